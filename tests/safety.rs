//! Nothing lost, nothing damaged: outputs that refuse devices, FIFOs and directories; checks
//! before any work; parameters written first; temporaries removed; signals that checkpoint;
//! runs killed with SIGKILL that resume to the same bits; errors instead of panics and aborts.
//!
//! Every device node, FIFO and symlink here is made in a temporary directory; nothing touches
//! /dev.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use burn::prelude::*;
use common::cli::{TINY, args, ember, fails_with, strs, succeeds, text};
use common::fashion::{fashion_like, write_idx_gz};
use ember::{Block, Dense, Init, L2Loss, Optimizer, Sequential};
use ember_datasets::Synthetic;
use ember_trainer::fit::{Fit, SyntheticEpochs};

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).status().unwrap();
    assert!(status.success(), "{program} {args:?}");
}

/// A FIFO, a character device with /dev/null's numbers, a symlink to that device, and a
/// directory, all inside `dir`, each with the words its refusal must use.
fn special_files(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let fifo = dir.join("fifo");
    let device = dir.join("null-like");
    let link = dir.join("link");
    let directory = dir.join("directory");
    run("mkfifo", &[fifo.to_str().unwrap()]);
    run("mknod", &[device.to_str().unwrap(), "c", "1", "3"]);
    std::os::unix::fs::symlink(&device, &link).unwrap();
    std::fs::create_dir(&directory).unwrap();
    vec![
        (fifo, "is a FIFO"),
        (device, "is a character device"),
        (link, "is a symlink to a character device"),
        (directory, "is a directory"),
    ]
}

fn kind(path: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(path).unwrap().file_type()
}

#[test]
fn save_and_metrics_refuse_what_is_not_a_regular_file_before_training_and_leave_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    for (path, what) in special_files(dir.path()) {
        let before = kind(&path);
        for flag in ["--save", "--metrics"] {
            let target = path.to_str().unwrap();
            let err = fails_with(&args(&TINY, &[flag, target]), what);
            assert!(err.contains(target), "the path is named: {err}");
            // Refused before any work: no epoch ran.
            let out = ember(&args(&TINY, &[flag, target]));
            assert!(!text(&out).0.contains("epoch 1:"), "{}", text(&out).0);
            assert_eq!(kind(&path), before, "{} was changed", path.display());
        }
    }
    let fifo = dir.path().join("fifo");
    assert!(kind(&fifo).is_fifo());
    assert!(kind(&dir.path().join("null-like")).is_char_device());
    assert!(kind(&dir.path().join("link")).is_symlink());
}

#[test]
fn a_symlink_to_a_regular_file_is_followed_and_stays_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.safetensors");
    std::fs::write(&real, b"old").unwrap();
    let link = dir.path().join("model.safetensors");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    succeeds(&args(&TINY, &["--save", link.to_str().unwrap()]));
    assert!(kind(&link).is_symlink());
    let bytes = std::fs::read(&real).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert!(file.names().contains(&"0.weight"), "{:?}", file.names());
}

#[test]
fn an_unwritable_output_is_refused_before_training_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    // Root writes through permission bits, so the unwritable place is under a regular file.
    let file = dir.path().join("plain");
    std::fs::write(&file, b"").unwrap();
    let metrics = file.join("m.csv");
    let save = dir.path().join("model.safetensors");
    let err = fails_with(
        &args(
            &TINY,
            &[
                "--metrics",
                metrics.to_str().unwrap(),
                "--save",
                save.to_str().unwrap(),
            ],
        ),
        "is not a directory",
    );
    assert!(err.contains("--metrics"), "{err}");
    assert!(
        !save.exists(),
        "nothing is written by a run that never started"
    );
}

/// Spawns ember with `args`, its output piped.
fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads the child's output until a line containing `needle`; returns the lines read.
fn read_until(lines: &mut impl Iterator<Item = std::io::Result<String>>, needle: &str) -> String {
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains(needle) {
            return seen;
        }
    }
    panic!("no line with {needle:?} in:\n{seen}");
}

#[test]
fn a_failing_metrics_write_keeps_neither_the_parameters_nor_the_other_output_from_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let metrics = sub.join("m.csv");
    let save = dir.path().join("model.safetensors");
    let mut child = spawn(&[
        "train",
        "--device",
        "flex",
        "--batches",
        "60",
        "--batch-size",
        "128",
        "--features",
        "128",
        "--hidden",
        "128",
        "--epochs",
        "3",
        "--metrics",
        metrics.to_str().unwrap(),
        "--save",
        save.to_str().unwrap(),
    ]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    read_until(&mut lines, "batch 50,");
    // The metrics' directory goes away while the run trains.
    std::fs::remove_dir_all(&sub).unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--metrics"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        rest.iter().any(|l| l.contains("parameters saved")),
        "{rest:?}"
    );
    let bytes = std::fs::read(&save).unwrap();
    safetensors::SafeTensors::deserialize(&bytes).unwrap();
}

#[test]
fn temporaries_that_killed_processes_left_are_removed_by_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    // No process has a number above Linux's largest pid_max.
    let dead = dir.path().join(".ember-tmp-4194999-0.model.safetensors");
    let dead_dir = dir.path().join(".ember-tmp-4194999-3.other");
    let alive = dir.path().join(format!(
        ".ember-tmp-{}-0.model.safetensors",
        std::process::id()
    ));
    for path in [&dead, &alive] {
        std::fs::write(path, vec![0u8; 1000]).unwrap();
    }
    std::fs::create_dir(&dead_dir).unwrap();
    let save = dir.path().join("model.safetensors");
    succeeds(&args(&TINY, &["--save", save.to_str().unwrap()]));
    assert!(
        !dead.exists(),
        "the dead process's temporary for this target is gone"
    );
    assert!(
        alive.exists(),
        "a running process's temporary is left alone"
    );
    assert!(
        dead_dir.exists(),
        "another target's temporary is left to its own writer"
    );
}

/// The safetensors file's tensors, by name, as raw bytes.
fn tensors(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    file.tensors()
        .into_iter()
        .map(|(name, view)| (name, view.data().to_vec()))
        .collect()
}

/// Enough work to stop in the middle: 2 epochs of 150 batches, a checkpoint every 7.
fn resumable(checkpoints: &Path, save: &Path) -> Vec<String> {
    [
        "train",
        "--device",
        "flex",
        "--batches",
        "150",
        "--batch-size",
        "128",
        "--features",
        "128",
        "--hidden",
        "128,64",
        "--epochs",
        "2",
        "--checkpoint",
        checkpoints.to_str().unwrap(),
        "--checkpoint-every",
        "7",
        "--save",
        save.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// No temporary of any writer is left anywhere under `dir`.
fn no_temporaries(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with(".ember-tmp-"), "left behind: {name}");
        if entry.path().is_dir() {
            no_temporaries(&entry.path());
        }
    }
}

#[test]
fn runs_killed_at_several_points_resume_to_the_same_bits_as_a_run_never_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.safetensors");
    succeeds(&strs(&resumable(&dir.path().join("ref-ck"), &reference)));
    let expected = tensors(&reference);

    // Where to kill: before any checkpoint, after a line of progress in each epoch, and after
    // a few milliseconds more, so that some kills land inside a step or a checkpoint's write.
    let points: [(&str, u64); 5] = [
        ("training", 0),
        ("batch 50,", 0),
        ("batch 100,", 3),
        ("epoch 1:", 0),
        ("epoch 1:", 11),
    ];
    for (i, (line, extra_ms)) in points.into_iter().enumerate() {
        let checkpoints = dir.path().join(format!("ck{i}"));
        let save = dir.path().join(format!("resumed{i}.safetensors"));
        let run = resumable(&checkpoints, &save);
        let mut child = spawn(&strs(&run));
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        read_until(&mut lines, line);
        std::thread::sleep(std::time::Duration::from_millis(extra_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!save.exists(), "killed before the end, at {line:?}");

        let mut resume = run.clone();
        let at = resume.iter().position(|a| a == "--checkpoint").unwrap();
        resume[at] = "--resume".to_string();
        let out = succeeds(&strs(&resume));
        eprintln!(
            "kill point {i} ({line:?} + {extra_ms} ms): {}",
            out.lines()
                .find(|l| l.contains("resuming") || l.contains("no complete checkpoint"))
                .unwrap_or("?")
        );
        assert_eq!(
            tensors(&save),
            expected,
            "kill point {i}: {line:?} + {extra_ms} ms"
        );
        no_temporaries(&checkpoints);
    }
}

#[test]
fn sigint_and_sigterm_finish_the_batch_write_a_checkpoint_and_exit_130_and_143() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.safetensors");
    succeeds(&strs(&resumable(&dir.path().join("ref-ck"), &reference)));
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let checkpoints = dir.path().join(format!("ck-{signal}"));
        let save = dir.path().join(format!("{signal}.safetensors"));
        let mut run = resumable(&checkpoints, &save);
        // Checkpoints only at the end of epochs: the one written here is the signal's.
        let every = run.iter().position(|a| a == "--checkpoint-every").unwrap();
        run.drain(every..every + 2);
        let mut child = spawn(&strs(&run));
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        read_until(&mut lines, "batch 50,");
        run_kill(signal, child.id());
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{rest:?}\n{stderr}");
        assert!(
            rest.iter()
                .any(|l| l.contains(&format!("stopped by SIG{signal}"))),
            "{rest:?}"
        );
        assert!(
            !save.exists(),
            "a stopped run leaves its parameters in the checkpoint"
        );
        let steps: Vec<_> = listing(&checkpoints)
            .into_iter()
            .filter(|name| name.starts_with("step-"))
            .collect();
        assert_eq!(steps.len(), 1, "one checkpoint, the signal's: {steps:?}");
        no_temporaries(&checkpoints);

        let mut resume = run.clone();
        let at = resume.iter().position(|a| a == "--checkpoint").unwrap();
        resume[at] = "--resume".to_string();
        succeeds(&strs(&resume));
        assert_eq!(tensors(&save), tensors(&reference), "SIG{signal}");
    }
}

fn run_kill(signal: &str, pid: u32) {
    let number = match signal {
        "INT" => libc::SIGINT,
        "TERM" => libc::SIGTERM,
        "KILL" => libc::SIGKILL,
        other => panic!("no signal {other} here"),
    };
    let pid = libc::pid_t::try_from(pid).unwrap();
    // SAFETY: kill(2) takes plain integers; the child is ours and not yet reaped.
    assert_eq!(
        unsafe { libc::kill(pid, number) },
        0,
        "kill -{signal} {pid}"
    );
}

#[test]
fn a_resume_with_other_flags_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = dir.path().join("ck");
    let ck = checkpoints.to_str().unwrap();
    succeeds(&args(&TINY, &["--checkpoint", ck]));
    let err = fails_with(&args(&TINY, &["--resume", ck, "--lr", "0.5"]), "--lr 0.01");
    assert!(err.contains("--lr 0.5"), "{err}");
    // Every flag that differs is named at once (b70e607 named one per attempt).
    let err = fails_with(
        &args(&TINY, &["--resume", ck, "--lr", "0.5", "--seed", "3"]),
        "--lr 0.5",
    );
    assert!(err.contains("this one has --seed 3"), "{err}");
    // --load beside --resume would be ignored: it is refused (b70e607 ignored it).
    let params = dir.path().join("m.safetensors");
    std::fs::write(&params, b"").unwrap();
    fails_with(
        &args(&TINY, &["--resume", ck, "--load", params.to_str().unwrap()]),
        "leave --load out",
    );
    fails_with(
        &args(
            &TINY,
            &["--resume", dir.path().join("none").to_str().unwrap()],
        ),
        "no such directory",
    );
}

#[test]
fn the_warm_up_leaves_the_first_batchs_loss_independent_of_the_learning_rate() {
    let device = Device::flex().autodiff();
    // One initialization for all runs (burn's generator is shared with the tests beside this).
    let net: Sequential = Sequential::new()
        .add(Dense::new(16))
        .add(Dense::new(1))
        .initialize(Init::default(), &device);
    let net = net.infer_shape(Tensor::<2>::ones([1, 8], &device)).unwrap();
    let losses = |lr: f64| -> (f32, f32) {
        let net = net.clone();
        let trainer = Optimizer::new(&net, "sgd", lr).unwrap();
        let mut data = SyntheticEpochs::new(Synthetic::chapter(32, 8, 3), 3);
        let run = Fit::new(net, L2Loss, trainer, &device)
            .run(&mut data)
            .unwrap();
        (run.trace.batches[0].loss, run.trace.batches[1].loss)
    };
    let (small, after_small) = losses(1e-6);
    let (large, after_large) = losses(0.5);
    assert!(small.is_finite());
    assert_eq!(small, large, "batch 0's loss is taken before any update");
    assert_eq!(small, losses(100.0).0);
    // The run itself trains: batch 1 comes after batch 0's update, which the rate sizes.
    assert_ne!(after_small, after_large);
}

#[test]
fn sizes_that_cannot_fit_in_memory_are_errors_naming_the_flag() {
    let base = ["train", "--device", "flex", "--batches", "2"];
    fails_with(
        &args(&base, &["--hidden", "18446744073709551615"]),
        "--hidden 18446744073709551615 is too large",
    );
    fails_with(
        &args(&base, &["--hidden", "1000000000000"]),
        "--hidden 1000000000000 is too large",
    );
    fails_with(
        &args(&base, &["--batch-size", "100000000"]),
        "--batch-size 100000000 is too large",
    );
    // The flag at fault, not the model beside it (b70e607 said "--hidden 8 is too large").
    fails_with(
        &args(&base, &["--features", "4000000000000", "--hidden", "8"]),
        "--features 4000000000000 is too large",
    );
    // The trace of every batch counts (b70e607 started 4·10¹² batches).
    let stderr = fails_with(
        &["train", "--device", "flex", "--batches", "4000000000000"],
        "--batches 4000000000000 is too large",
    );
    assert!(stderr.contains("for the trace of every batch"), "{stderr}");
    // A size past the machine's word is too large, not "not a number".
    fails_with(
        &args(&base, &["--hidden", "99999999999999999999"]),
        "too large: a size is at most",
    );
}

#[test]
fn a_closed_stdout_ends_the_program_quietly() {
    let child = spawn(&[
        "train",
        "--device",
        "flex",
        "--batches",
        "400",
        "--batch-size",
        "64",
        "--features",
        "16",
        "--hidden",
        "8",
    ]);
    let output = after_the_first_line(child);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

/// `child | head -1`: reads the first line of its output, closes the pipe, and waits for it.
fn after_the_first_line(mut child: Child) -> std::process::Output {
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    drop(stdout);
    child.wait_with_output().unwrap()
}

/// `ember train … --save m --metrics m.csv | head -1`: the reader goes away after the first
/// line, and the run still trains to the end and writes both (b70e607 exited 0 at the first
/// line it could not print, with neither written).
#[test]
fn a_closed_stdout_stops_the_printing_not_the_saving() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("m.safetensors");
    let metrics = dir.path().join("m.csv");
    let child = spawn(&[
        "train",
        "--device",
        "flex",
        "--batches",
        "120",
        "--batch-size",
        "64",
        "--features",
        "16",
        "--hidden",
        "8",
        "--epochs",
        "2",
        "--save",
        save.to_str().unwrap(),
        "--metrics",
        metrics.to_str().unwrap(),
    ]);
    let output = after_the_first_line(child);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let bytes = std::fs::read(&save).expect("--save written after stdout closed");
    let saved = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert!(saved.names().iter().any(|n| n.ends_with("weight")));
    let trace = std::fs::read_to_string(&metrics).expect("--metrics written");
    // Both epochs' batches: the run went on to the end.
    assert_eq!(
        trace.lines().count(),
        1 + 2 * 120,
        "{}",
        &trace[..200.min(trace.len())]
    );
}

#[test]
fn empty_training_and_test_sets_are_errors_naming_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("empty.csv");
    std::fs::write(&csv, "a,b,label\n").unwrap();
    let data = format!("csv:{}", csv.display());
    let err = fails_with(
        &[
            "train",
            "--device",
            "flex",
            "--data",
            &data,
            "--classes",
            "2",
        ],
        "training set has no examples",
    );
    assert!(err.contains("empty.csv"), "{err}");

    fashion_like(dir.path(), "train", 20, 1);
    write_idx_gz(
        &dir.path().join("t10k-images-idx3-ubyte.gz"),
        &[0, 28, 28],
        &[],
    );
    write_idx_gz(&dir.path().join("t10k-labels-idx1-ubyte.gz"), &[0], &[]);
    let data = format!("fashion-mnist:{}", dir.path().display());
    let err = fails_with(
        &["train", "--device", "flex", "--data", &data],
        "test set has no examples",
    );
    assert!(err.contains(&dir.path().display().to_string()), "{err}");
}

#[test]
fn compare_on_fashion_mnist_describes_that_data_in_its_summary() {
    let dir = tempfile::tempdir().unwrap();
    fashion_like(dir.path(), "train", 128, 1);
    fashion_like(dir.path(), "t10k", 32, 2);
    let out = dir.path().join("out");
    let data = format!("fashion-mnist:{}", dir.path().display());
    succeeds(&[
        "compare",
        "--device",
        "flex",
        "--data",
        &data,
        "--batch-size",
        "64",
        "--policies",
        "barrier",
        "--repeat",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("fashion-mnist:"), "{summary}");
    assert!(!summary.contains("features"), "{summary}");
}

/// Writes `tensors` (name, dtype, shape, bytes) as a safetensors file.
fn write_safetensors(path: &Path, tensors: &[(String, safetensors::Dtype, Vec<usize>, Vec<u8>)]) {
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(name, dtype, shape, data)| {
            let view = safetensors::tensor::TensorView::new(*dtype, shape.clone(), data).unwrap();
            (name.clone(), view)
        })
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

/// A saved 3 → 4 → 2 network's file, and the network to load into.
fn saved_net(dir: &Path) -> (PathBuf, Sequential) {
    let device = Device::flex();
    let net: Sequential = Sequential::new()
        .add(Dense::new(4))
        .add(Dense::new(2))
        .initialize(Init::default(), &device)
        .infer_shape(Tensor::<2>::zeros([1, 3], &device))
        .unwrap();
    let path = dir.join("f32.safetensors");
    net.save_parameters(&path).unwrap();
    (path, net)
}

/// The file's tensors as (name, shape, f32 values).
fn f32_tensors(path: &Path) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut out: Vec<_> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            let values = view
                .data()
                .chunks(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            (name, view.shape().to_vec(), values)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn half_bfloat_and_double_parameters_are_cast_on_load_and_integers_refused_by_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let (f32_path, net) = saved_net(dir.path());
    let original = f32_tensors(&f32_path);
    let device = Device::flex();
    let reload = |path: &Path| {
        let loaded = net.clone().load_parameters(path, &device).unwrap();
        let again = dir.path().join("again.safetensors");
        loaded.save_parameters(&again).unwrap();
        f32_tensors(&again)
    };

    // f64: the same values, exactly.
    let f64_path = dir.path().join("f64.safetensors");
    let f64s: Vec<_> = original
        .iter()
        .map(|(name, shape, values)| {
            let bytes = values
                .iter()
                .flat_map(|v| f64::from(*v).to_le_bytes())
                .collect();
            (name.clone(), safetensors::Dtype::F64, shape.clone(), bytes)
        })
        .collect();
    write_safetensors(&f64_path, &f64s);
    assert_eq!(reload(&f64_path), original);

    // bf16: the upper half of each f32.
    let bf16_path = dir.path().join("bf16.safetensors");
    let truncated: Vec<_> = original
        .iter()
        .map(|(name, shape, values)| {
            let values: Vec<f32> = values
                .iter()
                .map(|v| f32::from_bits(v.to_bits() & 0xffff_0000))
                .collect();
            (name.clone(), shape.clone(), values)
        })
        .collect();
    let bf16s: Vec<_> = truncated
        .iter()
        .map(|(name, shape, values)| {
            let bytes = values
                .iter()
                .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
                .collect();
            (name.clone(), safetensors::Dtype::BF16, shape.clone(), bytes)
        })
        .collect();
    write_safetensors(&bf16_path, &bf16s);
    assert_eq!(reload(&bf16_path), truncated);

    // f16: values it holds exactly.
    let exact: [(u16, f32); 6] = [
        (0x3800, 0.5),
        (0xbd00, -1.25),
        (0x4000, 2.0),
        (0x0000, 0.0),
        (0x3c00, 1.0),
        (0xba00, -0.75),
    ];
    let f16_path = dir.path().join("f16.safetensors");
    let mut expected = Vec::new();
    let f16s: Vec<_> = original
        .iter()
        .map(|(name, shape, values)| {
            let picks: Vec<(u16, f32)> = (0..values.len()).map(|i| exact[i % 6]).collect();
            expected.push((
                name.clone(),
                shape.clone(),
                picks.iter().map(|p| p.1).collect::<Vec<f32>>(),
            ));
            let bytes = picks.iter().flat_map(|p| p.0.to_le_bytes()).collect();
            (name.clone(), safetensors::Dtype::F16, shape.clone(), bytes)
        })
        .collect();
    write_safetensors(&f16_path, &f16s);
    assert_eq!(reload(&f16_path), expected);

    // Integers are no parameters: the error names the dtype and the tensor.
    let i64_path = dir.path().join("i64.safetensors");
    let mut i64s = f64s.clone();
    i64s[0].1 = safetensors::Dtype::I64;
    write_safetensors(&i64_path, &i64s);
    let err = net
        .clone()
        .load_parameters(&i64_path, &device)
        .unwrap_err()
        .to_string();
    assert!(err.contains("I64") && err.contains(&i64s[0].0), "{err}");
}

#[test]
fn a_pytorch_pickle_and_a_transposed_weight_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let (path, net) = saved_net(dir.path());
    let device = Device::flex();

    // torch.save writes a zip archive.
    let pickle = dir.path().join("model.pt");
    std::fs::write(&pickle, b"PK\x03\x04\x00\x00\x08\x00archive/data.pkl").unwrap();
    let err = net
        .clone()
        .load_parameters(&pickle, &device)
        .unwrap_err()
        .to_string();
    assert!(err.contains("PyTorch pickle"), "{err}");

    // 0.weight is (4, 3) in PyTorch's layout; a file with it as (3, 4) is reported in that
    // layout on both sides.
    let mut flipped: Vec<_> = f32_tensors(&path)
        .into_iter()
        .map(|(name, shape, values)| {
            let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (name, safetensors::Dtype::F32, shape, bytes)
        })
        .collect();
    let weight = flipped.iter_mut().find(|t| t.0 == "0.weight").unwrap();
    assert_eq!(weight.2, [4, 3]);
    weight.2 = vec![3, 4];
    let transposed = dir.path().join("transposed.safetensors");
    write_safetensors(&transposed, &flipped);
    let err = net
        .clone()
        .load_parameters(&transposed, &device)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("0.weight is [3, 4] in the file but [4, 3] in the network"),
        "{err}"
    );

    // And from the command line, a directory given to --save is named.
    let cli = [
        "train",
        "--device",
        "flex",
        "--batches",
        "2",
        "--save",
        dir.path().to_str().unwrap(),
    ];
    let err = fails_with(&cli, "is a directory");
    assert!(err.contains(dir.path().to_str().unwrap()), "{err}");
}

/// Every entry of `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_save_stopped_by_sigint_or_sigkill_leaves_no_temporary_behind() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("big.safetensors");
    // 33.6 M parameters: a 134 MB file, long enough a save to stop inside.
    let big = |save: &Path| {
        spawn(&[
            "train",
            "--device",
            "flex",
            "--batches",
            "1",
            "--batch-size",
            "8",
            "--features",
            "4096",
            "--hidden",
            "4096,4096",
            "--save",
            save.to_str().unwrap(),
        ])
    };
    for (signal, delay_ms) in [("INT", 30), ("INT", 150), ("KILL", 30), ("KILL", 150)] {
        let mut child = big(&save);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // The save starts right after the epoch's line.
        read_until(&mut lines, "epoch 1:");
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        run_kill(signal, child.id());
        let status = child.wait().unwrap();
        let left = listing(dir.path());
        eprintln!("SIG{signal} {delay_ms} ms after the epoch: {status:?}, left {left:?}");
        if status.success() {
            // The save won the race: the file is whole.
            assert_eq!(left, ["big.safetensors"]);
        } else if signal == "INT" {
            assert_eq!(status.code(), Some(130));
            assert!(left.iter().all(|n| n == "big.safetensors"), "{left:?}");
        } else {
            // SIGKILL runs no code: at most one temporary, every scratch file inside it.
            assert!(
                left.iter()
                    .all(|n| n == "big.safetensors" || n.starts_with(".ember-tmp-")),
                "{left:?}"
            );
            assert!(
                left.iter().filter(|n| n.starts_with('.')).count() <= 1,
                "{left:?}"
            );
        }
        // The next save to the same place removes what a killed one left.
        succeeds(&args(&TINY, &["--save", save.to_str().unwrap()]));
        assert_eq!(listing(dir.path()), ["big.safetensors"]);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&save).unwrap().permissions(),
        );
        assert_eq!(
            mode & 0o777,
            0o644,
            "a saved file is readable as any file a user writes"
        );
        std::fs::remove_file(&save).unwrap();
    }
}

#[test]
fn a_library_run_with_adam_dropout_and_batchnorm_resumes_from_any_checkpoint_to_the_same_bits() {
    use ember::{Activation, BatchNorm, Dropout};
    use ember_trainer::checkpoint::{Checkpoint, Checkpointing};

    let device = Device::flex().autodiff();
    // Initialized once: burn's generator is one per process, and the tests beside this one
    // draw from it too, so a second `device.seed(5)` and initialization need not repeat it.
    let net: Sequential = Sequential::new()
        .add(Dense::new(32).activation(Activation::Relu))
        .add(BatchNorm::new())
        .add(Dropout::new(0.5))
        .add(Dense::new(1))
        .initialize(Init::default(), &device);
    let net = net.infer_shape(Tensor::<2>::ones([1, 8], &device)).unwrap();
    let build = || -> (Sequential, Optimizer) {
        let trainer = Optimizer::new(&net, "adam", 0.01).unwrap();
        // A copy with running statistics of its own (a clone's are shared).
        (net.valid().train(), trainer)
    };
    let data = || SyntheticEpochs::new(Synthetic::chapter(16, 8, 1), 6);
    let saved = |net: &Sequential, name: &str, dir: &Path| {
        let path = dir.join(name);
        net.save_parameters(&path).unwrap();
        tensors(&path)
    };
    let dir = tempfile::tempdir().unwrap();
    let checkpoints = dir.path().join("ck");
    let mut every = Checkpointing::new(&checkpoints).every(4);
    every.keep = 100;
    let (net, trainer) = build();
    let full = Fit::new(net, L2Loss, trainer, &device)
        .epochs(3)
        .seed(9)
        .checkpoint(every)
        .run(&mut data())
        .unwrap();
    let expected = saved(&full.net, "full.safetensors", dir.path());
    // Without the per-step seed, Dropout draws other masks and the result differs: the
    // comparison below can fail.
    let (net, trainer) = build();
    let unseeded = Fit::new(net, L2Loss, trainer, &device)
        .epochs(3)
        .run(&mut data())
        .unwrap();
    assert_ne!(
        saved(&unseeded.net, "unseeded.safetensors", dir.path()),
        expected
    );

    let steps: Vec<String> = listing(&checkpoints)
        .into_iter()
        .filter(|name| name.starts_with("step-"))
        .collect();
    assert_eq!(
        steps.len(),
        5,
        "steps 4, 8, 12, 16 and the run's end, 18: {steps:?}"
    );
    for step in steps {
        let checkpoint = Checkpoint::open(&checkpoints.join(&step)).unwrap();
        let (net, trainer) = build();
        let resumed = Fit::new(net, L2Loss, trainer, &device)
            .epochs(3)
            .resume(checkpoint)
            .run(&mut data())
            .unwrap();
        assert_eq!(
            saved(&resumed.net, "resumed.safetensors", dir.path()),
            expected,
            "resumed from {step}"
        );
        assert_eq!(resumed.trace.batches.len(), 18);
        let losses = |t: &ember_trainer::trace::Trace| -> Vec<f32> {
            t.batches.iter().map(|b| b.loss).collect()
        };
        assert_eq!(losses(&resumed.trace), losses(&full.trace), "{step}");
    }
}
