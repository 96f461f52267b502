//! `save_parameters` / `load_parameters`: safetensors files with Gluon's and PyTorch's names
//! (`0.weight`, `2.0.bias`) and layouts (Dense weights as `(units, in_units)`), through
//! burn-store.
//!
//! A file saved from an MXNet Gluon or PyTorch `Sequential` of the same shape loads unchanged.
//! Loading checks every name and shape first; the error lists all that is missing, extra or
//! mis-shaped. Files are written to a temporary name beside the target and renamed, so a
//! failed save never leaves a half-written file behind.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block, Dense, Init, Sequential};
//! use ember::params::{load_parameters, save_parameters};
//!
//! let device = Device::flex();
//! let net: Sequential = Sequential::new()
//!     .add(Dense::new(8).activation(Activation::Relu))
//!     .add(Dense::new(1))
//!     .initialize(Init::default(), &device);
//! net.infer_shape(Tensor::zeros([1, 4], &device)).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("net.safetensors");
//! save_parameters(&net, &path).unwrap();
//!
//! // A fresh, deferred net takes its shapes from the file.
//! let fresh: Sequential = Sequential::new()
//!     .add(Dense::new(8).activation(Activation::Relu))
//!     .add(Dense::new(1));
//! let fresh = load_parameters(fresh, &path, &device).unwrap();
//! assert_eq!(fresh.collect_params(), net.collect_params());
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use burn::store::{
    BurnToPyTorchAdapter, ModuleSnapshot, ModuleStore, PyTorchToBurnAdapter, SafetensorsStore,
};
use burn::tensor::{Device, Tensor};

use crate::block::Block;
use crate::error::{Error, Result};
use crate::init::Init;

/// Writes every parameter of `net` to a safetensors file at `path`, atomically.
pub fn save_parameters<B: Block>(net: &B, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    if let Some(deferred) = net
        .collect_params()
        .params
        .into_iter()
        .find(|p| !p.is_known())
    {
        return Err(Error::DeferredInitialization {
            param: deferred.name,
            shape: deferred.shape,
        });
    }
    let tmp = temporary_sibling(path);
    let mut store = SafetensorsStore::from_file(&tmp)
        .overwrite(true)
        .skip_enum_variants(true)
        .with_to_adapter(BurnToPyTorchAdapter)
        .metadata("format", "pt")
        .metadata("producer", "ember");
    let written = net
        .save_into(&mut store)
        .map_err(|e| file_error(path, e.to_string()))
        .and_then(|()| {
            fs::rename(&tmp, path).map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })
        });
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// Reads the parameters of `net` from a safetensors file.
///
/// Layers whose input size is still deferred take it from the file; a net that was never
/// initialized is initialized on `device` first (the file then overwrites every value).
pub fn load_parameters<B: Block>(net: B, path: impl AsRef<Path>, device: &Device) -> Result<B> {
    let path = path.as_ref();
    let mut store = SafetensorsStore::from_file(path)
        .skip_enum_variants(true)
        .with_from_adapter(PyTorchToBurnAdapter);
    let in_file: BTreeMap<String, Vec<usize>> = store
        .get_all_tensors()
        .map_err(|e| file_error(path, e.to_string()))?
        .iter()
        .map(|(name, tensor)| (name.clone(), tensor.shape.as_slice().to_vec()))
        .collect();

    let mut net = net;
    let expected = net.collect_params();
    if expected.params.iter().any(|p| !p.is_known()) {
        // Deferred sizes follow from the network's input size, which is the second axis of
        // the first weight: run an example of that size through the network.
        net = net.initialize(Init::default(), device);
        if let Some(first) = expected.params.first()
            && let Some(shape) = in_file.get(&first.name)
            && shape.len() == 2
        {
            net.infer_shape(Tensor::zeros([1, shape[1]], device))
                .map_err(|e| file_error(path, format!("cannot take shapes from the file: {e}")))?;
        }
    }
    check_names_and_shapes(path, &net, &in_file)?;

    let result = net
        .load_from(&mut store)
        .map_err(|e| file_error(path, e.to_string()))?;
    if !result.errors.is_empty() || !result.missing.is_empty() {
        return Err(Error::ParameterMismatch {
            path: path.to_path_buf(),
            details: result.to_string(),
        });
    }
    Ok(net)
}

/// Compares the network's names and shapes with the file's, and lists every difference.
fn check_names_and_shapes<B: Block>(
    path: &Path,
    net: &B,
    in_file: &BTreeMap<String, Vec<usize>>,
) -> Result<()> {
    let expected = net.collect_params();
    let mut problems = Vec::new();
    for param in &expected.params {
        match in_file.get(&param.name) {
            None => problems.push(format!("missing: {} {:?}", param.name, param.shape)),
            Some(shape) if *shape != param.shape => problems.push(format!(
                "mis-shaped: {} is {:?} in the file but {:?} in the network",
                param.name, shape, param.shape
            )),
            Some(_) => {}
        }
    }
    for (name, shape) in in_file {
        if expected.get(name).is_none() {
            problems.push(format!(
                "extra: {name} {shape:?} is not a parameter of the network"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::ParameterMismatch {
            path: path.to_path_buf(),
            details: problems.join("\n"),
        })
    }
}

fn file_error(path: &Path, message: String) -> Error {
    Error::ParameterFile {
        path: path.to_path_buf(),
        message,
    }
}

/// `dir/.name.tmp-PID`: same directory, so the final rename is atomic.
pub(crate) fn temporary_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "parameters".to_string());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}
