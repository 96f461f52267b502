//! Timings side by side, as labelled bars on a log scale.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::chart::framed;
use super::figure::{DrawError, Figure};
use super::style::{FONT, LABEL, TICK, color};

/// Timings side by side: one horizontal bar of seconds per measurement, each labelled with its
/// value, on a log scale, so that times orders of magnitude apart (before and after a change,
/// one device against another) read on one figure.
pub struct BarsFigure<'a> {
    /// The figure's title.
    pub title: &'a str,
    /// A line under the title: device and sizes.
    pub subtitle: &'a str,
    /// (label, seconds), drawn top to bottom.
    pub bars: &'a [(String, f64)],
}

impl Figure for BarsFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let values = self.bars.iter().map(|b| b.1).filter(|v| *v > 0.0);
        let lo = values.clone().fold(f64::INFINITY, f64::min).min(1.0) / 4.0;
        let hi = values.fold(0.0, f64::max).max(lo * 10.0) * 3.0;
        let n = self.bars.len().max(1) as f64;
        let body = framed(root, self.title, self.subtitle)?;
        let mut chart = ChartBuilder::on(&body)
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(10)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..n)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc("seconds (log scale)")
            .axis_desc_style((FONT, LABEL))
            .label_style((FONT, TICK))
            .draw()?;
        for (i, (label, seconds)) in self.bars.iter().enumerate() {
            // The first bar on top.
            let y = n - 1.0 - i as f64;
            let end = seconds.max(lo);
            chart.draw_series([Rectangle::new(
                [(lo, y + 0.1), (end, y + 0.62)],
                color(i).mix(0.8).filled(),
            )])?;
            // The label sits above its bar, so a long bar never pushes it off the figure.
            chart.draw_series([Text::new(
                format!("{label}: {seconds:.4} s"),
                (lo * 1.05, y + 0.95),
                (FONT, LABEL),
            )])?;
        }
        Ok(())
    }
}
