//! The warm-up batch changes no parameter: batch 0's loss is the same at any learning rate.

use burn::prelude::*;
use ember::{Block, Dense, Init, L2Loss, Optimizer, Sequential};
use ember_datasets::Synthetic;
use ember_trainer::fit::{Fit, SyntheticEpochs};

#[test]
fn the_warm_up_leaves_the_first_batchs_loss_independent_of_the_learning_rate() {
    let device = Device::flex().autodiff();
    // One initialization for all runs (burn's generator is shared with the tests beside this).
    let net: Sequential = Sequential::new()
        .add(Dense::new(16))
        .add(Dense::new(1))
        .initialize(Init::default(), &device);
    let net = net.infer_shape(Tensor::<2>::ones([1, 8], &device)).unwrap();
    // The first two batches' losses; at a rate that diverges, the run fails at its end, and
    // its rescue gives the trace.
    let losses = |lr: f64| -> (f32, f32) {
        let net = net.clone();
        let trainer = Optimizer::new(&net, "sgd", lr).unwrap();
        let mut data = SyntheticEpochs::new(Synthetic::chapter(32, 8, 3), 3);
        let rescued = std::cell::RefCell::new(None);
        let run = Fit::new(net, L2Loss, trainer, &device)
            .rescue(|_, trace, _| *rescued.borrow_mut() = Some(trace.clone()))
            .run(&mut data);
        let trace = match run {
            Ok(run) => run.trace,
            Err(e) => rescued.take().unwrap_or_else(|| panic!("{e}")),
        };
        (trace.batches[0].loss, trace.batches[1].loss)
    };
    let (small, after_small) = losses(1e-6);
    let (large, after_large) = losses(0.5);
    assert!(small.is_finite());
    assert_eq!(small, large, "batch 0's loss is taken before any update");
    assert_eq!(small, losses(100.0).0);
    // The run itself trains: batch 1 comes after batch 0's update, which the rate sizes.
    assert_ne!(after_small, after_large);
}
