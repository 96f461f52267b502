//! Convolutions of any spatial rank (Conv1D, Conv2D) on oneDNN: the forward pass with the bias
//! and the activation fused, the data gradient and the weight and bias gradients; in f32, or
//! under autocast with the input, the weights and the output's gradient read in bf16 (the
//! reorders into the primitives' layouts round them) and every result in f32.

use std::sync::Arc;

use burn::backend::flex::FlexTensor;
use burn::tensor::Tensor;

mod backward;

use backward::{BiasSum, ConvBackward, State, Training};

use super::bridge::{self, Inputs};
use super::eltwise::{self, FromOutput};
use super::format::Format;
use super::layout::Pass;
use super::library::*;
use super::matmul::ColumnSums;
use super::primitive::{Attr, Md, Primitive, Result, forward_prop};
use super::reorder::arrange;
use crate::kernels::eltwise::Eltwise;
use crate::kernels::window::Window;
use crate::precision::Precision;

/// One convolution's configuration: what its primitives are made for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Config {
    input: Vec<usize>,
    weight: Vec<usize>,
    output: Vec<usize>,
    groups: usize,
    bias: bool,
    window: Window,
    /// The input's order in memory.
    src: Format,
    /// What the products read the input, the weights and the output's gradient in.
    precision: Precision,
}

/// The arrays' plain layouts (burn-flex's), or layouts left to oneDNN (`any`).
struct Descs {
    src: Md,
    weights: Md,
    bias: Option<Md>,
    dst: Md,
}

impl Config {
    /// oneDNN's weights: `[groups, out / groups, in / groups, kernel…]` with groups.
    fn weight_dims(&self) -> Vec<usize> {
        if self.groups > 1 {
            let mut dims = vec![self.groups, self.weight[0] / self.groups];
            dims.extend_from_slice(&self.weight[1..]);
            dims
        } else {
            self.weight.clone()
        }
    }

    /// The element type the products read the input, the weights and the output's gradient in.
    fn operands(&self) -> dnnl_data_type_t {
        super::primitive::operands(self.precision)
    }

    /// What the primitives compute in: the activations channels last (oneDNN's convolutions
    /// are as fast there as in their blocked layouts for few channels, faster for the data
    /// gradient, and the layers around them read and write it as it is), the weights in a
    /// layout oneDNN chooses; the input and the weights as the products read them, the output
    /// (and the bias) in f32.
    fn computed(&self) -> Result<Descs> {
        let mut d = self.descs(Md::any)?;
        d.src = Format::ChannelsLast.md_of(self.operands(), &self.input)?;
        d.weights = Md::any_of(self.operands(), &self.weight_dims())?;
        d.dst = Format::ChannelsLast.md(&self.output)?;
        Ok(d)
    }

    /// The output's gradient as the backward passes read it.
    fn diff_dst(&self) -> Result<Md> {
        Format::ChannelsLast.md_of(self.operands(), &self.output)
    }

    fn descs(&self, make: fn(&[usize]) -> Result<Md>) -> Result<Descs> {
        Ok(Descs {
            src: make(&self.input)?,
            weights: make(&self.weight_dims())?,
            bias: if self.bias {
                Some(Md::plain(&self.weight[..1])?)
            } else {
                None
            },
            dst: make(&self.output)?,
        })
    }

    fn padding_right(&self) -> crate::kernels::window::Dims {
        self.window
            .padding_right(&self.input[2..], &self.output[2..])
    }

    fn forward(&self, training: bool, attr: &Attr) -> Result<Primitive> {
        let d = self.computed()?;
        let w = &self.window;
        let prop = forward_prop(training);
        Primitive::describe("a convolution", attr, None, |api, desc| {
            // SAFETY: valid out-pointer, descriptors and dimension arrays.
            unsafe {
                api.dnnl_dilated_convolution_forward_desc_init(
                    desc,
                    prop,
                    dnnl_convolution_direct,
                    &d.src.0,
                    &d.weights.0,
                    d.bias.as_ref().map_or(std::ptr::null(), |b| &b.0),
                    &d.dst.0,
                    w.strides().as_ptr().cast_mut(),
                    w.dilation().as_ptr().cast_mut(),
                    w.padding_left().as_ptr().cast_mut(),
                    self.padding_right().as_ptr().cast_mut(),
                )
            }
        })
    }

    /// burn-flex's side of each array: the input in its order, the output in the order the
    /// primitive chose where that is channels last (else row-major), the rest row-major.
    fn sides(&self, output: Format) -> Result<Descs> {
        let mut d = self.descs(Md::plain)?;
        d.src = self.src.md(&self.input)?;
        d.dst = output.md(&self.output)?;
        Ok(d)
    }

    /// The forward pass on burn-flex's arrays: `x`, `w`, `b` (when there is a bias) into `y`,
    /// and the order `y` is written in.
    fn forward_pass(&self, primitive: Primitive) -> Result<(Pass, Format)> {
        let output = if primitive
            .md(dnnl_query_dst_md)
            .same(&Format::ChannelsLast.md(&self.output)?)
        {
            Format::ChannelsLast
        } else {
            Format::Plain
        };
        let p = self.sides(output)?;
        let mut args = vec![
            (DNNL_ARG_SRC, p.src, Some(dnnl_query_src_md)),
            (DNNL_ARG_WEIGHTS, p.weights, Some(dnnl_query_weights_md)),
            (DNNL_ARG_DST, p.dst, Some(dnnl_query_dst_md)),
        ];
        if let Some(bias) = p.bias {
            args.push((DNNL_ARG_BIAS, bias, None));
        }
        Ok((Pass::new(primitive, args)?, output))
    }
}

fn training(config: &Config, activation: Option<Eltwise>) -> Result<Arc<Training>> {
    bridge::cached(format!("conv train {config:?} {activation:?}"), || {
        let (attr, fused) = eltwise::post_op(activation, true)?;
        let (forward, output) = config.forward_pass(config.forward(true, &attr)?)?;
        // Backward passes are made against a forward pass without post-ops.
        let hint = config.forward(true, &Attr::none()?)?;
        let any = config.computed()?;
        // The gradients come out in f32; the output's gradient is read as the products read.
        let diff_src = Format::ChannelsLast.md(&config.input)?;
        let diff_weights = Md::any(&config.weight_dims())?;
        let diff_dst = config.diff_dst()?;
        // The weight-gradient pass sums the bias's gradient from the gradient it reads: in f32
        // only. Under autocast it is summed from the f32 gradient, as Dense's is.
        let bias_sum = match (config.bias, config.precision, output) {
            (false, ..) => BiasSum::NoBias,
            (true, Precision::F32, _) => BiasSum::WeightPass,
            (true, Precision::Bf16, Format::ChannelsLast) => {
                let channels = config.output[1];
                let rows = config.output.iter().product::<usize>() / channels.max(1);
                BiasSum::Rows(Box::new(ColumnSums::new(rows, channels)?))
            }
            (true, Precision::Bf16, Format::Plain) => BiasSum::Flex,
        };
        let bias_gradient = matches!(bias_sum, BiasSum::WeightPass);
        let plain = config.sides(output)?;
        let w = &config.window;
        let (strides, dilation, left, right) = (
            w.strides(),
            w.dilation(),
            w.padding_left(),
            config.padding_right(),
        );
        let what = "a convolution's data gradient";
        let data = Primitive::describe(what, &Attr::none()?, Some(&hint), |api, desc| {
            // SAFETY: valid out-pointer, descriptors and dimension arrays.
            unsafe {
                api.dnnl_dilated_convolution_backward_data_desc_init(
                    desc,
                    dnnl_convolution_direct,
                    &diff_src.0,
                    &any.weights.0,
                    &diff_dst.0,
                    strides.as_ptr().cast_mut(),
                    dilation.as_ptr().cast_mut(),
                    left.as_ptr().cast_mut(),
                    right.as_ptr().cast_mut(),
                )
            }
        })?;
        let data = Pass::new(
            data,
            vec![
                (
                    DNNL_ARG_DIFF_DST,
                    plain.dst.clone(),
                    Some(dnnl_query_diff_dst_md),
                ),
                (
                    DNNL_ARG_WEIGHTS,
                    plain.weights.clone(),
                    Some(dnnl_query_weights_md),
                ),
                (
                    DNNL_ARG_DIFF_SRC,
                    plain.src.clone(),
                    Some(dnnl_query_diff_src_md),
                ),
            ],
        )?;
        let what = "a convolution's weight gradient";
        let weights = Primitive::describe(what, &Attr::none()?, Some(&hint), |api, desc| {
            // SAFETY: valid out-pointer, descriptors and dimension arrays.
            unsafe {
                api.dnnl_dilated_convolution_backward_weights_desc_init(
                    desc,
                    dnnl_convolution_direct,
                    &any.src.0,
                    &diff_weights.0,
                    any.bias
                        .as_ref()
                        .filter(|_| bias_gradient)
                        .map_or(std::ptr::null(), |b| &b.0),
                    &diff_dst.0,
                    strides.as_ptr().cast_mut(),
                    dilation.as_ptr().cast_mut(),
                    left.as_ptr().cast_mut(),
                    right.as_ptr().cast_mut(),
                )
            }
        })?;
        let mut args = vec![
            (DNNL_ARG_SRC, plain.src, Some(dnnl_query_src_md)),
            (DNNL_ARG_DIFF_DST, plain.dst, Some(dnnl_query_diff_dst_md)),
            (
                DNNL_ARG_DIFF_WEIGHTS,
                plain.weights,
                Some(dnnl_query_diff_weights_md),
            ),
        ];
        if let Some(bias) = plain.bias.filter(|_| bias_gradient) {
            args.push((DNNL_ARG_DIFF_BIAS, bias, None));
        }
        let weights = Pass::new(weights, args)?;
        let activation = match activation {
            Some(a) if fused => Some(FromOutput::new(a, &config.output)?),
            _ => None,
        };
        Ok(Training {
            forward,
            output,
            data,
            weights,
            bias_sum,
            activation,
        })
    })
}

/// The inference pass, with any activation fused.
struct Inference {
    forward: Pass,
    output: Format,
    fused: bool,
}

fn inference(config: &Config, activation: Option<Eltwise>) -> Result<Arc<Inference>> {
    bridge::cached(format!("conv infer {config:?} {activation:?}"), || {
        let (attr, fused) = eltwise::post_op(activation, false)?;
        let (forward, output) = config.forward_pass(config.forward(false, &attr)?)?;
        Ok(Inference {
            forward,
            output,
            fused,
        })
    })
}

/// The convolution of `x` (`[batch, channels, spatial…]`) with `weight` (`[out, in / groups,
/// kernel…]`) and `bias`, then `activation`, through oneDNN, its products in `precision` (the
/// caller asks for bf16 only where oneDNN multiplies it), and whether the activation was
/// applied (fused as a post-op; else the caller applies it); `None` where the tensors are not
/// burn-flex f32 tensors or oneDNN cannot run this configuration (the caller then takes burn's
/// path).
pub fn conv<const D: usize>(
    x: &Tensor<D>,
    weight: &Tensor<D>,
    bias: Option<&Tensor<1>>,
    groups: usize,
    window: Window,
    activation: Option<Eltwise>,
    precision: Precision,
) -> Option<(Tensor<D>, bool)> {
    // One or two spatial axes: burn-flex's gradients, the backward pass's fallback, have no more.
    if !(1..=2).contains(&window.kernel.len()) {
        return None;
    }
    let input = x.dims().to_vec();
    let spatial = window.output(&input[2..])?;
    let weight_dims = weight.dims().to_vec();
    let mut output = vec![input[0], weight_dims[0]];
    output.extend(spatial);
    // The input's order is known once its array is.
    let config = |src| Config {
        input: input.clone(),
        weight: weight_dims.clone(),
        output: output.clone(),
        groups,
        bias: bias.is_some(),
        window,
        src,
        precision,
    };
    let x_in = bridge::input(x)?;
    let b = bridge::bias_or_stand_in(bias, &x_in)?;
    let inputs: Inputs<3> = bridge::same_kind([x_in, bridge::input(weight)?, b])?;
    // Whether a post-op applied the activation: training fuses only what it can differentiate.
    let mut fused = false;
    let y = bridge::run(ConvBackward, inputs, |[x, w, b], tracked| {
        // The input is read in the order it is in (a layer before wrote it channels last, or
        // burn wrote it row-major).
        let config = config(Format::of(x).unwrap_or(Format::Plain));
        let x = arrange(x, config.src)?;
        let (w, b) = (bridge::dense(w), bridge::dense(b));
        let mut y = bridge::Out::new(&config.output);
        if !tracked {
            let prims = inference(&config, activation)?;
            execute_forward(&prims.forward, &x, &w, &b, config.bias, &mut y)?;
            fused = prims.fused;
            // SAFETY: the forward pass wrote it.
            return Ok((unsafe { y.written_in(prims.output) }, None));
        }
        let prims = training(&config, activation)?;
        execute_forward(&prims.forward, &x, &w, &b, config.bias, &mut y)?;
        fused = prims.activation.is_some();
        // SAFETY: the forward pass wrote it.
        let y = unsafe { y.written_in(prims.output) };
        let keep = prims.activation.as_ref().map(|_| y.clone());
        Ok((
            y,
            Some(State {
                prims,
                x,
                w,
                src: config.src,
                has_bias: config.bias,
                window: config.window,
                groups,
                y: keep,
            }),
        ))
    })
    .map_err(|e| crate::kernels::counters::fell_back(&e))
    .ok()?;
    Some((y, fused))
}

fn execute_forward(
    forward: &Pass,
    x: &FlexTensor,
    w: &FlexTensor,
    b: &FlexTensor,
    bias: bool,
    y: &mut bridge::Out,
) -> Result<()> {
    let mut inputs = vec![
        (DNNL_ARG_SRC, bridge::read(x)),
        (DNNL_ARG_WEIGHTS, bridge::read(w)),
    ];
    if bias {
        inputs.push((DNNL_ARG_BIAS, bridge::read(b)));
    }
    forward.run(&inputs, &[(DNNL_ARG_DST, y.ptr())])
}
