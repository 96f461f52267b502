//! `ember devices`, `--device` and `--devices`: the list, one card or adapter by its index, a
//! batch split across devices, and bad device lists.

use super::common::cli::{fails_with, succeeds};

#[test]
fn devices_lists_wgpu_flex_and_ndarray() {
    let stdout = succeeds(&["devices"]);
    for name in ["wgpu", "flex", "ndarray", "auto"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(name)),
            "{name} missing:\n{stdout}"
        );
    }
    // CI installs lavapipe: wgpu must be usable, and auto must pass over it for flex, which is
    // faster on the same cores, and say so.
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("wgpu") && l.contains("usable ")),
        "{stdout}"
    );
    // cuda says which build has it, or, in a build with it, that this machine has no driver
    // and the library it looked for (CI's machines have no NVIDIA card).
    let cuda = stdout.lines().find(|l| l.starts_with("cuda")).unwrap();
    let expected: &[&str] = match ember::device::cuda::BUILT {
        false => &[
            "unusable",
            "no CUDA backend",
            "scripts/install-cuda-llvm.sh",
            "--features ember-trainer/cuda",
        ],
        true => &["unusable", "no NVIDIA driver", "libcuda"],
    };
    assert!(expected.iter().all(|e| cuda.contains(e)), "{stdout}");
    let auto = stdout.lines().find(|l| l.starts_with("auto")).unwrap();
    assert!(
        auto.starts_with("auto     -> flex")
            && auto.contains("llvmpipe")
            && auto.contains("software rasterizer"),
        "{stdout}"
    );
}

#[test]
fn device_names_one_card_or_adapter_by_its_index() {
    let small = ["--batches", "1", "--batch-size", "64"];
    let train = |device: &'static str| [&["train", "--device", device][..], &small].concat();
    let out = succeeds(&train("flex:0"));
    assert!(out.contains("device: flex"), "{out}");
    fails_with(&train("flex:1"), "flex has a single device");
    fails_with(&train("wgpu:7"), "invalid device wgpu:7: this machine has");
    let cuda = if ember::device::cuda::BUILT {
        "no NVIDIA driver"
    } else {
        "cuda:7: this build of ember has no CUDA backend"
    };
    fails_with(&train("cuda:7"), cuda);
    fails_with(&train("flex:x"), "invalid device index flex:x");
    fails_with(
        &["bench", "one", "--device", "wgpu:7", "--config", "raw"],
        "wgpu:7",
    );
}

#[test]
fn train_splits_each_batch_across_devices_and_prints_each_devices_completion() {
    let dir = tempfile::tempdir().unwrap();
    let metrics = dir.path().join("trace.jsonl");
    let out = succeeds(&[
        "train",
        "--devices",
        "flex,flex",
        "--batches",
        "4",
        "--batch-size",
        "64",
        "--metrics",
        metrics.to_str().unwrap(),
    ]);
    assert!(
        out.contains("device 0: flex") && out.contains("device 1: flex"),
        "{out}"
    );
    assert!(
        out.contains("gradients summed on the main device (NCCL joins CUDA cards only)"),
        "{out}"
    );
    assert!(out.contains("epoch 1: time per epoch"), "{out}");
    assert!(
        out.contains("per-device completion, mean from issue: device 0 ")
            && out.contains(", device 1 "),
        "{out}"
    );
    let trace = ember_trainer::trace::Trace::read_jsonl(&metrics).unwrap();
    assert_eq!(trace.batches.len(), 4);
    assert!(trace.batches.iter().all(|b| b.device_done.len() == 2));

    // A checkpoint of a split run resumes on the same devices, and names them to a run
    // without them.
    let checkpoints = dir.path().join("checkpoints");
    let checkpoints = checkpoints.to_str().unwrap();
    let small = ["--batches", "4", "--batch-size", "64"];
    let split = ["train", "--devices", "flex,flex"];
    succeeds(&[&split[..], &small, &["--checkpoint", checkpoints]].concat());
    let resume = ["--resume", checkpoints, "--epochs", "2"];
    let out = succeeds(&[&split[..], &small, &resume].concat());
    assert!(
        out.contains("resuming from") && out.contains("epoch 2:"),
        "{out}"
    );
    let stderr = fails_with(
        &[&["train", "--device", "flex"][..], &small, &resume].concat(),
        "with --devices flex,flex, and this one has no --devices",
    );
    // Why, and the way on where a remote device is gone (issue 62).
    assert!(
        stderr.contains("a run goes on on the devices it trained on")
            && stderr.contains("ember serve --listen HOST:PORT"),
        "{stderr}"
    );
}

#[test]
fn bad_device_lists_are_clear_errors_with_a_nonzero_exit() {
    let train = |devices: &str, batch: &str, needle: &str| {
        fails_with(
            &[
                "train",
                "--devices",
                devices,
                "--batches",
                "2",
                "--batch-size",
                batch,
            ],
            needle,
        )
    };
    train("flex,tpu", "64", "unknown device 'tpu'");
    train(
        "flex,flex",
        "1",
        "invalid --batch-size 1: --devices flex,flex splits",
    );
    if ember::device::cuda::BUILT {
        train("cuda:0,cuda:1", "64", "no NVIDIA driver");
    } else {
        train("cuda:0,cuda:1", "64", "no CUDA backend");
        // `--device cuda` is a device this build lacks, not an unknown one.
        fails_with(
            &["train", "--device", "cuda", "--batches", "1"],
            "cuda: this build of ember has no CUDA backend",
        );
    }
    train("flex:1,flex", "64", "flex has a single device");
    train("wgpu:7", "64", "wgpu:7");
    fails_with(
        &["train", "--devices", "flex,flex", "--device", "flex"],
        "cannot be used with",
    );
    fails_with(
        &["bench", "policies", "--devices", "flex,flex"],
        "ember bench runs on one device",
    );
}

/// A file named `libcuda.so` on the library path that is no NVIDIA driver (a stray library, a
/// partial install) loaded, and cudarc panicked at its first call to a function it lacks:
/// `devices` and `train` on `auto` exited 101 in the CUDA build (hostile pass). Now cuda is
/// unusable, saying why, and `auto` goes on to another device. A build without CUDA never
/// touches the file.
#[test]
fn a_libcuda_that_is_no_driver_is_named_and_auto_trains_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    // A shared library every Linux has, under the driver's name.
    let libm = [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/aarch64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
        "/usr/lib64/libm.so.6",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).is_file())
    .expect("libm.so.6 in one of the usual places");
    std::fs::copy(libm, dir.path().join("libcuda.so")).unwrap();
    let run = |args: &[&str]| {
        let (ok, stdout, stderr) = with_libraries(dir.path(), args);
        assert!(ok, "{args:?}:\n{stdout}{stderr}");
        stdout
    };
    let stdout = run(&["devices"]);
    let cuda = stdout.lines().find(|l| l.starts_with("cuda")).unwrap();
    match ember::device::cuda::BUILT {
        true => assert!(
            cuda.contains("libcuda.so loads but is no NVIDIA driver: it has no cuInit"),
            "{cuda}"
        ),
        false => assert!(cuda.contains("no CUDA backend"), "{cuda}"),
    }
    let stdout = run(&[
        "train",
        "--batches",
        "2",
        "--batch-size",
        "8",
        "--features",
        "4",
        "--hidden",
        "3",
    ]);
    assert!(stdout.contains("device: auto: picked"), "{stdout}");
    // Where the build has CUDA, `auto` says why it passed over it.
    let said = stdout.contains("(not cuda: libcuda.so loads but is no NVIDIA driver");
    assert_eq!(said, ember::device::cuda::BUILT, "{stdout}");
}

/// A driver that loads and answers, but sees no card (a machine with the driver installed and
/// its card gone, or a container without the device nodes): the error was cudarc's debug text,
/// `DriverError(CUDA_ERROR_NO_DEVICE, "…")` (hostile pass). Here a stand-in driver built from
/// C answers as the real one does there; it is the driver's words and code, and `auto` trains
/// elsewhere saying them. A build without CUDA never touches the file.
#[test]
fn a_driver_that_sees_no_card_is_named_in_its_own_words() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("driver.c");
    std::fs::write(
        &source,
        "int cuInit(unsigned f) { return 100; }\n\
         int cuDeviceGetCount(int *n) { return 100; }\n\
         int cuDeviceGet(int *d, int i) { return 100; }\n\
         int cuDevicePrimaryCtxRetain(void **c, int d) { return 100; }\n\
         int cuGetErrorString(int e, const char **s) {\n\
           *s = e == 100 ? \"no CUDA-capable device is detected\" : \"unknown error\";\n\
           return 0;\n\
         }\n\
         int cuGetErrorName(int e, const char **s) { *s = \"CUDA_ERROR_NO_DEVICE\"; return 0; }\n",
    )
    .unwrap();
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.path().join("libcuda.so"))
        .arg(&source)
        .status()
        .expect("a C compiler (cc) builds the stand-in driver");
    assert!(built.success(), "cc failed on the stand-in driver");
    let run = |args: &[&str]| with_libraries(dir.path(), args);
    let (ok, stdout, stderr) = run(&["devices"]);
    assert!(ok, "{stdout}{stderr}");
    let cuda = stdout.lines().find(|l| l.starts_with("cuda")).unwrap();
    let words = "CUDA driver: no CUDA-capable device is detected (CUDA_ERROR_NO_DEVICE)";
    match ember::device::cuda::BUILT {
        true => assert!(
            cuda.contains(words) && !cuda.contains("DriverError"),
            "{cuda}"
        ),
        false => assert!(cuda.contains("no CUDA backend"), "{cuda}"),
    }
    if ember::device::cuda::BUILT {
        let (ok, stdout, stderr) = run(&["train", "--device", "cuda", "--batches", "2"]);
        assert!(!ok && stderr.contains(words), "{stdout}{stderr}");
    }
}

/// `ember ARGS` with the libraries in `dir` first on the library path: whether it succeeded,
/// its stdout and stderr; it never panics.
fn with_libraries(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .env("LD_LIBRARY_PATH", dir)
        .output()
        .unwrap();
    let (stdout, stderr) = super::common::cli::text(&out);
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    (out.status.success(), stdout, stderr)
}
