//! Gluon's `EvalMetric` as a trait: what a metric sees of a batch, which way it improves, and
//! the device counts, rows and reads the built-in metrics share.

use burn::tensor::{Device, Int, Tensor};
use ember::{Error, Result};

/// Which way a metric improves: accuracies up, losses down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// Higher is better (`acc`, `top5`, `f1`).
    Max,
    /// Lower is better (losses, errors).
    Min,
}

/// A batch's targets, as a metric sees them.
#[derive(Debug, Clone, Copy)]
pub enum Truth<'a> {
    /// One class index per example, `[batch]`.
    Labels(&'a Tensor<1, Int>),
    /// Values of the outputs' shape, `[batch, outputs]`.
    Values(&'a Tensor<2>),
}

/// A metric accumulated over batches on the device, Gluon's `EvalMetric`.
pub trait Metric: Send {
    /// Its name: the column's suffix in the epoch records (`acc` gives `train_acc`,
    /// `test_acc`).
    fn name(&self) -> String;

    /// Which way it improves: give it to [`crate::fit::Watched::with_goal`] to watch a metric
    /// of one's own whose name does not say ([`super::goal_of`]).
    fn goal(&self) -> Goal;

    /// Adds a batch: the network's `outputs` (`[batch, outputs]`) and their targets. Issues
    /// device work only, and reads nothing back.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for targets the metric does not take (class labels for `mse`),
    /// [`Error::Shape`] for outputs that do not fit them.
    fn update(&mut self, outputs: &Tensor<2>, truth: Truth<'_>) -> Result<()>;

    /// The value over every example since the last reset, read back once (NaN before any).
    ///
    /// # Errors
    /// [`Error::Readback`] when the device cannot be read.
    fn get(&self) -> Result<f64>;

    /// Forgets every batch.
    fn reset(&mut self);

    /// A new metric of the same kind, with nothing counted: one for each set evaluated.
    fn fresh(&self) -> Box<dyn Metric>;

    /// What it has counted since the last reset, read back, for a checkpoint: a run resumed in
    /// the middle of an epoch goes on from it ([`Metric::restore`]) and counts the epoch whole,
    /// as the run never stopped does. `None`, the default, for a metric that cannot say: a
    /// resumed run then counts that epoch from the resume on.
    ///
    /// # Errors
    /// [`Error::Readback`] when the device cannot be read.
    fn state(&self) -> Result<Option<Vec<f64>>> {
        Ok(None)
    }

    /// Goes on from what [`Metric::state`] gave, its counts on `device`. The default does
    /// nothing.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] for a state this metric never gives.
    fn restore(&mut self, state: &[f64], device: &Device) -> Result<()> {
        let _ = (state, device);
        Ok(())
    }
}

/// A metric's state: its sums on the device (read back) and how many things they count, or
/// nothing before the first batch. Integers and `f32` sums are exact as `f64`.
pub(super) fn state_of<const D: usize>(
    sums: &[Tensor<D, impl burn::tensor::kind::Numeric + Send + 'static>],
    counted: usize,
    what: &str,
) -> Result<Option<Vec<f64>>> {
    let mut state = Vec::new();
    for sum in sums {
        let data = fetch(sum.clone(), what)?.convert::<f64>();
        let values = data.try_into_vec::<f64>().map_err(|e| Error::Readback {
            what: what.to_string(),
            reason: format!("{e:?}"),
        })?;
        state.extend(values);
    }
    if !sums.is_empty() {
        state.push(counted as f64);
    }
    Ok(Some(state))
}

/// The sums of a state [`state_of`] gave, `parts` tensors of `len` values each (`None` where
/// the state is empty: nothing counted), and the count; an error naming `metric` for a state
/// of another length.
pub(super) fn sums_of(
    metric: &str,
    state: &[f64],
    parts: usize,
    len: Option<usize>,
) -> Result<Option<(Vec<Vec<f64>>, usize)>> {
    let Some((&counted, values)) = state.split_last() else {
        return Ok(None);
    };
    let len = len.unwrap_or(values.len() / parts.max(1));
    if len == 0 || values.len() != parts * len || counted < 0.0 || counted.fract() != 0.0 {
        return Err(Error::InvalidValue {
            name: "metric state",
            value: format!("{metric}: {state:?}"),
            reason: format!(
                "expected {parts} sum(s) then a count; the checkpoint holds another metric's \
                 state, or was edited"
            ),
        });
    }
    let sums = values.chunks(len).map(<[f64]>::to_vec).collect();
    Ok(Some((sums, counted as usize)))
}

/// Reads `tensor` back to the host; on a remote device, within its bound
/// ([`ember::device::remote::bounded`]): an evaluation's reads are the frontend's own, which no
/// engine watches.
fn fetch<const D: usize, K>(tensor: Tensor<D, K>, what: &str) -> Result<burn::tensor::TensorData>
where
    K: burn::tensor::kind::Numeric + Send + 'static,
{
    let device = tensor.device();
    ember::device::remote::bounded(&[device], &format!("reading {what} back"), move || {
        Ok(tensor.into_data())
    })
}

/// Reads back a float tensor, saying `what` it was where the read fails.
///
/// # Errors
/// [`Error::Readback`] with burn's own words.
pub fn read_floats(tensor: Tensor<1>, what: &str) -> Result<Vec<f64>> {
    fetch(tensor, what)?
        .convert::<f64>()
        .try_into_vec::<f64>()
        .map_err(|e| Error::Readback {
            what: what.to_string(),
            reason: format!("{e:?}"),
        })
}

/// Reads back an integer tensor, saying `what` it was where the read fails.
///
/// # Errors
/// [`Error::Readback`] with burn's own words.
pub fn read_ints(tensor: Tensor<1, Int>, what: &str) -> Result<Vec<i64>> {
    fetch(tensor, what)?
        .convert::<i64>()
        .try_into_vec::<i64>()
        .map_err(|e| Error::Readback {
            what: what.to_string(),
            reason: format!("{e:?}"),
        })
}

/// A float sum and the count it is the sum over: what `ce`, `mse` and `mae` keep, their value
/// the sum's mean. The steps give one value per row (each example's loss or error), which stay
/// on the device until read; a read adds them on the host, in `f64`, one by one in the order
/// the rows came, and keeps the sum, so that no row is read twice (a checkpoint every few
/// batches read the whole epoch's rows again each time). So, in one process, the sum does not
/// depend on how the rows were grouped into updates: a checkpoint that updates early, or a
/// resume that goes on from the sum so far, gives the bits a run without either gives.
#[derive(Default)]
pub(super) struct Mean {
    /// The rows not read yet, and the sum of those read (or restored). Behind a lock: a read
    /// (`&self`) folds them.
    rows: std::sync::Mutex<Rows>,
    count: usize,
}

/// [`Mean`]'s rows not read yet, and the sum of those read.
#[derive(Default)]
struct Rows {
    unread: Vec<Tensor<1>>,
    folded: Option<f64>,
}

/// More row tensors than this are joined into one as they come (the values stay the same).
const ROW_TENSORS: usize = 64;

impl Mean {
    /// Adds `rows`, one value per row of `count` things.
    pub(super) fn add(&mut self, rows: Tensor<1>, count: usize) {
        let held = self.rows.get_mut().unwrap_or_else(|e| e.into_inner());
        held.unread.push(rows);
        if held.unread.len() > ROW_TENSORS {
            held.unread = vec![Tensor::cat(std::mem::take(&mut held.unread), 0)];
        }
        self.count += count;
    }

    /// The sum so far, read back once (`None` before any), saying `what` it is where it fails.
    fn sum(&self, what: &str) -> Result<Option<f64>> {
        let mut held = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        if held.unread.is_empty() {
            return Ok(held.folded);
        }
        let rows = read_floats(Tensor::cat(held.unread.clone(), 0), what)?;
        let sum = (rows.iter()).fold(held.folded.unwrap_or(0.0), |sum, row| sum + row);
        held.unread.clear();
        held.folded = Some(sum);
        Ok(Some(sum))
    }

    /// The mean, read back once (NaN before any), saying `what` the sum is where it fails.
    pub(super) fn get(&self, what: &str) -> Result<f64> {
        Ok(match self.sum(what)? {
            Some(sum) => sum / self.count as f64,
            None => f64::NAN,
        })
    }

    /// `[sum, count]`, for a checkpoint.
    pub(super) fn state(&self, what: &str) -> Result<Option<Vec<f64>>> {
        Ok(Some(match self.sum(what)? {
            Some(sum) => vec![sum, self.count as f64],
            None => Vec::new(),
        }))
    }

    /// From what [`Mean::state`] gave; an error naming `metric` for another state.
    pub(super) fn restore(metric: &str, state: &[f64]) -> Result<Self> {
        Ok(match sums_of(metric, state, 1, Some(1))? {
            None => Self::default(),
            Some((sums, count)) => Self {
                rows: std::sync::Mutex::new(Rows {
                    unread: Vec::new(),
                    folded: Some(sums[0][0]),
                }),
                count,
            },
        })
    }
}

/// `sum + more` on the device, `more` where there is no sum yet.
pub(super) fn add<const D: usize, K>(sum: Option<Tensor<D, K>>, more: Tensor<D, K>) -> Tensor<D, K>
where
    K: burn::tensor::kind::Numeric,
{
    match sum {
        Some(sum) => sum + more,
        None => more,
    }
}

/// The error for a metric given targets it does not take.
pub(super) fn wrong_truth(metric: &str, needs: &str, got: &str) -> Error {
    Error::InvalidValue {
        name: "metric",
        value: metric.to_string(),
        reason: format!("it needs {needs}, and this loss's targets are {got}"),
    }
}
