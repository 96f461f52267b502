//! The timeline of a run: when each batch was issued and when it completed, per policy.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::chart::{Curve, chart, draw_markers, framed, legend, policy_label, sparse};
use super::figure::{DrawError, Figure};
use super::style::{color, marker_outline, shifted};
use crate::trace::Trace;

/// Figure 3, `timeline`: batches issued and batches completed against wall time: the chapter's
/// frontend/backend figure from real data. The gap between the two curves is the in-flight depth.
///
/// Each curve is a staircase of (seconds, batches). A data-parallel trace also draws, thin,
/// when each device finished its share of each batch.
pub struct TimelineFigure<'a> {
    /// One trace per pair of curves (a run of `fit`; the first round of each policy in a
    /// comparison), labelled with its policy.
    pub traces: &'a [&'a Trace],
    /// A line under the title.
    pub subtitle: &'a str,
}

impl Figure for TimelineFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let steps = |mut times: Vec<f64>| -> Vec<(f64, f64)> {
            times.sort_by(f64::total_cmp);
            let mut points = vec![(0.0, 0.0)];
            for (k, t) in times.into_iter().enumerate() {
                points.push((t, k as f64));
                points.push((t, k as f64 + 1.0));
            }
            points
        };
        // (issued, completed, each device's completions) per policy.
        let curves: Vec<(Curve, Curve, Vec<Curve>)> = self
            .traces
            .iter()
            .map(|trace| {
                let first = trace
                    .batches
                    .iter()
                    .map(|b| b.issue_start)
                    .fold(f64::INFINITY, f64::min);
                let issued = trace.batches.iter().map(|b| b.issue_end - first).collect();
                let done = trace.batches.iter().map(|b| b.done - first).collect();
                let per_device = (0..crate::trace::device_count(&trace.batches))
                    .map(|d| {
                        let times = trace.batches.iter().filter_map(|b| b.device_done.get(d));
                        steps(times.map(|t| t - first).collect())
                    })
                    .collect();
                (steps(issued), steps(done), per_device)
            })
            .collect();
        let all = curves.iter().flat_map(|(a, b, _)| a.iter().chain(b));
        let x_max = all.clone().map(|p| p.0).fold(1e-3, f64::max) * 1.02;
        let y_max = all.map(|p| p.1).fold(1.0, f64::max) * 1.1;
        let body = framed(root, "Frontend issue vs backend completion", self.subtitle)?;
        let mut chart = chart(
            &body,
            0f64..x_max,
            0f64..y_max,
            "wall time since the epoch's first issue (s)",
            "batches",
        )?;
        for (i, (trace, (issued, done, per_device))) in self.traces.iter().zip(&curves).enumerate()
        {
            let style = color(i).stroke_width(2);
            chart
                .draw_series(LineSeries::new(issued.clone(), style))?
                .label(format!("{}: issued (solid)", policy_label(trace)))
                .legend(move |(x, y)| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, 0), (24, 0)], style)
                        + Polygon::new(shifted(marker_outline(i), 12), style)
                });
            chart
                .draw_series(DashedLineSeries::new(done.clone(), 10, 6, style))?
                .label(format!("{}: completed (dashed)", policy_label(trace)))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], style));
            draw_markers(&mut chart, i, sparse(done, 10), style)?;
            draw_markers(&mut chart, i, sparse(issued, 10), style)?;
            for (device, curve) in per_device.iter().enumerate() {
                let thin = color(i).mix(0.6).stroke_width(1);
                chart
                    .draw_series(LineSeries::new(curve.clone(), thin))?
                    .label(format!(
                        "{}: device {device} done (thin)",
                        policy_label(trace)
                    ))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], thin));
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}
