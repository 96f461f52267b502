//! Adam and AdamW whose update of a burn-flex f32 parameter is one pass over its elements.
//!
//! burn's update (`burn::optim::Adam`, `AdamW`) is a chain of about a dozen tensor operations
//! per parameter, each a pass over the parameter's size and several of them a new array: on d2l's
//! character LSTM (300 k parameters), a twentieth of the epoch. Here each element is read and
//! written once, with burn's arithmetic in burn's order, in f32 as burn-flex computes it (a
//! scalar `f64` rounded to `f32` first), so the result is burn's to the bit. The state is
//! burn's own (`AdamState`, `AdamWState`), so saved optimizer states load either way.
//!
//! burn's update runs where the pass does not apply: another device, another precision, a
//! strided array, a gradient or moment of another shape than the parameter's, AMSGrad.

use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::optim::{
    AdamState, AdamWState, AdaptiveMomentumState, LearningRate, Optimizer as BurnOptimizer,
};
use burn::tensor::{DType, Device, Tensor, TensorData};

/// Adam's hyper-parameters, as burn holds them (f32).
#[derive(Debug, Clone, Copy)]
pub(super) struct Moments {
    pub(super) beta1: f32,
    pub(super) beta2: f32,
    pub(super) epsilon: f32,
}

/// Adam with L2 weight decay added to the gradient (burn's `Adam`, `penalty` its decay).
#[derive(Clone)]
pub(super) struct Adam {
    pub(super) burn: burn::optim::Adam,
    pub(super) moments: Moments,
    pub(super) penalty: Option<f32>,
}

/// AdamW: decoupled weight decay (burn's `AdamW`, not cautious, without AMSGrad).
#[derive(Clone)]
pub(super) struct AdamW {
    pub(super) burn: burn::optim::AdamW,
    pub(super) moments: Moments,
    pub(super) weight_decay: f32,
}

impl BurnOptimizer for Adam {
    type State<const D: usize> = AdamState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<AdamState<D>>,
    ) -> (Tensor<D>, Option<AdamState<D>>) {
        let decay = match self.penalty {
            Some(penalty) => Decay::L2(penalty),
            None => Decay::None,
        };
        match Pass::of(&tensor, &grad, state.as_ref().map(|s| &s.momentum)) {
            Some(pass) => {
                drop((tensor, grad, state));
                let (tensor, momentum) = pass.run(self.moments, decay, lr);
                (tensor, Some(AdamState { momentum }))
            }
            None => self.burn.step(lr, tensor, grad, state),
        }
    }

    fn to_device<const D: usize>(state: AdamState<D>, device: &Device) -> AdamState<D> {
        burn::optim::Adam::to_device(state, device)
    }
}

impl BurnOptimizer for AdamW {
    type State<const D: usize> = AdamWState<D>;

    fn step<const D: usize>(
        &self,
        lr: LearningRate,
        tensor: Tensor<D>,
        grad: Tensor<D>,
        state: Option<AdamWState<D>>,
    ) -> (Tensor<D>, Option<AdamWState<D>>) {
        match Pass::of(&tensor, &grad, state.as_ref().map(|s| &s.momentum)) {
            Some(pass) => {
                drop((tensor, grad, state));
                let decay = Decay::Decoupled(self.weight_decay);
                let (tensor, momentum) = pass.run(self.moments, decay, lr);
                (tensor, Some(AdamWState { momentum }))
            }
            None => self.burn.step(lr, tensor, grad, state),
        }
    }

    fn to_device<const D: usize>(state: AdamWState<D>, device: &Device) -> AdamWState<D> {
        burn::optim::AdamW::to_device(state, device)
    }
}

#[derive(Debug, Clone, Copy)]
enum Decay {
    None,
    /// Adam's: `grad + param·penalty`.
    L2(f32),
    /// AdamW's: the parameter times `1 − lr·wd` before the update.
    Decoupled(f32),
}

/// One parameter's arrays, each burn-flex f32 and contiguous, of one size.
struct Pass<const D: usize> {
    param: FlexTensor,
    grad: FlexTensor,
    /// The moments and the steps taken, where the parameter has stepped.
    moments: Option<(FlexTensor, FlexTensor, usize)>,
    shape: [usize; D],
}

/// `t` as a contiguous burn-flex f32 array of the dimensions `shape` (sharing its storage).
fn flex<const D: usize>(t: &Tensor<D>, shape: [usize; D]) -> Option<FlexTensor> {
    if t.dtype() != DType::F32 || t.dims() != shape {
        return None;
    }
    let f = t.clone().try_into_primitive::<Flex>().ok()?;
    let (start, end) = f.layout().contiguous_offsets()?;
    (end - start == shape.iter().product::<usize>()).then_some(f)
}

impl<const D: usize> Pass<D> {
    /// The arrays, where every one is on burn-flex in f32, contiguous, and of the parameter's
    /// size, and the state has no AMSGrad maximum; the caller drops its handles before
    /// [`Pass::run`], so that arrays held nowhere else are updated where they are.
    fn of(
        param: &Tensor<D>,
        grad: &Tensor<D>,
        state: Option<&AdaptiveMomentumState<D>>,
    ) -> Option<Self> {
        let shape = param.dims();
        let moments = match state {
            None => None,
            Some(s) if s.max_moment_2.is_some() => return None,
            Some(s) => Some((flex(&s.moment_1, shape)?, flex(&s.moment_2, shape)?, s.time)),
        };
        Some(Self {
            param: flex(param, shape)?,
            grad: flex(grad, shape)?,
            moments,
            shape,
        })
    }

    fn run(
        self,
        h: Moments,
        decay: Decay,
        lr: LearningRate,
    ) -> (Tensor<D>, AdaptiveMomentumState<D>) {
        let Pass {
            param,
            grad,
            moments,
            shape,
        } = self;
        let n = shape.iter().product();
        let (mut m, mut v, time) = match moments {
            Some((m, v, time)) => (m, v, time + 1),
            None => (zeros(n), zeros(n), 1),
        };
        // burn's scalars: f32 as given, an f64 rounded to f32 as burn-flex's scalar operations do.
        let t = time as i32;
        let bias_correction2_sqrt = (1.0 - h.beta2.powi(t)).sqrt();
        let (keep, divided) = match decay {
            Decay::Decoupled(wd) => (lr * wd as f64 != 0.0, true),
            _ => (false, false),
        };
        let scalars = Scalars {
            beta1: h.beta1,
            beta2: h.beta2,
            factor1: 1.0 - h.beta1,
            factor2: 1.0 - h.beta2,
            folded: bias_correction2_sqrt / (1.0 - h.beta1.powi(t)),
            folded_epsilon: h.epsilon * bias_correction2_sqrt,
            first_correction: 1.0 - h.beta1.powi(t),
            second_correction: 1.0 - h.beta2.powi(t),
            epsilon: h.epsilon,
            lr: lr as f32,
            penalty: match decay {
                Decay::L2(p) => p,
                _ => 0.0,
            },
            keep: match decay {
                Decay::Decoupled(wd) => (1.0 - lr * wd as f64) as f32,
                _ => 1.0,
            },
            form: Form {
                first: time == 1,
                l2: matches!(decay, Decay::L2(_)),
                keep,
                divided,
            },
        };
        // The moments are the optimizer's own; the parameter is often held elsewhere too (by
        // the network the caller keeps), and then the new one is a new array, written in the
        // same pass rather than copied first.
        let param = {
            let (g, m, v) = (slice(&grad), slice_mut(&mut m), slice_mut(&mut v));
            match param.is_unique() {
                true => {
                    let mut param = param;
                    update(&scalars, Target::InPlace(slice_mut(&mut param)), g, m, v);
                    param
                }
                false => {
                    let mut new = Vec::with_capacity(n);
                    update(&scalars, Target::New(slice(&param), &mut new), g, m, v);
                    FlexTensor::from_data(TensorData::new(new, [n]))
                }
            }
        };
        let tensor = |f: FlexTensor| Tensor::<D>::from_primitive::<Flex>(f).reshape(shape);
        let state = AdaptiveMomentumState {
            time,
            moment_1: tensor(m),
            moment_2: tensor(v),
            max_moment_2: None,
        };
        (tensor(param), state)
    }
}

fn zeros(n: usize) -> FlexTensor {
    FlexTensor::zeros([n].into(), DType::F32)
}

fn slice(t: &FlexTensor) -> &[f32] {
    let (start, end) = t.layout().contiguous_offsets().expect("checked contiguous");
    &t.storage::<f32>()[start..end]
}

/// The array's elements to write, copied first where another handle shares them.
fn slice_mut(t: &mut FlexTensor) -> &mut [f32] {
    let (start, end) = t.layout().contiguous_offsets().expect("checked contiguous");
    &mut t.storage_mut::<f32>()[start..end]
}

/// Which of burn's formulas a step takes, each a loop of its own (without branches, so that it
/// runs on vectors).
#[derive(Clone, Copy)]
struct Form {
    /// The first step: the moments start from the gradient alone.
    first: bool,
    /// Adam's L2 decay: `grad + param·penalty`.
    l2: bool,
    /// AdamW's decay: the parameter times `keep` first (burn skips it where `lr·wd` is 0).
    keep: bool,
    /// AdamW's correction: `(m / first) / (√(v / second) + ε)`; else Adam's,
    /// `m·folded / (√v + folded_epsilon)`.
    divided: bool,
}

/// One step's scalars, in f32.
struct Scalars {
    beta1: f32,
    beta2: f32,
    factor1: f32,
    factor2: f32,
    folded: f32,
    folded_epsilon: f32,
    first_correction: f32,
    second_correction: f32,
    epsilon: f32,
    lr: f32,
    penalty: f32,
    keep: f32,
    form: Form,
}

/// Where the updated parameter goes.
enum Target<'a> {
    /// Over the old one, which nothing else holds.
    InPlace(&'a mut [f32]),
    /// Into a new array, from the old one.
    New(&'a [f32], &'a mut Vec<f32>),
}

fn update(s: &Scalars, p: Target<'_>, g: &[f32], m: &mut [f32], v: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { update_avx2(s, p, g, m, v) };
    }
    update_any(s, p, g, m, v)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn update_avx2(s: &Scalars, p: Target<'_>, g: &[f32], m: &mut [f32], v: &mut [f32]) {
    update_any(s, p, g, m, v)
}

/// The loop for the step's [`Form`].
#[inline(always)]
fn update_any(s: &Scalars, p: Target<'_>, g: &[f32], m: &mut [f32], v: &mut [f32]) {
    let f = s.form;
    match (f.first, f.l2) {
        (true, true) => decayed::<true, true>(s, p, g, m, v),
        (true, false) => decayed::<true, false>(s, p, g, m, v),
        (false, true) => decayed::<false, true>(s, p, g, m, v),
        (false, false) => decayed::<false, false>(s, p, g, m, v),
    }
}

#[inline(always)]
fn decayed<const FIRST: bool, const L2: bool>(
    s: &Scalars,
    p: Target<'_>,
    g: &[f32],
    m: &mut [f32],
    v: &mut [f32],
) {
    match (s.form.keep, s.form.divided) {
        (true, true) => pass::<FIRST, L2, true, true>(s, p, g, m, v),
        (true, false) => pass::<FIRST, L2, true, false>(s, p, g, m, v),
        (false, true) => pass::<FIRST, L2, false, true>(s, p, g, m, v),
        (false, false) => pass::<FIRST, L2, false, false>(s, p, g, m, v),
    }
}

#[inline(always)]
fn pass<const FIRST: bool, const L2: bool, const KEEP: bool, const DIVIDED: bool>(
    s: &Scalars,
    p: Target<'_>,
    g: &[f32],
    m: &mut [f32],
    v: &mut [f32],
) {
    let n = m.len();
    let (g, v) = (&g[..n], &mut v[..n]);
    let element = element::<FIRST, L2, KEEP, DIVIDED>;
    match p {
        Target::InPlace(p) => {
            let p = &mut p[..n];
            for i in 0..n {
                p[i] = element(s, p[i], g[i], &mut m[i], &mut v[i]);
            }
        }
        Target::New(p, new) => {
            let p = &p[..n];
            let out = &mut new.spare_capacity_mut()[..n];
            for i in 0..n {
                out[i].write(element(s, p[i], g[i], &mut m[i], &mut v[i]));
            }
            // SAFETY: the loop wrote the first `n` elements, within the capacity.
            unsafe { new.set_len(n) };
        }
    }
}

/// burn's Adam or AdamW on one element: the new parameter, the moments updated; each
/// operation rounded to f32 as burn-flex rounds it (never fused into a multiply-add).
#[inline(always)]
fn element<const FIRST: bool, const L2: bool, const KEEP: bool, const DIVIDED: bool>(
    s: &Scalars,
    p: f32,
    g: f32,
    m: &mut f32,
    v: &mut f32,
) -> f32 {
    let grad = if L2 { p * s.penalty + g } else { g };
    let square = grad * grad;
    if FIRST {
        *m = grad * s.factor1;
        *v = square * s.factor2;
    } else {
        *m = *m * s.beta1 + grad * s.factor1;
        *v = *v * s.beta2 + square * s.factor2;
    }
    let step = if DIVIDED {
        (*m / s.first_correction) / ((*v / s.second_correction).sqrt() + s.epsilon)
    } else {
        (*m * s.folded) / (v.sqrt() + s.folded_epsilon)
    };
    let param = if KEEP { p * s.keep } else { p };
    param - step * s.lr
}

#[cfg(test)]
#[path = "fused_tests.rs"]
mod tests;
