//! What a run trained on, by content: the data's files' lengths and CRC-32s. A resume compares
//! it, not `--data` as typed: the same file named `csv:./big.csv` was refused, and another
//! file of the same name, in another directory, was trained on in silence (hostile pass).

use std::path::PathBuf;

/// The key a run's description holds it under.
pub const KEY: &str = "the data's content";

/// The content of `files`, in their order: each one's bytes and CRC-32, or why it cannot be
/// read (a resume then compares that, and the run itself fails on the file as it would).
pub fn of(files: &[PathBuf]) -> String {
    let each: Vec<String> = files
        .iter()
        .map(|path| match std::fs::read(path) {
            Ok(bytes) => format!(
                "{} bytes, crc32 {:08x}",
                bytes.len(),
                crc32fast::hash(&bytes)
            ),
            Err(e) => format!("{} unreadable ({e})", path.display()),
        })
        .collect();
    each.join("; ")
}
