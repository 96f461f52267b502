//! Files ember writes and reads: whether a path can take an output ([`output`]), every output
//! written atomically ([`atomic`]), and parameters as safetensors in PyTorch's layout
//! ([`safetensors`]).

pub mod atomic;
pub mod header;
pub mod output;
mod removal;
pub mod safetensors;
mod temporary;

pub use atomic::{
    ScratchDir, ScratchFile, proc_stat, remove_stale_in, remove_temporaries, running, write_atomic,
    write_atomic_bytes, write_atomic_dir,
};
pub use output::{Identity, check, check_dir, check_dir_unmade, describe, identity, place};
pub use removal::remove_dir_holding;
pub use temporary::is_temporary;

/// The names in `dir`, sorted: what this module's tests compare.
#[cfg(test)]
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
