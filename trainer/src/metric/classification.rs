//! Metrics of class scores against class labels: accuracy, top-K accuracy, cross-entropy and
//! macro F1. Each sums its counts on the device, one small tensor a batch.

use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor};
use ember::{Error, Result};

use super::eval_metric::{
    Goal, Mean, Metric, Truth, add, read_ints, state_of, sums_of, wrong_truth,
};

/// The labels of `truth`, checked against `outputs`' rows, or the error naming `metric`.
fn labels<'a>(metric: &str, outputs: &Tensor<2>, truth: Truth<'a>) -> Result<&'a Tensor<1, Int>> {
    let Truth::Labels(labels) = truth else {
        return Err(wrong_truth(metric, "class labels", "values"));
    };
    let [rows, _] = outputs.dims();
    if labels.dims()[0] != rows {
        return Err(Error::Shape {
            what: format!("the labels for metric {metric}"),
            expected: format!("[{rows}], one per output row"),
            got: labels.dims().to_vec(),
        });
    }
    Ok(labels)
}

/// Per row of `outputs`, 1 where it holds no NaN and 0 where it does: a row with a NaN
/// predicts no class, so that it counts as wrong in `acc` and `f1` as in `topK`.
fn numbers(outputs: &Tensor<2>) -> Tensor<2, Int> {
    outputs.clone().is_nan().any_dim(1).bool_not().int()
}

/// Examples counted, and a count summed on the device: the state of the counting metrics.
#[derive(Default)]
struct Count {
    sum: Option<Tensor<1, Int>>,
    examples: usize,
}

impl Count {
    fn add(&mut self, more: Tensor<1, Int>, examples: usize) {
        self.sum = Some(add(self.sum.take(), more));
        self.examples += examples;
    }

    /// The count's share of the examples.
    fn share(&self, what: &str) -> Result<f64> {
        Ok(match &self.sum {
            Some(sum) => read_ints(sum.clone(), what)?[0] as f64 / self.examples as f64,
            None => f64::NAN,
        })
    }

    /// `[count, examples]`, for a checkpoint.
    fn state(&self, what: &str) -> Result<Option<Vec<f64>>> {
        state_of(self.sum.as_slice(), self.examples, what)
    }

    fn restore(metric: &str, state: &[f64], device: &Device) -> Result<Self> {
        Ok(match sums_of(metric, state, 1, Some(1))? {
            None => Self::default(),
            Some((sums, examples)) => Self {
                sum: Some(Tensor::from_ints([sums[0][0] as i64], device)),
                examples,
            },
        })
    }
}

/// `acc`: the share of examples whose largest output is their label (Gluon's `Accuracy`,
/// d2l's `accuracy`). Of equal largest outputs the first counts, as `argmax` gives it; a row
/// with a NaN output counts as wrong.
#[derive(Default)]
pub struct Accuracy(Count);

impl Metric for Accuracy {
    fn name(&self) -> String {
        "acc".to_string()
    }

    fn goal(&self) -> Goal {
        Goal::Max
    }

    fn update(&mut self, outputs: &Tensor<2>, truth: Truth<'_>) -> Result<()> {
        let labels = labels("acc", outputs, truth)?;
        let [rows, _] = outputs.dims();
        let predicted = outputs.clone().detach().argmax(1).reshape([rows]);
        let right = predicted.equal(labels.clone()).int() * numbers(outputs).reshape([rows]);
        let right = right.sum();
        self.0.add(right, rows);
        Ok(())
    }

    fn get(&self) -> Result<f64> {
        self.0.share("an accuracy's count")
    }

    fn reset(&mut self) {
        self.0 = Count::default();
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Self::default())
    }

    fn state(&self) -> Result<Option<Vec<f64>>> {
        self.0.state("an accuracy's count")
    }

    fn restore(&mut self, state: &[f64], device: &Device) -> Result<()> {
        self.0 = Count::restore("acc", state, device)?;
        Ok(())
    }
}

/// `topK`: the share of examples whose label is among the K largest outputs (Gluon's
/// `TopKAccuracy`). The label's rank counts the outputs above its own, and the equal ones at a
/// smaller index, so that `top1` is `acc` (whose `argmax` takes the first of equals), and a
/// label whose own output is NaN ranks last and misses.
pub struct TopK {
    k: usize,
    count: Count,
}

impl TopK {
    /// Top-`k` accuracy.
    pub fn new(k: usize) -> Self {
        Self {
            k,
            count: Count::default(),
        }
    }
}

impl Metric for TopK {
    fn name(&self) -> String {
        format!("top{}", self.k)
    }

    fn goal(&self) -> Goal {
        Goal::Max
    }

    fn update(&mut self, outputs: &Tensor<2>, truth: Truth<'_>) -> Result<()> {
        let name = self.name();
        let labels = labels(&name, outputs, truth)?;
        let [rows, classes] = outputs.dims();
        if self.k > classes {
            return Err(Error::InvalidValue {
                name: "metric",
                value: name,
                reason: format!("the network has {classes} outputs, fewer than {}", self.k),
            });
        }
        let outputs = outputs.clone().detach();
        let labels = labels.clone().reshape([rows, 1]);
        let own = outputs
            .clone()
            .gather(1, labels.clone())
            .expand([rows, classes]);
        // Not at or below the label's own output: above it, or NaN on either side.
        let above = outputs.clone().lower_equal(own.clone()).bool_not().int();
        let before = Tensor::<1, Int>::arange(0..classes as i64, &outputs.device())
            .reshape([1, classes])
            .expand([rows, classes])
            .lower(labels.expand([rows, classes]))
            .int();
        let tied_before = outputs.equal(own).int() * before;
        let rank = (above + tied_before).sum_dim(1);
        let right = rank.lower_elem(self.k as i64).int().sum();
        self.count.add(right, rows);
        Ok(())
    }

    fn get(&self) -> Result<f64> {
        self.count.share("a top-K accuracy's count")
    }

    fn reset(&mut self) {
        self.count = Count::default();
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Self::new(self.k))
    }

    fn state(&self) -> Result<Option<Vec<f64>>> {
        self.count.state("a top-K accuracy's count")
    }

    fn restore(&mut self, state: &[f64], device: &Device) -> Result<()> {
        self.count = Count::restore(&self.name(), state, device)?;
        Ok(())
    }
}

/// `ce`: the mean over the examples of `-log softmax(outputs)[label]`, PyTorch's
/// `cross_entropy` of the outputs as logits (Gluon's `CrossEntropy` takes probabilities).
#[derive(Default)]
pub struct CrossEntropy(Mean);

impl Metric for CrossEntropy {
    fn name(&self) -> String {
        "ce".to_string()
    }

    fn goal(&self) -> Goal {
        Goal::Min
    }

    fn update(&mut self, outputs: &Tensor<2>, truth: Truth<'_>) -> Result<()> {
        let labels = labels("ce", outputs, truth)?;
        let [rows, _] = outputs.dims();
        let picked =
            log_softmax(outputs.clone().detach(), 1).gather(1, labels.clone().reshape([rows, 1]));
        self.0.add(-picked.reshape([rows]), rows);
        Ok(())
    }

    fn get(&self) -> Result<f64> {
        self.0.get("a cross-entropy's sum")
    }

    fn reset(&mut self) {
        *self = Self::default();
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Self::default())
    }

    fn state(&self) -> Result<Option<Vec<f64>>> {
        self.0.state("a cross-entropy's sum")
    }

    fn restore(&mut self, state: &[f64], _device: &Device) -> Result<()> {
        self.0 = Mean::restore("ce", state)?;
        Ok(())
    }
}

/// `f1`: the macro F1 score, scikit-learn's `f1_score(average="macro")`: per class,
/// `2 TP / (2 TP + FP + FN)`, averaged over the classes that occur among the labels or the
/// predictions (Gluon's `F1(average="macro")` is binary only). The prediction is the largest
/// output, as for `acc`; a row with a NaN output predicts no class (a miss for its label).
/// Three per-class counts are summed on the device.
#[derive(Default)]
pub struct MacroF1 {
    /// Per class: examples predicted and labelled so (TP), predicted so, labelled so.
    counts: Option<[Tensor<1, Int>; 3]>,
}

impl Metric for MacroF1 {
    fn name(&self) -> String {
        "f1".to_string()
    }

    fn goal(&self) -> Goal {
        Goal::Max
    }

    fn update(&mut self, outputs: &Tensor<2>, truth: Truth<'_>) -> Result<()> {
        let labels = labels("f1", outputs, truth)?;
        let [rows, classes] = outputs.dims();
        let device = outputs.device();
        let all = Tensor::<1, Int>::arange(0..classes as i64, &device)
            .reshape([1, classes])
            .expand([rows, classes]);
        let hot = |index: Tensor<2, Int>| index.expand([rows, classes]).equal(all.clone()).int();
        let predicted =
            hot(outputs.clone().detach().argmax(1)) * numbers(outputs).expand([rows, classes]);
        let labelled = hot(labels.clone().reshape([rows, 1]));
        let column = |t: Tensor<2, Int>| t.sum_dim(0).reshape([classes]);
        let batch = [
            column(predicted.clone() * labelled.clone()),
            column(predicted),
            column(labelled),
        ];
        self.counts = Some(match self.counts.take() {
            Some(sums) => {
                let [a, b, c] = sums;
                let [x, y, z] = batch;
                [a + x, b + y, c + z]
            }
            None => batch,
        });
        Ok(())
    }

    fn get(&self) -> Result<f64> {
        let Some([tp, predicted, labelled]) = &self.counts else {
            return Ok(f64::NAN);
        };
        let read = |t: &Tensor<1, Int>| read_ints(t.clone(), "an F1 score's counts");
        let (tp, predicted, labelled) = (read(tp)?, read(predicted)?, read(labelled)?);
        let scores: Vec<f64> = (0..tp.len())
            .filter(|&c| predicted[c] + labelled[c] > 0)
            .map(|c| 2.0 * tp[c] as f64 / (predicted[c] + labelled[c]) as f64)
            .collect();
        Ok(scores.iter().sum::<f64>() / scores.len().max(1) as f64)
    }

    fn reset(&mut self) {
        self.counts = None;
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Self::default())
    }

    /// The three per-class counts, one after the other (and a count of 0, unused).
    fn state(&self) -> Result<Option<Vec<f64>>> {
        let counts = self.counts.as_ref().map_or(&[][..], |c| &c[..]);
        state_of(counts, 0, "an F1 score's counts")
    }

    fn restore(&mut self, state: &[f64], device: &Device) -> Result<()> {
        self.counts = match sums_of("f1", state, 3, None)? {
            None => None,
            Some((sums, _)) => {
                let ints = |values: &Vec<f64>| {
                    let values: Vec<i64> = values.iter().map(|&v| v as i64).collect();
                    Tensor::<1, Int>::from_ints(values.as_slice(), device)
                };
                Some([ints(&sums[0]), ints(&sums[1]), ints(&sums[2])])
            }
        };
        Ok(())
    }
}
