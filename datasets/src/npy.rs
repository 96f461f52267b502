//! NumPy `.npy` files: features in one file, targets in another.
//!
//! Supported: little-endian `f4`, `f8`, `u1` and `i8` (and `|u1`), C order, any rank (an array
//! of rank above 2 is flattened to `[n, rest]`, as Gluon's Dense does). Anything else is an
//! error naming the dtype or shape.

use std::path::Path;

use crate::error::{DatasetError, Result};
use crate::examples::{Examples, class_labels};
use crate::input::{Input, size_of};

/// A decoded array, as f32.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    /// The shape.
    pub shape: Vec<usize>,
    /// The values, row-major.
    pub data: Vec<f32>,
}

/// Reads a `.npy` file: its header first, then, once the header's shape and dtype agree with
/// the file's size, exactly the data they describe.
pub fn read_npy(path: impl AsRef<Path>) -> Result<NpyArray> {
    let mut input = Input::open(path.as_ref())?;
    let not_npy = |input: &Input| {
        input.format(
            "magic string (bytes 0-5)",
            "not a .npy file: it does not start with \\x93NUMPY".into(),
        )
    };
    if input.len < 10 {
        return Err(not_npy(&input));
    }
    let lead = input.bytes(10, "magic string (bytes 0-5)")?;
    if &lead[..6] != b"\x93NUMPY" {
        return Err(not_npy(&input));
    }
    let (header_len, start) = match lead[6] {
        1 => (u64::from(u16::from_le_bytes([lead[8], lead[9]])), 10u64),
        2 | 3 if input.len >= 12 => {
            let rest = input.bytes(2, "header length")?;
            (
                u64::from(u32::from_le_bytes([lead[8], lead[9], rest[0], rest[1]])),
                12,
            )
        }
        v => return Err(input.format("version", format!("unsupported .npy version {v}"))),
    };
    if start + header_len > input.len {
        return Err(input.format(
            "header",
            format!(
                "truncated: the header needs {header_len} bytes, the file has {} after its \
                 first {start}",
                input.len - start
            ),
        ));
    }
    let header = input.bytes(header_len as usize, "header")?;
    let header = String::from_utf8_lossy(&header).into_owned();
    let format = |at: &str, message: String| DatasetError::Format {
        path: input.path.clone(),
        at: at.to_string(),
        message,
    };
    let field = |key: &str| -> Result<String> {
        let at = header
            .find(&format!("'{key}'"))
            .ok_or_else(|| format("header", format!("no {key:?} in {header:?}")))?;
        let rest = header[at + key.len() + 2..]
            .trim_start()
            .trim_start_matches(':')
            .trim_start();
        let end = if rest.starts_with('(') {
            rest.find(')').map(|e| e + 1)
        } else {
            rest.find(',')
        };
        Ok(rest[..end.unwrap_or(rest.len())]
            .trim()
            .trim_matches('\'')
            .to_string())
    };
    let descr = field("descr")?;
    if field("fortran_order")? != "False" {
        return Err(format(
            "header",
            "fortran_order arrays are not supported: save with C order".into(),
        ));
    }
    let shape_text = field("shape")?;
    let shape = shape_text
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.parse::<usize>()
                .map_err(|_| format("header", format!("bad shape {shape_text}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let (width, convert): (usize, fn(&[u8]) -> f32) = match descr.as_str() {
        "<f4" => (4, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        "<f8" => (8, |b| {
            f64::from_le_bytes(b.try_into().expect("8 bytes")) as f32
        }),
        "|u1" | "<u1" => (1, |b| f32::from(b[0])),
        "<i8" => (8, |b| {
            i64::from_le_bytes(b.try_into().expect("8 bytes")) as f32
        }),
        other => {
            return Err(format(
                "header",
                format!("unsupported dtype {other:?}: expected <f4, <f8, |u1 or <i8"),
            ));
        }
    };
    let body = input.len - start - header_len;
    let Some(needed) = size_of(&shape, width) else {
        return Err(format(
            "header",
            format!(
                "the shape {shape_text} of {descr} needs more than 2^64 bytes, and the file \
                 has {body} bytes of data"
            ),
        ));
    };
    if body != needed {
        return Err(format(
            "data",
            format!("{body} bytes of data, the shape {shape:?} of {descr} needs {needed}"),
        ));
    }
    let data: Vec<f32> = input
        .bytes(needed as usize, "data")?
        .chunks_exact(width)
        .map(convert)
        .collect();
    if let Some(at) = data.iter().position(|v| !v.is_finite()) {
        return Err(input.format(
            "data",
            format!(
                "value {at} (row-major) is {}: training on it gives a NaN loss",
                data[at]
            ),
        ));
    }
    Ok(NpyArray { shape, data })
}

/// Features from `x` (rank ≥ 2: `[n, …]`) and targets from `y` (`[n]` or `[n, outputs]`); with
/// `classes`, targets must be class indices in range.
pub fn read_npy_pair(
    x: impl AsRef<Path>,
    y: impl AsRef<Path>,
    classes: Option<usize>,
) -> Result<Examples> {
    let (x_path, y_path) = (x.as_ref(), y.as_ref());
    let x = read_npy(x_path)?;
    let y = read_npy(y_path)?;
    let shape_error = |path: &Path, shape: &[usize], want: &str| DatasetError::Format {
        path: path.to_path_buf(),
        at: "shape".to_string(),
        message: format!("unsupported shape {shape:?}: expected {want}"),
    };
    if x.shape.len() < 2 || x.shape[0] == 0 {
        return Err(shape_error(x_path, &x.shape, "[examples, features…]"));
    }
    if y.shape.is_empty() || y.shape.len() > 2 {
        return Err(shape_error(
            y_path,
            &y.shape,
            "[examples] or [examples, outputs]",
        ));
    }
    if x.shape[0] != y.shape[0] {
        return Err(DatasetError::Mismatch {
            what: "examples",
            first: x_path.to_path_buf(),
            first_count: x.shape[0],
            second: y_path.to_path_buf(),
            second_count: y.shape[0],
        });
    }
    let features = x.shape[1..].iter().product();
    let outputs = y.shape.get(1).copied().unwrap_or(1);
    let examples = match classes {
        None => Examples::regression(x.data, features, y.data, outputs),
        Some(classes) => {
            if outputs != 1 {
                return Err(shape_error(y_path, &y.shape, "[examples] of class indices"));
            }
            let labels = class_labels(&y.data, classes, y_path)?;
            Examples::classification(x.data, features, labels, classes)
        }
    }?;
    // Each example keeps its array's shape: `[n, 1, 28, 28]` gives images.
    examples.with_shape(&x.shape[1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A .npy file (version 1.0) as NumPy writes it.
    fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend((header.len() as u16).to_le_bytes());
        out.extend(header.as_bytes());
        out.extend(data);
        out
    }

    #[test]
    fn every_supported_dtype_reads_the_same_values() {
        let dir = tempfile::tempdir().unwrap();
        let values = [0.0f64, 1.0, 2.0, 3.0, 4.0, 5.0];
        let files = [
            (
                "<f4",
                values
                    .iter()
                    .flat_map(|v| (*v as f32).to_le_bytes())
                    .collect::<Vec<u8>>(),
            ),
            ("<f8", values.iter().flat_map(|v| v.to_le_bytes()).collect()),
            ("|u1", values.iter().map(|v| *v as u8).collect()),
            (
                "<i8",
                values
                    .iter()
                    .flat_map(|v| (*v as i64).to_le_bytes())
                    .collect(),
            ),
        ];
        let y = dir.path().join("y.npy");
        std::fs::write(
            &y,
            npy(
                "<i8",
                "(3,)",
                &[0i64, 2, 1]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>(),
            ),
        )
        .unwrap();
        for (descr, data) in files {
            let x = dir.path().join(format!("x{}.npy", &descr[1..]));
            std::fs::write(&x, npy(descr, "(3, 2)", &data)).unwrap();
            let examples = read_npy_pair(&x, &y, Some(3)).unwrap();
            assert_eq!(examples.row(1), (&[2.0, 3.0][..], &[2.0][..]), "{descr}");
            assert_eq!(examples.classes(), Some(3));
        }
    }

    #[test]
    fn unsupported_or_broken_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: Vec<u8>| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let y = write("y.npy", npy("<f4", "(2,)", &[0u8; 8]));
        let cases = [
            (
                write("c8.npy", npy("<c8", "(2, 1)", &[0; 16])),
                "unsupported dtype \"<c8\"",
            ),
            (
                write("short.npy", npy("<f4", "(2, 2)", &[0; 12])),
                "needs 16",
            ),
            (
                write("rank1.npy", npy("<f4", "(2,)", &[0; 8])),
                "unsupported shape [2]",
            ),
            (
                write("text.npy", b"hello world".to_vec()),
                "not a .npy file",
            ),
            (
                write("three.npy", npy("<f4", "(3, 1)", &[0; 12])),
                "3 examples",
            ),
        ];
        for (x, detail) in cases {
            let err = read_npy_pair(&x, &y, None).unwrap_err().to_string();
            assert!(
                err.contains(&*x.to_string_lossy()) && err.contains(detail),
                "{err}"
            );
        }
        let x = write("x.npy", npy("<f4", "(2, 1)", &[0; 8]));
        let labels = write(
            "labels.npy",
            npy("<f4", "(2,)", &[0, 0, 0, 0, 0, 0, 0x20, 0x41]),
        );
        let err = read_npy_pair(&x, &labels, Some(5)).unwrap_err().to_string();
        assert!(
            err.contains("labels.npy") && err.contains("label 10"),
            "{err}"
        );
    }
}
