//! Gluon's layers, one per file with its options and tests, and `Sequential`, the container
//! that chains them. Each layer with an input size takes it from the first batch (deferred
//! initialization, [`crate::deferred`]) and runs on ember's CPU kernels where they apply
//! ([`crate::kernels`]).
//!
//! A new layer is its file here and its line in the list below, which declares the file,
//! re-exports its types at the crate root (`ember::Dense`) and makes them children a
//! [`Sequential`] holds; then its ONNX operators in `onnx/layers.rs`, and its kernel in
//! `kernels/` if it has one.

/// Each layer's file and the layers it defines: the one list of ember's layers.
macro_rules! layers {
    ($($file:ident: $($kind:ident),+;)*) => {
        $(
            pub(crate) mod $file;
            pub use $file::{$($kind),+};
        )*

        /// Calls `$m!` with every layer's type, for [`sequential`]'s kinds of child.
        macro_rules! with_every_layer {
            ($m:ident) => {
                $m!($($($kind),+),*);
            };
        }
    };
}

layers! {
    dense: Dense;
    conv1d: Conv1D;
    conv2d: Conv2D;
    pool: MaxPool2D, AvgPool2D, GlobalAvgPool2D;
    norm: BatchNorm, LayerNorm;
    dropout: Dropout;
    flatten: Flatten;
    embedding: Embedding;
    rnn: Recurrent, RecurrentCell;
    positional: PositionalEncoding;
    activation: Activation;
    attention: MultiHeadAttention, TransformerEncoderLayer, TransformerEncoder;
}

pub(crate) mod conv;
pub(crate) mod sequential;

pub use attention::Mask;
pub use conv::Pair;
pub use rnn::{Layout, Mode};
// Any module's, not a layer's: defined below the layers, for the file loader and the replicas.
pub use crate::running_statistics::settle_running_statistics;
pub use sequential::{Layer, NoBlock, Sequential};
