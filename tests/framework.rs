//! The framework core against Gluon's semantics, on flex and on wgpu (lavapipe in CI).

use std::collections::HashMap;
use std::path::Path;

use burn::prelude::*;
use burn::tensor::Distribution;
use ember::{
    Activation, Block, Dense, DeviceName, Dropout, Error, Init, L2Loss, Loss, NdTensor, Optimizer,
    OptimizerKind, Sequential, load_parameters, save_parameters,
};
use ember_datasets::Synthetic;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};

/// Writes a safetensors file with the `safetensors` crate alone, in PyTorch's layout, as
/// `torch`/`safetensors.torch.save_file` would: independent of burn-store's writer.
fn write_pytorch_file(path: &Path, tensors: &[(&str, Vec<usize>, Vec<f32>)]) {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(name, shape, values)| {
            let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (name.to_string(), shape.clone(), data)
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = bytes
        .iter()
        .map(|(name, shape, data)| {
            (
                name.clone(),
                TensorView::new(Dtype::F32, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

/// Every tensor of a safetensors file: name -> (shape, values).
fn read_file(path: &Path) -> HashMap<String, (Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    file.tensors()
        .into_iter()
        .map(|(name, view)| {
            let values = view
                .data()
                .chunks(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (name, (view.shape().to_vec(), values))
        })
        .collect()
}

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (f64::from(*g) - w).abs() < 1e-5,
            "{what}: got {got:?}, want {want:?}"
        );
    }
}

fn tiny_net() -> Sequential {
    Sequential::new()
        .add(Dense::new(3).activation(Activation::Relu))
        .add(Dense::new(1))
}

/// The tiny net with its input size (2) inferred, ready to load.
fn resolved_tiny_net(device: &Device) -> Sequential {
    tiny_net()
        .initialize(Init::default(), device)
        .infer_shape(Tensor::<2>::zeros([1, 2], device))
        .unwrap()
}

/// The network's output for a batch of rows.
fn out(net: &Sequential, x: Tensor<2>) -> Tensor<2> {
    net.forward(NdTensor::from(x)).rank()
}

/// The fixed weights of the reference, in Gluon/PyTorch layout `(units, in_units)`.
fn tiny_weights() -> Vec<(&'static str, Vec<usize>, Vec<f32>)> {
    vec![
        ("0.weight", vec![3, 2], vec![0.1, -0.2, 0.3, 0.4, -0.5, 0.6]),
        ("0.bias", vec![3], vec![0.01, -0.02, 0.03]),
        ("1.weight", vec![1, 3], vec![0.7, -0.8, 0.9]),
        ("1.bias", vec![1], vec![0.05]),
    ]
}

/// The reference's net with its fixed weights (loaded from a PyTorch-layout file), X and y.
fn reference_problem(device: &Device) -> (Sequential, Tensor<2>, Tensor<2>) {
    let dir = tempfile::tempdir().unwrap();
    let fixed = dir.path().join("fixed.safetensors");
    write_pytorch_file(&fixed, &tiny_weights());
    let net = load_parameters(resolved_tiny_net(device), &fixed, device).unwrap();
    let x = Tensor::<2>::from_floats([[1.0, 2.0], [-1.0, 0.5], [0.3, -0.7], [2.0, 1.0]], device);
    let y = Tensor::<2>::from_floats([[1.0], [0.0], [-1.0], [2.0]], device);
    (net, x, y)
}

// Reference: MXNet 1.9.1, Gluon, run on this machine's Python 3.11 (numpy 1.23.5):
//
//   from mxnet import autograd, gluon, init, np, npx
//   from mxnet.gluon import nn
//   npx.set_np()
//   net = nn.Sequential()
//   net.add(nn.Dense(3, activation='relu'), nn.Dense(1))
//   net.initialize()
//   net(np.zeros((1, 2)))
//   w0 = np.array([[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6]]); b0 = np.array([0.01, -0.02, 0.03])
//   w1 = np.array([[0.7, -0.8, 0.9]]); b1 = np.array([0.05])
//   for p, v in zip(net.collect_params().values(), [w0, b0, w1, b1]):
//       p.set_data(v)
//   X = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -0.7], [2.0, 1.0]])
//   y = np.array([[1.0], [0.0], [-1.0], [2.0]])
//   trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})
//   loss = gluon.loss.L2Loss()
//   with autograd.record():
//       l = loss(net(X), y)
//   l.backward()
//   trainer.step(X.shape[0])
//
// printed:
//   loss [0.6693245768547058, 0.3176044821739197, 0.6914880275726318, 3.718264579772949]
//   dense0_weight [[0.1892710030078888, -0.13787150382995605], [0.16777999699115753, 0.2991800010204315], [-0.45603498816490173, 0.643098771572113]]
//   dense0_bias [0.03714250028133392, -0.097680002450943, 0.038100000470876694]
//   dense1_weight [[0.6953897476196289, -0.7019494771957397, 0.9045774936676025]]
//   dense1_bias [0.09777499735355377]
fn gluon_reference_on(device: &Device) {
    let dir = tempfile::tempdir().unwrap();
    let (mut net, x, y) = reference_problem(device);
    let mut trainer = Optimizer::new(&net, "sgd", 0.1).unwrap();
    let l = L2Loss.forward(out(&net, x), y).unwrap();
    let values: Vec<f32> = l.clone().into_data().try_to_vec().unwrap();
    assert_close(
        &values,
        &[
            0.669_324_576_854_705_8,
            0.317_604_482_173_919_7,
            0.691_488_027_572_631_8,
            3.718_264_579_772_949,
        ],
        "L2Loss per example",
    );
    net = trainer.step(net, l.backward(), 4).unwrap();

    let after = dir.path().join("after.safetensors");
    save_parameters(&net, &after).unwrap();
    let saved = read_file(&after);
    let expect: [(&str, Vec<usize>, Vec<f64>); 4] = [
        (
            "0.weight",
            vec![3, 2],
            vec![
                0.189_271_003,
                -0.137_871_503_8,
                0.167_779_996_99,
                0.299_180_001,
                -0.456_034_988,
                0.643_098_771_6,
            ],
        ),
        (
            "0.bias",
            vec![3],
            vec![0.037_142_500_28, -0.097_680_002_45, 0.038_100_000_47],
        ),
        (
            "1.weight",
            vec![1, 3],
            vec![0.695_389_747_6, -0.701_949_477_2, 0.904_577_493_7],
        ),
        ("1.bias", vec![1], vec![0.097_774_997_35]),
    ];
    assert_eq!(
        saved.len(),
        4,
        "exactly the four parameters: {:?}",
        saved.keys()
    );
    for (name, shape, values) in expect {
        let (got_shape, got) = &saved[name];
        assert_eq!(got_shape, &shape, "{name} is saved as (units, in_units)");
        assert_close(got, &values, name);
    }
}

#[test]
fn gluon_loss_and_sgd_step_match_mxnet_on_flex() {
    gluon_reference_on(&Device::flex().autodiff());
}

/// wgpu is required, never skipped: CI installs lavapipe.
fn wgpu() -> Device {
    DeviceName::Wgpu
        .resolve()
        .expect("this test needs wgpu: apt-get install -y mesa-vulkan-drivers")
        .device
}

#[test]
fn gluon_loss_and_sgd_step_match_mxnet_on_wgpu() {
    gluon_reference_on(&wgpu().autodiff());
}

/// Two `step(4)`s of `optimizer` from the reference's fixed weights; the saved parameters.
fn two_steps(
    device: &Device,
    optimizer: OptimizerKind,
    lr: f64,
) -> HashMap<String, (Vec<usize>, Vec<f32>)> {
    let dir = tempfile::tempdir().unwrap();
    let (mut net, x, y) = reference_problem(device);
    let mut trainer = Optimizer::new(&net, optimizer, lr).unwrap();
    for _ in 0..2 {
        let l = L2Loss.forward(out(&net, x.clone()), y.clone()).unwrap();
        net = trainer.step(net, l.backward(), 4).unwrap();
    }
    let after = dir.path().join("after.safetensors");
    save_parameters(&net, &after).unwrap();
    read_file(&after)
}

// Reference: MXNet 1.9.1, same net, weights and data as above, two iterations of
// `with autograd.record(): l = loss(net(X), y)`, `l.backward()`, `trainer.step(4)` with
//   gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1, 'momentum': 0.9, 'wd': 0.01})
//   gluon.Trainer(net.collect_params(), 'adam', {'learning_rate': 0.01})
// printed (flattened, rounded to 9 digits):
//   sgd:  dense0_weight [0.335254729, -0.030272797, -0.035331979, 0.150280938, -0.382972956, 0.697171807]
//         dense0_bias [0.076368272, -0.214282602, 0.039695475]
//         dense1_weight [0.697847664, -0.573756516, 0.901806533]   dense1_bias [0.155765176]
//   adam: dense2_weight [0.11998529, -0.180010304, 0.28001672, 0.380023301, -0.480007887, 0.619960964]
//         dense2_bias [0.029973561, -0.039980542, 0.049720977]
//         dense3_weight [0.680736601, -0.780032337, 0.91978997]      dense3_bias [0.069952942]
#[test]
fn sgd_with_momentum_and_weight_decay_and_adam_match_mxnet() {
    let device = Device::flex().autodiff();
    let sgd = two_steps(
        &device,
        OptimizerKind::sgd()
            .with_momentum(0.9)
            .with_weight_decay(0.01),
        0.1,
    );
    let expect_sgd: [(&str, Vec<f64>); 4] = [
        (
            "0.weight",
            vec![
                0.335254729,
                -0.030272797,
                -0.035331979,
                0.150280938,
                -0.382972956,
                0.697171807,
            ],
        ),
        ("0.bias", vec![0.076368272, -0.214282602, 0.039695475]),
        ("1.weight", vec![0.697847664, -0.573756516, 0.901806533]),
        ("1.bias", vec![0.155765176]),
    ];
    for (name, values) in expect_sgd {
        assert_close(
            &sgd[name].1,
            &values,
            &format!("sgd(momentum 0.9, wd 0.01) {name}"),
        );
    }
    let adam = two_steps(&device, OptimizerKind::adam(), 0.01);
    let expect_adam: [(&str, Vec<f64>); 4] = [
        (
            "0.weight",
            vec![
                0.11998529,
                -0.180010304,
                0.28001672,
                0.380023301,
                -0.480007887,
                0.619960964,
            ],
        ),
        ("0.bias", vec![0.029973561, -0.039980542, 0.049720977]),
        ("1.weight", vec![0.680736601, -0.780032337, 0.91978997]),
        ("1.bias", vec![0.069952942]),
    ];
    for (name, values) in expect_adam {
        assert_close(&adam[name].1, &values, &format!("adam {name}"));
    }
}

#[test]
fn a_pytorch_layout_file_gives_the_hand_computed_outputs() {
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("torch.safetensors");
    write_pytorch_file(&path, &tiny_weights());
    let net = load_parameters(resolved_tiny_net(&device), &path, &device).unwrap();
    // h = relu(W0·x + b0) with x = (1, 2): (0.1−0.4+0.01, 0.3+0.8−0.02, −0.5+1.2+0.03) → (0, 1.08, 0.73)
    // out = 0.7·0 − 0.8·1.08 + 0.9·0.73 + 0.05 = −0.157
    let y: Vec<f32> = out(&net, Tensor::from_floats([[1.0, 2.0]], &device))
        .into_data()
        .try_to_vec()
        .unwrap();
    assert_close(&y, &[-0.157], "forward");
}

#[test]
fn save_then_load_round_trips_once_shapes_are_inferred() {
    let device = Device::flex();
    let build = || {
        Sequential::<ember::NoBlock>::new()
            .add(Dense::new(16).activation(Activation::Tanh))
            .add(Activation::Relu)
            .add(
                Sequential::new()
                    .add(Dense::new(8))
                    .add(Dense::new(2).use_bias(false)),
            )
            .initialize(Init::Xavier, &device)
    };
    let x = Tensor::<2>::random([5, 7], Distribution::Normal(0.0, 1.0), &device);
    let net = build().infer_shape(x.clone()).unwrap();
    let before: Vec<f32> = out(&net, x.clone()).into_data().try_to_vec().unwrap();
    assert_eq!(
        net.collect_params().names(),
        ["0.weight", "0.bias", "2.0.weight", "2.0.bias", "2.1.weight"],
        "activations take an index but hold no parameter; nesting adds a level"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("net.safetensors");
    save_parameters(&net, &path).unwrap();
    let shapes: HashMap<String, Vec<usize>> = read_file(&path)
        .into_iter()
        .map(|(k, (s, _))| (k, s))
        .collect();
    assert_eq!(shapes["0.weight"], vec![16, 7]);
    assert_eq!(shapes["2.1.weight"], vec![2, 8]);
    let listed: HashMap<String, Vec<usize>> = net
        .collect_params()
        .params
        .into_iter()
        .map(|p| (p.name, p.shape))
        .collect();
    assert_eq!(listed, shapes, "collect_params lists what the file holds");

    // A deferred net cannot take shapes from a file: it says which layers wait.
    let err = load_parameters(build(), &path, &device).unwrap_err();
    assert!(
        err.to_string().contains("0: Dense") && err.to_string().contains("2.1: Dense"),
        "{err}"
    );
    device.seed(99);
    let fresh = build().infer_shape(x.clone()).unwrap();
    assert_ne!(
        out(&fresh, x.clone())
            .into_data()
            .try_to_vec::<f32>()
            .unwrap(),
        before
    );
    let loaded = load_parameters(fresh, &path, &device).unwrap();
    let after: Vec<f32> = out(&loaded, x).into_data().try_to_vec().unwrap();
    assert_eq!(before, after);
}

#[test]
fn a_wrong_shape_missing_or_extra_name_in_a_file_is_listed() {
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.safetensors");
    write_pytorch_file(
        &path,
        &[
            ("0.weight", vec![3, 2], vec![0.0; 6]),
            ("0.bias", vec![4], vec![0.0; 4]),
            ("1.weight", vec![1, 3], vec![0.0; 3]),
            ("9.weight", vec![1], vec![0.0]),
        ],
    );
    let err = load_parameters(resolved_tiny_net(&device), &path, &device).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::ParameterMismatch { .. }), "{text}");
    assert!(
        text.contains("mis-shaped: 0.bias is [4] in the file but [3]"),
        "{text}"
    );
    assert!(text.contains("missing: 1.bias"), "{text}");
    assert!(text.contains("extra: 9.weight"), "{text}");
}

#[test]
fn a_dropout_rate_outside_zero_to_one_is_an_error_naming_it_not_a_panic() {
    let device = Device::flex().autodiff();
    for rate in [1.0, 1.5, -0.25, f64::NAN] {
        let net: Sequential = Sequential::new()
            .add(Dense::new(4))
            .add(Dropout::new(rate))
            .initialize(Init::default(), &device);
        let err = net
            .infer_shape(Tensor::<2>::ones([2, 3], &device))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("dropout rate") && err.contains(&rate.to_string()),
            "{rate}: {err}"
        );
    }
}

#[test]
fn corrupt_and_truncated_files_are_errors_not_panics() {
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.safetensors");
    write_pytorch_file(&good, &tiny_weights());
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.path().join("truncated.safetensors");
    std::fs::write(&truncated, &bytes[..bytes.len() - 10]).unwrap();
    let garbage = dir.path().join("garbage.safetensors");
    std::fs::write(&garbage, b"not a safetensors file at all").unwrap();
    for path in [&truncated, &garbage, &dir.path().join("absent.safetensors")] {
        let err = load_parameters(resolved_tiny_net(&device), path, &device).unwrap_err();
        assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
    }
}

#[test]
fn saving_never_clobbers_a_file_with_a_half_written_one() {
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keep.safetensors");
    std::fs::write(&path, b"previous contents").unwrap();
    // A deferred net cannot be saved: the old file must survive untouched, with no temporary.
    let deferred = tiny_net().initialize(Init::default(), &device);
    let err = save_parameters(&deferred, &path).unwrap_err();
    assert!(matches!(err, Error::DeferredInitialization { .. }), "{err}");
    assert!(err.to_string().contains("0: Dense"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"previous contents");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_batch_with_the_wrong_feature_count_names_both_numbers() {
    let device = Device::flex();
    let net = tiny_net()
        .initialize(Init::default(), &device)
        .infer_shape(Tensor::<2>::zeros([2, 512], &device))
        .unwrap();
    let err = net
        .infer_shape(Tensor::<2>::zeros([2, 784], &device))
        .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("layer 0: "), "{text}");
    assert!(text.contains("784") && text.contains("512"), "{text}");
}

/// The chapter's MLP (512-2048-512-1) learns a learnable synthetic target.
fn chapter_mlp_learns_on(device: &Device, batch: usize, steps: usize) {
    device.seed(7);
    let data = Synthetic::regression(batch, 512, 0.01, 11);
    let mut net: Sequential = Sequential::new()
        .add(Dense::new(2048).activation(Activation::Relu))
        .add(Dense::new(512).activation(Activation::Relu))
        .add(Dense::new(1))
        .initialize(Init::default(), device)
        .infer_shape(Tensor::<2>::zeros([1, 512], device))
        .unwrap();
    let mut trainer = Optimizer::new(&net, "sgd", 0.004).unwrap();
    let mut losses = Vec::new();
    for step in 0..steps {
        let b = data.batch(step as u64 % 4);
        let x = b.x_on(device).unwrap();
        let y = NdTensor::from_host(&b.y, &b.y_shape, device)
            .unwrap()
            .rank();
        let l = L2Loss.forward(net.forward(x).rank(), y).unwrap();
        losses.push(l.clone().mean().into_scalar::<f32>());
        net = trainer.step(net, l.backward(), batch).unwrap();
    }
    assert_eq!(
        net.collect_params().get("0.weight").unwrap().shape,
        [2048, 512]
    );
    eprintln!("losses: {losses:?}");
    // The data cycles through 4 batches: compare each batch with itself, first visit to last.
    let first: f32 = losses[..4].iter().sum::<f32>() / 4.0;
    let last: f32 = losses[steps - 4..].iter().sum::<f32>() / 4.0;
    assert!(
        losses.iter().all(|l| l.is_finite())
            && (0..4).all(|b| losses[steps - 4 + b] < losses[b])
            && last < 0.8 * first,
        "loss did not decrease: {losses:?}"
    );
}

#[test]
fn chapter_mlp_learns_on_flex() {
    chapter_mlp_learns_on(&Device::flex().autodiff(), 64, 16);
}

#[test]
fn chapter_mlp_learns_on_wgpu() {
    chapter_mlp_learns_on(&wgpu().autodiff(), 64, 16);
}

/// A user's block that holds a deferred layer passes `initialize` on, as it passes the example
/// in `infer`: no hidden mode carries the initializer to it. One that does not is told so.
#[test]
fn a_users_block_passes_initialize_on_to_its_deferred_layers() {
    #[derive(Module, Debug)]
    struct Wrapper {
        dense: Dense,
    }
    impl Block for Wrapper {
        fn forward(&self, x: NdTensor) -> NdTensor {
            self.dense.forward(x)
        }
        fn infer(self, x: NdTensor) -> ember::Result<(Self, NdTensor)> {
            let (dense, y) = self.dense.infer(x)?;
            Ok((Self { dense }, y))
        }
    }
    let device = Device::flex();
    let x = Tensor::<2>::ones([3, 4], &device);
    let err = Wrapper {
        dense: Dense::new(2),
    }
    .initialize(Init::default(), &device)
    .infer_shape(x.clone())
    .unwrap_err();
    assert!(matches!(err, Error::NotInitialized { .. }), "{err:?}");
    assert!(err.to_string().contains("passes initialize on"), "{err}");

    // Passed on, as the block's own `initialize` would.
    let net = Wrapper {
        dense: Dense::new(2).initialize(Init::Normal(0.5), &device),
    }
    .infer_shape(x)
    .unwrap();
    assert_eq!(
        net.collect_params().get("dense.weight").unwrap().shape,
        [2, 4]
    );
}
