//! Figures of training runs and timings, drawn with plotters as PNG and SVG: time, memory and
//! the timeline of a run's trace, the policies' sweep, and timings as bars.
//!
//! Text uses DejaVu Sans embedded in the binary, so a machine without fontconfig or any font
//! renders it. Each policy gets a colour **and** a marker shape (and issued/completed curves a
//! solid/dashed line), so the figures read in black-and-white print too.
//!
//! Each figure lives in a file of its own; what they share lives beside them, so that no figure
//! imports from this front: [`Figure`] and [`DrawError`] in `figure`, the font, sizes, colours
//! and markers in `style`, and the title, axes, markers and legend in `chart`.

mod bars;
mod chart;
mod figure;
mod lr_find;
mod memory;
mod style;
mod sweep;
mod time;
mod timeline;

use std::path::{Path, PathBuf};

use ember::io::write_atomic;
use plotters::coord::Shift;
use plotters::prelude::*;

use style::{SIZE, register_font};

pub use bars::BarsFigure;
pub use figure::{DrawError, Figure};
pub use lr_find::LrFindFigure;
pub use memory::MemoryFigure;
pub use sweep::SweepFigure;
pub use time::TimeFigure;
pub use timeline::TimelineFigure;

/// Draws `figure` to `dir/name.png` and `dir/name.svg`, each written atomically through
/// [`ember::io`]. Returns the two paths.
///
/// # Errors
/// [`ember::Error::Output`] for a path that cannot take a file, or one on which drawing
/// failed, naming it; I/O errors naming the path. A file that was there keeps its content.
pub fn render(figure: &impl Figure, dir: &Path, name: &str) -> ember::Result<Vec<PathBuf>> {
    register_font();
    let png = dir.join(format!("{name}.png"));
    let svg = dir.join(format!("{name}.svg"));
    let failed = |path: &Path, e: DrawError| ember::Error::Output {
        path: path.to_path_buf(),
        what: format!("drawing the figure failed: {e}"),
    };
    write_atomic(&png, |tmp| {
        let root = BitMapBackend::new(tmp, SIZE).into_drawing_area();
        draw_on(figure, &root).map_err(|e| failed(&png, e))
    })?;
    write_atomic(&svg, |tmp| {
        let root = SVGBackend::new(tmp, SIZE).into_drawing_area();
        draw_on(figure, &root).map_err(|e| failed(&svg, e))
    })?;
    Ok(vec![png, svg])
}

/// Fills `root` white, draws `figure` and writes it out.
fn draw_on<DB: DrawingBackend>(
    figure: &impl Figure,
    root: &DrawingArea<DB, Shift>,
) -> Result<(), DrawError> {
    root.fill(&WHITE)?;
    figure.draw(root)?;
    Ok(root.present()?)
}
