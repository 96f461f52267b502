//! `--precision`: bf16 refused where ember cannot train in it, with the reason that holds on
//! this machine (its CPU named), before anything is written; `ember devices` says whether the
//! CPU has bf16 instructions. What bf16 computes is in tests/layers/autocast.rs and
//! tests/library/precision.rs.

use ember::device::cpu::Cpu;

use super::common::cli::{TINY, args, fails_with, succeeds};

#[test]
fn bf16_is_refused_on_the_cpu_and_on_wgpu_naming_why_and_writing_nothing() {
    fails_with(
        &args(&TINY, &["--precision", "fp16"]),
        "invalid --precision \"fp16\": it is f32 or bf16",
    );
    let cpu = Cpu::here();
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("net.safetensors");
    let metrics = dir.path().join("trace.jsonl");
    let more = [
        "--precision",
        "bf16",
        "--save",
        save.to_str().unwrap(),
        "--metrics",
        metrics.to_str().unwrap(),
    ];
    let why = if cpu.has_bf16() {
        "has bf16 instructions"
    } else {
        "has no bf16 instructions"
    };
    let err = fails_with(
        &args(&TINY, &more),
        &format!("--precision bf16 on flex: this CPU ({}) {why}", cpu.model),
    );
    assert!(
        err.contains("--precision f32") && err.contains("--device cuda"),
        "{err}"
    );
    assert!(
        !save.exists() && !metrics.exists(),
        "refused before writing"
    );
    // burn's wgpu (WGSL) has no bf16; CI's wgpu is lavapipe.
    let mut wgpu = args(&TINY, &more);
    wgpu[2] = "wgpu";
    fails_with(
        &wgpu,
        "--precision bf16 on wgpu: burn's wgpu has no bf16 arithmetic",
    );
    // compare refuses it up front too, before a run starts.
    let out = dir.path().join("compare");
    fails_with(
        &[
            "compare",
            "--device",
            "flex",
            "--batches",
            "2",
            "--precision",
            "bf16",
            "--out",
            out.to_str().unwrap(),
        ],
        "--precision bf16 on flex",
    );
    assert!(!out.join("summary.csv").exists());
    // f32 is the default, and given, trains.
    succeeds(&args(&TINY, &["--precision", "f32"]));
}

#[test]
fn devices_says_whether_the_cpu_has_bf16() {
    let cpu = Cpu::here();
    let out = succeeds(&["devices"]);
    let line = out
        .lines()
        .find(|l| l.starts_with("cpu") && l.contains("bf16"))
        .unwrap_or_else(|| panic!("no bf16 line:\n{out}"));
    let said = if cpu.has_bf16() {
        format!(
            "{} has bf16 instructions: {}",
            cpu.model,
            cpu.bf16.join(", ")
        )
    } else {
        format!("{} has no bf16 instructions", cpu.model)
    };
    assert!(line.contains(&said), "{line}");
}
