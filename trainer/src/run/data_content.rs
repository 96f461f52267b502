//! What a run trained on, by content: the data's files' lengths and CRC-32s. A resume compares
//! it, not `--data` as typed: the same file named `csv:./big.csv` was refused, and another
//! file of the same name, in another directory, was trained on in silence (hostile pass).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::workload::DataSpec;

/// The key a run's description holds it under.
pub const KEY: &str = "--data's content";

/// Adds the content of `data`'s files to a run's `description`, where it reads files.
pub fn describe(data: &DataSpec, description: &mut BTreeMap<String, String>) {
    let files = data.files();
    if !files.is_empty() {
        description.insert(KEY.to_string(), of(&files));
    }
}

/// The content of `files`, in their order: each one's bytes and CRC-32, or why it cannot be
/// read (a resume then compares that, and the run itself fails on the file as it would). Read
/// in pieces: the data is in memory already, and a second whole copy of it was held here.
/// A job's ranks compare `--load`'s file by it too.
pub(super) fn of(files: &[PathBuf]) -> String {
    let each: Vec<String> = files
        .iter()
        .map(|path| match crc(path) {
            Ok((bytes, crc)) => format!("{bytes} bytes, crc32 {crc:08x}"),
            Err(e) => format!("{} unreadable ({e})", path.display()),
        })
        .collect();
    each.join("; ")
}

/// `path`'s length and CRC-32.
fn crc(path: &std::path::Path) -> std::io::Result<(u64, u32)> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let (mut hasher, mut bytes, mut piece) = (crc32fast::Hasher::new(), 0, vec![0; 1 << 20]);
    loop {
        match file.read(&mut piece)? {
            0 => return Ok((bytes, hasher.finalize())),
            read => {
                hasher.update(&piece[..read]);
                bytes += read as u64;
            }
        }
    }
}

impl DataSpec {
    /// The files it reads, in order; none for synthetic data.
    pub fn files(&self) -> Vec<PathBuf> {
        match self {
            DataSpec::Synthetic => Vec::new(),
            DataSpec::FashionMnist(dir) => ember_datasets::fashion_mnist::FILES
                .iter()
                .map(|file| {
                    let [gz, plain] = ember_datasets::fashion_mnist::names(file);
                    Some(dir.join(&gz))
                        .filter(|p| p.exists())
                        .unwrap_or(dir.join(plain))
                })
                .collect(),
            DataSpec::Csv(path) => vec![path.clone()],
            DataSpec::Npy(x, y) => vec![x.clone(), y.clone()],
            // Where they cannot be listed, loading the text says why.
            DataSpec::Text(_) => {
                let dir = std::path::Path::new(ember_datasets::text::fortunes::DIR);
                ember_datasets::text::fortunes::files(dir).unwrap_or_default()
            }
        }
    }
}
