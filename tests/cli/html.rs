//! `ember compare --html`: the page loaded in a real browser, Debian's `chromium` headless
//! (.ci/run installs it): no console error, one compute rectangle a batch in each policy's
//! timeline, and a screenshot (kept where `EMBER_SCREENSHOT_DIR` names a directory).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::cli::succeeds;

/// Debian's Chromium; required, never skipped.
fn chromium() -> PathBuf {
    let path =
        PathBuf::from(std::env::var_os("EMBER_CHROMIUM").unwrap_or("/usr/bin/chromium".into()));
    assert!(
        path.exists(),
        "{} not found: this test loads the page in a real browser; apt-get install chromium \
         (.ci/run does)",
        path.display()
    );
    path
}

/// Loads `page` headless; returns the DOM after its scripts ran and the browser's log.
fn load(page: &Path, more: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(more)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("running chromium");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "chromium failed:\n{stderr}");
    (stdout, stderr)
}

/// The console's errors in chromium's log: uncaught exceptions and `console.error`.
fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("Uncaught") || l.contains("Error")))
        .collect()
}

#[test]
fn the_html_report_draws_every_batch_in_a_browser_without_a_console_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let page = dir.path().join("report.html");
    succeeds(&[
        "compare",
        "--device",
        "flex",
        "--batches",
        "7",
        "--batch-size",
        "16",
        "--features",
        "8",
        "--hidden",
        "8",
        "--policies",
        "barrier,t+2,none",
        "--out",
        out.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing to fetch.
    for needle in ["<link", " src=", "https://", "import "] {
        assert!(!html.contains(needle), "{needle} in the page");
    }
    assert!(html.contains("<svg"), "the plots are inline");

    let (dom, log) = load(&page, &["--dump-dom"]);
    assert!(console_errors(&log).is_empty(), "{log}");
    // Each timeline: 7 batches, each a compute rectangle.
    for i in 0..3 {
        let start = dom
            .find(&format!("id=\"timeline-{i}\""))
            .unwrap_or_else(|| panic!("no timeline {i}"));
        let rest = &dom[start..];
        let end = rest[1..]
            .find("id=\"timeline-")
            .map_or(rest.len(), |e| e + 1);
        let drawn = rest[..end].matches("class=\"batch\"").count();
        assert_eq!(drawn, 7, "timeline {i}");
    }

    // The check above sees an error where there is one.
    let broken = dir.path().join("broken.html");
    std::fs::write(
        &broken,
        html.replace("const RUNS =", "const RUNS = missing +"),
    )
    .unwrap();
    let (_, log) = load(&broken, &["--dump-dom"]);
    assert!(
        !console_errors(&log).is_empty(),
        "the error went unseen:\n{log}"
    );

    let shots =
        std::env::var_os("EMBER_SCREENSHOT_DIR").map_or(dir.path().to_path_buf(), PathBuf::from);
    let shot = shots.join("compare-report.png");
    load(
        &page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1400",
        ],
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
}
