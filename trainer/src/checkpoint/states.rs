//! What a checkpoint's two state files hold, checked beyond their checksums: a file replaced by
//! another run's (and its checksum recomputed) passed every check, and the optimizer's state
//! of another network was taken in silence (burn keys it by parameter ids, and drops the
//! ones it does not find, so the moments started again from zero, hostile pass).
//!
//! The check goes one way: state that belongs to nothing, or to a parameter of another shape.
//! A file holding less state than the network could (another run's plain SGD's, an older copy
//! of the same run's) is not found: which parameters have state depends on the optimizer and
//! on the gradients they got.
//!
//! [`check_files`] needs no network, so that [`super::Checkpoint::verify`] finds such a
//! checkpoint where a resume falls back to the one before it; [`check_network`] compares the
//! network file with the network a resumed run built.

use std::collections::BTreeMap;
use std::path::Path;

use burn::module::Module;
use burn::store::ModuleSnapshot;
use burn::store::burn_pack::Reader;
use ember::{Error, Result};

/// One tensor of a state file: its name and shape, by the parameter id it belongs to.
struct Entry {
    name: String,
    shape: Vec<usize>,
}

/// The tensors of the burnpack file at `path`, with their parameter ids (`None` for a tensor
/// that carries none).
fn tensors(path: &Path) -> Result<Vec<(Option<u64>, Entry)>> {
    let unreadable = |e: &dyn std::fmt::Display| Error::ParameterFile {
        path: path.to_path_buf(),
        message: format!("it is no state file ember can read ({e})"),
    };
    let tensors = Reader::from_file(path)
        .map_err(|e| unreadable(&e))?
        .into_tensors()
        .map_err(|e| unreadable(&e))?;
    Ok(tensors
        .into_iter()
        .map(|t| {
            let entry = Entry {
                name: t.name,
                shape: t.shape.as_slice().to_vec(),
            };
            (t.param_id, entry)
        })
        .collect())
}

/// A checkpoint's network file `model` and optimizer file `optimizer` are both readable, and
/// every tensor of the optimizer's state belongs to a parameter of the network file, in its
/// shape (every state burn's optimizers keep, a moment or a velocity, has its parameter's).
///
/// # Errors
/// [`Error::ParameterFile`] naming the file that cannot be read, or the optimizer's state
/// that belongs to no parameter of the network, or to one of another shape.
pub(super) fn check_files(model: &Path, optimizer: &Path) -> Result<()> {
    let name = model.file_name().unwrap_or_default().to_string_lossy();
    let params: BTreeMap<u64, Entry> = tensors(model)?
        .into_iter()
        .filter_map(|(id, entry)| Some((id?, entry)))
        .collect();
    for (id, state) in tensors(optimizer)? {
        let problem = match id.and_then(|id| params.get(&id)) {
            None => format!(
                "its {} belongs to no parameter of {name} beside it: it is another network's \
                 optimizer state",
                state.name
            ),
            Some(param) if param.shape != state.shape => format!(
                "its {} has shape {:?}, and the parameter it belongs to, {} in {name}, has \
                 {:?}: it is another network's optimizer state",
                state.name, state.shape, param.name, param.shape
            ),
            Some(_) => continue,
        };
        return Err(Error::ParameterFile {
            path: optimizer.to_path_buf(),
            message: problem,
        });
    }
    Ok(())
}

/// The network file at `path` holds every parameter and statistic of `net` (as a resumed run
/// built it), by name, in its shape, and nothing else.
///
/// # Errors
/// [`Error::ParameterMismatch`] listing every missing, extra and mis-shaped name, in words
/// (burn's own error was its debug text, hostile pass).
pub(super) fn check_network<M: Module>(net: &M, path: &Path) -> Result<()> {
    let in_file: BTreeMap<String, Vec<usize>> = tensors(path)?
        .into_iter()
        .map(|(_, entry)| (entry.name, entry.shape))
        .collect();
    // Named as the checkpoint's writer names them (burnpack keeps enum variants' names).
    let expected: BTreeMap<String, Vec<usize>> = net
        .collect(None, None, false)
        .into_iter()
        .map(|t| (t.name, t.shape.as_slice().to_vec()))
        .collect();
    let mut problems = Vec::new();
    for (name, shape) in &expected {
        match in_file.get(name) {
            None => problems.push(format!("missing: {name} {shape:?}")),
            Some(found) if found != shape => problems.push(format!(
                "mis-shaped: {name} is {found:?} in the checkpoint but {shape:?} in this run's \
                 network"
            )),
            Some(_) => {}
        }
    }
    for (name, shape) in &in_file {
        if !expected.contains_key(name) {
            problems.push(format!(
                "extra: {name} {shape:?} is no parameter of this run's network"
            ));
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(Error::ParameterMismatch {
            path: path.to_path_buf(),
            details: problems.join("\n"),
        }),
    }
}
