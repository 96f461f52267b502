//! oneDNN's descriptors of recurrent primitives, found in the library already opened
//! ([`super::super::library`]) by name: the generated table holds the functions the other
//! kernels call, and these six are looked up beside it, once. A library without them (none of
//! oneDNN 2.x lacks them) turns the recurrent path off with the reason, as a missing library
//! turns every path off.

use std::ffi::c_uint;
use std::sync::OnceLock;

use super::super::error::Error;
use super::super::library::*;

type Md = *const dnnl_memory_desc_t;
type Desc = *mut dnnl_rnn_desc_t;

/// `dnnl_vanilla_rnn_forward_desc_init`.
type VanillaForward = unsafe extern "C" fn(
    Desc,
    dnnl_prop_kind_t,
    dnnl_alg_kind_t,
    dnnl_rnn_direction_t,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    c_uint,
    f32,
    f32,
) -> dnnl_status_t;

/// `dnnl_vanilla_rnn_backward_desc_init`.
type VanillaBackward = unsafe extern "C" fn(
    Desc,
    dnnl_prop_kind_t,
    dnnl_alg_kind_t,
    dnnl_rnn_direction_t,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    c_uint,
    f32,
    f32,
) -> dnnl_status_t;

/// `dnnl_lstm_forward_desc_init`.
type LstmForward = unsafe extern "C" fn(
    Desc,
    dnnl_prop_kind_t,
    dnnl_rnn_direction_t,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    c_uint,
) -> dnnl_status_t;

/// `dnnl_lstm_backward_desc_init`.
type LstmBackward = unsafe extern "C" fn(
    Desc,
    dnnl_prop_kind_t,
    dnnl_rnn_direction_t,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    c_uint,
) -> dnnl_status_t;

/// `dnnl_lbr_gru_forward_desc_init`.
type GruForward = unsafe extern "C" fn(
    Desc,
    dnnl_prop_kind_t,
    dnnl_rnn_direction_t,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    c_uint,
) -> dnnl_status_t;

/// `dnnl_lbr_gru_backward_desc_init`.
type GruBackward = unsafe extern "C" fn(
    Desc,
    dnnl_prop_kind_t,
    dnnl_rnn_direction_t,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    Md,
    c_uint,
) -> dnnl_status_t;

/// The six descriptor functions.
pub struct Api {
    pub vanilla_forward: VanillaForward,
    pub vanilla_backward: VanillaBackward,
    pub lstm_forward: LstmForward,
    pub lstm_backward: LstmBackward,
    pub gru_forward: GruForward,
    pub gru_backward: GruBackward,
    _library: libloading::Library,
}

/// The functions, looked up once; the error says why they cannot be.
pub fn api() -> Result<&'static Api, Error> {
    static API: OnceLock<Result<Api, Error>> = OnceLock::new();
    API.get_or_init(open).as_ref().map_err(Error::from)
}

fn open() -> Result<Api, Error> {
    runtime().map_err(Error::from)?;
    let name = library_name();
    let missing = |e: libloading::Error| Error::Load {
        library: name.clone(),
        reason: e.to_string(),
    };
    // SAFETY: the library is open already (its initializers ran); each symbol has the C
    // signature its type spells out, from oneDNN 2.x's `dnnl.h`.
    unsafe {
        let library = libloading::Library::new(&name).map_err(missing)?;
        Ok(Api {
            vanilla_forward: *library
                .get(b"dnnl_vanilla_rnn_forward_desc_init\0")
                .map_err(missing)?,
            vanilla_backward: *library
                .get(b"dnnl_vanilla_rnn_backward_desc_init\0")
                .map_err(missing)?,
            lstm_forward: *library
                .get(b"dnnl_lstm_forward_desc_init\0")
                .map_err(missing)?,
            lstm_backward: *library
                .get(b"dnnl_lstm_backward_desc_init\0")
                .map_err(missing)?,
            gru_forward: *library
                .get(b"dnnl_lbr_gru_forward_desc_init\0")
                .map_err(missing)?,
            gru_backward: *library
                .get(b"dnnl_lbr_gru_backward_desc_init\0")
                .map_err(missing)?,
            _library: library,
        })
    }
}
