//! The window sweep: time per epoch against peak memory growth, one point per window size.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::chart::{chart, draw_markers, framed};
use super::figure::{DrawError, Figure};
use super::style::{FONT, LABEL, color};
use crate::policy::PolicyKind;
use crate::summary::PolicySummary;

/// Figure 4, `sweep`: time per epoch against peak memory growth, one labelled point per window
/// size.
pub struct SweepFigure<'a> {
    /// The sweep's policies (window:k for each k, and none).
    pub summaries: &'a [PolicySummary],
    /// A line under the title.
    pub subtitle: &'a str,
}

impl Figure for SweepFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let xs = self.summaries.iter().map(|s| s.peak_growth_mb);
        let ys = self.summaries.iter().map(|s| s.time_per_epoch);
        let (x_lo, x_hi) = (xs.clone().fold(0.0, f64::min), xs.fold(1.0, f64::max));
        let (y_lo, y_hi) = (
            ys.clone().fold(f64::INFINITY, f64::min),
            ys.fold(0.0, f64::max),
        );
        let pad_x = (x_hi - x_lo).max(1.0) * 0.15;
        let pad_y = (y_hi - y_lo).max(y_hi * 0.05).max(1e-3) * 0.3;
        let body = framed(root, "How much overlap buys how much memory", self.subtitle)?;
        let mut chart = chart(
            &body,
            (x_lo - pad_x)..(x_hi + pad_x),
            (y_lo - pad_y).max(0.0)..(y_hi + pad_y),
            "peak memory growth (MB)",
            "time per epoch (s)",
        )?;
        let points: Vec<(f64, f64)> = self
            .summaries
            .iter()
            .map(|s| (s.peak_growth_mb, s.time_per_epoch))
            .collect();
        chart.draw_series(LineSeries::new(
            points.clone(),
            BLACK.mix(0.4).stroke_width(1),
        ))?;
        for (i, (s, p)) in self.summaries.iter().zip(points).enumerate() {
            let style = color(i).filled();
            draw_markers(&mut chart, i, vec![p], style)?;
            let label = match s.policy {
                PolicyKind::Window(1) => "k=1 (barrier)".to_string(),
                PolicyKind::Window(k) => format!("k={k}"),
                ref other => other.to_string(),
            };
            chart.draw_series(std::iter::once(Text::new(
                label,
                (p.0 + pad_x * 0.08, p.1 + pad_y * 0.15),
                (FONT, LABEL),
            )))?;
        }
        Ok(())
    }
}
