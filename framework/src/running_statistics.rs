//! Running statistics (BatchNorm's) as burn keeps them: each update is held per thread until
//! that thread reads the statistics again, so a caller that changes threads or writes the
//! values settles them first. Any module's, with no layer of ember's in view, so that loading
//! a file ([`crate::io::safetensors`]) and data parallelism ([`crate::parallel`]) take it from
//! here rather than from the layers above them.

/// Takes every running-statistics update (BatchNorm's) that burn still holds per thread into
/// `net`'s values. burn keeps each update per thread until that thread reads the statistics
/// again (or a `valid()`), so updates made by a thread that is gone stayed aside, and a load
/// that writes the values under them was undone at the next read. Data parallelism's replicas
/// call it after each step (the replicas' mean, as Gluon averages the devices' copies), and
/// [`load_parameters`](crate::io::safetensors::load_parameters) before it writes.
pub fn settle_running_statistics<M: burn::module::Module>(net: &M) {
    drop(net.valid());
}
