//! What a figure is: something drawn on any plotters backend, and the error drawing it gives.

use plotters::coord::Shift;
use plotters::prelude::{DrawingArea, DrawingAreaErrorKind, DrawingBackend};

/// A figure that can be drawn on any plotters backend.
pub trait Figure {
    /// Draws the figure on `root`.
    ///
    /// # Errors
    /// [`DrawError`] when plotters fails to draw (plotters' errors convert with `?`).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>;
}

/// plotters failed to draw a figure, in its words.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DrawError(pub String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for DrawError {
    fn from(error: DrawingAreaErrorKind<E>) -> Self {
        DrawError(error.to_string())
    }
}
