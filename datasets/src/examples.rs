//! Examples held in memory: a feature matrix and targets (class indices or values).

use std::path::Path;

use crate::batch::Batch;
use crate::error::{DatasetError, Result};

/// Targets read as numbers from `path`, as class indices: each must be an integer in
/// `0..classes`, else an error names the example and the value.
pub(crate) fn class_labels(values: &[f32], classes: usize, path: &Path) -> Result<Vec<usize>> {
    values
        .iter()
        .enumerate()
        .map(|(row, &v)| {
            if v.fract() == 0.0 && v >= 0.0 && (v as usize) < classes {
                Ok(v as usize)
            } else {
                Err(DatasetError::Label {
                    path: path.to_path_buf(),
                    at: format!("example {row}"),
                    label: v.to_string(),
                    classes,
                })
            }
        })
        .collect()
}

/// `len` examples of `features` values each, with their targets, row-major. Each example has
/// a shape (`[features]`, or `[1, 28, 28]` for an image), which its batches carry.
#[derive(Debug, Clone, PartialEq)]
pub struct Examples {
    x: Vec<f32>,
    features: usize,
    shape: Vec<usize>,
    y: Vec<f32>,
    outputs: usize,
    classes: Option<usize>,
}

impl Examples {
    /// Examples whose targets are class indices in `0..classes`, one per example. A label out
    /// of range is an error naming it and its row.
    pub fn classification(
        x: Vec<f32>,
        features: usize,
        labels: Vec<usize>,
        classes: usize,
    ) -> Result<Self> {
        if let Some((row, label)) = labels.iter().enumerate().find(|(_, l)| **l >= classes) {
            return Err(DatasetError::InvalidValue {
                name: "label",
                value: label.to_string(),
                reason: format!(
                    "example {row} has label {label}, but there are {classes} classes (0..{classes})"
                ),
            });
        }
        let y = labels.into_iter().map(|l| l as f32).collect();
        Self::checked(x, features, y, 1, Some(classes))
    }

    /// Examples with `outputs` real-valued targets each.
    pub fn regression(x: Vec<f32>, features: usize, y: Vec<f32>, outputs: usize) -> Result<Self> {
        Self::checked(x, features, y, outputs, None)
    }

    fn checked(
        x: Vec<f32>,
        features: usize,
        y: Vec<f32>,
        outputs: usize,
        classes: Option<usize>,
    ) -> Result<Self> {
        if features == 0 || outputs == 0 {
            return Err(DatasetError::InvalidValue {
                name: "shape",
                value: format!("{features} features, {outputs} outputs"),
                reason: "examples need at least one feature and one target".to_string(),
            });
        }
        if !x.len().is_multiple_of(features)
            || !y.len().is_multiple_of(outputs)
            || x.len() / features != y.len() / outputs
        {
            return Err(DatasetError::InvalidValue {
                name: "shape",
                value: format!("{} feature values, {} target values", x.len(), y.len()),
                reason: format!(
                    "expected n × {features} features and n × {outputs} targets for the same n"
                ),
            });
        }
        Ok(Self {
            x,
            features,
            shape: vec![features],
            y,
            outputs,
            classes,
        })
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        self.x.len() / self.features
    }

    /// Whether there is no example.
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// Features per example.
    pub fn features(&self) -> usize {
        self.features
    }

    /// The same examples, each read as an array of `shape` (`[1, 28, 28]` for a grey image):
    /// batches then have the shape `[batch, …shape]`.
    ///
    /// # Errors
    /// [`DatasetError::InvalidValue`] when the shape does not hold exactly the example's
    /// features.
    pub fn with_shape(mut self, shape: &[usize]) -> Result<Self> {
        if shape.iter().product::<usize>() != self.features || shape.is_empty() {
            return Err(DatasetError::InvalidValue {
                name: "example shape",
                value: format!("{shape:?}"),
                reason: format!("each example has {} features", self.features),
            });
        }
        self.shape = shape.to_vec();
        Ok(self)
    }

    /// Each example's shape (`[features]` unless set by [`Examples::with_shape`]).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Targets per example (1 for class labels).
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// Number of classes, for classification data.
    pub fn classes(&self) -> Option<usize> {
        self.classes
    }

    /// Example `i`: its features and its targets.
    pub fn row(&self, i: usize) -> (&[f32], &[f32]) {
        (
            &self.x[i * self.features..(i + 1) * self.features],
            &self.y[i * self.outputs..(i + 1) * self.outputs],
        )
    }

    /// The examples at `indices`, in that order, as examples of their own.
    pub(crate) fn subset(&self, indices: &[usize]) -> Examples {
        let batch = self.batch(indices);
        Examples {
            x: batch.x,
            features: self.features,
            shape: self.shape.clone(),
            y: batch.y,
            outputs: self.outputs,
            classes: self.classes,
        }
    }

    /// The examples at `indices`, in that order, as one host batch.
    pub fn batch(&self, indices: &[usize]) -> Batch {
        let mut x = Vec::with_capacity(indices.len() * self.features);
        let mut y = Vec::with_capacity(indices.len() * self.outputs);
        for &i in indices {
            let (features, targets) = self.row(i);
            x.extend_from_slice(features);
            y.extend_from_slice(targets);
        }
        Batch {
            x,
            x_shape: std::iter::once(indices.len())
                .chain(self.shape.iter().copied())
                .collect(),
            y,
            y_shape: [indices.len(), self.outputs],
        }
    }
}
