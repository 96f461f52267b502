//! Gluon's L2Loss and `Trainer.step` against MXNet 1.9.1's printed numbers: SGD on flex and on
//! wgpu, and SGD with momentum and weight decay, and Adam, over two steps.

use std::collections::HashMap;

use burn::prelude::*;
use ember::{L2Loss, Loss, Optimizer, OptimizerKind, Sequential, load_parameters, save_parameters};

use super::common::wgpu;
use super::tiny_net::{
    assert_close, out, read_file, resolved_tiny_net, tiny_weights, write_pytorch_file,
};

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
            .and_then(|sgd| sgd.with_weight_decay(0.01))
            .unwrap(),
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
