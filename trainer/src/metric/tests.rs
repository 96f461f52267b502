//! Each built-in metric against PyTorch on the data tests/reference/torch_metrics.py makes,
//! fed in uneven batches.

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::*;

mod torch {
    include!("../../../tests/reference/torch_metrics.out.rs");
}

const N: usize = 23;
const C: usize = 5;
/// Uneven batches: the accumulation across batches is under test too.
const BATCHES: [std::ops::Range<usize>; 3] = [0..7, 7..10, 10..23];

fn classification(rows: std::ops::Range<usize>, device: &Device) -> (Tensor<2>, Tensor<1, Int>) {
    let n = rows.len();
    let scores: Vec<f32> = rows
        .clone()
        .flat_map(|i| {
            (0..C).map(move |c| match c {
                4 => -10.0,
                _ => 2.0 * (0.7 * i as f32 + 1.3 * c as f32 + 0.2).sin(),
            })
        })
        .collect();
    let labels: Vec<i64> = rows.map(|i| ((3 * i + i / 5) % 3) as i64).collect();
    (
        Tensor::from_data(TensorData::new(scores, [n, C]), device),
        Tensor::from_ints(labels.as_slice(), device),
    )
}

fn regression(rows: std::ops::Range<usize>, device: &Device) -> (Tensor<2>, Tensor<2>) {
    let n = rows.len();
    let out: Vec<f32> = rows
        .clone()
        .flat_map(|i| (0..2).map(move |j| (0.41 * i as f32 + 0.9 * j as f32).sin()))
        .collect();
    let target: Vec<f32> = rows
        .flat_map(|i| (0..2).map(move |j| (0.33 * i as f32 + 0.5 * j as f32).cos()))
        .collect();
    (
        Tensor::from_data(TensorData::new(out, [n, 2]), device),
        Tensor::from_data(TensorData::new(target, [n, 2]), device),
    )
}

/// Gives `metric` the rows of the classification data (`labels`) or of the regression data.
fn feed(metric: &mut dyn Metric, rows: std::ops::Range<usize>, labels: bool, device: &Device) {
    if labels {
        let (out, y) = classification(rows, device);
        metric.update(&out, Truth::Labels(&y)).unwrap();
    } else {
        let (out, y) = regression(rows, device);
        metric.update(&out, Truth::Values(&y)).unwrap();
    }
}

/// The metric's value over the batches, twice: the second time after a reset, which must
/// forget the first.
fn over_batches(metric: &mut dyn Metric, labels: bool) -> f64 {
    let device = Device::flex();
    let mut values = Vec::new();
    for _ in 0..2 {
        metric.reset();
        for rows in BATCHES {
            feed(metric, rows, labels, &device);
        }
        values.push(metric.get().unwrap());
    }
    assert_eq!(values[0], values[1], "{}: reset forgets", metric.name());
    assert_eq!(BATCHES.last().unwrap().end, N);
    values[0]
}

#[test]
fn each_builtin_metric_matches_pytorch() {
    let cases = [
        ("acc", torch::ACC),
        ("top2", torch::TOP2),
        ("top3", torch::TOP3),
        ("top5", torch::TOP5),
        ("ce", torch::CE),
        ("f1", torch::F1),
        ("mse", torch::MSE),
        ("mae", torch::MAE),
    ];
    for (name, expected) in cases {
        let kind: MetricKind = name.parse().unwrap();
        let mut metric = kind.build();
        assert_eq!(metric.name(), name);
        assert_eq!(kind.to_string(), name);
        let got = over_batches(metric.as_mut(), kind.needs_labels());
        assert!(
            (got - expected).abs() < 1e-6,
            "{name}: ember {got}, PyTorch {expected}"
        );
        let mut fresh = metric.fresh();
        assert!(
            fresh.get().unwrap().is_nan(),
            "{name}: a fresh metric has counted nothing"
        );
        assert_eq!(over_batches(fresh.as_mut(), kind.needs_labels()), got);
    }
}

#[test]
fn a_metric_refuses_targets_it_does_not_take() {
    let device = Device::flex();
    let (out, labels) = classification(0..5, &device);
    let (values, targets) = regression(0..5, &device);
    let err = MetricKind::MeanSquaredError
        .build()
        .update(&out, Truth::Labels(&labels))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("mse") && err.contains("target values"),
        "{err}"
    );
    let err = Accuracy::default()
        .update(&values, Truth::Values(&targets))
        .unwrap_err()
        .to_string();
    assert!(err.contains("acc") && err.contains("class labels"), "{err}");
    let err = TopK::new(6)
        .update(&out, Truth::Labels(&labels))
        .unwrap_err()
        .to_string();
    assert!(err.contains("top6") && err.contains("5 outputs"), "{err}");
    // burn's slice takes a range a dimension: one here.
    #[allow(clippy::single_range_in_vec_init)]
    let short = labels.slice([0..3]);
    let err = CrossEntropy::default()
        .update(&out, Truth::Labels(&short))
        .unwrap_err()
        .to_string();
    assert!(err.contains("ce"), "{err}");
}

#[test]
fn metric_lists_parse_and_bad_names_are_named() {
    let kinds = MetricKind::parse_list("acc,top5,ce").unwrap();
    assert_eq!(
        kinds,
        [
            MetricKind::Accuracy,
            MetricKind::TopK(5),
            MetricKind::CrossEntropy
        ]
    );
    for (bad, named) in [
        ("accuracy", "accuracy"),
        ("top0", "top0"),
        ("topx", "topx"),
        ("", ""),
        ("acc,", ""),
        ("top+2", "top+2"),
        ("top99999999999999999999", "top99999999999999999999"),
        ("acc,acc", "acc"),
    ] {
        let err = MetricKind::parse_list(bad).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("invalid metric {named}: ")),
            "{bad}: {err}"
        );
    }
    assert_eq!(goal_of("test_top5"), Goal::Max);
    assert_eq!(goal_of("valid_ce"), Goal::Min);
    assert_eq!(goal_of("train_f1"), Goal::Max);
    assert_eq!(goal_of("loss"), Goal::Min);
    assert_eq!(goal_of("valid_loss"), Goal::Min);
    assert_eq!(goal_of("my_accuracy"), Goal::Max);
}

/// The value of `metric` on one batch of `scores` (rows of 3) and `labels`.
fn on(metric: &mut dyn Metric, scores: &[f32], labels: &[i64]) -> f64 {
    let device = Device::flex();
    let rows = labels.len();
    let out = Tensor::from_data(TensorData::new(scores.to_vec(), [rows, 3]), &device);
    let y = Tensor::<1, Int>::from_ints(labels, &device);
    metric.reset();
    metric.update(&out, Truth::Labels(&y)).unwrap();
    metric.get().unwrap()
}

#[test]
fn top_k_breaks_ties_as_accuracy_does_and_a_nan_misses() {
    // All outputs equal, as from a head initialized to zero: argmax takes class 0, so only
    // the label 0 is right, at top 1 as at acc; at top 2, labels 0 and 1.
    let flat = [0.5_f32; 12];
    let labels = [0, 1, 2, 0];
    assert_eq!(on(&mut Accuracy::default(), &flat, &labels), 0.5);
    assert_eq!(on(&mut TopK::new(1), &flat, &labels), 0.5);
    assert_eq!(on(&mut TopK::new(2), &flat, &labels), 0.75);
    assert_eq!(on(&mut TopK::new(3), &flat, &labels), 1.0);
    // A NaN output of the label's own ranks last, even at top 3 of 3; a NaN elsewhere counts
    // above the label.
    let nan = f32::NAN;
    let scores = [nan, 1.0, 2.0, 3.0, nan, 1.0];
    assert_eq!(on(&mut TopK::new(3), &scores, &[0, 2]), 0.5);
    assert_eq!(on(&mut TopK::new(1), &scores, &[2, 0]), 0.0);
    // acc and top1 agree on rows with a NaN: both wrong, wherever the NaN is.
    for labels in [[0, 2], [2, 0], [1, 1]] {
        let acc = on(&mut Accuracy::default(), &scores, &labels);
        assert_eq!(acc, on(&mut TopK::new(1), &scores, &labels), "{labels:?}");
        assert_eq!(acc, 0.0, "{labels:?}");
    }
    // In F1 a row with a NaN predicts nothing: a miss for its label, no false positive.
    let rows = [0.0, 5.0, 1.0, nan, 9.0, 0.0];
    let f1 = on(&mut MacroF1::default(), &rows, &[1, 1]);
    // Class 1: TP 1, predicted 1, labelled 2: 2/3; no other class occurs.
    assert!((f1 - 2.0 / 3.0).abs() < 1e-12, "{f1}");
}

#[test]
fn a_metric_goes_on_from_its_state_as_if_never_stopped() {
    let device = Device::flex();
    for name in ["acc", "top2", "ce", "f1", "mse", "mae"] {
        let kind: MetricKind = name.parse().unwrap();
        let labels = matches!(name, "acc" | "top2" | "ce" | "f1");
        let feed = |metric: &mut dyn Metric, rows| feed(metric, rows, labels, &device);
        let mut whole = kind.build();
        for rows in BATCHES {
            feed(&mut *whole, rows);
        }
        // Stopped after the first two batches: a fresh one goes on from the state.
        let mut first = kind.build();
        assert_eq!(
            first.state().unwrap(),
            Some(Vec::new()),
            "{name}: nothing yet"
        );
        feed(&mut *first, BATCHES[0].clone());
        feed(&mut *first, BATCHES[1].clone());
        let state = first.state().unwrap().unwrap();
        let mut resumed = kind.build();
        resumed.restore(&state, &device).unwrap();
        feed(&mut *resumed, BATCHES[2].clone());
        assert_eq!(resumed.get().unwrap(), whole.get().unwrap(), "{name}");
        // Only the first batches, not the whole: the state is what was counted.
        let mut alone = kind.build();
        feed(&mut *alone, BATCHES[2].clone());
        assert_ne!(resumed.get().unwrap(), alone.get().unwrap(), "{name}");
        // Another metric's state is refused, naming the metric.
        let err = resumed.restore(&[1.0, 2.0, 3.0, 4.5], &device).unwrap_err();
        assert!(err.to_string().contains(name), "{err}");
    }
}
