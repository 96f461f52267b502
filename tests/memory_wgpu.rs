//! Queued batches pile up under `none` but not under `barrier`, on wgpu. On lavapipe the
//! device's memory is the process's own, so RSS sees batches queued in the device queue too.

mod common;

#[test]
fn queued_batches_pile_up_under_none_but_not_under_barrier() {
    common::memory::check(&common::wgpu(), 12, 256, 256);
}
