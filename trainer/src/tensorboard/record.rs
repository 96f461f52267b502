//! TFRecord framing, the container of TensorBoard's event files: each record is its length
//! (u64, little-endian), the length's masked CRC-32C (u32), the data, and the data's masked
//! CRC-32C (u32).

/// TFRecord's masking of a CRC-32C: rotated right by 15 bits, plus a constant, so that a CRC
/// stored beside the data it covers does not look like data.
pub fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// `data` framed as one record.
pub fn frame(data: &[u8]) -> Vec<u8> {
    let length = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&length);
    out.extend_from_slice(&masked_crc(&length).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CRC-32C's published check value (RFC 3720's iSCSI polynomial, over "123456789"), and
    /// TFRecord's masking of it as TensorFlow's `crc32c::Mask` defines it.
    #[test]
    fn the_crc_is_castagnolis_masked_as_tfrecord_masks_it() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        let masked = 0xe306_9283_u32.rotate_right(15).wrapping_add(0xa282_ead8);
        assert_eq!(masked_crc(b"123456789"), masked);
        assert_ne!(masked, 0xe306_9283);
    }

    #[test]
    fn a_record_is_its_length_its_crc_its_data_and_their_crc() {
        let record = frame(b"event");
        assert_eq!(record.len(), 8 + 4 + 5 + 4);
        assert_eq!(&record[..8], &5u64.to_le_bytes());
        assert_eq!(
            &record[8..12],
            &masked_crc(&5u64.to_le_bytes()).to_le_bytes()
        );
        assert_eq!(&record[12..17], b"event");
        assert_eq!(&record[17..], &masked_crc(b"event").to_le_bytes());
    }
}
