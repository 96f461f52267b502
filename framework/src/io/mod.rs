//! Files ember writes and reads: whether a path can take an output ([`output`]), every output
//! written atomically ([`atomic`]), and parameters as safetensors in PyTorch's layout
//! ([`safetensors`]).

pub mod atomic;
pub mod header;
pub mod output;
pub mod safetensors;
mod temporary;

pub use atomic::{
    ScratchDir, ScratchFile, proc_stat, remove_stale_in, remove_temporaries, running, write_atomic,
    write_atomic_bytes, write_atomic_dir,
};
pub use output::{Identity, check, check_dir, describe, identity, place};
pub use temporary::is_temporary;
