//! Batched matrix products on oneDNN: `a · op(b)` for arrays of `[batch, rows, columns]`, `op`
//! the identity or the transpose of the last two axes (attention's `q · kᵀ` and `weights · v`),
//! and the two products of its backward pass. A transposed operand is read through its
//! strides, never copied; each product runs over the whole batch in one primitive.

use std::sync::Arc;

use burn::backend::Flex;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::backend::flex::FlexTensor;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::Tensor;

use super::bridge::{self, Inputs};
use super::fallback;
use super::library::*;
use super::primitive::{Attr, Md, Primitive, Result};
use super::threads;

/// The layout of a logical `[batch, rows, columns]` operand stored contiguously, as itself or
/// (`transposed`) as `[batch, columns, rows]`.
fn view(batch: usize, rows: usize, columns: usize, transposed: bool) -> Result<Md> {
    let strides = match transposed {
        false => [rows * columns, columns, 1],
        true => [rows * columns, 1, rows],
    };
    Md::strided_of(dnnl_f32, &[batch, rows, columns], &strides)
}

/// `src · weights → dst` over the batch, on one thread where it is small.
fn product(src: &Md, weights: &Md, dst: &Md, flop: f64) -> Result<Primitive> {
    let describe = || {
        Primitive::describe(
            "a batched matrix product",
            &Attr::none()?,
            None,
            |api, desc| {
                // SAFETY: valid out-pointer and descriptors.
                unsafe {
                    api.dnnl_matmul_desc_init(desc, &src.0, &weights.0, std::ptr::null(), &dst.0)
                }
            },
        )
    };
    if flop < threads::ONE_THREAD_BELOW_FLOP {
        Primitive::alone(describe)
    } else {
        describe()
    }
}

/// One product's primitive and its three layouts.
struct Product {
    primitive: Primitive,
    src: Md,
    weights: Md,
    dst: Md,
}

impl Product {
    fn new(src: Md, weights: Md, dst: Md, flop: f64) -> Result<Product> {
        Ok(Product {
            primitive: product(&src, &weights, &dst, flop)?,
            src,
            weights,
            dst,
        })
    }

    /// Runs it on `src` and `weights` (each stored contiguously as its layout reads it).
    fn run(&self, src: &FlexTensor, weights: &FlexTensor, dims: &[usize]) -> Result<FlexTensor> {
        let mut dst = bridge::Out::new(dims);
        self.primitive.execute(&[
            (DNNL_ARG_SRC, &self.src, bridge::read(src)),
            (DNNL_ARG_WEIGHTS, &self.weights, bridge::read(weights)),
            (DNNL_ARG_DST, &self.dst, dst.ptr()),
        ])?;
        // SAFETY: the product above wrote it.
        Ok(unsafe { dst.written() })
    }
}

/// The sizes of one product: `a [batch, m, k] · op(b) [batch, k, n]`, `b` stored transposed
/// (`[batch, n, k]`) where `tb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    tb: bool,
}

impl Shape {
    fn flop(&self) -> f64 {
        2.0 * (self.batch * self.m * self.k * self.n) as f64
    }

    /// `b`'s stored dimensions.
    fn b_stored(&self) -> [usize; 3] {
        match self.tb {
            true => [self.batch, self.n, self.k],
            false => [self.batch, self.k, self.n],
        }
    }
}

fn forward(s: Shape) -> Result<Arc<Product>> {
    bridge::cached(format!("batched forward {s:?}"), || {
        let Shape { batch, m, k, n, tb } = s;
        Product::new(
            view(batch, m, k, false)?,
            view(batch, k, n, tb)?,
            Md::plain(&[batch, m, n])?,
            s.flop(),
        )
    })
}

/// The gradients' products: of `a`, then of `b` as stored.
struct Gradient {
    a: Product,
    b: Product,
}

fn gradient(s: Shape) -> Result<Arc<Gradient>> {
    bridge::cached(format!("batched backward {s:?}"), || {
        let Shape { batch, m, k, n, tb } = s;
        let flop = s.flop();
        // dA = dY · op(b)ᵀ, op(b)ᵀ read from b through its strides.
        let a = Product::new(
            view(batch, m, n, false)?,
            view(batch, n, k, !tb)?,
            Md::plain(&[batch, m, k])?,
            flop,
        )?;
        // dB = Aᵀ · dY; stored transposed, dBᵀ = dYᵀ · A.
        let b = match tb {
            false => Product::new(
                view(batch, k, m, true)?,
                view(batch, m, n, false)?,
                Md::plain(&[batch, k, n])?,
                flop,
            )?,
            true => Product::new(
                view(batch, n, m, true)?,
                view(batch, m, k, false)?,
                Md::plain(&[batch, n, k])?,
                flop,
            )?,
        };
        Ok(Gradient { a, b })
    })
}

#[derive(Clone)]
struct State {
    shape: Shape,
    a: FlexTensor,
    b: FlexTensor,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oneDNN batched product")
    }
}

#[derive(Debug)]
struct BatchedBackward;

impl Backward<Flex, 2> for BatchedBackward {
    type State = State;

    fn backward(self, ops: Ops<State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [pa, pb] = ops.parents;
        let dy = bridge::dense(&grads.consume::<Flex>(&ops.node));
        let State { shape, a, b } = ops.state;
        let Shape { batch, m, k, .. } = shape;
        let products = gradient(shape);
        // burn-flex's products of the same arrays, where oneDNN fails.
        let swapped = |t: &FlexTensor| Flex::float_swap_dims(t.clone(), 1, 2);
        let logical_b = match shape.tb {
            true => swapped(&b),
            false => b.clone(),
        };
        if let Some(pa) = pa {
            let da = fallback::or_flex(
                || products.clone()?.a.run(&dy, &b, &[batch, m, k]),
                || Flex::float_matmul(dy.clone(), swapped(&logical_b)),
            );
            grads.register::<Flex>(pa.id, da);
        }
        if let Some(pb) = pb {
            let db = fallback::or_flex(
                || {
                    let p = products.clone()?;
                    match shape.tb {
                        false => p.b.run(&a, &dy, &shape.b_stored()),
                        true => p.b.run(&dy, &a, &shape.b_stored()),
                    }
                },
                || {
                    let db = Flex::float_matmul(swapped(&a), dy.clone());
                    match shape.tb {
                        true => swapped(&db),
                        false => db,
                    }
                },
            );
            grads.register::<Flex>(pb.id, db);
        }
    }
}

/// `a · op(b)` for `a [batch, m, k]` and `b` stored as `[batch, k, n]` (or `[batch, n, k]`
/// where `transpose_b`): `[batch, m, n]`, through oneDNN; `None` where the tensors are not
/// burn-flex f32 tensors, their sizes do not fit, or oneDNN cannot run it.
pub fn batched_matmul(a: &Tensor<3>, b: &Tensor<3>, transpose_b: bool) -> Option<Tensor<3>> {
    let ([batch, m, k], [batch_b, b1, b2]) = (a.dims(), b.dims());
    let (k_b, n) = if transpose_b { (b2, b1) } else { (b1, b2) };
    if batch != batch_b || k != k_b || [batch, m, k, n].contains(&0) {
        return None;
    }
    let shape = Shape {
        batch,
        m,
        k,
        n,
        tb: transpose_b,
    };
    let inputs: Inputs<2> = bridge::same_kind([bridge::input(a)?, bridge::input(b)?])?;
    bridge::run(BatchedBackward, inputs, |[a, b], tracked| {
        let (a, b) = (bridge::dense(a), bridge::dense(b));
        let y = forward(shape)?.run(&a, &b, &[batch, m, n])?;
        Ok((y, tracked.then_some(State { shape, a, b })))
    })
    .map_err(|e| crate::kernels::counters::fell_back(&e))
    .ok()
}
