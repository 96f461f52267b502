//! `save_parameters` / `load_parameters`: safetensors files with Gluon's and PyTorch's names
//! (`0.weight`, `2.0.bias`) and layouts (Dense weights as `(units, in_units)`), through
//! burn-store.
//!
//! A file saved from an MXNet Gluon or PyTorch `Sequential` of the same shape loads unchanged:
//! convolution weights are `(out, in/groups, kh, kw)`, normalization layers hold `weight`,
//! `bias`, `running_mean` and `running_var`; PyTorch's `num_batches_tracked` counters, which
//! nothing in ember reads, are passed over. The names and shapes are those of
//! [`Block::collect_params`], the one source of both. Loading checks every name and shape
//! first; the error lists all that is missing, extra or mis-shaped. Half, bfloat16 and
//! double tensors are cast to f32 on load. Files are written through [`crate::io::atomic`]: to a
//! temporary name beside the target, then renamed, so a failed save never leaves a
//! half-written file behind, and a device or FIFO at the path is refused, never replaced.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{Activation, Block, Dense, Init, Sequential};
//! use ember::io::safetensors::{load_parameters, save_parameters};
//!
//! let device = Device::flex();
//! let build = || -> Sequential {
//!     Sequential::new()
//!         .add(Dense::new(8).activation(Activation::Relu))
//!         .add(Dense::new(1))
//!         .initialize(Init::default(), &device)
//! };
//! let net = build().infer_shape(Tensor::<2>::zeros([1, 4], &device)).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("net.safetensors");
//! save_parameters(&net, &path).unwrap();
//!
//! // A deferred net is resolved first (its shapes follow from the input), then loaded.
//! assert!(load_parameters(build(), &path, &device).is_err());
//! let fresh = build().infer_shape(Tensor::<2>::zeros([1, 4], &device)).unwrap();
//! let fresh = load_parameters(fresh, &path, &device).unwrap();
//! assert_eq!(fresh.collect_params(), net.collect_params());
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use burn::module::Module;
use burn::store::{
    BurnToPyTorchAdapter, FloatCastAdapter, ModuleAdapter, ModuleSnapshot, ModuleStore,
    PyTorchToBurnAdapter, SafetensorsStore,
};
use burn::tensor::{DType, Device};

use super::atomic;
use crate::error::{Error, Result};
use crate::params::{ParamDict, collect_params};
use crate::running_statistics::settle_running_statistics;

/// Writes every parameter of `net` to a safetensors file at `path`, atomically (see
/// [`crate::io::atomic`]: `path` must be a regular file or new, and keeps its old content if the
/// save fails). Parameters on a remote device have
/// [`answer_within`](crate::device::remote::answer_within) to be read back.
///
/// # Errors
/// [`Error::DeferredInitialization`] naming the layers still deferred;
/// [`Error::NonFiniteParameter`] for a NaN or infinite parameter (the file keeps its old
/// content); [`Error::Output`] for a path that cannot take the file; [`Error::ParameterFile`]
/// when writing fails; [`Error::Silent`] for a remote device that did not answer in time.
pub fn save_parameters<M: Module + 'static>(net: &M, path: impl AsRef<Path>) -> Result<()> {
    save_parameters_with(net, path, &BTreeMap::new())
}

/// [`save_parameters`], with `metadata` in the file's header beside PyTorch's `format: pt`
/// (`ember train --save` records the model, the input shape and the outputs there, which
/// `ember export` reads back: [`super::header::metadata`]).
///
/// # Errors
/// As [`save_parameters`].
pub fn save_parameters_with<M: Module + 'static>(
    net: &M,
    path: impl AsRef<Path>,
    metadata: &BTreeMap<String, String>,
) -> Result<()> {
    let (net, path, metadata) = (net.clone(), path.as_ref().to_path_buf(), metadata.clone());
    crate::device::remote::bounded(
        &net.devices(),
        "reading the parameters back to write them",
        move || write_parameters(&net, &path, &metadata),
    )
}

/// [`save_parameters_with`]'s reads and writes, on this thread.
fn write_parameters<M: Module>(
    net: &M,
    path: &Path,
    metadata: &BTreeMap<String, String>,
) -> Result<()> {
    refuse_deferred(&collect_params(net))?;
    if let Some(e) = non_finite(net) {
        return Err(e);
    }
    atomic::write_atomic(path, |tmp| {
        let mut store = SafetensorsStore::from_file(tmp)
            .overwrite(true)
            .skip_enum_variants(true)
            .with_to_adapter(BurnToPyTorchAdapter)
            .clear_metadata()
            .metadata("format", "pt");
        for (key, value) in metadata {
            store = store.metadata(key, value);
        }
        // The inference copy: burn folds every pending update of a running statistic
        // (BatchNorm's) into its value there, and the file gets the value as it stands.
        net.valid()
            .save_into(&mut store)
            .map_err(|e| file_error(path, e.to_string()))?;
        // The same parameters and metadata, the same bytes.
        super::header::sort_metadata(tmp)
    })
}

/// Reads the parameters of `net` from a safetensors file.
///
/// Every input size must be known: a network with deferred layers is resolved first with
/// [`Block::infer_shape`](crate::Block::infer_shape) on an example input, since a file alone cannot say the input's
/// shape. `device` is where the parameters go.
///
/// # Errors
/// [`Error::DeferredInitialization`] naming the deferred layers; [`Error::ParameterMismatch`]
/// listing every missing, extra and mis-shaped name; [`Error::ParameterFile`] for a file that
/// is no safetensors file.
pub fn load_parameters<M: Module>(net: M, path: impl AsRef<Path>, device: &Device) -> Result<M> {
    let path = path.as_ref();
    super::header::refuse_special(path)?;
    refuse_pickle(path)?;
    // A header that cannot be one (a NumPy file, a text file) is named as such, not as
    // whatever the reader trips on first.
    super::header::metadata(path)?;
    // Half, bfloat16 and double parameters are cast to the network's f32, as PyTorch's
    // `load_state_dict` copies into the module's dtype.
    let mut store = SafetensorsStore::from_file(path)
        .skip_enum_variants(true)
        .with_from_adapter(PyTorchToBurnAdapter.chain(FloatCastAdapter::to(DType::F32)));
    let in_file: BTreeMap<String, (Vec<usize>, DType)> = store
        .get_all_tensors()
        .map_err(|e| read_error(path, &e.to_string()))?
        .iter()
        .filter(|(name, _)| !name.ends_with(PYTORCH_COUNTER))
        .map(|(name, tensor)| {
            (
                name.clone(),
                (tensor.shape.as_slice().to_vec(), tensor.dtype),
            )
        })
        .collect();
    let expected = collect_params(&net);
    refuse_deferred(&expected)?;
    check_names_and_shapes(path, &expected, &in_file)?;

    // An update still held for a thread would be taken in over the file's statistics later.
    settle_running_statistics(&net);
    let mut net = net.to_device(device);
    let result = net
        .load_from(&mut store)
        .map_err(|e| file_error(path, e.to_string()))?;
    if !result.errors.is_empty() || !result.missing.is_empty() {
        return Err(Error::ParameterMismatch {
            path: path.to_path_buf(),
            details: result.to_string(),
        });
    }
    if let Some(Error::NonFiniteParameter {
        name, index, value, ..
    }) = non_finite(&net)
    {
        return Err(Error::NonFiniteParameter {
            path: Some(path.to_path_buf()),
            name,
            index,
            value,
        });
    }
    Ok(net)
}

/// PyTorch's BatchNorm counts its batches in a buffer of this name; ember has no use for it.
const PYTORCH_COUNTER: &str = "num_batches_tracked";

/// A network whose input sizes are still deferred has parameters to come that no file can
/// shape.
fn refuse_deferred(params: &ParamDict) -> Result<()> {
    if params.deferred.is_empty() {
        Ok(())
    } else {
        Err(Error::DeferredInitialization {
            layers: params.deferred.clone(),
        })
    }
}

/// Compares the network's names and shapes with the file's, and lists every difference.
fn check_names_and_shapes(
    path: &Path,
    expected: &ParamDict,
    in_file: &BTreeMap<String, (Vec<usize>, DType)>,
) -> Result<()> {
    let mut problems = Vec::new();
    for param in &expected.params {
        match in_file.get(&param.name) {
            None => problems.push(format!("missing: {} {:?}", param.name, param.shape)),
            Some((shape, _)) if *shape != param.shape => problems.push(format!(
                "mis-shaped: {} is {:?} in the file but {:?} in the network (both in the \
                 file's PyTorch layout)",
                param.name, shape, param.shape
            )),
            Some((_, dtype)) if !dtype.is_float() => problems.push(format!(
                "wrong type: {} is {dtype:?} in the file; parameters must be floating point \
                 (f16, bf16 and f64 are cast to f32)",
                param.name
            )),
            Some(_) => {}
        }
    }
    for (name, (shape, _)) in in_file {
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

/// Reads every parameter of `net` back from its device without a panic where the device is
/// gone (a remote server that died): `Err` names the first that could not be read. What a
/// run that failed checks before it writes anything: burn-store's reads panic there, once per
/// tensor and place tried.
///
/// A remote device has [`answer_within`](crate::device::remote::answer_within) to hand them
/// all over.
///
/// # Errors
/// [`Error::Readback`] naming the parameter and the device's reason; [`Error::Silent`] for a
/// remote device that did not answer in time.
pub fn readable<M: Module + 'static>(net: &M) -> Result<()> {
    let net = net.clone();
    crate::device::remote::bounded(&net.devices(), "reading the parameters back", move || {
        read_all(&net)
    })
}

/// [`readable`]'s reads, on this thread.
fn read_all<M: Module>(net: &M) -> Result<()> {
    struct Read(Option<Error>);
    impl burn::module::ModuleVisitor for Read {
        fn visit_float<const D: usize>(
            &mut self,
            param: &burn::module::Param<burn::tensor::Tensor<D>>,
        ) {
            if self.0.is_none()
                && let Err(e) = param.val().try_to_data()
            {
                self.0 = Some(Error::Readback {
                    what: format!("a parameter of shape {:?}", param.val().dims()),
                    reason: e.to_string(),
                });
            }
        }
    }
    let mut read = Read(None);
    net.visit(&mut read);
    read.0.map_or(Ok(()), Err)
}

/// The first NaN or infinity among `net`'s parameters, as [`Error::NonFiniteParameter`]
/// (without a file): a file of them would turn every loss into NaN, where it would be blamed on
/// the learning rate. Every parameter is read back to the host.
pub fn non_finite<M: Module>(net: &M) -> Option<Error> {
    for tensor in net.collect(None, Some(Box::new(BurnToPyTorchAdapter)), true) {
        let name = tensor.name.clone();
        let values = burn::store::bridge::into_data(tensor)
            .ok()
            .and_then(|data| data.convert::<f32>().try_to_vec::<f32>().ok());
        if let Some((index, &value)) = values
            .iter()
            .flatten()
            .enumerate()
            .find(|(_, v)| !v.is_finite())
        {
            return Some(Error::NonFiniteParameter {
                path: None,
                name,
                index,
                value,
            });
        }
    }
    None
}

/// `torch.save` writes a zip archive (or, before PyTorch 1.6, a bare pickle), which no
/// safetensors reader can take: say so rather than report a malformed header.
fn refuse_pickle(path: &Path) -> Result<()> {
    let mut start = [0u8; 9];
    let (read, len) = fs::File::open(path)
        .and_then(|mut f| {
            let len = f.metadata()?.len();
            Ok((std::io::Read::read(&mut f, &mut start)?, len))
        })
        .map_err(|source| Error::io(path, source))?;
    // A safetensors file: a little-endian header length, then the header's `{`. Its first
    // two bytes are a pickle's (0x80, protocol 2 to 5) whenever that length is 0x0280 to
    // 0x05ff with 0x80 as its low byte (640, 896, 1152, 1408 bytes, and so on every 64 KiB),
    // and such a file (a 1-layer `nn.RNN`'s) was refused as a pickle.
    let header = u64::from_le_bytes(start[..8].try_into().expect("8 bytes"));
    let safetensors = read == 9 && start[8] == b'{' && header.saturating_add(8) <= len;
    let zip = !safetensors && read >= 4 && start[..4] == *b"PK\x03\x04";
    let pickle = !safetensors && read >= 2 && start[0] == 0x80 && (2..=5).contains(&start[1]);
    if zip || pickle {
        return Err(file_error(
            path,
            "this is a PyTorch pickle (torch.save), not safetensors: in PyTorch, save it with \
             safetensors.torch.save_file(model.state_dict(), path)"
                .to_string(),
        ));
    }
    Ok(())
}

/// The reader's error, in words a user can act on where the library's are its own.
fn read_error(path: &Path, said: &str) -> Error {
    let message = match said.contains("file not fully covered") {
        true => format!(
            "it is shorter than its header says ({} bytes): cut short, maybe by a copy or a \
             download that did not finish",
            std::fs::metadata(path).map_or(0, |m| m.len())
        ),
        false => said.to_string(),
    };
    file_error(path, message)
}

fn file_error(path: &Path, message: String) -> Error {
    Error::ParameterFile {
        path: path.to_path_buf(),
        message,
    }
}
