//! What a run trained on, by content: the data's files' lengths and CRC-32s. A resume compares
//! it, not `--data` as typed: the same file named `csv:./big.csv` was refused, and another
//! file of the same name, in another directory, was trained on in silence (hostile pass).

use std::path::PathBuf;

/// The key a run's description holds it under.
pub const KEY: &str = "--data's content";

/// The content of `files`, in their order: each one's bytes and CRC-32, or why it cannot be
/// read (a resume then compares that, and the run itself fails on the file as it would). Read
/// in pieces: the data is in memory already, and a second whole copy of it was held here.
pub fn of(files: &[PathBuf]) -> String {
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
