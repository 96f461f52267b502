//! `ember bench --report DIR`: `chapter.md`, one section per experiment (what the book says,
//! what this machine measured, whether the book's claim held and why), with its figures.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::plot::{BarsFigure, TimelineFigure, render};
use crate::trace::Trace;
use anyhow::Context;
use ember::io::write_atomic_bytes;

use super::{Outcome, Picture, show_ratio};

/// Writes the figures and `chapter.md` into `dir`; returns every file written.
pub fn write(dir: &Path, machine: &str, outcomes: &[Outcome]) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut md = summary(machine, outcomes);
    for o in outcomes {
        section(&mut md, o);
        let figure = figure(dir, o).unwrap_or_else(|e| {
            // The report and the other figures are written all the same.
            failures.push(format!("drawing the figure of {}: {e}", o.experiment.key));
            Vec::new()
        });
        if let Some(png) = figure
            .iter()
            .find(|p| p.extension().is_some_and(|e| e == "png"))
        {
            let name = png.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let _ = writeln!(md, "![{}]({name})\n", o.experiment.title);
        }
        written.extend(figure);
    }
    let path = dir.join("chapter.md");
    write_atomic_bytes(&path, md.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    written.push(path);
    if !failures.is_empty() {
        anyhow::bail!("{}", failures.join("\n"));
    }
    Ok(written)
}

/// The report's head: the machine, how many claims held, and a table of every experiment.
fn summary(machine: &str, outcomes: &[Outcome]) -> String {
    let mut md = String::new();
    let held = outcomes.iter().filter(|o| o.held).count();
    let _ = writeln!(
        md,
        "# d2l \"Computational Performance\", measured on this machine\n"
    );
    let _ = writeln!(md, "{machine}\n");
    let _ = writeln!(
        md,
        "The book's qualitative claim held in {held} of {} experiments. Each section gives \
         what the book does and finds, what ember measured here (medians), and whether the \
         claim held, with the reason where it did not.\n",
        outcomes.len()
    );
    let _ = writeln!(md, "| experiment | ratio | claim |\n|---|---:|---|");
    for o in outcomes {
        let _ = writeln!(
            md,
            "| [{}](#{}) | {}: {} | {} |",
            o.experiment.title,
            o.experiment.key,
            o.ratio.0,
            show_ratio(o.ratio.1),
            if o.held { "held" } else { "did not hold" }
        );
    }
    md
}

/// One experiment's section: the book, the medians, the notes and the claim's verdict.
fn section(md: &mut String, o: &Outcome) {
    let _ = writeln!(
        md,
        "\n<a id=\"{}\"></a>\n## {}\n",
        o.experiment.key, o.experiment.title
    );
    let _ = writeln!(md, "`ember bench {}` — {}\n", o.experiment.key, o.context);
    let _ = writeln!(md, "**The book.** {}\n", o.experiment.book);
    let _ = writeln!(md, "**Measured here.**\n\n| | seconds |\n|---|---:|");
    for t in &o.timings {
        let _ = writeln!(md, "| {} | {:.4} |", t.label, t.median());
    }
    let _ = writeln!(md);
    for note in &o.notes {
        let _ = writeln!(md, "- {note}");
    }
    let _ = writeln!(md, "- ratio {}: **{}**\n", o.ratio.0, show_ratio(o.ratio.1));
    let _ = writeln!(
        md,
        "**Claim: {}** — {}. {}.\n",
        if o.held { "held" } else { "did not hold here" },
        o.claim,
        capitalized(&o.why)
    );
}

/// The experiment's figure, in `dir`.
fn figure(dir: &Path, o: &Outcome) -> ember::Result<Vec<PathBuf>> {
    match &o.picture {
        Picture::Bars => {
            let bars: Vec<(String, f64)> = o
                .timings
                .iter()
                .map(|t| (t.label.clone(), t.median()))
                .collect();
            render(
                &BarsFigure {
                    title: o.experiment.title,
                    subtitle: &o.context,
                    bars: &bars,
                },
                dir,
                o.experiment.key,
            )
        }
        Picture::Timeline(runs) => {
            let traces: Vec<&Trace> = runs.iter().map(|r| &r.trace).collect();
            render(
                &TimelineFigure {
                    traces: &traces,
                    subtitle: &o.context,
                },
                dir,
                o.experiment.key,
            )
        }
        Picture::None => Ok(Vec::new()),
    }
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
