//! Figures of training runs and timings, drawn with plotters as PNG and SVG: time, memory and
//! the timeline of a run's trace, the policies' sweep, and timings as bars.
//!
//! Text uses DejaVu Sans embedded in the binary, so a machine without fontconfig or any font
//! renders it. Each policy gets a colour **and** a marker shape (and issued/completed curves a
//! solid/dashed line), so the figures read in black-and-white print too.

use std::path::{Path, PathBuf};
use std::sync::Once;

use ember::output::write_atomic;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::compare::PolicySummary;
use crate::trace::Trace;

const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (1200, 750);
const TITLE: u32 = 30;
const LABEL: u32 = 20;
const TICK: u32 = 17;

static FONT_ONCE: Once = Once::new();

fn register_font() {
    FONT_ONCE.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../assets/DejaVuSans.ttf");
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
/// [`ember::output`]. Returns the two paths.
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
        let names: Vec<String> = self.summaries.iter().map(|s| s.policy.clone()).collect();
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
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

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
                .label(format!("{}: process RSS", trace.policy()))
                .legend(move |(x, y)| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, 0), (24, 0)], style)
                        + Polygon::new(shifted(marker_outline(i), 12), style)
                });
            draw_markers(&mut chart, i, sparse(&rss[i], 12), style)?;
            if !pool[i].is_empty() {
                chart
                    .draw_series(DashedLineSeries::new(pool[i].clone(), 10, 6, style))?
                    .label(format!("{}: device pool in use (absolute)", trace.policy()))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 8, y)], style));
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}

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
                .label(format!("{}: issued (solid)", trace.policy()))
                .legend(move |(x, y)| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, 0), (24, 0)], style)
                        + Polygon::new(shifted(marker_outline(i), 12), style)
                });
            chart
                .draw_series(DashedLineSeries::new(done.clone(), 10, 6, style))?
                .label(format!("{}: completed (dashed)", trace.policy()))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], style));
            draw_markers(&mut chart, i, sparse(done, 10), style)?;
            draw_markers(&mut chart, i, sparse(issued, 10), style)?;
            for (device, curve) in per_device.iter().enumerate() {
                let thin = color(i).mix(0.6).stroke_width(1);
                chart
                    .draw_series(LineSeries::new(curve.clone(), thin))?
                    .label(format!("{}: device {device} done (thin)", trace.policy()))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], thin));
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}

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
            let label = match s.policy.strip_prefix("window:") {
                Some(k) => format!("k={k}"),
                None if s.policy == "barrier" => "k=1 (barrier)".to_string(),
                None => s.policy.clone(),
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
