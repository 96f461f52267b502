//! The metadata in a safetensors file's header: what ember records beside the parameters (the
//! model, the input shape, the outputs: all a later `ember export` needs), read back, and
//! written in one order.
//!
//! The header is 8 bytes of its length (little-endian) and a JSON object; its `__metadata__`
//! entry maps strings to strings. safetensors writes that map from a hash map, whose order
//! changes from process to process, so the same parameters gave different bytes; ember
//! rewrites the header in place with the entries sorted (same entries, same length).

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// A header longer than this is no header ember wrote, and is not read.
const MAX_HEADER: u64 = 100 << 20;

fn read_header(file: &mut fs::File, path: &Path) -> Result<(u64, serde_json::Value)> {
    let io = |source| Error::io(path, source);
    let size = file.metadata().map_err(io)?.len();
    if size < 8 {
        return Err(not_safetensors(path, format!("it is {size} bytes long")));
    }
    let mut length = [0u8; 8];
    file.read_exact(&mut length).map_err(io)?;
    if length.starts_with(b"\x93NUMPY") {
        return Err(not_safetensors(path, "it is a NumPy .npy file".to_string()));
    }
    let n = u64::from_le_bytes(length);
    if n > MAX_HEADER || n + 8 > size {
        return Err(not_safetensors(
            path,
            format!("its header length, {n}, does not fit"),
        ));
    }
    let mut header = vec![0u8; n as usize];
    file.read_exact(&mut header).map_err(io)?;
    let value = serde_json::from_slice(&header)
        .map_err(|e| not_safetensors(path, format!("its header is not JSON ({e})")))?;
    Ok((n, value))
}

fn not_safetensors(path: &Path, why: String) -> Error {
    Error::ParameterFile {
        path: path.to_path_buf(),
        message: format!("not a safetensors file: {why}"),
    }
}

/// The string metadata of the safetensors file at `path` (empty when it has none).
///
/// # Errors
/// [`Error::Io`] when it cannot be read; [`Error::ParameterFile`] when it is not a regular file
/// (a FIFO would wait for a writer) or no safetensors file.
pub fn metadata(path: &Path) -> Result<BTreeMap<String, String>> {
    refuse_special(path)?;
    let mut file = fs::File::open(path).map_err(|source| Error::io(path, source))?;
    let (_, header) = read_header(&mut file, path)?;
    Ok(header
        .get("__metadata__")
        .and_then(serde_json::Value::as_object)
        .map(|entries| {
            entries
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default())
}

/// Rewrites the header of the file at `path` with its metadata sorted by key, in place.
pub(super) fn sort_metadata(path: &Path) -> Result<()> {
    let io = |source| Error::io(path, source);
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io)?;
    let (n, mut header) = read_header(&mut file, path)?;
    let Some(entries) = header.get("__metadata__").and_then(|m| m.as_object()) else {
        return Ok(());
    };
    let sorted: BTreeMap<String, serde_json::Value> = entries
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut object = serde_json::Map::new();
    object.insert("__metadata__".to_string(), serde_json::json!(sorted));
    for (key, value) in header.as_object_mut().into_iter().flatten() {
        if key != "__metadata__" {
            object.insert(key.clone(), value.clone());
        }
    }
    let mut bytes = serde_json::to_vec(&serde_json::Value::Object(object))
        .map_err(|e| io(std::io::Error::other(e)))?;
    // Reordered, the same entries take the same bytes; the rest is the writer's padding.
    if bytes.len() as u64 > n {
        return Ok(());
    }
    bytes.resize(n as usize, b' ');
    file.seek(SeekFrom::Start(8)).map_err(io)?;
    file.write_all(&bytes).map_err(io)
}

/// Parameters are read only from a regular file: a FIFO would wait for a writer, a device
/// such as `/dev/zero` read forever.
pub(super) fn refuse_special(path: &Path) -> Result<()> {
    let meta = fs::metadata(path).map_err(|source| Error::io(path, source))?;
    match meta.is_file() {
        true => Ok(()),
        false => Err(Error::ParameterFile {
            path: path.to_path_buf(),
            message: format!(
                "it is {}; parameters are read only from regular files",
                super::output::describe(&meta.file_type())
            ),
        }),
    }
}
