//! Time per epoch and frontend issue time, per policy: two bars each.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::chart::{Chart, framed, legend};
use super::figure::{DrawError, Figure};
use super::style::{FONT, LABEL, TICK};
use crate::summary::PolicySummary;

/// Figure 1, `time`: time per epoch per policy, with the frontend's issue time beside it.
pub struct TimeFigure<'a> {
    /// The policies, in order.
    pub summaries: &'a [PolicySummary],
    /// A line under the title: device and workload.
    pub subtitle: &'a str,
}

impl Figure for TimeFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let n = self.summaries.len().max(1);
        let top = self
            .summaries
            .iter()
            .map(|s| s.time_per_epoch.max(s.issue_time))
            .fold(0.0, f64::max)
            .max(1e-3)
            * 1.2;
        let body = framed(
            root,
            "Time to issue vs time to compute, per epoch",
            self.subtitle,
        )?;
        let names: Vec<String> = self
            .summaries
            .iter()
            .map(|s| s.policy.to_string())
            .collect();
        let mut chart = ChartBuilder::on(&body)
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..n as f64, 0f64..top)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            // Ticks every 0.5: the policy's name sits at the centre of its pair of bars.
            .x_labels(2 * n + 1)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x - i as f64 - 0.5).abs() < 0.26 {
                    names.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc("sync policy")
            .y_desc("seconds")
            .axis_desc_style((FONT, LABEL))
            .label_style((FONT, TICK))
            .draw()?;
        self.bars(&mut chart, top)?;
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

impl TimeFigure<'_> {
    /// Each policy's pair of bars, with their values above them.
    fn bars<DB: DrawingBackend>(
        &self,
        chart: &mut Chart<'_, DB>,
        top: f64,
    ) -> Result<(), DrawError> {
        let compute = BLACK.mix(0.75).filled();
        let issue = ShapeStyle {
            color: BLACK.to_rgba(),
            filled: false,
            stroke_width: 2,
        };
        chart
            .draw_series(self.summaries.iter().enumerate().map(|(i, s)| {
                Rectangle::new(
                    [(i as f64 + 0.12, 0.0), (i as f64 + 0.48, s.time_per_epoch)],
                    compute,
                )
            }))?
            .label("time per epoch (first issue to all complete)")
            .legend(move |(x, y)| Rectangle::new([(x, y - 7), (x + 18, y + 7)], compute));
        chart
            .draw_series(self.summaries.iter().enumerate().map(|(i, s)| {
                Rectangle::new(
                    [(i as f64 + 0.52, 0.0), (i as f64 + 0.88, s.issue_time)],
                    issue,
                )
            }))?
            .label("frontend issue time (first to last issue)")
            .legend(move |(x, y)| Rectangle::new([(x, y - 7), (x + 18, y + 7)], issue));
        chart.draw_series(self.summaries.iter().enumerate().flat_map(|(i, s)| {
            [
                Text::new(
                    format!("{:.2} s", s.time_per_epoch),
                    (i as f64 + 0.14, s.time_per_epoch + top * 0.04),
                    (FONT, TICK),
                ),
                Text::new(
                    format!("{:.2} s", s.issue_time),
                    (i as f64 + 0.54, s.issue_time + top * 0.04),
                    (FONT, TICK),
                ),
            ]
        }))?;
        Ok(())
    }
}
