//! The `ember` binary as a user runs it: output lines, files, and bad input.

mod common;

use common::cli::{fails_with, succeeds};

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
fn train_prints_the_books_lines_and_writes_metrics() {
    let dir = tempfile::tempdir().unwrap();
    for (metrics, extra) in [
        ("trace.csv", "trace.epochs.csv"),
        ("trace.jsonl", "trace.jsonl"),
    ] {
        let path = dir.path().join(metrics);
        let stdout = succeeds(&[
            "train",
            "--device",
            "flex",
            "--sync",
            "t+2",
            "--batches",
            "50",
            "--batch-size",
            "16",
            "--hidden",
            "32,16",
            "--features",
            "8",
            "--epochs",
            "2",
            "--metrics",
            path.to_str().unwrap(),
        ]);
        assert!(stdout.contains("batch 50, time "), "{stdout}");
        assert!(stdout.contains("time per epoch: "), "{stdout}");
        assert!(stdout.contains("increased memory: "), "{stdout}");
        assert!(stdout.contains("policy window:2"), "{stdout}");
        let written = std::fs::read_to_string(dir.path().join(extra)).unwrap();
        if metrics.ends_with(".csv") {
            let rows = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                rows.lines().count(),
                1 + 100,
                "header + 2 epochs x 50 batches"
            );
            assert!(
                rows.starts_with("policy,epoch,batch,issue_start,issue_end,done"),
                "{rows}"
            );
            assert_eq!(written.lines().count(), 1 + 2);
        } else {
            let kinds: Vec<serde_json::Value> = written
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(kinds.iter().filter(|v| v["kind"] == "batch").count(), 100);
            assert_eq!(kinds.iter().filter(|v| v["kind"] == "epoch").count(), 2);
        }
    }
}

#[test]
fn bad_values_are_clear_errors_with_a_nonzero_exit() {
    let cases: [(&[&str], &str); 7] = [
        (&["train", "--sync", "sometimes"], "window:K"),
        (&["train", "--sync", "window:0"], "window:0"),
        (&["train", "--batch-size", "0"], "--batch-size 0"),
        (&["train", "--device", "tpu"], "unknown device 'tpu'"),
        (&["train", "--lr", "-1"], "--lr -1"),
        (&["train", "--hidden", "2048,x"], "--hidden"),
        (&["train", "--data", "imagenet"], "--data"),
    ];
    for (args, needle) in cases {
        fails_with(args, needle);
    }
}

#[test]
fn a_diverging_run_stops_with_the_batch_named() {
    let stderr = fails_with(
        &[
            "train",
            "--device",
            "flex",
            "--lr",
            "1e30",
            "--batches",
            "20",
            "--batch-size",
            "16",
            "--hidden",
            "16",
            "--features",
            "8",
        ],
        "loss is",
    );
    assert!(stderr.contains("batch "), "{stderr}");
}

#[test]
fn bench_policies_runs_each_configuration_and_prints_the_ratios() {
    let stdout = succeeds(&[
        "bench",
        "policies",
        "--device",
        "flex",
        "--batches",
        "4",
        "--batch-size",
        "16",
        "--hidden",
        "16",
        "--features",
        "8",
        "--repeat",
        "2",
    ]);
    // Two rounds of four configurations, each its own line.
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("round ")).count(),
        8,
        "{stdout}"
    );
    for line in [
        "ratio window:2 / none throughput: ",
        "ratio barrier / raw burn time: ",
    ] {
        let value = stdout
            .lines()
            .find_map(|l| l.strip_prefix(line))
            .unwrap_or_else(|| panic!("{line:?} missing:\n{stdout}"));
        let ratio: f64 = value.split_whitespace().next().unwrap().parse().unwrap();
        assert!(ratio.is_finite() && ratio > 0.0, "{line}{value}");
    }
}

#[test]
fn train_on_fashion_mnist_files_reports_accuracy_saves_and_loads() {
    let dir = tempfile::tempdir().unwrap();
    common::fashion::fashion_like(dir.path(), "train", 2000, 1);
    common::fashion::fashion_like(dir.path(), "t10k", 300, 2);
    let data = format!("fashion-mnist:{}", dir.path().display());
    let params = dir.path().join("mlp.safetensors");
    let metrics = dir.path().join("run.csv");
    let stdout = succeeds(&[
        "train",
        "--device",
        "flex",
        "--data",
        &data,
        "--model",
        "mlp:64",
        "--loss",
        "softmax-ce",
        "--lr",
        "0.1",
        "--batch-size",
        "64",
        "--epochs",
        "3",
        "--sync",
        "t+2",
        "--save",
        params.to_str().unwrap(),
        "--metrics",
        metrics.to_str().unwrap(),
    ]);
    let accuracy = |line: &str| -> f64 {
        line.split("test_acc ")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let last = stdout.lines().rfind(|l| l.contains("test_acc")).unwrap();
    assert!(
        stdout.lines().any(|l| l.starts_with("epoch 3: train loss")),
        "{stdout}"
    );
    assert!(accuracy(last) > 0.8, "{last}");
    let epochs = std::fs::read_to_string(dir.path().join("run.epochs.csv")).unwrap();
    assert!(
        epochs
            .lines()
            .next()
            .unwrap()
            .ends_with("test_acc,train_acc"),
        "{epochs}"
    );

    // Starting from the saved parameters, the first epoch is already accurate.
    let stdout = succeeds(&[
        "train",
        "--device",
        "flex",
        "--data",
        &data,
        "--model",
        "mlp:64",
        "--lr",
        "0.01",
        "--batch-size",
        "64",
        "--epochs",
        "1",
        "--load",
        params.to_str().unwrap(),
    ]);
    let first = stdout.lines().find(|l| l.contains("test_acc")).unwrap();
    assert!(accuracy(first) > 0.8, "{first}");

    for (args, needle) in [
        (
            vec!["--data", "fashion-mnist:/nonexistent"],
            "dataset-fashion-mnist",
        ),
        (vec!["--data", &data, "--loss", "l2"], "--loss"),
        (vec!["--model", "mlp:x"], "--model"),
        (vec!["--data", "fashion-mnist:"], "--data"),
    ] {
        let mut all = vec!["train", "--device", "flex"];
        all.extend(args.iter().copied());
        fails_with(&all, needle);
    }
}

/// A `.npy` file of little-endian f32 values with the given shape.
fn write_npy(path: &std::path::Path, shape: &[usize], values: &[f32]) {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn train_builds_lenet_and_reads_csv_and_npy_data() {
    let dir = tempfile::tempdir().unwrap();
    common::fashion::fashion_like(dir.path(), "train", 1000, 1);
    common::fashion::fashion_like(dir.path(), "t10k", 200, 2);
    let data = format!("fashion-mnist:{}", dir.path().display());
    let params = dir.path().join("lenet.safetensors");
    let stdout = succeeds(&[
        "train",
        "--device",
        "flex",
        "--data",
        &data,
        "--model",
        "lenet-relu",
        "--lr",
        "0.1",
        "--batch-size",
        "32",
        "--epochs",
        "2",
        "--save",
        params.to_str().unwrap(),
    ]);
    assert!(
        stdout.contains("examples of shape [1, 28, 28]; lenet-relu"),
        "{stdout}"
    );
    let last = stdout.lines().rfind(|l| l.contains("test_acc")).unwrap();
    let acc: f64 = last
        .split("test_acc ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(acc > 0.7, "{last}");
    // 6·1·25+6 + 16·6·25+16 + 120·400+120 + 84·120+84 + 10·84+10 = 61706, d2l's count.
    assert!(stdout.contains("parameters: 61706"), "{stdout}");

    // CSV: the label in the last column; two classes, the sign of the first feature.
    let csv = dir.path().join("table.csv");
    let rows: Vec<String> = (0..200)
        .map(|i| {
            let a = ((i * 37 % 101) as f32 / 50.0) - 1.0;
            let b = ((i * 13 % 29) as f32 / 14.0) - 1.0;
            format!("{a},{b},{}", u8::from(a > 0.0))
        })
        .collect();
    std::fs::write(&csv, format!("a,b,label\n{}\n", rows.join("\n"))).unwrap();
    let csv_data = format!("csv:{}", csv.display());
    let stdout = succeeds(&[
        "train",
        "--device",
        "flex",
        "--data",
        &csv_data,
        "--classes",
        "2",
        "--model",
        "mlp:16",
        "--lr",
        "0.5",
        "--batch-size",
        "20",
        "--epochs",
        "5",
    ]);
    let last = stdout.lines().rfind(|l| l.contains("train_acc")).unwrap();
    let acc: f64 = last
        .split("train_acc ")
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(acc > 0.9, "{last}");
    // Without --classes the same table is a regression, trained with l2.
    let stdout = succeeds(&[
        "train",
        "--device",
        "flex",
        "--data",
        &csv_data,
        "--batch-size",
        "50",
        "--epochs",
        "1",
    ]);
    assert!(stdout.contains("epoch 1: time per epoch"), "{stdout}");

    // NPY: images of 1×8×8 keep their shape, so a convolution takes them, and LeNet's second
    // convolution, which needs more than 8×8, is refused with the layer and the shapes named.
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    let pixels: Vec<f32> = (0..40 * 64).map(|i| ((i * 7 % 13) as f32) / 13.0).collect();
    let labels: Vec<f32> = (0..40).map(|i| (i % 3) as f32).collect();
    write_npy(&x, &[40, 1, 8, 8], &pixels);
    write_npy(&y, &[40], &labels);
    let npy = format!("npy:{},{}", x.display(), y.display());
    let stdout = succeeds(&[
        "train",
        "--device",
        "flex",
        "--data",
        &npy,
        "--classes",
        "3",
        "--batch-size",
        "8",
    ]);
    assert!(stdout.contains("examples of shape [1, 8, 8]"), "{stdout}");
    fails_with(
        &[
            "train",
            "--device",
            "flex",
            "--data",
            &npy,
            "--classes",
            "3",
            "--model",
            "lenet",
        ],
        "layer 2: Conv2D(? -> 16, kernel_size=5, sigmoid): expected shape with axis 2 of at \
         least 5 (window 5, padding 0 each side), got [40, 6, 4, 4]",
    );
}

#[test]
fn a_flag_the_data_or_model_ignores_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    common::fashion::fashion_like(dir.path(), "train", 10, 1);
    common::fashion::fashion_like(dir.path(), "t10k", 10, 2);
    let data = format!("fashion-mnist:{}", dir.path().display());
    for (args, needle) in [
        (
            vec!["--data", &data, "--features", "16"],
            "--features applies to --data synthetic only",
        ),
        (
            vec!["--data", &data, "--hidden", "8"],
            "--hidden applies to --data synthetic only",
        ),
        (
            vec!["--data", &data, "--batches", "3"],
            "--batches applies to --data synthetic only",
        ),
        (
            vec!["--data", &data, "--classes", "3"],
            "--classes applies to csv: and npy: data only",
        ),
        (
            vec!["--model", "lenet", "--hidden", "8"],
            "--hidden is ignored when --model is given",
        ),
        (vec!["--data", "npy:x.npy"], "npy:X.npy,Y.npy"),
        (vec!["--model", "resnet"], "lenet-relu"),
        // LeNet on the chapter's flat synthetic rows: the first convolution says why not.
        (
            vec![
                "--model",
                "lenet",
                "--batches",
                "1",
                "--batch-size",
                "4",
                "--features",
                "8",
            ],
            "layer 0: Conv2D(? -> 6, kernel_size=5, sigmoid): expected shape [batch, channels, height, width], got [4, 8]",
        ),
    ] {
        let mut all = vec!["train", "--device", "flex"];
        all.extend(args.iter().copied());
        fails_with(&all, needle);
    }
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
    fails_with(
        &[&["train", "--device", "flex"][..], &small, &resume].concat(),
        "with --devices flex,flex, and this one has no --devices",
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

/// `ember serve` processes on 127.0.0.1, stopped when dropped.
struct Servers(Vec<std::process::Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `count` flex servers on free ports, and returns them with their `remote:` devices
/// once each accepts connections.
fn serve(count: usize) -> (Servers, String) {
    let mut servers = Servers(Vec::new());
    let mut devices = Vec::new();
    for _ in 0..count {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        servers.0.push(
            std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
                .args(["serve", "--listen", &address])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        let start = std::time::Instant::now();
        while std::net::TcpStream::connect(&address).is_err() {
            assert!(
                start.elapsed().as_secs() < 20,
                "ember serve on {address} never listened"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        devices.push(format!("remote:ws://{address}"));
    }
    (servers, devices.join(","))
}

#[test]
fn remote_devices_train_as_local_ones_or_say_which_build_they_need() {
    let flags = ["--batches", "3", "--batch-size", "64", "--hidden", "64,32"];
    if cfg!(feature = "remote") {
        let (_servers, devices) = serve(2);
        let losses = |out: String| -> Vec<String> {
            out.lines()
                .filter_map(|l| l.split(", mean loss ").nth(1))
                .map(|rest| rest.split(',').next().unwrap().to_string())
                .collect()
        };
        let remote = succeeds(&[&["train", "--devices", &devices], &flags[..]].concat());
        assert!(
            remote.contains("device 1: remote device 0 of the server at ws://"),
            "{remote}"
        );
        let local = succeeds(&[&["train", "--devices", "flex,flex"], &flags[..]].concat());
        assert_eq!(losses(remote.clone()), losses(local), "{remote}");
        assert_eq!(losses(remote).len(), 1);
        fails_with(
            &[
                "train",
                "--devices",
                "remote:ws://127.0.0.1:9",
                "--batches",
                "1",
            ],
            "cannot connect to its server",
        );

        // A server that goes away in the middle of the run: an error naming the batch and the
        // device, a non-zero exit, no panic.
        let (mut servers, devices) = serve(2);
        let run = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
            .args([
                "train",
                "--devices",
                &devices,
                "--batches",
                "500",
                "--batch-size",
                "256",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_secs(3));
        let mut lost = servers.0.remove(1);
        lost.kill().unwrap();
        lost.wait().unwrap();
        let out = run.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains(" of epoch 1: ") && stderr.contains("device 1: "),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    } else {
        fails_with(
            &[
                &["train", "--devices", "flex,remote:ws://127.0.0.1:3000"],
                &flags[..],
            ]
            .concat(),
            "--features ember-trainer/remote",
        );
        fails_with(&["serve"], "--features ember-trainer/remote");
    }
}
