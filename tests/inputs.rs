//! Inputs are checked before work: an endless stream, a sparse giant, a gzip bomb and a
//! header whose sizes overflow are each refused at once, in bounded memory, with an error
//! naming the file and the figures; nothing is trained on them. Every stream and device here
//! is made in a temporary directory; nothing under /dev is touched.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What one `ember` run did: its exit status, standard error, seconds and peak RSS.
struct Bounded {
    success: bool,
    stderr: String,
    seconds: f64,
    peak_mb: f64,
}

/// Runs `ember args`, killed after 60 s, with its peak RSS from `wait4`.
// The child is reaped by `wait4`, which clippy does not see.
#[allow(clippy::zombie_processes)]
fn run_bounded(args: &[&str]) -> Bounded {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let pid = child.id() as libc::pid_t;
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        // SAFETY: kill(2) with a pid this test spawned; harmless if it has exited.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    drop(killer);
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for the child it reaps.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for this test's own child.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid);
    Bounded {
        success: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        stderr: reader.join().unwrap(),
        seconds: start.elapsed().as_secs_f64(),
        peak_mb: usage.ru_maxrss as f64 / 1024.0,
    }
}

/// `ember train` on `data` fails within 10 s, below 300 MB, with an error holding each of
/// `needles`, and no panic.
fn refused(data: &str, needles: &[&str]) -> String {
    let mut args = vec!["train", "--device", "flex", "--data", data];
    if !data.starts_with("fashion-mnist:") {
        args.extend(["--classes", "2"]);
    }
    let run = run_bounded(&args);
    let what = format!(
        "--data {data}: {:.1} s, {:.0} MB, {}",
        run.seconds, run.peak_mb, run.stderr
    );
    assert!(!run.success, "{what}");
    for needle in needles {
        assert!(run.stderr.contains(needle), "expected {needle:?}: {what}");
    }
    assert!(!run.stderr.contains("panicked"), "{what}");
    assert!(run.seconds < 10.0 && run.peak_mb < 300.0, "{what}");
    eprintln!("{what}");
    run.stderr
}

/// A .npy file (version 1.0) whose header says `shape` of `<f4`, followed by `data`.
fn npy(path: &Path, shape: &str, data: &[u8]) {
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(data);
    std::fs::write(path, bytes).unwrap();
}

/// A Fashion-MNIST directory whose files are small and valid, but for `train-images`, which
/// the test writes: returns that file's path (raw, or `.gz` when `gzipped`).
fn mnist(dir: &Path, gzipped: bool) -> PathBuf {
    let mnist = dir.join("mnist");
    std::fs::create_dir(&mnist).unwrap();
    let images = [0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28];
    let image: Vec<u8> = images.iter().copied().chain([0; 784]).collect();
    std::fs::write(
        mnist.join("train-labels-idx1-ubyte"),
        [0, 0, 8, 1, 0, 0, 0, 1, 3],
    )
    .unwrap();
    std::fs::write(
        mnist.join("t10k-labels-idx1-ubyte"),
        [0, 0, 8, 1, 0, 0, 0, 1, 3],
    )
    .unwrap();
    std::fs::write(mnist.join("t10k-images-idx3-ubyte"), image).unwrap();
    match gzipped {
        true => mnist.join("train-images-idx3-ubyte.gz"),
        false => mnist.join("train-images-idx3-ubyte"),
    }
}

fn made(program: &str, args: &[&str]) {
    let status = Command::new(program).args(args).status().unwrap();
    assert!(status.success(), "{program} {args:?}");
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn endless_streams_are_refused_at_once_naming_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let zero = dir.path().join("zero");
    let fifo = dir.path().join("fifo");
    made("mknod", &[arg(&zero), "c", "1", "5"]);
    made("mkfifo", &[arg(&fifo)]);
    let y = dir.path().join("y.npy");
    npy(&y, "(2,)", &[0; 8]);
    refused(
        &format!("csv:{}", arg(&zero)),
        &[arg(&zero), "a character device"],
    );
    refused(
        &format!("npy:{},{}", arg(&zero), arg(&y)),
        &[arg(&zero), "a character device"],
    );
    refused(
        &format!("npy:{},{}", arg(&y), arg(&fifo)),
        &[arg(&fifo), "a FIFO"],
    );
    let images = mnist(dir.path(), false);
    made("mknod", &[arg(&images), "c", "1", "5"]);
    let data = format!("fashion-mnist:{}", arg(images.parent().unwrap()));
    refused(&data, &["train-images", "a character device"]);
}

#[test]
fn sparse_giants_are_refused_by_their_header_before_they_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let giant = |name: &str, head: &[u8]| -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, head).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4 << 30)
            .unwrap();
        path
    };
    let y = dir.path().join("y.npy");
    npy(&y, "(2,)", &[0; 8]);
    let x = giant("x.npy", b"");
    refused(
        &format!("npy:{},{}", arg(&x), arg(&y)),
        &["x.npy", "not a .npy file"],
    );
    let csv = giant("table.csv", b"1,2,0\n3,4,1\n");
    refused(
        &format!("csv:{}", arg(&csv)),
        &["table.csv", "byte 12", "NUL byte"],
    );
    let images = mnist(dir.path(), false);
    let header = [0, 0, 8, 3, 0, 0, 0, 10, 0, 0, 0, 28, 0, 0, 0, 28];
    giant(
        images.strip_prefix(dir.path()).unwrap().to_str().unwrap(),
        &header,
    );
    refused(
        &format!("fashion-mnist:{}", arg(images.parent().unwrap())),
        &[
            "train-images",
            "too long: 4294967280 bytes of data",
            "need 7840",
        ],
    );
}

#[test]
fn a_gzip_bomb_is_decompressed_no_further_than_its_header_says() {
    let dir = tempfile::tempdir().unwrap();
    let images = mnist(dir.path(), true);
    // Ten labels, as the bomb's header has ten images: the counts agree, and its data is read.
    let labels = images.with_file_name("train-labels-idx1-ubyte");
    std::fs::write(
        &labels,
        [&[0u8, 0, 8, 1, 0, 0, 0, 10][..], &[3; 10]].concat(),
    )
    .unwrap();
    let mut encoder = flate2::write::GzEncoder::new(
        std::fs::File::create(&images).unwrap(),
        flate2::Compression::best(),
    );
    encoder
        .write_all(&[0, 0, 8, 3, 0, 0, 0, 10, 0, 0, 0, 28, 0, 0, 0, 28])
        .unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..1536 {
        encoder.write_all(&zeros).unwrap();
    }
    encoder.finish().unwrap();
    let size = std::fs::metadata(&images).unwrap().len();
    assert!(size < 2 << 20, "a {size}-byte bomb");
    refused(
        &format!("fashion-mnist:{}", arg(images.parent().unwrap())),
        &["train-images", "too long: more than 7840 bytes of data"],
    );
}

#[test]
fn sizes_that_overflow_are_errors_naming_the_file_and_the_shape() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    npy(&y, "(5,)", &[0; 20]);
    // 4611686018427387909 × 1 × 4 bytes wraps around to 20 in 64 bits.
    npy(&x, "(4611686018427387909, 1)", &[0; 20]);
    let data = format!("npy:{},{}", arg(&x), arg(&y));
    refused(
        &data,
        &[
            "x.npy",
            "(4611686018427387909, 1)",
            "more than 2^64 bytes",
            "has 20 bytes",
        ],
    );
    npy(&x, "(9223372036854775808, 9223372036854775808)", &[]);
    refused(&data, &["x.npy", "more than 2^64 bytes", "has 0 bytes"]);
    // IDX: 2^31 × 2^31 × 4 images wrap around to 0 bytes; the images file is at fault.
    let images = mnist(dir.path(), false);
    let header = [0, 0, 8, 3, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 4];
    std::fs::write(&images, header).unwrap();
    let stderr = refused(
        &format!("fashion-mnist:{}", arg(images.parent().unwrap())),
        &["train-images-idx3-ubyte", "need more than 2^64 bytes"],
    );
    assert!(!stderr.contains("train-labels"), "{stderr}");
}

/// Test images of another shape than the training images: refused before training, where
/// b70e607 trained a whole epoch and then panicked in the evaluation, losing `--save` (or,
/// for the MLP with as many pixels, evaluated images it cannot read and exited 0).
#[test]
fn test_images_of_another_shape_are_refused_before_any_training() {
    for (model, test_shape) in [
        ("mlp:16", [28, 27]),
        ("lenet-relu", [14, 56]),
        ("mlp:16", [14, 56]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        common::fashion::fashion_like(dir.path(), "train", 64, 1);
        let [rows, cols] = test_shape;
        let pixels = vec![100u8; 8 * rows * cols];
        let images = dir.path().join("t10k-images-idx3-ubyte.gz");
        common::fashion::write_idx_gz(&images, &[8, rows as u32, cols as u32], &pixels);
        let labels = dir.path().join("t10k-labels-idx1-ubyte.gz");
        common::fashion::write_idx_gz(&labels, &[8], &[1; 8]);
        let save = dir.path().join("m.safetensors");
        let data = format!("fashion-mnist:{}", arg(dir.path()));
        let args = [
            "train",
            "--device",
            "flex",
            "--data",
            &data,
            "--model",
            model,
            "--save",
            arg(&save),
        ];
        let out = common::cli::ember(&args);
        let (stdout, stderr) = common::cli::text(&out);
        assert!(
            !out.status.success(),
            "{model}, test {test_shape:?}: {stdout}{stderr}"
        );
        let expected = format!(
            "test images have shape [1, {rows}, {cols}] and its training images [1, 28, 28]"
        );
        assert!(stderr.contains(&expected), "{model}: {stderr}");
        assert!(!stdout.contains("epoch 1"), "trained first: {stdout}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// A NaN or an infinity in the data or in loaded parameters is named, with its file and
/// place, before training; b70e607 trained on it and blamed the learning rate ("loss is NaN at
/// batch 0 of epoch 0: training diverged (lower the learning rate?)").
#[test]
fn nan_in_the_data_or_the_loaded_parameters_is_named_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("table.csv");
    std::fs::write(&csv, "1,2,0\n3,nan,1\n5,6,0\n").unwrap();
    refused(
        &format!("csv:{}", arg(&csv)),
        &["table.csv", "line 2", "column 2 is nan"],
    );
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    let values: Vec<u8> = [1.0f32, 2.0, f32::INFINITY, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    npy(&x, "(2, 2)", &values);
    npy(&y, "(2,)", &[0; 8]);
    refused(
        &format!("npy:{},{}", arg(&x), arg(&y)),
        &["x.npy", "value 2 (row-major) is inf"],
    );
    // Parameters: a saved network with a NaN put into its first bias.
    let params = dir.path().join("m.safetensors");
    let tiny = common::cli::TINY;
    common::cli::succeeds(&common::cli::args(&tiny, &["--save", arg(&params)]));
    let bytes = std::fs::read(&params).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, view.shape().to_vec(), view.data().to_vec()))
        .collect();
    let bias = tensors
        .iter_mut()
        .find(|(name, ..)| name == "0.bias")
        .unwrap();
    bias.2[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(name, shape, data)| {
            let view =
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data);
            (name.clone(), view.unwrap())
        })
        .collect();
    safetensors::serialize_to_file(views, None, &params).unwrap();
    let args = common::cli::args(&tiny, &["--load", arg(&params)]);
    let stderr = common::cli::fails_with(&args, "parameter 0.bias holds NaN (value 1");
    assert!(
        stderr.contains("m.safetensors") && !stderr.contains("learning rate"),
        "{stderr}"
    );
}

/// A last batch too small to give each of `--devices` an example is refused before
/// training; b70e607 found it at the epoch's last step.
#[test]
fn a_last_batch_too_small_for_the_devices_is_refused_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("nine.csv");
    let rows: String = (0..9)
        .map(|i| format!("{i},{},{}\n", i * 2, i % 2))
        .collect();
    std::fs::write(&csv, rows).unwrap();
    let data = format!("csv:{}", arg(&csv));
    let args = [
        "train",
        "--devices",
        "flex,flex",
        "--data",
        &data,
        "--classes",
        "2",
        "--batch-size",
        "4",
    ];
    let out = common::cli::ember(&args);
    let (stdout, stderr) = common::cli::text(&out);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("the last batch of each epoch holds 1, too few for the 2 devices"),
        "{stderr}"
    );
    assert!(!stdout.contains("epoch 1"), "trained first: {stdout}");
}
