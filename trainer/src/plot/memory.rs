//! Memory over a run: the process's RSS growth per batch, and the device pool where there is one.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::chart::{chart, draw_markers, framed, legend, policy_label, sparse};
use super::figure::{DrawError, Figure};
use super::style::{color, marker_outline, shifted};
use crate::trace::Trace;

/// Figure 2, `memory`: memory growth over the batches of each policy: process RSS, and the
/// device pool.
pub struct MemoryFigure<'a> {
    /// One trace per curve (a run of `fit`; the first round of each policy in a comparison),
    /// labelled with its policy.
    pub traces: &'a [&'a Trace],
    /// A line under the title.
    pub subtitle: &'a str,
}

impl MemoryFigure<'_> {
    /// (batch number over the run, RSS growth in MB) for each policy.
    fn rss_curves(&self) -> Vec<Vec<(f64, f64)>> {
        self.traces
            .iter()
            .map(|trace| {
                let mut x = 0.0;
                let mut points = Vec::new();
                for epoch in &trace.epochs {
                    for b in trace.batches.iter().filter(|b| b.epoch == epoch.epoch) {
                        points.push((
                            x,
                            (b.rss as f64 - epoch.rss_before as f64) / (1024.0 * 1024.0),
                        ));
                        x += 1.0;
                    }
                }
                points
            })
            .collect()
    }

    fn pool_curves(&self) -> Vec<Vec<(f64, f64)>> {
        self.traces
            .iter()
            .map(|trace| {
                trace
                    .batches
                    .iter()
                    .enumerate()
                    .filter_map(|(i, b)| {
                        b.pool_in_use
                            .map(|p| (i as f64, p as f64 / (1024.0 * 1024.0)))
                    })
                    .collect()
            })
            .collect()
    }
}

impl Figure for MemoryFigure<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError> {
        let rss = self.rss_curves();
        let pool = self.pool_curves();
        let all = rss.iter().chain(&pool).flatten();
        let x_max = all.clone().map(|p| p.0).fold(1.0, f64::max);
        let y_min = all.clone().map(|p| p.1).fold(0.0, f64::min);
        let y_max = all.map(|p| p.1).fold(1.0, f64::max) * 1.15;
        let body = framed(
            root,
            "Memory growth while batches are issued",
            self.subtitle,
        )?;
        let mut chart = chart(
            &body,
            0f64..x_max,
            y_min..y_max,
            "batch (issue order)",
            "MB: RSS growth since the epoch began, pool in use",
        )?;
        for (i, trace) in self.traces.iter().enumerate() {
            let style = color(i).stroke_width(2);
            chart
                .draw_series(LineSeries::new(rss[i].clone(), style))?
                .label(format!("{}: process RSS", policy_label(trace)))
                .legend(move |(x, y)| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, 0), (24, 0)], style)
                        + Polygon::new(shifted(marker_outline(i), 12), style)
                });
            draw_markers(&mut chart, i, sparse(&rss[i], 12), style)?;
            if !pool[i].is_empty() {
                chart
                    .draw_series(DashedLineSeries::new(pool[i].clone(), 10, 6, style))?
                    .label(format!(
                        "{}: device pool in use (absolute)",
                        policy_label(trace)
                    ))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 8, y)], style));
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}
