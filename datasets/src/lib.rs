//! # ember-datasets
//!
//! Host-side data for ember: the d2l chapter's synthetic minibatches (X ~ N(0, 1), y = 1),
//! a learnable synthetic regression, MNIST/Fashion-MNIST IDX files, CSV and NumPy `.npy` tables,
//! text for sequence models ([`text`]), and a [`DataLoader`] with a
//! seeded shuffle and prefetch, all producing the host [`Batch`] the training loop uploads.
//!
//! ```
//! use ember_datasets::{Batch, Synthetic};
//! let data = Synthetic::chapter(4, 512, 7);
//! let batch: Batch = data.batch(0);
//! assert_eq!(batch.x_shape, [4, 512]);
//! assert_eq!(batch.y, vec![1.0; 4]);
//! assert_eq!(data.batch(0), batch, "same seed and index, same batch");
//! ```
#![warn(missing_docs)]

pub mod batch;
pub mod csv;
pub mod error;
pub mod examples;
pub mod fashion_mnist;
pub mod idx;
mod input;
pub mod loader;
pub mod npy;
mod split;
pub mod synthetic;
pub mod text;

pub use batch::Batch;
pub use error::{DatasetError, Result};
pub use examples::Examples;
pub use loader::DataLoader;
pub use synthetic::Synthetic;
