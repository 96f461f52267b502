//! Pooling: `MaxPool2D`, `AvgPool2D` and `GlobalAvgPool2D`, over burn-nn's `MaxPool2d`,
//! `AvgPool2d` and `AdaptiveAvgPool2d`. They hold no parameter.
//!
//! ```
//! use burn::prelude::*;
//! use ember::{AvgPool2D, Block, GlobalAvgPool2D, MaxPool2D};
//!
//! let device = Device::flex();
//! let x = || Tensor::<4>::ones([2, 3, 8, 8], &device).into();
//! assert_eq!(MaxPool2D::new(2).forward(x()).dims(), [2, 3, 4, 4]);
//! assert_eq!(AvgPool2D::new(3).strides(1).padding(1).forward(x()).dims(), [2, 3, 8, 8]);
//! assert_eq!(GlobalAvgPool2D::new().forward(x()).dims(), [2, 3, 1, 1]);
//! ```

use std::fmt;

use burn::nn::PaddingConfig2d;
use burn::nn::pool::{
    AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig, AvgPool2d, AvgPool2dConfig, MaxPool2d,
    MaxPool2dConfig,
};

use crate::block::Block;
use crate::deferred::layer_module;
use crate::error::{Error, Result};
use crate::layers::conv::{Pair, window_output};
use crate::ndtensor::NdTensor;

/// A pooling window in Gluon's names; `strides` defaults to the pool size.
#[derive(Debug, Clone, Copy)]
struct PoolWindow {
    pool_size: Pair,
    strides: Pair,
    padding: Pair,
}

impl PoolWindow {
    fn new(pool_size: Pair) -> Self {
        Self {
            pool_size,
            strides: pool_size,
            padding: Pair([0, 0]),
        }
    }

    /// The window as ember's CPU kernels take it.
    fn cpu(&self) -> crate::kernels::Window {
        crate::kernels::Window {
            kernel: self.pool_size.0.to_vec(),
            strides: self.strides.0.to_vec(),
            padding: self.padding.0.to_vec(),
            dilation: vec![1, 1],
        }
    }

    fn padding_config(&self) -> PaddingConfig2d {
        let [ph, pw] = self.padding.0;
        PaddingConfig2d::Explicit(ph, pw, ph, pw)
    }

    /// Checks that the input is `[batch, channels, height, width]` and the window fits.
    fn check(&self, layer: &dyn fmt::Display, dims: &[usize]) -> Result<()> {
        if dims.len() != 4 {
            return Err(rank_4(layer, dims));
        }
        for axis in 0..2 {
            window_output(
                layer,
                dims,
                axis + 2,
                self.pool_size.0[axis],
                self.strides.0[axis],
                self.padding.0[axis],
                1,
            )?;
        }
        Ok(())
    }
}

fn rank_4(layer: &dyn fmt::Display, dims: &[usize]) -> Error {
    Error::Shape {
        what: layer.to_string(),
        expected: "[batch, channels, height, width]".to_string(),
        got: dims.to_vec(),
    }
}

macro_rules! pool_layer {
    ($name:ident, $gluon:literal, $inner:ty, $build:expr, max: $max:expr) => {
        impl $name {
            /// `strides=`: the step of the window (default: the pool size).
            pub fn strides(mut self, strides: impl Into<Pair>) -> Self {
                self.window.strides = strides.into();
                self.pool = $build(&self.window);
                self
            }

            /// `padding=`: added on each side of each spatial axis (default 0).
            pub fn padding(mut self, padding: impl Into<Pair>) -> Self {
                self.window.padding = padding.into();
                self.pool = $build(&self.window);
                self
            }

            /// The burn layer inside.
            pub fn pool(&self) -> &$inner {
                &self.pool
            }
        }

        impl Block for $name {
            /// # Shapes
            /// - input: `[batch, channels, height, width]`
            /// - output: `[batch, channels, out_height, out_width]`, with
            ///   `out = ⌊(in + 2·padding − pool_size) / strides⌋ + 1`
            fn forward(&self, x: NdTensor) -> NdTensor {
                let x = x.rank::<4>();
                match crate::kernels::pool(&x, $max, self.window.cpu()) {
                    Some(y) => y.into(),
                    None => self.pool.forward(x).into(),
                }
            }

            fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
                self.window.check(&self, &x.dims())?;
                let y = self.forward(x);
                Ok((self, y))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let w = &self.window;
                write!(
                    f,
                    concat!($gluon, "(pool_size={}, strides={}, padding={})"),
                    w.pool_size, w.strides, w.padding
                )
            }
        }

        layer_module!($name, pool);
    };
}

/// `nn.MaxPool2D(pool_size=2, strides=None, padding=0)`: the largest value of each window.
#[derive(Debug, Clone)]
pub struct MaxPool2D {
    window: PoolWindow,
    pool: MaxPool2d,
}

impl MaxPool2D {
    /// A `pool_size` window, moved by `pool_size` (Gluon's `strides=None`), without padding.
    pub fn new(pool_size: impl Into<Pair>) -> Self {
        let window = PoolWindow::new(pool_size.into());
        Self {
            pool: build_max(&window),
            window,
        }
    }
}

fn build_max(w: &PoolWindow) -> MaxPool2d {
    MaxPool2dConfig::new(w.pool_size.0)
        .with_strides(w.strides.0)
        .with_padding(w.padding_config())
        .init()
}

pool_layer!(MaxPool2D, "MaxPool2D", MaxPool2d, build_max, max: true);

/// `nn.AvgPool2D(pool_size=2, strides=None, padding=0)`: the mean of each window, padding
/// zeros counted (Gluon's and PyTorch's default `count_include_pad=True`).
#[derive(Debug, Clone)]
pub struct AvgPool2D {
    window: PoolWindow,
    pool: AvgPool2d,
}

impl AvgPool2D {
    /// A `pool_size` window, moved by `pool_size` (Gluon's `strides=None`), without padding.
    pub fn new(pool_size: impl Into<Pair>) -> Self {
        let window = PoolWindow::new(pool_size.into());
        Self {
            pool: build_avg(&window),
            window,
        }
    }
}

fn build_avg(w: &PoolWindow) -> AvgPool2d {
    AvgPool2dConfig::new(w.pool_size.0)
        .with_strides(w.strides.0)
        .with_padding(w.padding_config())
        .with_count_include_pad(true)
        .init()
}

pool_layer!(AvgPool2D, "AvgPool2D", AvgPool2d, build_avg, max: false);

/// `nn.GlobalAvgPool2D()`: the mean over each channel's whole plane.
#[derive(Debug, Clone)]
pub struct GlobalAvgPool2D {
    pool: AdaptiveAvgPool2d,
}

impl Default for GlobalAvgPool2D {
    fn default() -> Self {
        Self::new()
    }
}

impl GlobalAvgPool2D {
    /// The layer.
    pub fn new() -> Self {
        Self {
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
        }
    }
}

impl Block for GlobalAvgPool2D {
    /// # Shapes
    /// - input: `[batch, channels, height, width]`
    /// - output: `[batch, channels, 1, 1]`, as Gluon keeps it
    fn forward(&self, x: NdTensor) -> NdTensor {
        self.pool.forward(x.rank::<4>()).into()
    }

    fn infer(self, x: NdTensor) -> Result<(Self, NdTensor)> {
        let dims = x.dims();
        if dims.len() != 4 || dims[2] == 0 || dims[3] == 0 {
            return Err(rank_4(&self, &dims));
        }
        let y = self.forward(x);
        Ok((self, y))
    }
}

impl fmt::Display for GlobalAvgPool2D {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GlobalAvgPool2D")
    }
}

layer_module!(GlobalAvgPool2D, pool);
