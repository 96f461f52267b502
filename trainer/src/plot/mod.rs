//! Figures of training runs and timings, drawn with plotters as PNG and SVG: time, memory and
//! the timeline of a run's trace, the policies' sweep, and timings as bars.
//!
//! Text uses DejaVu Sans embedded in the binary, so a machine without fontconfig or any font
//! renders it. Each policy gets a colour **and** a marker shape (and issued/completed curves a
//! solid/dashed line), so the figures read in black-and-white print too.

mod bars;
mod lr_find;
mod memory;
mod sweep;
mod time;
mod timeline;

use std::path::{Path, PathBuf};
use std::sync::Once;

use ember::io::write_atomic;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::policy::PolicyKind;
use crate::summary::PolicySummary;
use crate::trace::Trace;

/// A trace's curves are labelled with its policy (`run` for a trace without records).
fn policy_label(trace: &Trace) -> String {
    trace
        .policy()
        .map_or_else(|| "run".to_string(), ToString::to_string)
}

const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (1200, 750);
const TITLE: u32 = 30;
const LABEL: u32 = 20;
const TICK: u32 = 17;

static FONT_ONCE: Once = Once::new();

fn register_font() {
    FONT_ONCE.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../../assets/DejaVuSans.ttf");
        // The font is a fixed, valid file: failing to parse it is a build defect.
        if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_err() {
            panic!("the embedded DejaVu Sans font does not parse");
        }
    });
}

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

/// The colour of the i-th policy: dark, well separated hues.
fn color(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 6] = [
        RGBColor(0, 90, 181),
        RGBColor(220, 50, 32),
        RGBColor(0, 140, 70),
        RGBColor(120, 60, 160),
        RGBColor(200, 120, 0),
        RGBColor(60, 60, 60),
    ];
    COLORS[i % COLORS.len()]
}

/// A curve's points, (x, y) in data coordinates.
type Curve = Vec<(f64, f64)>;

/// The chart type every figure draws on.
type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The outline of the i-th policy's marker, in pixels around its point: octagon, triangle,
/// diamond, square.
fn marker_outline(i: usize) -> Vec<(i32, i32)> {
    match i % 4 {
        0 => vec![
            (-3, -6),
            (3, -6),
            (6, -3),
            (6, 3),
            (3, 6),
            (-3, 6),
            (-6, 3),
            (-6, -3),
        ],
        1 => vec![(0, -7), (7, 6), (-7, 6)],
        2 => vec![(0, -7), (7, 0), (0, 7), (-7, 0)],
        _ => vec![(-5, -5), (5, -5), (5, 5), (-5, 5)],
    }
}

/// The outline moved `dx` pixels to the right (legend entries draw it on their line).
fn shifted(outline: Vec<(i32, i32)>, dx: i32) -> Vec<(i32, i32)> {
    outline.into_iter().map(|(x, y)| (x + dx, y)).collect()
}

/// Draws the i-th policy's marker at each point.
fn draw_markers<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    i: usize,
    points: Vec<(f64, f64)>,
    style: ShapeStyle,
) -> Result<(), DrawError> {
    chart
        .draw_series(
            points
                .into_iter()
                .map(|p| EmptyElement::at(p) + Polygon::new(marker_outline(i), style)),
        )
        .map(drop)
        .map_err(DrawError::from)
}

/// Writes the title and the subtitle (device and workload) at the top of `root`, and returns
/// the area below them.
fn framed<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &str,
) -> Result<DrawingArea<DB, Shift>, DrawError> {
    let (top, body) = root.split_vertically(70);
    top.titled(title, (FONT, TITLE))?;
    top.draw(&Text::new(subtitle.to_string(), (12, 45), (FONT, TICK)))?;
    Ok(body)
}

/// A chart over `x` × `y` in `area`, with its grid, tick labels and axis descriptions drawn.
fn chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    x_desc: &str,
    y_desc: &str,
) -> Result<Chart<'a, DB>, DrawError> {
    let mut chart = ChartBuilder::on(area)
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .axis_desc_style((FONT, LABEL))
        .label_style((FONT, TICK))
        .draw()?;
    Ok(chart)
}

/// Draws the legend of the labelled series.
fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    position: SeriesLabelPosition,
) -> Result<(), DrawError> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FONT, TICK))
        .draw()
        .map_err(DrawError::from)
}

/// Every `step`-th point of a curve, and the last, so that markers stay legible.
fn sparse(points: &[(f64, f64)], count: usize) -> Vec<(f64, f64)> {
    let step = (points.len() / count.max(1)).max(1);
    let mut picked: Vec<(f64, f64)> = points.iter().copied().step_by(step).collect();
    if let Some(last) = points.last()
        && picked.last() != Some(last)
    {
        picked.push(*last);
    }
    picked
}

pub use bars::BarsFigure;
pub use lr_find::LrFindFigure;
pub use memory::MemoryFigure;
pub use sweep::SweepFigure;
pub use time::TimeFigure;
pub use timeline::TimelineFigure;
