//! `--precision`: bf16 refused where ember cannot train in it, with the reason that holds on
//! this machine (its CPU named), before anything is written, and taken on the CPU where
//! oneDNN multiplies in bf16; `ember devices` says whether the CPU has bf16 instructions. What
//! bf16 computes is in tests/layers/autocast.rs and tests/library/precision.rs.

use ember::device::cpu::Cpu;

use super::common::cli::{TINY, args, fails_with, succeeds};

#[test]
fn bf16_is_taken_on_the_cpu_only_where_onednn_multiplies_it_and_refused_on_wgpu_writing_nothing() {
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
    let out = dir.path().join("compare");
    let compare = [
        "compare",
        "--device",
        "flex",
        "--batches",
        "2",
        "--precision",
        "bf16",
        "--out",
        out.to_str().unwrap(),
    ];
    if ember::kernels::status().bf16 {
        // This CPU has bf16 instructions and oneDNN uses them: bf16 trains, and says so.
        assert!(cpu.has_bf16(), "{cpu:?}");
        let said = succeeds(&args(&TINY, &more));
        assert!(said.contains("bf16 products"), "{said}");
        assert!(save.exists() && metrics.exists());
        succeeds(&compare);
        assert!(out.join("summary.csv").exists());
    } else {
        let why = if cpu.has_bf16() {
            "has bf16 instructions"
        } else {
            "has no bf16 instructions"
        };
        let err = fails_with(
            &args(&TINY, &more),
            &format!("--precision bf16 on flex: this CPU ({}) {why}", cpu.model),
        );
        // The card's way out is offered only by a build that can take it.
        assert!(err.contains("--precision f32"), "{err}");
        assert_eq!(
            err.contains("--device cuda"),
            ember::device::cuda::BUILT,
            "{err}"
        );
        assert!(
            !save.exists() && !metrics.exists(),
            "refused before writing"
        );
        // compare refuses it up front too, before a run starts.
        fails_with(&compare, "--precision bf16 on flex");
        assert!(!out.join("summary.csv").exists());
    }
    // Whatever the CPU, ndarray has no bf16 products of ember's.
    let mut ndarray = args(&TINY, &more);
    ndarray[2] = "ndarray";
    fails_with(
        &ndarray,
        "--precision bf16 on ndarray: ember's bf16 products run on flex",
    );
    // burn's wgpu (WGSL) has no bf16; CI's wgpu is lavapipe.
    let mut wgpu = args(&TINY, &more);
    wgpu[2] = "wgpu";
    fails_with(
        &wgpu,
        "--precision bf16 on wgpu: burn's wgpu has no bf16 arithmetic",
    );
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
    if cpu.has_bf16() {
        assert_eq!(
            line.contains("--precision bf16 runs Dense and the convolutions on oneDNN in bf16"),
            ember::kernels::status().bf16,
            "{line}"
        );
    }
}
