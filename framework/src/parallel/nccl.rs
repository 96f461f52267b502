//! Across ranks on NVIDIA cards (the `cuda` and `mpi` features): each rank's gradients are
//! summed where they are, on its card, by NCCL, as PyTorch's DDP does with its NCCL backend,
//! rather than read back and summed by MPI on the host. MPI still starts the job and carries
//! NCCL's unique id: rank 0 mints it, MPI broadcasts it, and every rank joins the communicator
//! on its own card.
//!
//! burn's own collective cannot cross processes (burn-cubecl mints its id privately), so this
//! reaches the gradients' buffer through burn's CubeCL backend: the flattened gradients are one
//! fresh tensor (`Tensor::cat` writes a new buffer), resolved out of kernel fusion to its CUDA
//! allocation, whose address NCCL sums in place. burn's stream is not public, so the host
//! orders the two: it waits for burn's work on the device before the all-reduce, and for NCCL's
//! before burn reads the sums.

use std::cell::RefCell;
use std::sync::Arc;

use burn::backend::Cube;
use burn::tensor::{DType, Device, Tensor};
use burn_cubecl::cubecl::cuda::CudaRuntime;
use burn_cubecl::{CubeBackend, CubeDevice};
use cubecl_runtime::runtime::Runtime;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaContext, CudaStream, DevicePtrMut, DeviceSlice, SyncOnDrop};
use cudarc::nccl::{Comm, Id, ReduceOp};

use crate::error::{Error, Result};

type CudaServer = <CudaRuntime as Runtime>::Server;

thread_local! {
    /// The communicator of the thread that sums, with its card's ordinal: made at its first
    /// sum, which every rank reaches at the same step.
    static COMM: RefCell<Option<(usize, Comm)>> = const { RefCell::new(None) };
}

/// The card this rank would sum on, as `HOST cuda:N` (two ranks on one card is what NCCL
/// refuses), or why it cannot sum through NCCL: not a CUDA card, or NCCL's library does not
/// load.
pub(super) fn card(device: &Device) -> std::result::Result<String, String> {
    let Some(ordinal) = crate::device::cuda::ordinals(std::slice::from_ref(device))[0] else {
        return Err(format!("{device:?} is not a CUDA card"));
    };
    crate::device::cuda::nccl()?;
    let host = mpi::environment::processor_name().unwrap_or_else(|_| "?".to_string());
    Ok(format!("{host} cuda:{ordinal}"))
}

fn failed(what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Distributed(format!("NCCL: {what}: {e:?}"))
}

/// Sums `flat` over the ranks, in place, on this rank's card. `flat` must be a buffer of its
/// own (a `Tensor::cat`), f32, on `cuda:ordinal`; every rank calls this at the same steps.
/// Returns the seconds of the all-reduce itself, from its call to its end on the card: not the
/// wait for burn's kernels before it, nor the communicator's start at the first call.
pub(super) fn sum_in_place(flat: &Tensor<1>, rank: usize, size: usize) -> Result<f64> {
    let fused = flat
        .clone()
        .try_into_primitive::<Cube>()
        .map_err(|e| failed("the gradients are not on burn's CubeCL backend", e))?;
    let client = fused.client.clone();
    let cube = client.resolve_tensor_float::<CubeBackend>(fused);
    let CubeDevice::Cuda(card) = &cube.device else {
        return Err(failed("the gradients are not on a CUDA card", &cube.device));
    };
    let ordinal = card.index;
    if cube.dtype != DType::F32 || !cube.is_contiguous() {
        return Err(failed("the gradients are not one f32 buffer", cube.dtype));
    }
    let len = flat.dims()[0];
    let resource = cube
        .client
        .get_resource::<CudaServer>(cube.handle.clone())
        .map_err(|e| failed("the gradients' buffer", e))?;
    let buffer = resource.resource();
    if (buffer.size as usize) < len * size_of::<f32>() {
        return Err(failed(
            "the gradients' buffer is smaller than they are",
            (buffer.size, len),
        ));
    }
    // burn's kernels that wrote the gradients are done before NCCL reads them.
    flat.device()
        .sync()
        .map_err(|e| failed("waiting for the gradients", e))?;
    let seconds = COMM.with(|cell| -> Result<f64> {
        let mut cell = cell.borrow_mut();
        if cell.as_ref().is_none_or(|(on, _)| *on != ordinal) {
            *cell = Some((ordinal, join(ordinal, rank, size)?));
        }
        let (_, comm) = cell.as_ref().expect("made above");
        comm.context()
            .bind_to_thread()
            .map_err(|e| failed("binding the card", e))?;
        let mut sums = Buffer {
            ptr: buffer.ptr,
            len,
            stream: comm.stream(),
        };
        let started = std::time::Instant::now();
        comm.all_reduce_in_place(&mut sums, &ReduceOp::Sum)
            .map_err(|e| failed("all-reduce", e))?;
        // NCCL's sums are in the buffer before burn reads it.
        comm.stream()
            .synchronize()
            .map_err(|e| failed("waiting for the all-reduce", e))?;
        Ok(started.elapsed().as_secs_f64())
    });
    drop(resource);
    seconds
}

/// This rank's communicator on `cuda:ordinal`: rank 0 mints NCCL's id and MPI broadcasts it.
fn join(ordinal: usize, rank: usize, size: usize) -> Result<Comm> {
    use mpi::traits::{Communicator, Root};
    let world = mpi::topology::SimpleCommunicator::world();
    let mut id = [0u8; 128];
    if rank == 0 {
        let minted = Id::new().map_err(|e| failed("minting the job's id", e))?;
        for (byte, c) in id.iter_mut().zip(minted.internal()) {
            *byte = *c as u8;
        }
    }
    world.process_at_rank(0).broadcast_into(&mut id[..]);
    let id = Id::uninit(id.map(|b| b as std::ffi::c_char));
    // The card's primary context, which burn's CUDA runtime uses too, current on this thread.
    let context = CudaContext::new(ordinal).map_err(|e| failed("opening the card", e))?;
    let stream = context
        .new_stream()
        .map_err(|e| failed("a stream for the sums", e))?;
    Comm::from_rank(stream, rank, size, id).map_err(|e| failed("joining the ranks", e))
}

/// A buffer of burn's on the card, as NCCL's all-reduce takes it: the address, borrowed while
/// the caller holds burn's resource.
struct Buffer {
    ptr: CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
}

impl DeviceSlice<f32> for Buffer {
    fn len(&self) -> usize {
        self.len
    }

    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl DevicePtrMut<f32> for Buffer {
    fn device_ptr_mut<'a>(&'a mut self, _: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        // The host waited for burn's writes before, and waits for NCCL's after.
        (self.ptr, SyncOnDrop::Sync(None))
    }
}
