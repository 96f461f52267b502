//! How every figure looks: the embedded font and its sizes, the pixel size, and each policy's
//! colour and marker shape. Kept in one place so that the figures of a run match one another.

use std::sync::Once;

use plotters::style::{FontStyle, RGBColor};

/// The family name the embedded DejaVu Sans is registered under.
pub(super) const FONT: &str = "sans-serif";
/// Width and height of every figure, in pixels.
pub(super) const SIZE: (u32, u32) = (1200, 750);
/// Font size of a figure's title.
pub(super) const TITLE: u32 = 30;
/// Font size of axis descriptions and labels drawn on the chart.
pub(super) const LABEL: u32 = 20;
/// Font size of tick labels, legends and subtitles.
pub(super) const TICK: u32 = 17;

static FONT_ONCE: Once = Once::new();

/// Registers the embedded DejaVu Sans as [`FONT`], once per process, so that a machine without
/// fontconfig or any font still renders text.
pub(super) fn register_font() {
    FONT_ONCE.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../../assets/DejaVuSans.ttf");
        // The font is a fixed, valid file: failing to parse it is a build defect.
        if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_err() {
            panic!("the embedded DejaVu Sans font does not parse");
        }
    });
}

/// The colour of the i-th policy: dark, well separated hues.
pub(super) fn color(i: usize) -> RGBColor {
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

/// The outline of the i-th policy's marker, in pixels around its point: octagon, triangle,
/// diamond, square.
pub(super) fn marker_outline(i: usize) -> Vec<(i32, i32)> {
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
pub(super) fn shifted(outline: Vec<(i32, i32)>, dx: i32) -> Vec<(i32, i32)> {
    outline.into_iter().map(|(x, y)| (x + dx, y)).collect()
}
