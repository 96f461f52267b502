//! What oneDNN is told of a recurrent layer: the layouts of the arrays burn-flex holds, and the
//! descriptors of its forward and backward passes, made through oneDNN's functions.

use super::super::library::*;
use super::super::primitive::{Attr, Md, Primitive, Result};
use super::params::Shape;
use crate::kernels::dispatch::Recurrence;

/// The arrays' layouts in burn-flex's memory, all f32.
pub struct Descs {
    /// `[time, batch, in]` (`tnc`).
    pub src_layer: Md,
    /// `[time, batch, directions·hidden]`.
    pub dst_layer: Md,
    /// A state `[1, directions, batch, hidden]` (`ldnc`).
    pub iter: Md,
    /// The weights as [`params::weights`] lays them out.
    pub weights_layer: Md,
    pub weights_iter: Md,
    /// `[1, directions, bias gates, hidden]` (`ldgo`): zeros for a layer without biases (oneDNN
    /// 2.6 has no training kernel without one).
    pub bias: Md,
}

impl Descs {
    pub fn new(s: &Shape) -> Result<Descs> {
        let (t, n, d, h) = (s.steps, s.batch, s.directions, s.hidden);
        Ok(Descs {
            src_layer: Md::plain(&[t, n, s.input])?,
            dst_layer: Md::plain(&[t, n, d * h])?,
            iter: Md::plain(&[1, d, n, h])?,
            weights_layer: s.weights_md(s.input)?,
            weights_iter: s.weights_md(h)?,
            bias: Md::plain(&[1, d, s.bias_gates(), h])?,
        })
    }
}

/// The primitive that `init` describes with the library's functions, `hint` being the
/// forward pass's descriptor for a backward one, and the layouts it chose for `queries`
/// (`(query, index)`). The descriptor returned lives as long as the primitive.
pub fn make(
    what: &str,
    hint: const_dnnl_primitive_desc_t,
    queries: &[(dnnl_query_t, i32)],
    init: impl FnOnce(&Dnnl, *mut dnnl_rnn_desc_t) -> dnnl_status_t,
) -> Result<(Primitive, const_dnnl_primitive_desc_t, Vec<Md>)> {
    let rt = runtime()?;
    let attr = Attr::none()?;
    let mut desc = std::mem::MaybeUninit::<dnnl_rnn_desc_t>::zeroed();
    check(
        init(&rt.api, desc.as_mut_ptr()),
        &format!("describing {what}"),
    )?;
    // SAFETY: a plain C struct, zeroed and then filled in by `init`.
    let desc = unsafe { desc.assume_init() };
    let mut pd = std::ptr::null_mut();
    // SAFETY: `desc` is an initialized operation descriptor; `pd` is a valid out-pointer.
    check(
        unsafe {
            rt.api.dnnl_primitive_desc_create(
                &mut pd,
                &desc as *const dnnl_rnn_desc_t as *const std::ffi::c_void,
                attr.0,
                rt.engine,
                hint,
            )
        },
        what,
    )?;
    // SAFETY: `pd` is alive (the primitive made next owns it); each descriptor is copied.
    let chosen = queries
        .iter()
        .map(|&(query, index)| {
            Md(unsafe { *rt.api.dnnl_primitive_desc_query_md(pd, query, index) })
        })
        .collect();
    let primitive = Primitive::from_pd(pd, what)?;
    Ok((primitive, pd, chosen))
}

fn direction(s: &Shape) -> dnnl_rnn_direction_t {
    match s.directions {
        1 => dnnl_unidirectional_left2right,
        _ => dnnl_bidirectional_concat,
    }
}

/// The forward pass (`prop`: training or inference), reading weights in the layouts `wl`,
/// `wi` (left to oneDNN).
pub fn forward_desc(
    api: &Dnnl,
    desc: *mut dnnl_rnn_desc_t,
    s: &Shape,
    prop: dnnl_prop_kind_t,
    d: &Descs,
    [wl, wi]: [&Md; 2],
) -> dnnl_status_t {
    let (dir, bias) = (direction(s), &d.bias.0);
    let (src, dst, iter) = (&d.src_layer.0, &d.dst_layer.0, &d.iter.0);
    // SAFETY: every descriptor is initialized and outlives the call.
    unsafe {
        match s.recurrence {
            Recurrence::Tanh | Recurrence::Relu => api.dnnl_vanilla_rnn_forward_desc_init(
                desc,
                prop,
                activation(s),
                dir,
                src,
                iter,
                &wl.0,
                &wi.0,
                bias,
                dst,
                iter,
                0,
                0.0,
                0.0,
            ),
            Recurrence::Lstm => api.dnnl_lstm_forward_desc_init(
                desc, prop, dir, src, iter, iter, &wl.0, &wi.0, bias, dst, iter, iter, 0,
            ),
            Recurrence::Gru => api.dnnl_lbr_gru_forward_desc_init(
                desc, prop, dir, src, iter, &wl.0, &wi.0, bias, dst, iter, 0,
            ),
        }
    }
}

/// The backward pass, reading weights in the layouts `wl`, `wi` and writing their gradients
/// in `dwl`, `dwi` (all left to oneDNN); every other gradient in its array's own layout.
pub fn backward_desc(
    api: &Dnnl,
    desc: *mut dnnl_rnn_desc_t,
    s: &Shape,
    d: &Descs,
    [wl, wi, dwl, dwi]: [&Md; 4],
) -> dnnl_status_t {
    let (dir, bias) = (direction(s), &d.bias.0);
    let (src, dst, iter) = (&d.src_layer.0, &d.dst_layer.0, &d.iter.0);
    let (wl, wi, dwl, dwi) = (&wl.0, &wi.0, &dwl.0, &dwi.0);
    // SAFETY: every descriptor is initialized and outlives the call.
    unsafe {
        match s.recurrence {
            Recurrence::Tanh | Recurrence::Relu => api.dnnl_vanilla_rnn_backward_desc_init(
                desc,
                dnnl_backward,
                activation(s),
                dir,
                src,
                iter,
                wl,
                wi,
                bias,
                dst,
                iter,
                src,
                iter,
                dwl,
                dwi,
                bias,
                dst,
                iter,
                0,
                0.0,
                0.0,
            ),
            Recurrence::Lstm => api.dnnl_lstm_backward_desc_init(
                desc,
                dnnl_backward,
                dir,
                src,
                iter,
                iter,
                wl,
                wi,
                bias,
                dst,
                iter,
                iter,
                src,
                iter,
                iter,
                dwl,
                dwi,
                bias,
                dst,
                iter,
                iter,
                0,
            ),
            Recurrence::Gru => api.dnnl_lbr_gru_backward_desc_init(
                desc,
                dnnl_backward,
                dir,
                src,
                iter,
                wl,
                wi,
                bias,
                dst,
                iter,
                src,
                iter,
                dwl,
                dwi,
                bias,
                dst,
                iter,
                0,
            ),
        }
    }
}

/// Elman's activation (relu with PyTorch's slope 0).
fn activation(s: &Shape) -> dnnl_alg_kind_t {
    match s.recurrence {
        Recurrence::Relu => dnnl_eltwise_relu,
        _ => dnnl_eltwise_tanh,
    }
}
