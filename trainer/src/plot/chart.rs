//! The parts every figure is drawn from: the title and subtitle, the chart with its axes, the
//! policies' markers and the legend. Sharing them keeps the figures laid out alike.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::figure::DrawError;
use super::style::{FONT, LABEL, TICK, TITLE, marker_outline};
use crate::trace::Trace;

/// A trace's curves are labelled with its policy (`run` for a trace without records).
pub(super) fn policy_label(trace: &Trace) -> String {
    trace
        .policy()
        .map_or_else(|| "run".to_string(), ToString::to_string)
}

/// A curve's points, (x, y) in data coordinates.
pub(super) type Curve = Vec<(f64, f64)>;

/// The chart type every figure draws on.
pub(super) type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws the i-th policy's marker at each point.
pub(super) fn draw_markers<DB: DrawingBackend>(
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
pub(super) fn framed<DB: DrawingBackend>(
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
pub(super) fn chart<'a, DB: DrawingBackend>(
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
pub(super) fn legend<'a, DB: DrawingBackend + 'a>(
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
pub(super) fn sparse(points: &[(f64, f64)], count: usize) -> Vec<(f64, f64)> {
    let step = (points.len() / count.max(1)).max(1);
    let mut picked: Vec<(f64, f64)> = points.iter().copied().step_by(step).collect();
    if let Some(last) = points.last()
        && picked.last() != Some(last)
    {
        picked.push(*last);
    }
    picked
}
