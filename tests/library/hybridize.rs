//! `Fit::hybridize`: the training step recorded once and replayed (wgpu) or run again (flex)
//! gives the eager loop's numbers bit for bit, for the MLP, LeNet and the small ResNet (its
//! BatchNorm's running statistics included), under barrier, t+2 and none, with SGD with
//! momentum and with Adam, an epoch's short last batch included; what a recording cannot hold
//! runs eagerly, says why once, and trains as the eager loop does.

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use ember::optim::Schedule;
use ember::{
    Block, Dense, Dropout, Init, Optimizer, OptimizerKind, Sequential, SoftmaxCrossEntropyLoss,
};
use ember_datasets::{Batch, DataLoader, Examples};
use ember_trainer::fit::{BatchSource, Fit, Progress};
use ember_trainer::policy::{NoSync, SyncPolicy, Window};

/// Every parameter's and running statistic's bits, in visiting order.
fn bits<M: Module>(net: &M) -> Vec<u32> {
    struct Bits(Vec<u32>);
    impl ModuleVisitor for Bits {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let v = param.val().into_data().convert::<f32>();
            self.0.extend(v.iter::<f32>().map(f32::to_bits));
        }
    }
    let mut b = Bits(Vec::new());
    // `valid` reads the running statistics' last update, which burn keeps aside until then.
    net.valid().visit(&mut b);
    b.0
}

/// 100 images of 1 × 12 × 12 (or 144 features) in 4 classes: batches of 16 leave a last one of
/// 4, which runs outside the recording.
fn examples(images: bool) -> Examples {
    let x: Vec<f32> = (0..100 * 144)
        .map(|i| ((i as f32) * 0.013).sin() + ((i / 144) % 4) as f32 * 0.1)
        .collect();
    let labels: Vec<usize> = (0..100).map(|i| i % 4).collect();
    let examples = Examples::classification(x, 144, labels, 4).unwrap();
    match images {
        true => examples.with_shape(&[1, 12, 12]).unwrap(),
        false => examples,
    }
}

/// What the run said through `Progress::acted`.
#[derive(Default)]
struct Said(Vec<String>);

impl Progress for Said {
    fn acted(&mut self, why: &str) {
        self.0.push(why.to_string());
    }
}

fn policies() -> Vec<(&'static str, Box<dyn SyncPolicy>)> {
    vec![
        ("barrier", Box::new(Window(1))),
        ("t+2", Box::new(Window(2))),
        ("none", Box::new(NoSync)),
    ]
}

struct Trained {
    params: Vec<u32>,
    losses: Vec<u32>,
    said: Vec<String>,
    /// Each epoch's `recording_mb`.
    recording_mb: Vec<Option<f64>>,
}

/// Two epochs of `net` (sized) on `device` with `kind` from rate 0.05 down a cosine (another
/// rate every step, after 3 steps of warm-up), hybridized or not.
fn train<B: Block + 'static>(
    net: &B,
    kind: OptimizerKind,
    images: bool,
    device: &Device,
    policy: Box<dyn SyncPolicy>,
    hybridize: bool,
) -> Trained {
    let optimizer = Optimizer::new(net, kind, 0.05).unwrap();
    let mut said = Said::default();
    // A copy with running statistics of its own (a clone shares BatchNorm's with `net`).
    let run = Fit::new(
        net.valid().train(),
        SoftmaxCrossEntropyLoss,
        optimizer,
        device,
    )
    .epochs(2)
    .lr_schedule(Schedule::Cosine { warmup: 3 })
    .policy(policy)
    .progress(&mut said)
    .hybridize(hybridize)
    .run(&mut DataLoader::new(examples(images), 16).unwrap().shuffle(3))
    .unwrap();
    let losses = run.trace.batches.iter().map(|b| b.loss.to_bits()).collect();
    Trained {
        params: bits(&run.net),
        losses,
        said: said.0,
        recording_mb: run.trace.epochs.iter().map(|e| e.recording_mb).collect(),
    }
}

fn sized<B: Block>(net: B, images: bool, device: &Device) -> B {
    let example: Tensor<2> = Tensor::zeros([1, 144], device);
    let example: ember::NdTensor = match images {
        true => example.reshape([1, 1, 12, 12]).into(),
        false => example.into(),
    };
    net.initialize(Init::Xavier, device)
        .infer_shape(example)
        .unwrap()
}

fn optimizers() -> [(&'static str, OptimizerKind); 2] {
    [
        (
            "sgd momentum 0.9",
            OptimizerKind::sgd().with_momentum(0.9).unwrap(),
        ),
        ("adam", OptimizerKind::adam()),
    ]
}

/// The recorded runs equal the eager one bit for bit: each batch's loss and every parameter.
fn same_as_eager<B: Block + 'static>(
    name: &str,
    net: B,
    images: bool,
    device: &Device,
    replays: bool,
) {
    let device = device.clone().autodiff();
    let net = sized(net, images, &device);
    for (optimizer, kind) in optimizers() {
        let eager = train(&net, kind, images, &device, Box::new(Window(1)), false);
        assert!(eager.said.is_empty(), "{:?}", eager.said);
        assert_eq!(eager.losses.len(), 2 * 7);
        for (policy_name, policy) in policies() {
            let recorded = train(&net, kind, images, &device, policy, true);
            let case = format!("{name}, {optimizer}, {policy_name}");
            let expected = if replays {
                "recorded once and replayed"
            } else {
                "runs again"
            };
            // 6 batches of 16 an epoch through the recording, and the last of 4 outside it.
            assert!(
                recorded.said.len() == 2
                    && recorded.said[0].contains(expected)
                    && recorded.said[1].contains("12 steps ran the recording, 2 outside it"),
                "{case}: {:?}",
                recorded.said
            );
            assert_eq!(recorded.losses, eager.losses, "{case}: the batches' losses");
            assert!(recorded.params == eager.params, "{case}: the parameters");
            held(&case, &net, optimizer, &eager, &recorded, replays);
        }
    }
}

/// The trace's `recording_mb`: none for the eager run; for the recorded one the same figure
/// every epoch, the slots' bytes, exactly for the MLP and LeNet: every parameter, its optimizer state (one slot with
/// momentum, two with Adam), the update's 4 numbers and the batch (16 × 144 features, 16 class
/// labels of 4 or 8 bytes).
fn held<B: Block>(
    case: &str,
    net: &B,
    optimizer: &str,
    eager: &Trained,
    recorded: &Trained,
    replays: bool,
) {
    assert!(eager.recording_mb.iter().all(Option::is_none), "{case}");
    let mb = recorded.recording_mb[0].unwrap_or_else(|| panic!("{case}: no recording_mb"));
    assert!(
        mb > 0.0 && recorded.recording_mb.iter().all(|m| *m == Some(mb)),
        "{case}: {:?}",
        recorded.recording_mb
    );
    // A pool (wgpu) is named beside the slots, its growth said but not kept: other tests
    // share the device's pool. flex has none.
    let pool = recorded.said[0].contains("memory pool grew by");
    assert!(
        recorded.said[0].contains("slots (") && pool == replays,
        "{case}: {:?}",
        recorded.said
    );
    // The ResNet's running statistics have no optimizer state: the count below leaves it.
    if case.starts_with("resnet") {
        return;
    }
    let values = bits(net).len();
    let states = if optimizer == "adam" { 2 } else { 1 };
    let floats = values * (1 + states) + 4 + 16 * 144;
    let bytes = mb * 1024.0 * 1024.0;
    assert!(
        [4, 8]
            .iter()
            .any(|label| bytes == (4 * floats + 16 * label) as f64),
        "{case}: {bytes} bytes for {values} parameters"
    );
}

#[test]
fn a_recorded_mlp_trains_as_the_eager_loop_bit_for_bit_on_flex() {
    same_as_eager(
        "mlp",
        ember::models::mlp(&[32, 16], 4),
        false,
        &Device::flex(),
        false,
    );
}

#[test]
fn a_recorded_mlp_trains_as_the_eager_loop_bit_for_bit_on_wgpu() {
    let device = super::common::wgpu();
    same_as_eager(
        "mlp",
        ember::models::mlp(&[32, 16], 4),
        false,
        &device,
        true,
    );
}

#[test]
fn a_recorded_lenet_trains_as_the_eager_loop_bit_for_bit_on_flex() {
    same_as_eager(
        "lenet",
        ember::models::lenet(4),
        true,
        &Device::flex(),
        false,
    );
}

#[test]
fn a_recorded_lenet_trains_as_the_eager_loop_bit_for_bit_on_wgpu() {
    let device = super::common::wgpu();
    same_as_eager("lenet", ember::models::lenet(4), true, &device, true);
}

#[test]
fn a_recorded_resnet_trains_as_the_eager_loop_bit_for_bit_on_flex() {
    let net = ember::models::small_resnet(4);
    same_as_eager("resnet", net, true, &Device::flex(), false);
}

#[test]
fn a_recorded_resnet_trains_as_the_eager_loop_bit_for_bit_on_wgpu() {
    let net = ember::models::small_resnet(4);
    same_as_eager("resnet", net, true, &super::common::wgpu(), true);
}

/// What a recording cannot hold runs eagerly, says so once naming it, and trains as the
/// eager loop does.
#[test]
fn what_a_recording_cannot_hold_runs_eagerly_and_says_why_once() {
    let device = Device::flex().autodiff();
    let dense = || Sequential::new().add(Dense::new(16)).add(Dense::new(4));
    let cases: Vec<(&str, Sequential, OptimizerKind, &str)> = vec![
        (
            "dropout",
            Sequential::new()
                .add(Dense::new(16))
                .add(Dropout::new(0.5))
                .add(Dense::new(4)),
            OptimizerKind::sgd(),
            "Dropout",
        ),
        (
            "rmsprop",
            dense(),
            OptimizerKind::rmsprop(),
            "only sgd, adam and adamw",
        ),
    ];
    for (name, net, kind, reason) in cases {
        let net = sized(net, false, &device);
        // Dropout draws from burn's generator: the same seed before each run.
        device.seed(5);
        let eager = train(&net, kind, false, &device, Box::new(Window(2)), false);
        device.seed(5);
        let recorded = train(&net, kind, false, &device, Box::new(Window(2)), true);
        assert!(
            recorded.said.len() == 1
                && recorded.said[0].contains("runs eagerly")
                && recorded.said[0].contains(reason),
            "{name}: {:?}",
            recorded.said
        );
        if name != "dropout" {
            assert!(recorded.params == eager.params, "{name}: the parameters");
        }
    }
}

/// Batches of `examples`, one label of epoch 1's batch 3 out of range: that step fails.
struct Failing(DataLoader);

impl BatchSource for Failing {
    fn batches(&mut self, epoch: usize) -> Box<dyn Iterator<Item = ember::Result<Batch>> + '_> {
        Box::new(self.0.batches(epoch).enumerate().map(move |(i, batch)| {
            let mut batch = batch?;
            if (epoch, i) == (1, 3) {
                batch.y[0] = 9.0;
            }
            Ok(batch)
        }))
    }
}

/// A run that fails hands its rescue the network its last completed step left, out of the
/// recording's slots: the eager run's, bit for bit.
#[test]
fn a_failed_recorded_run_rescues_what_its_last_step_trained() {
    for device in [Device::flex(), super::common::wgpu()] {
        let device = device.autodiff();
        let net = sized(ember::models::mlp(&[32, 16], 4), false, &device);
        let rescued = |hybridize: bool| {
            let optimizer = Optimizer::new(&net, OptimizerKind::adam(), 0.05).unwrap();
            let mut rescued = None;
            let run = Fit::new(
                net.valid().train(),
                SoftmaxCrossEntropyLoss,
                optimizer,
                &device,
            )
            .epochs(2)
            .policy(Window(2))
            .hybridize(hybridize)
            .rescue(|net: Option<&Sequential>, _, _| rescued = net.map(bits))
            .run(&mut Failing(DataLoader::new(examples(false), 16).unwrap()));
            let Err(error) = run else {
                panic!("{device:?}: the run went through the bad label");
            };
            assert!(error.to_string().contains("class label"), "{error}");
            rescued.expect("a network to rescue")
        };
        let eager = rescued(false);
        assert_ne!(
            eager,
            bits(&net),
            "{device:?}: the steps before the failure trained"
        );
        assert!(rescued(true) == eager, "{device:?}: the rescued parameters");
    }
}
