//! `Block`: Gluon's building block. Only `forward` is required; `initialize`, `infer_shape`,
//! `collect_params`, `summary` and burn's `num_params` come for free.
//!
//! A block maps an [`NdTensor`] of any rank to another, so a user's own burn module on images
//! goes into a `Sequential` beside ember's layers:
//!
//! ```
//! use burn::prelude::*;
//! use burn::nn::conv::{Conv2d, Conv2dConfig};
//! use burn::nn::PaddingConfig2d;
//! use ember::{Block, NdTensor};
//!
//! /// y = x + relu(conv(x)), on `[N, C, H, W]`.
//! #[derive(Module, Debug)]
//! struct Residual {
//!     conv: Conv2d,
//! }
//!
//! impl Block for Residual {
//!     fn forward(&self, x: NdTensor) -> NdTensor {
//!         let x: Tensor<4> = x.rank();
//!         (x.clone() + burn::tensor::activation::relu(self.conv.forward(x))).into()
//!     }
//! }
//!
//! let device = Device::flex();
//! let conv = Conv2dConfig::new([2, 2], [3, 3]).with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1));
//! let block = Residual { conv: conv.init(&device) };
//! assert_eq!(block.collect_params().names(), vec!["conv.weight", "conv.bias"]);
//! let y = block.forward(Tensor::<4>::ones([1, 2, 5, 5], &device).into());
//! assert_eq!(y.dims(), [1, 2, 5, 5]);
//! // A wrong input is an error naming the block, found before any training step.
//! let err = block.infer_shape(Tensor::<2>::ones([1, 2], &device)).unwrap_err();
//! assert!(err.to_string().contains("Residual"), "{err}");
//! ```

use std::cell::Cell;

use burn::module::{Module, ModuleDisplay};
use burn::tensor::Device;

use crate::error::{Error, Result};
use crate::init::{Init, Reinitializer};
use crate::ndtensor::NdTensor;
use crate::params::ParamDict;

/// A piece of a network: a layer, a container or a user's own module.
pub trait Block: Module + ModuleDisplay + Sized {
    /// Runs the block. A pure function of the parameters and the input.
    ///
    /// # Shapes
    /// Each block documents its own; a [`Sequential`](crate::Sequential) passes the output
    /// of one child to the next.
    ///
    /// # Panics
    /// When the input does not fit the block (a wrong rank or size), or when a layer's input
    /// size is still deferred. [`Block::infer_shape`] checks all of that once, with errors.
    fn forward(&self, x: NdTensor) -> NdTensor;

    /// The one explicit step that resolves deferred sizes: creates the parameters that wait
    /// for the input's size, checks that `x` fits every layer, and returns the block with
    /// its output for `x`. ember's layers check shapes themselves and report a mismatch as
    /// an error naming the layer; the default, for a block whose parameters already exist,
    /// runs [`Block::forward`] and reports a panic in it as an [`Error::Shape`] naming the
    /// block. A block that holds ember layers with deferred sizes overrides it to pass `x`
    /// through each of them (see `examples/resnet.rs`).
    ///
    /// # Errors
    /// [`Error::Shape`], [`Error::FeatureMismatch`] or [`Error::NotInitialized`], naming the
    /// layer at fault.
    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let dims = x.dims();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.forward(x)));
        match outcome {
            Ok(y) => Ok((self, y)),
            Err(panic) => Err(Error::Shape {
                what: format!(
                    "{} ({})",
                    self.format(Default::default()).trim(),
                    crate::error::panic_text(&panic)
                ),
                expected: "an input this block can take".to_string(),
                got: dims,
            }),
        }
    }

    /// Gluon's `initialize`: weights are drawn from `init`, biases are zeros, and
    /// normalization layers start from γ = 1, β = 0 and fresh running statistics. Layers
    /// whose input size is not yet known create their parameters at [`Block::infer_shape`]
    /// (or the first batch of `fit`). The default moves the module to `device` and
    /// re-initializes every float parameter it holds; containers and ember's layers override
    /// it. A block of one's own that holds ember layers with deferred sizes overrides it too,
    /// passing `init` and `device` to each of them, as it passes the example in
    /// [`Block::infer`] (see `examples/resnet.rs`).
    fn initialize(self, init: Init, device: &Device) -> Self {
        self.to_device(device).map(&mut Reinitializer::new(init))
    }

    /// Gluon's `infer_shape`: runs an example input through the block, so that every
    /// deferred parameter takes its shape now. See [`Block::infer`]. The example trains
    /// nothing: a [`BatchNorm`](crate::BatchNorm) it passes through, also through a block's
    /// own `forward`, keeps its running statistics as they were (burn's `nn::BatchNorm`
    /// inside a block of one's own does not know this, and takes the example in).
    ///
    /// # Errors
    /// As [`Block::infer`].
    fn infer_shape(self, example: impl Into<NdTensor>) -> Result<Self> {
        let _inferring = Inferring::enter();
        self.infer(example.into()).map(|(block, _)| block)
    }

    /// Every parameter with its structural name (`0.weight`, `2.0.bias`, …) and its shape,
    /// exactly as [`save_parameters`](crate::io::safetensors::save_parameters) writes them: burn's
    /// module snapshot seen through burn-store's PyTorch adapter, so a Dense weight is
    /// `(units, in_units)` and a BatchNorm's γ is `weight`. Layers whose input size is still
    /// deferred hold no parameter yet and are listed in [`ParamDict::deferred`].
    fn collect_params(&self) -> ParamDict {
        crate::params::collect_params(self)
    }

    /// A printable table of the parameters and the total count.
    fn summary(&self) -> String {
        self.collect_params().to_string()
    }

    /// Gluon's `save_parameters`: see [`crate::io::safetensors::save_parameters`].
    ///
    /// # Errors
    /// As [`crate::io::safetensors::save_parameters`].
    fn save_parameters(&self, path: impl AsRef<std::path::Path>) -> Result<()>
    where
        Self: 'static,
    {
        crate::io::safetensors::save_parameters(self, path)
    }

    /// Gluon's `load_parameters`: see [`crate::io::safetensors::load_parameters`].
    ///
    /// # Errors
    /// As [`crate::io::safetensors::load_parameters`].
    fn load_parameters(self, path: impl AsRef<std::path::Path>, device: &Device) -> Result<Self> {
        crate::io::safetensors::load_parameters(self, path, device)
    }
}

thread_local! {
    /// Whether this thread is inside [`Block::infer_shape`].
    static INFERRING: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as inferring shapes until dropped (nested calls keep the outer mark).
pub(crate) struct Inferring(bool);

impl Inferring {
    pub(crate) fn enter() -> Self {
        Self(INFERRING.with(|i| i.replace(true)))
    }
}

impl Drop for Inferring {
    fn drop(&mut self) {
        INFERRING.with(|i| i.set(self.0));
    }
}

/// Whether the running thread is inside [`Block::infer_shape`] (or `summarize`): a layer with
/// state that training updates (BatchNorm's running statistics) leaves it as it is.
pub(crate) fn inferring() -> bool {
    INFERRING.with(Cell::get)
}
