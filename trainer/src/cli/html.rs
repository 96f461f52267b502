//! `ember compare --html FILE`: the comparison as one self-contained page, with no network: the
//! table, the plots (their SVGs inline), and an interactive timeline per policy (its first
//! round): the frontend's issue and the backend's compute of every batch against wall time;
//! the wheel zooms, a drag pans, and hovering a batch shows its issue and completion times and
//! the memory after it. Every script is inline.

use std::fmt::Write as _;
use std::path::Path;

use ember_trainer::profile::compute_spans;
use ember_trainer::summary::PolicyRun;
use ember_trainer::trace::BatchRecord;
use serde_json::json;

/// The page: `table` (rows of cells, the first row the header), the note under it, the SVG
/// plots written into `out` (those of `plots` that exist), and a timeline of each of `runs`.
pub fn page(
    context: &str,
    table: &[Vec<String>],
    note: &str,
    runs: &[&PolicyRun],
    out: &Path,
    plots: &[&str],
) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>ember compare</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>Sync policies compared</h1>\n<p>{}</p>\n",
        escape(context)
    );
    html.push_str("<table>\n");
    for (i, row) in table.iter().enumerate() {
        let cell = if i == 0 { "th" } else { "td" };
        html.push_str("<tr>");
        for value in row {
            let _ = write!(html, "<{cell}>{}</{cell}>", escape(value));
        }
        html.push_str("</tr>\n");
    }
    let _ = write!(html, "</table>\n<p class=\"note\">{}</p>\n", escape(note));
    html.push_str(
        "<h2>Timelines</h2>\n<p>Each policy's first round: the frontend's issue of every batch \
         (blue) and the backend's compute of it (orange, from when it could start: its issue's \
         end or the batch before's end). The wheel zooms, a drag pans, and hovering a batch \
         shows its times and the memory after it.</p>\n",
    );
    for (i, run) in runs.iter().enumerate() {
        let _ = writeln!(
            html,
            "<h3>{}</h3>\n<div class=\"timeline\" id=\"timeline-{i}\" data-batches=\"{}\">\
             <div class=\"tip\"></div></div>",
            escape(&run.policy.to_string()),
            run.trace.batches.len()
        );
    }
    html.push_str("<h2>Plots</h2>\n");
    for plot in plots {
        if let Ok(svg) = std::fs::read_to_string(out.join(format!("{plot}.svg"))) {
            let svg: String = svg
                .lines()
                .filter(|l| !l.trim_start().starts_with("<?xml"))
                .collect::<Vec<_>>()
                .join("\n");
            let _ = writeln!(
                html,
                "<figure>{svg}<figcaption>{plot}</figcaption></figure>"
            );
        }
    }
    let data: Vec<_> = runs
        .iter()
        .map(|run| {
            // A batch never done is drawn as done where its issue ended.
            let done = |b: &BatchRecord| match b.done.is_finite() {
                true => b.done,
                false => b.issue_end,
            };
            let trace = &run.trace.batches;
            let spans = compute_spans(trace.iter().map(|b| (b.issue_end, done(b))));
            let batches: Vec<_> = trace
                .iter()
                .zip(spans)
                .map(|(b, span)| {
                    let [start, end] = span.expect("every batch is given a finite end");
                    json!([
                        b.issue_start,
                        b.issue_end,
                        end,
                        b.rss as f64 / 1e6,
                        b.depth,
                        b.epoch + 1,
                        b.batch,
                        start
                    ])
                })
                .collect();
            json!({ "policy": run.policy.to_string(), "batches": batches })
        })
        .collect();
    // `<` never appears raw inside the script, so no value can end it.
    let data = serde_json::to_string(&data)
        .expect("numbers and names serialize")
        .replace('<', "\\u003c");
    let _ = write!(
        html,
        "<script>\n\"use strict\";\nconst RUNS = {data};\n{SCRIPT}</script>\n</body>\n</html>\n"
    );
    html
}

/// Text as HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}\
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\
td:first-child,th:first-child{text-align:left}.note{color:#555;font-size:90%}\
.timeline{position:relative;border:1px solid #ccc;margin:0 0 1em 0;user-select:none}\
.tip{position:absolute;display:none;background:#fff;border:1px solid #888;padding:4px 6px;\
font-size:12px;white-space:pre;pointer-events:none}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto}svg text{font-size:11px}";

/// Draws each `.timeline` from `RUNS`: one `rect.issue` and one `rect.batch` (its compute) a
/// batch, zoomed by the wheel and panned by a drag.
const SCRIPT: &str = r##"const NS = "http://www.w3.org/2000/svg";
function el(name, attrs, parent) {
  const e = document.createElementNS(NS, name);
  for (const key of Object.keys(attrs)) e.setAttribute(key, attrs[key]);
  parent.appendChild(e);
  return e;
}
function timeline(run, box) {
  const W = 1100, H = 110, LEFT = 70, RIGHT = 10, PLOT = W - LEFT - RIGHT;
  // Each batch: issue start and end, done, RSS (MB), depth, epoch, batch, compute start.
  const batches = run.batches;
  const done = batches.map(b => b[2]);
  const starts = batches.map(b => b[7]);
  const end = Math.max(1e-6, ...done);
  let view = [0, end];
  const svg = el("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}` }, box);
  el("text", { x: 4, y: 32 }, svg).textContent = "frontend";
  el("text", { x: 4, y: 72 }, svg).textContent = "backend";
  const lanes = el("g", {}, svg);
  const axis = el("g", {}, svg);
  const tip = box.querySelector(".tip");
  const show = (event, i) => {
    const b = batches[i];
    tip.textContent = `epoch ${b[5]}, batch ${b[6]}\nissued ${b[0].toFixed(4)} to ${b[1].toFixed(4)} s\n` +
      `done ${done[i].toFixed(4)} s\nRSS ${b[3].toFixed(1)} MB, ${b[4]} in flight`;
    const at = box.getBoundingClientRect();
    tip.style.left = `${event.clientX - at.left + 12}px`;
    tip.style.top = `${event.clientY - at.top + 12}px`;
    tip.style.display = "block";
  };
  const rects = batches.map((b, i) => {
    const issue = el("rect", { class: "issue", y: 20, height: 18, fill: "#4878d0" }, lanes);
    const compute = el("rect", { class: "batch", y: 60, height: 18, fill: "#ee854a" }, lanes);
    for (const r of [issue, compute]) {
      r.addEventListener("mousemove", event => show(event, i));
      r.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    }
    return [issue, compute];
  });
  const x = t => LEFT + (t - view[0]) / (view[1] - view[0]) * PLOT;
  const place = (r, a, b) => {
    const x0 = x(a);
    r.setAttribute("x", x0);
    r.setAttribute("width", Math.max(x(b) - x0, 0.5));
  };
  const draw = () => {
    rects.forEach(([issue, compute], i) => {
      place(issue, batches[i][0], batches[i][1]);
      place(compute, starts[i], done[i]);
    });
    axis.replaceChildren();
    for (let k = 0; k <= 5; k++) {
      const t = view[0] + (view[1] - view[0]) * k / 5;
      const anchor = k === 0 ? "start" : k === 5 ? "end" : "middle";
      el("text", { x: x(t), y: 100, "text-anchor": anchor }, axis).textContent = `${t.toFixed(3)} s`;
    }
  };
  svg.addEventListener("wheel", event => {
    event.preventDefault();
    const at = svg.getBoundingClientRect();
    const t = view[0] + (event.clientX - at.left - LEFT) / PLOT * (view[1] - view[0]);
    const k = event.deltaY < 0 ? 0.8 : 1.25;
    view = [t - (t - view[0]) * k, t + (view[1] - t) * k];
    draw();
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", event => { drag = [event.clientX, view]; });
  window.addEventListener("mouseup", () => { drag = null; });
  svg.addEventListener("mousemove", event => {
    if (!drag) return;
    const shift = (event.clientX - drag[0]) / PLOT * (drag[1][1] - drag[1][0]);
    view = [drag[1][0] - shift, drag[1][1] - shift];
    draw();
  });
  draw();
}
RUNS.forEach((run, i) => timeline(run, document.getElementById(`timeline-${i}`)));
"##;
