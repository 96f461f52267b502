//! The learning-rate finder's curve: loss against learning rate, the suggestion marked.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::chart::{Curve, framed, legend};
use super::figure::{DrawError, Figure};
use super::style::{FONT, LABEL, TICK, color};
use crate::fit::{LrPoint, SweepMode};

/// `lr_find`: each batch's loss (light) and the smoothed loss (dark) against the learning rate,
/// on a log axis for an exponential sweep, with the suggested rate marked. Losses far above
/// the curve's start (where it blew up) are drawn at the top edge.
pub struct LrFindFigure<'a> {
    /// The sweep's points, in order.
    pub points: &'a [LrPoint],
    /// How the rates were spaced: exponential sweeps get a log axis.
    pub mode: SweepMode,
    /// The suggested point's index in `points`.
    pub suggested: Option<usize>,
    /// A line under the title.
    pub subtitle: &'a str,
}

impl LrFindFigure<'_> {
    /// Where a rate goes on the x axis.
    fn x(&self, lr: f64) -> f64 {
        match self.mode {
            SweepMode::Exponential => lr.log10(),
            SweepMode::Linear => lr,
        }
    }
}

impl Figure for LrFindFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let body = framed(root, "Loss against learning rate", self.subtitle)?;
        let xs = self.points.iter().map(|p| self.x(p.lr));
        let (x_lo, x_hi) = (
            xs.clone().fold(f64::INFINITY, f64::min),
            xs.fold(f64::NEG_INFINITY, f64::max),
        );
        let (x_lo, x_hi) = match x_lo < x_hi {
            true => (x_lo, x_hi),
            false => (x_lo - 1.0, x_lo + 1.0),
        };
        let finite = |v: &f64| v.is_finite();
        let smoothed = self.points.iter().map(|p| p.smoothed).filter(finite);
        let low = self
            .points
            .iter()
            .flat_map(|p| [p.loss, p.smoothed])
            .filter(finite)
            .fold(f64::INFINITY, f64::min);
        // The top: the highest smoothed loss, but no more than twice the start's, so that a
        // blow-up does not flatten the part of the curve that matters.
        let start = self.points.first().map_or(1.0, |p| p.smoothed);
        let high = smoothed.fold(f64::NEG_INFINITY, f64::max).min(2.0 * start);
        let (low, high) = match low.is_finite() && high > low {
            true => (low, high),
            false => (0.0, 1.0),
        };
        let pad = (high - low) * 0.05;
        let top = high + pad;
        let mut chart = ChartBuilder::on(&body)
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(x_lo..x_hi, (low - pad)..top)?;
        let log = self.mode == SweepMode::Exponential;
        let x_format = |v: &f64| match log {
            true => format!("1e{v:.0}"),
            false => format!("{v:.3}"),
        };
        chart
            .configure_mesh()
            .x_desc(match log {
                true => "learning rate (log scale)",
                false => "learning rate",
            })
            .y_desc("loss")
            .x_label_formatter(&x_format)
            .axis_desc_style((FONT, LABEL))
            .label_style((FONT, TICK))
            .draw()?;
        let clipped = |loss: f64| loss.min(top);
        let curve = |loss: fn(&LrPoint) -> f64| -> Curve {
            self.points
                .iter()
                .map(|p| (self.x(p.lr), loss(p)))
                .filter(|(_, y)| y.is_finite())
                .map(|(x, y)| (x, clipped(y)))
                .collect()
        };
        chart
            .draw_series(LineSeries::new(
                curve(|p| p.loss),
                color(0).mix(0.35).stroke_width(1),
            ))?
            .label("loss of each batch")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], color(0).mix(0.35)));
        chart
            .draw_series(LineSeries::new(
                curve(|p| p.smoothed),
                color(0).stroke_width(3),
            ))?
            .label("smoothed loss")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], color(0).stroke_width(3)));
        if let Some(point) = self.suggested.and_then(|i| self.points.get(i)) {
            let at = (self.x(point.lr), clipped(point.smoothed));
            chart
                .draw_series(std::iter::once(Circle::new(at, 9, color(1).filled())))?
                .label(format!("suggested {:.2e}", point.lr))
                .legend(|(x, y)| Circle::new((x + 10, y), 6, color(1).filled()));
            chart.draw_series(DashedLineSeries::new(
                [(at.0, low - pad), (at.0, top)],
                6,
                4,
                color(1).stroke_width(1),
            ))?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerLeft)
    }
}
