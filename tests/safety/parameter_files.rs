//! Parameter files from elsewhere: f16, bf16 and f64 tensors are cast on load, integers are
//! refused by dtype, and a PyTorch pickle or a transposed weight is named as such.

use std::path::{Path, PathBuf};

use burn::prelude::*;
use ember::{Block, Dense, Init, Sequential};

use super::common::cli::fails_with;
use super::runs::spawn;

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
    // An older torch.save (pickle protocol 2, no zip) too.
    std::fs::write(&pickle, b"\x80\x02}q\x00(X\x08\x00\x00\x000.weightq\x01").unwrap();
    let err = net.clone().load_parameters(&pickle, &device).unwrap_err();
    assert!(err.to_string().contains("PyTorch pickle"), "{err}");
    // A safetensors file whose header is 640 bytes starts with 0x80 0x02 as such a pickle
    // does: it was refused as one (a 1-layer nn.RNN's state_dict, issue 64).
    let padded = dir.path().join("padded.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    let header = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let json = String::from_utf8(bytes[8..8 + header].to_vec()).unwrap();
    let longer = format!(
        "{}{}",
        json.trim_end(),
        " ".repeat(640 - json.trim_end().len())
    );
    bytes.splice(
        ..8 + header,
        [&640u64.to_le_bytes()[..], longer.as_bytes()].concat(),
    );
    std::fs::write(&padded, &bytes).unwrap();
    assert_eq!(bytes[..2], [0x80, 0x02]);
    net.clone().load_parameters(&padded, &device).unwrap();

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

/// `export --load` reads the file's metadata first: a FIFO there waited for a writer forever,
/// and a directory gave only the OS's "Is a directory", without naming --load. Both are now
/// refused at once, naming --load and what the path is; `train --load` refused them already.
#[test]
fn export_refuses_a_fifo_or_a_directory_as_load_at_once_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let out = dir.path().join("net.onnx");
    for (load, what) in [
        (&fifo, "a FIFO"),
        (&dir.path().to_path_buf(), "a directory"),
    ] {
        let mut child = spawn(&[
            "export",
            "--load",
            load.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let start = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > std::time::Duration::from_secs(30) {
                child.kill().unwrap();
                panic!("export --load {} still runs after 30 s", load.display());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("invalid --load {}", load.display())) && stderr.contains(what),
            "{stderr}"
        );
        assert!(!out.exists());
    }
}
