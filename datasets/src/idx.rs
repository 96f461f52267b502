//! The IDX format of MNIST and Fashion-MNIST, raw or gzipped.
//!
//! An IDX file is a big-endian header (two zero bytes, a type byte, the number of dimensions,
//! then one u32 per dimension) followed by the values. Images are `ubyte` of rank 3
//! (magic `0x00000803`), labels `ubyte` of rank 1 (magic `0x00000801`). A gzip file is
//! recognized by its own magic bytes, whatever its name.
//!
//! ```no_run
//! use ember_datasets::idx::read_pair;
//! let train = read_pair(
//!     "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
//!     "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz",
//! ).unwrap();
//! assert_eq!(train.features(), 784);
//! ```

use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use flate2::read::GzDecoder;

use crate::error::{DatasetError, Result};
use crate::examples::Examples;
use crate::input::{Input, size_of};

/// A decoded IDX array of unsigned bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxArray {
    /// The dimensions, outermost first.
    pub dims: Vec<usize>,
    /// The values, row-major.
    pub data: Vec<u8>,
}

/// The most a gzip stream can expand: deflate's best ratio is about 1032 to 1.
const GZIP_MAX_RATIO: u64 = 1032;

/// Reads an unsigned-byte IDX file of the given rank, raw or gzipped: the header first, then,
/// once its dimensions agree with what the file can hold, exactly the data they describe. A
/// gzipped file is decompressed no further than its header's size (and one byte more, to tell
/// a stream that goes on).
pub fn read_idx(path: impl AsRef<Path>, rank: usize) -> Result<IdxArray> {
    read_checked(path.as_ref(), rank, |_| Ok(()))
}

/// [`read_idx`], with the header's dimensions given to `check` before any data is read.
fn read_checked(
    path: &Path,
    rank: usize,
    check: impl FnOnce(&[usize]) -> Result<()>,
) -> Result<IdxArray> {
    let mut input = Input::open(path)?;
    let mut magic = [0u8; 2];
    let gzipped = input.len >= 2 && {
        input
            .file
            .read_exact(&mut magic)
            .map_err(|source| DatasetError::Io {
                path: input.path.clone(),
                source,
            })?;
        input
            .file
            .seek(SeekFrom::Start(0))
            .map_err(|source| DatasetError::Io {
                path: input.path.clone(),
                source,
            })?;
        magic == [0x1f, 0x8b]
    };
    let (path, len) = (input.path.clone(), input.len);
    let format = |at: String, message: String| DatasetError::Format {
        path: path.clone(),
        at,
        message,
    };
    let mut stream: Box<dyn Read> = match gzipped {
        true => Box::new(GzDecoder::new(BufReader::new(&mut input.file))),
        false => Box::new(&mut input.file),
    };
    let gzip_error =
        |e: std::io::Error| format("gzip stream".to_string(), format!("cannot decompress: {e}"));
    // Reads up to `n` bytes: fewer only at the end of the data.
    let read = |stream: &mut Box<dyn Read>, n: u64| -> Result<Vec<u8>> {
        let mut out = Vec::new();
        stream
            .take(n)
            .read_to_end(&mut out)
            .map_err(|e| match gzipped {
                true => gzip_error(e),
                false => DatasetError::Io {
                    path: path.clone(),
                    source: e,
                },
            })?;
        Ok(out)
    };
    let head = read(&mut stream, 4)?;
    if head.len() < 4 {
        return Err(format(
            "header".into(),
            format!(
                "truncated: {} bytes, an IDX header needs at least 4",
                head.len()
            ),
        ));
    }
    let magic = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    let expected = 0x0000_0800 | rank as u32;
    if magic != expected {
        return Err(format(
            "magic number (bytes 0-3)".into(),
            format!(
                "found 0x{magic:08x}, expected 0x{expected:08x} (unsigned bytes of rank {rank})"
            ),
        ));
    }
    let header = 4 + 4 * rank;
    let sizes = read(&mut stream, 4 * rank as u64)?;
    if sizes.len() < 4 * rank {
        return Err(format(
            "header".into(),
            format!(
                "truncated: {} bytes, the header of rank {rank} needs {header}",
                4 + sizes.len()
            ),
        ));
    }
    let dims: Vec<usize> = sizes
        .chunks_exact(4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .collect();
    let data_at = format!("data (from byte {header})");
    let count = size_of(&dims, 1).ok_or_else(|| {
        format(
            data_at.clone(),
            format!("the dimensions {dims:?} need more than 2^64 bytes"),
        )
    })?;
    let truncated = |body: u64| {
        format!("truncated: {body} bytes of data, the dimensions {dims:?} need {count}")
    };
    // A raw file's data is its size less the header; a gzip file's, at most its size times
    // deflate's largest ratio. A header that promises more is refused before anything is
    // read.
    if !gzipped {
        let body = len - header as u64;
        if body < count {
            return Err(format(data_at, truncated(body)));
        }
        if body > count {
            return Err(format(
                data_at,
                format!("too long: {body} bytes of data, the dimensions {dims:?} need {count}"),
            ));
        }
    } else if count > len.saturating_mul(GZIP_MAX_RATIO) {
        return Err(format(
            data_at,
            format!(
                "truncated: the dimensions {dims:?} need {count} bytes of data, and a gzip \
                 file of {len} bytes holds at most {} (deflate expands at most {GZIP_MAX_RATIO} \
                 times)",
                len.saturating_mul(GZIP_MAX_RATIO)
            ),
        ));
    }
    // The header is sound: what it says is checked against the caller's before the data is read.
    check(&dims)?;
    let data = read(&mut stream, count + 1)?;
    let body = data.len() as u64;
    if body != count {
        return Err(format(
            data_at,
            match body < count {
                true => truncated(body),
                false => format!(
                    "too long: more than {count} bytes of data, which the dimensions {dims:?} need"
                ),
            },
        ));
    }
    Ok(IdxArray { dims, data })
}

/// Reads an images file (rank 3) and a labels file (rank 1) into examples: pixels scaled to
/// [0, 1], each image an example of shape `[1, rows, cols]` (one channel, as Gluon's
/// `ToTensor` gives it), labels as class indices (10 classes).
pub fn read_pair(images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Result<Examples> {
    let (images, labels) = (images.as_ref(), labels.as_ref());
    // The labels first, and the images' count against theirs before the images' data is
    // read: a giant images file is refused by its header.
    let y = read_idx(labels, 1)?;
    let x = read_checked(images, 3, |dims| match dims[0] == y.dims[0] {
        true => Ok(()),
        false => Err(DatasetError::Mismatch {
            what: "examples",
            first: images.to_path_buf(),
            first_count: dims[0],
            second: labels.to_path_buf(),
            second_count: y.dims[0],
        }),
    })?;
    let features = x.dims[1] * x.dims[2];
    if features == 0 {
        return Err(DatasetError::Format {
            path: images.to_path_buf(),
            at: "header".to_string(),
            message: format!(
                "images of {} × {} pixels: an image needs at least one",
                x.dims[1], x.dims[2]
            ),
        });
    }
    Examples::classification(
        x.data.iter().map(|&p| f32::from(p) / 255.0).collect(),
        features,
        y.data.iter().map(|&c| usize::from(c)).collect(),
        10,
    )
    .map_err(|e| match e {
        DatasetError::InvalidValue { reason, .. } => DatasetError::Format {
            path: labels.to_path_buf(),
            at: "labels".to_string(),
            message: reason,
        },
        other => other,
    })?
    .with_shape(&[1, x.dims[1], x.dims[2]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// An IDX file of unsigned bytes with the given dimensions.
    pub(crate) fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut out = vec![0, 0, 0x08, dims.len() as u8];
        for d in dims {
            out.extend(d.to_be_bytes());
        }
        out.extend(data);
        out
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn raw_and_gzipped_files_read_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let pixels: Vec<u8> = (0..3 * 2 * 2).map(|v| (v * 20) as u8).collect();
        let images = idx_bytes(&[3, 2, 2], &pixels);
        let labels = idx_bytes(&[3], &[7, 0, 9]);
        std::fs::write(dir.path().join("x"), &images).unwrap();
        std::fs::write(dir.path().join("y"), &labels).unwrap();
        std::fs::write(dir.path().join("x.gz"), gzip(&images)).unwrap();
        std::fs::write(dir.path().join("y.gz"), gzip(&labels)).unwrap();
        let raw = read_pair(dir.path().join("x"), dir.path().join("y")).unwrap();
        let gz = read_pair(dir.path().join("x.gz"), dir.path().join("y.gz")).unwrap();
        assert_eq!(raw, gz);
        assert_eq!(raw.len(), 3);
        assert_eq!(raw.features(), 4);
        assert_eq!(
            raw.row(1).0,
            &[80.0 / 255.0, 100.0 / 255.0, 120.0 / 255.0, 140.0 / 255.0]
        );
        assert_eq!(raw.row(2).1, &[9.0]);
    }

    #[test]
    fn bad_files_name_the_file_and_the_place() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let labels = write("labels", &idx_bytes(&[2], &[1, 2]));
        let cases = [
            (
                write("magic", &idx_bytes(&[1, 1], &[0])),
                "magic number",
                "0x00000802",
            ),
            (write("short", &[0, 0, 8]), "header", "truncated"),
            (
                write("cut", &idx_bytes(&[2, 2, 2], &[0; 7])),
                "data",
                "truncated: 7 bytes",
            ),
            (
                write("long", &idx_bytes(&[2, 2, 2], &[0; 9])),
                "data",
                "too long",
            ),
        ];
        for (path, place, detail) in cases {
            let err = read_pair(&path, &labels).unwrap_err().to_string();
            assert!(
                err.contains(&*path.to_string_lossy())
                    && err.contains(place)
                    && err.contains(detail),
                "{err}"
            );
        }
        // Images of no pixels name the images file (they blamed the labels file).
        for dims in [[2, 0, 28], [2, 28, 0]] {
            let empty = write("no-pixels", &idx_bytes(&dims, &[]));
            let err = read_pair(&empty, &labels).unwrap_err().to_string();
            assert!(
                err.contains("no-pixels") && !err.contains("labels") && err.contains("pixels"),
                "{err}"
            );
        }
        let three = write("three", &idx_bytes(&[3, 1, 1], &[0, 0, 0]));
        let err = read_pair(&three, &labels).unwrap_err().to_string();
        assert!(err.contains("3 examples") && err.contains("has 2"), "{err}");
        let bad_labels = write("bad-labels", &idx_bytes(&[3], &[1, 12, 2]));
        let err = read_pair(&three, &bad_labels).unwrap_err().to_string();
        assert!(err.contains("bad-labels") && err.contains("12"), "{err}");
        let garbage_gz = write("garbage.gz", &[0x1f, 0x8b, 1, 2, 3]);
        assert!(
            read_pair(&garbage_gz, &labels)
                .unwrap_err()
                .to_string()
                .contains("gzip")
        );
    }
}
