//! Dense layers on oneDNN's matrix product: `x·W + b` with the activation fused as a post-op,
//! and the three products of its backward pass; in f32, or under autocast with `x`, `W` and the
//! gradient rounded to bf16 (products accumulated in f32, results in f32, the bias in f32).

use std::sync::Arc;

use burn::backend::Flex;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;

use super::bridge::{self, Inputs};
use super::eltwise::{self, FromOutput};
use super::fallback;
use super::format::Format;
use super::library::*;
use super::primitive::{Attr, Md, Primitive, Result, operands};
use super::reorder;
use super::threads;
use crate::kernels::eltwise::Eltwise;
use crate::precision::Precision;

/// `src · weights (+ bias) → dst`, on one thread where it is small
/// ([`threads::ONE_THREAD_BELOW_FLOP`]).
fn product(src: &Md, weights: &Md, bias: Option<&Md>, dst: &Md, attr: &Attr) -> Result<Primitive> {
    let [m, k] = [src.0.dims[0], src.0.dims[1]];
    let n = weights.0.dims[1];
    let describe = || {
        Primitive::describe("a matrix product", attr, None, |api, desc| {
            // SAFETY: valid out-pointer and descriptors.
            unsafe {
                api.dnnl_matmul_desc_init(
                    desc,
                    &src.0,
                    &weights.0,
                    bias.map_or(std::ptr::null(), |b| &b.0),
                    &dst.0,
                )
            }
        })
    };
    if 2.0 * ((m * k * n) as f64) < threads::ONE_THREAD_BELOW_FLOP {
        Primitive::alone(describe)
    } else {
        describe()
    }
}

/// `t` as the products read it: itself in f32, rounded to bf16 under autocast.
fn operand(t: &FlexTensor, precision: Precision) -> Result<FlexTensor> {
    match precision {
        Precision::F32 => Ok(t.clone()),
        Precision::Bf16 => reorder::to_bf16(t),
    }
}

/// The layouts of `x [n, in]` and `W [in, out]` (burn's Linear) as the forward product reads
/// them, and of `b [1, out]` and `y [n, out]` (f32).
struct Descs {
    x: Md,
    w: Md,
    b: Option<Md>,
    y: Md,
}

fn descs(n: usize, i: usize, o: usize, bias: bool, precision: Precision) -> Result<Descs> {
    let element = operands(precision);
    Ok(Descs {
        x: Md::plain_of(element, &[n, i])?,
        w: Md::plain_of(element, &[i, o])?,
        b: if bias {
            Some(Md::plain(&[1, o])?)
        } else {
            None
        },
        y: Md::plain(&[n, o])?,
    })
}

struct Inference {
    d: Descs,
    forward: Primitive,
    fused: bool,
}

struct Training {
    precision: Precision,
    d: Descs,
    forward: Primitive,
    /// The gradient `dy [n, out]` as `dx` and `dw` read it.
    dy: Md,
    /// `dy · Wᵀ`, with `Wᵀ` read from `W` through its strides, into `dx_md` (f32).
    dx: Primitive,
    wt: Md,
    dx_md: Md,
    /// `xᵀ · dy`, into `dw_md` (f32).
    dw: Primitive,
    xt: Md,
    dw_md: Md,
    /// The bias gradient, in f32.
    db: ColumnSums,
    activation: Option<Arc<FromOutput>>,
}

fn inference(
    n: usize,
    i: usize,
    o: usize,
    bias: bool,
    act: Option<Eltwise>,
    precision: Precision,
) -> Result<Arc<Inference>> {
    let key = format!("dense infer {n} {i} {o} {bias} {act:?} {precision}");
    bridge::cached(key, || {
        let d = descs(n, i, o, bias, precision)?;
        let (attr, fused) = eltwise::post_op(act, false)?;
        let forward = product(&d.x, &d.w, d.b.as_ref(), &d.y, &attr)?;
        Ok(Inference { d, forward, fused })
    })
}

fn training(
    n: usize,
    i: usize,
    o: usize,
    bias: bool,
    act: Option<Eltwise>,
    precision: Precision,
) -> Result<Arc<Training>> {
    let key = format!("dense train {n} {i} {o} {bias} {act:?} {precision}");
    bridge::cached(key, || {
        let d = descs(n, i, o, bias, precision)?;
        let element = operands(precision);
        let (attr, fused) = eltwise::post_op(act, true)?;
        let forward = product(&d.x, &d.w, d.b.as_ref(), &d.y, &attr)?;
        let dy = Md::plain_of(element, &[n, o])?;
        let wt = Md::strided_of(element, &[o, i], &[1, o])?;
        let dx_md = Md::plain(&[n, i])?;
        let dx = product(&dy, &wt, None, &dx_md, &Attr::none()?)?;
        let xt = Md::strided_of(element, &[i, n], &[1, i])?;
        let dw_md = Md::plain(&[i, o])?;
        let dw = product(&xt, &dy, None, &dw_md, &Attr::none()?)?;
        let db = ColumnSums::new(n, o)?;
        let activation = match act {
            Some(a) if fused => Some(FromOutput::new(a, &[n, o])?),
            _ => None,
        };
        Ok(Training {
            precision,
            d,
            forward,
            dy,
            dx,
            wt,
            dx_md,
            dw,
            xt,
            dw_md,
            db,
            activation,
        })
    })
}

/// The sums of the columns of an f32 array of `[rows, columns]`: `1ᵀ · a`, a bias's gradient
/// (Dense's; a convolution's from its output's gradient channels last).
pub struct ColumnSums {
    product: Primitive,
    ones: Md,
    array: Md,
    sums: Md,
    /// `1ᵀ`, made once.
    ones_data: FlexTensor,
    columns: usize,
}

impl ColumnSums {
    pub fn new(rows: usize, columns: usize) -> Result<ColumnSums> {
        let (ones, array, sums) = (
            Md::plain(&[1, rows])?,
            Md::plain(&[rows, columns])?,
            Md::plain(&[1, columns])?,
        );
        let product = product(&ones, &array, None, &sums, &Attr::none()?)?;
        let ones_data = FlexTensor::filled_typed(
            burn::tensor::Shape::from(vec![1, rows]),
            burn::tensor::DType::F32,
            1.0f32,
        );
        Ok(ColumnSums {
            product,
            ones,
            array,
            sums,
            ones_data,
            columns,
        })
    }

    /// The sums of `a`, an f32 array whose elements lie row after row from its first
    /// (`bridge::dense`), as an array of `[columns]`.
    pub fn run(&self, a: &FlexTensor) -> Result<FlexTensor> {
        assert_eq!(
            a.dtype(),
            burn::tensor::DType::F32,
            "column sums of f32 arrays"
        );
        let mut sums = bridge::Out::new(&[self.columns]);
        self.product.execute(&[
            (DNNL_ARG_SRC, &self.ones, bridge::read(&self.ones_data)),
            (DNNL_ARG_WEIGHTS, &self.array, bridge::read(a)),
            (DNNL_ARG_DST, &self.sums, sums.ptr()),
        ])?;
        // SAFETY: the product above wrote it.
        Ok(unsafe { sums.written() })
    }
}

#[derive(Clone)]
struct State {
    prims: Arc<Training>,
    /// `x` and `W` as the forward product read them (f32, or bf16 under autocast).
    x: FlexTensor,
    w: FlexTensor,
    y: Option<FlexTensor>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oneDNN dense")
    }
}

#[derive(Debug)]
struct DenseBackward;

impl Backward<Flex, 3> for DenseBackward {
    type State = State;

    fn backward(self, ops: Ops<State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [px, pw, pb] = ops.parents;
        let grad = grads.consume::<Flex>(&ops.node);
        let s = ops.state;
        let p = &s.prims;
        let grad =
            eltwise::before_activation(p.activation.as_deref(), s.y.as_ref(), &grad, Format::Plain);
        // Row-major from its first element, as the products read it (a copy, never oneDNN's).
        let grad = bridge::dense(&grad);
        let [n, o] = [bridge::dims(&grad)[0], bridge::dims(&grad)[1]];
        let i = bridge::dims(&s.x)[1];
        // The gradient as the products of dx and dw read it, rounded once for both.
        let dy = operand(&grad, p.precision);
        if let Some(px) = px {
            let dx = fallback::or_flex(
                || {
                    let dy = dy.clone()?;
                    let mut dx = bridge::Out::new(&[n, i]);
                    p.dx.execute(&[
                        (DNNL_ARG_SRC, &p.dy, bridge::read(&dy)),
                        (DNNL_ARG_WEIGHTS, &p.wt, bridge::read(&s.w)),
                        (DNNL_ARG_DST, &p.dx_md, dx.ptr()),
                    ])?;
                    // SAFETY: the product above wrote it.
                    Ok(unsafe { dx.written() })
                },
                || fallback::dense_x(&s.w, &grad),
            );
            grads.register::<Flex>(px.id, dx);
        }
        if let Some(pw) = pw {
            let dw = fallback::or_flex(
                || {
                    let dy = dy.clone()?;
                    let mut dw = bridge::Out::new(&[i, o]);
                    p.dw.execute(&[
                        (DNNL_ARG_SRC, &p.xt, bridge::read(&s.x)),
                        (DNNL_ARG_WEIGHTS, &p.dy, bridge::read(&dy)),
                        (DNNL_ARG_DST, &p.dw_md, dw.ptr()),
                    ])?;
                    // SAFETY: the product above wrote it.
                    Ok(unsafe { dw.written() })
                },
                || fallback::dense_w(&s.x, &grad),
            );
            grads.register::<Flex>(pw.id, dw);
        }
        if let Some(pb) = pb {
            let db = fallback::or_flex(|| p.db.run(&grad), || fallback::dense_b(&grad));
            grads.register::<Flex>(pb.id, db);
        }
    }
}

/// `activation(x·W + b)` for `x [n, in]` and burn's `W [in, out]`, through oneDNN, with the
/// products in `precision` (the caller asks for bf16 only where oneDNN multiplies it), and
/// whether the activation was applied (fused as a post-op); `None` where the tensors are not
/// burn-flex f32 tensors or oneDNN cannot run it.
pub fn dense(
    x: &Tensor<2>,
    weight: &Tensor<2>,
    bias: Option<&Tensor<1>>,
    activation: Option<Eltwise>,
    precision: Precision,
) -> Option<(Tensor<2>, bool)> {
    let [n, i] = x.dims();
    let [_, o] = weight.dims();
    let x_in = bridge::input(x)?;
    let b = bridge::bias_or_stand_in(bias, &x_in)?;
    let inputs: Inputs<3> = bridge::same_kind([x_in, bridge::input(weight)?, b])?;
    let has_bias = bias.is_some();
    // Whether a post-op applied the activation: training fuses only what it can differentiate.
    let mut fused = false;
    let y = bridge::run(DenseBackward, inputs, |[x, w, b], tracked| {
        let (x, w, b) = (bridge::dense(x), bridge::dense(w), bridge::dense(b));
        let (x, w) = (operand(&x, precision)?, operand(&w, precision)?);
        let mut y = bridge::Out::new(&[n, o]);
        if !tracked {
            let p = inference(n, i, o, has_bias, activation, precision)?;
            execute_forward(&p.forward, &p.d, &x, &w, &b, &mut y)?;
            fused = p.fused;
            // SAFETY: the product wrote it.
            return Ok((unsafe { y.written() }, None));
        }
        let p = training(n, i, o, has_bias, activation, precision)?;
        execute_forward(&p.forward, &p.d, &x, &w, &b, &mut y)?;
        fused = p.activation.is_some();
        // SAFETY: the product wrote it.
        let y = unsafe { y.written() };
        let keep = p.activation.as_ref().map(|_| y.clone());
        Ok((
            y,
            Some(State {
                prims: p,
                x,
                w,
                y: keep,
            }),
        ))
    })
    .map_err(|e| crate::kernels::counters::fell_back(&e))
    .ok()?;
    Some((y, fused))
}

fn execute_forward(
    forward: &Primitive,
    d: &Descs,
    x: &FlexTensor,
    w: &FlexTensor,
    b: &FlexTensor,
    y: &mut bridge::Out,
) -> Result<()> {
    let mut args = vec![
        (DNNL_ARG_SRC, &d.x, bridge::read(x)),
        (DNNL_ARG_WEIGHTS, &d.w, bridge::read(w)),
        (DNNL_ARG_DST, &d.y, y.ptr()),
    ];
    if let Some(bias) = &d.b {
        args.push((DNNL_ARG_BIAS, bias, bridge::read(b)));
    }
    forward.execute(&args)
}
