//! What a run measures besides its loss: the training metrics its steps update, and the
//! evaluations after each epoch on a snapshot of the network.

use burn::tensor::Device;
use ember::{Block, Loss, Result};
use ember_datasets::DataLoader;

use super::Fit;
use super::epoch::Evaluation;
use crate::metric::{Metric, column};
use crate::target::Target;

impl<B, L> Fit<'_, B, L>
where
    B: Block + 'static,
    L: Loss + Send + Sync + 'static,
    L::Target: Target,
{
    /// Adds a metric computed after each epoch on a snapshot of the network without autodiff,
    /// on the caller's thread; its time does not count in the epoch's.
    pub fn evaluate(
        mut self,
        name: impl Into<String>,
        metric: impl Fn(&B) -> Result<f64> + 'static,
    ) -> Self {
        self.evaluations.push(Evaluation {
            names: vec![name.into()],
            compute: Box::new(move |net| Ok(vec![metric(net)?])),
        });
        self
    }

    /// Adds an evaluation that gives several columns from one pass, as [`Fit::evaluate`] one.
    pub fn evaluation(mut self, evaluation: Evaluation<B>) -> Self {
        self.evaluations.push(evaluation);
        self
    }

    /// The metrics the training steps update, read at each epoch's end as `train_<name>`
    /// ([`crate::metric`]). They add no barrier: each step adds to sums on the device, read
    /// where the epoch ends. By default, accuracy where the loss takes class labels, and none
    /// otherwise; an empty list turns them off. A checkpoint written in the middle of an epoch
    /// keeps their sums so far ([`Metric::state`]), and a run resumed from it goes on from them,
    /// so that the epoch's counts (`acc`, `topK`, `f1`) are the uninterrupted run's, and its
    /// float sums (`ce`, `mse`, `mae`) are to the rounding of where the sums were cut. A metric
    /// of one's own that keeps no state, or whose sum is not finite, counts that epoch from
    /// the resume on.
    ///
    /// ```
    /// use burn::prelude::*;
    /// use ember::{Block, Dense, Init, Optimizer, Sequential, SoftmaxCrossEntropyLoss};
    /// use ember_datasets::{DataLoader, Examples};
    /// use ember_trainer::fit::Fit;
    /// use ember_trainer::metric::MetricKind;
    ///
    /// let device = Device::flex().autodiff();
    /// let x: Vec<f32> = (0..64).map(|i| (i as f32 * 0.37).sin()).collect();
    /// let labels: Vec<usize> = (0..32).map(|i| i % 3).collect();
    /// let data = Examples::classification(x, 2, labels, 3).unwrap();
    /// let net: Sequential = Sequential::new().add(Dense::new(3)).initialize(Init::default(), &device);
    /// let optimizer = Optimizer::new(&net, "sgd", 0.1).unwrap();
    /// let kinds = MetricKind::parse_list("acc,top2,ce").unwrap();
    /// let test = DataLoader::new(data.clone(), 16).unwrap();
    /// let mut train = DataLoader::new(data, 8).unwrap();
    /// let run = Fit::new(net, SoftmaxCrossEntropyLoss, optimizer, &device)
    ///     .metrics(kinds.iter().map(|k| k.build()))
    ///     .evaluate_metrics("test", test, kinds.iter().map(|k| k.build()), &Device::flex())
    ///     .run(&mut train)
    ///     .unwrap();
    /// let epoch = &run.trace.epochs[0];
    /// assert!((0.0..=1.0).contains(&epoch.metrics["train_top2"]));
    /// assert!(epoch.metrics["test_ce"] > 0.0);
    /// assert!(epoch.metrics["test_acc"] <= epoch.metrics["test_top2"]);
    /// ```
    pub fn metrics(mut self, metrics: impl IntoIterator<Item = Box<dyn Metric>>) -> Self {
        self.metrics = Some(metrics.into_iter().collect());
        self
    }

    /// After each epoch, `metrics` over every example of `data`, on a snapshot of the network
    /// without autodiff, which lives on `device` (the training device without autodiff,
    /// `device.inner()`), as `<set>_<name>`
    /// columns (`test_acc`): one pass over the data for all of them. Its time does not count
    /// in the epoch's.
    pub fn evaluate_metrics(
        mut self,
        set: &str,
        data: DataLoader,
        metrics: impl IntoIterator<Item = Box<dyn Metric>>,
        device: &Device,
    ) -> Self {
        let metrics: Vec<Box<dyn Metric>> = metrics.into_iter().collect();
        let names = metrics.iter().map(|m| column(set, &m.name())).collect();
        let device = device.clone();
        let metrics = std::cell::RefCell::new(metrics);
        self.evaluations.push(Evaluation {
            names,
            compute: Box::new(move |net: &B| {
                crate::evaluate::metrics::<B, L::Target>(
                    net,
                    &mut metrics.borrow_mut(),
                    &data,
                    &device,
                )
            }),
        });
        self
    }
}
