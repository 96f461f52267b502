//! The sweep's rates, smoothing, stop and suggestion, against Lightning's formulas by hand.

use super::suggestion::gradient;
use super::*;

fn points(lrs: &[f64], smoothed: &[f64]) -> Vec<LrPoint> {
    lrs.iter()
        .zip(smoothed)
        .map(|(&lr, &smoothed)| LrPoint {
            lr,
            loss: smoothed,
            smoothed,
        })
        .collect()
}

#[test]
fn the_rates_run_from_min_to_max_at_a_constant_ratio() {
    let sweep = LrSweep::new(1e-3, 1.0, 4);
    let rates: Vec<f64> = (0..4).map(|i| sweep.rate(i)).collect();
    for (got, want) in rates.iter().zip([1e-3, 1e-2, 1e-1, 1.0]) {
        assert!((got / want - 1.0).abs() < 1e-12, "{rates:?}");
    }
    let linear = sweep.mode(SweepMode::Linear);
    assert_eq!(linear.rate(0), 1e-3);
    assert!((linear.rate(2) - (1e-3 + 0.999 * 2.0 / 3.0)).abs() < 1e-12);
    assert_eq!(linear.rate(9), 1.0);
}

/// Lightning's smoothing by hand, β = 0.5 and losses 4, 2, 2, 40:
/// avg = 2, 2, 2, 21; bias corrections 1−0.5, 1−0.25, 1−0.125, 1−0.0625;
/// smoothed = 4, 8/3, 16/7, 22.4. The best before the last is 16/7, and 22.4 > 4 × 16/7.
#[test]
fn the_smoothed_loss_is_bias_corrected_and_stops_past_the_threshold() {
    let mut sweep = LrSweep::new(0.1, 0.8, 10);
    sweep.beta = 0.5;
    let mut curve = Curve::new(sweep);
    for (step, loss) in [4.0, 2.0, 2.0, 40.0].into_iter().enumerate() {
        assert!(curve.ended.is_none(), "ended before step {step}");
        curve.push(sweep.rate(step), loss);
    }
    let smoothed: Vec<f64> = curve.points.iter().map(|p| p.smoothed).collect();
    for (got, want) in smoothed.iter().zip([4.0, 8.0 / 3.0, 16.0 / 7.0, 22.4]) {
        assert!((got - want).abs() < 1e-12, "{smoothed:?}");
    }
    let Some(SweepEnd::Diverged { best, lr, .. }) = curve.ended else {
        panic!("{:?}", curve.ended);
    };
    assert!((best - 16.0 / 7.0).abs() < 1e-12);
    assert_eq!(lr, sweep.rate(3));
}

#[test]
fn a_nan_loss_ends_the_sweep_without_a_point() {
    let mut curve = Curve::new(LrSweep::default());
    curve.push(1e-8, 1.0);
    curve.push(1e-7, f32::NAN);
    assert_eq!(curve.points.len(), 1);
    assert!(matches!(
        curve.ended,
        Some(SweepEnd::NonFiniteLoss { lr: 1e-7, .. })
    ));
}

/// `numpy.gradient([5, 4, 1, 0.5, 3], [-3, -2, -1, 0, 1])` (unit spacing on log10(lr)) is
/// [-1, -2, -1.75, 1, 2.5]: the steepest is at index 1, lr 1e-2.
#[test]
fn the_suggestion_is_the_steepest_descent_per_decade() {
    let lrs = [1e-3, 1e-2, 1e-1, 1.0, 10.0];
    let curve = points(&lrs, &[5.0, 4.0, 1.0, 0.5, 3.0]);
    let slopes = gradient(
        &curve.iter().map(|p| p.smoothed).collect::<Vec<_>>(),
        &lrs.map(f64::log10),
    );
    for (got, want) in slopes.iter().zip([-1.0, -2.0, -1.75, 1.0, 2.5]) {
        assert!((got - want).abs() < 1e-12, "{slopes:?}");
    }
    let suggestion = Suggestion::of(&curve, SweepMode::Exponential, 0, 0);
    assert_eq!(suggestion.lr(), Some(1e-2));
    // Skipping the first point and the last one leaves [4, 1, 0.5]: slopes -3, -1.75, -0.5.
    let Suggestion::At { index, slope, .. } = Suggestion::of(&curve, SweepMode::Exponential, 1, 1)
    else {
        panic!("a suggestion");
    };
    assert_eq!(index, 1);
    assert!((slope + 3.0).abs() < 1e-12);
}

/// Non-uniform spacing, NumPy's formula: `numpy.gradient([0, 1, 4], [0, 1, 3])` is
/// [1, 1.1667, 1.5]; inside, the slope at 1 of the parabola x²/6 + 5x/6 through the three
/// points, 7/6.
#[test]
fn the_gradient_takes_uneven_spacing_as_numpy_does() {
    let slopes = gradient(&[0.0, 1.0, 4.0], &[0.0, 1.0, 3.0]);
    for (got, want) in slopes.iter().zip([1.0, 7.0 / 6.0, 1.5]) {
        assert!((got - want).abs() < 1e-12, "{slopes:?}");
    }
}

#[test]
fn too_few_points_or_a_loss_that_never_falls_suggest_nothing() {
    let lrs = [1e-3, 1e-2, 1e-1];
    let curve = points(&lrs, &[1.0, 0.5, 0.25]);
    assert_eq!(
        Suggestion::of(&curve, SweepMode::Exponential, 2, 0),
        Suggestion::TooFewPoints { points: 3 }
    );
    let rising = points(&lrs, &[1.0, 2.0, 3.0]);
    assert_eq!(
        Suggestion::of(&rising, SweepMode::Exponential, 0, 0),
        Suggestion::NeverFell
    );
}

#[test]
fn bad_sweeps_are_refused_naming_the_value() {
    let bad = [
        (LrSweep::new(0.0, 1.0, 10), "min_lr"),
        (LrSweep::new(f64::NAN, 1.0, 10), "min_lr"),
        (LrSweep::new(1.0, 1.0, 10), "max_lr"),
        (LrSweep::new(1e-3, f64::INFINITY, 10), "max_lr"),
        (LrSweep::new(1e-3, 1.0, 1), "steps"),
        (
            LrSweep::new(1e-3, 1.0, 10).early_stop_threshold(Some(0.5)),
            "early_stop_threshold",
        ),
    ];
    for (sweep, field) in bad {
        let Err(Error::InvalidValue { name, .. }) = sweep.check() else {
            panic!("{sweep:?} was accepted");
        };
        assert_eq!(name, field, "{sweep:?}");
    }
    assert!(LrSweep::default().check().is_ok());
}
