//! Queued host batches pile up under `none` but not under `barrier`, on flex.

mod common;

#[test]
fn queued_host_batches_pile_up_under_none_but_not_under_barrier() {
    // 8 MiB batches; a step takes several times longer than copying one.
    common::memory::check(&burn::tensor::Device::flex(), 24, 512, 512);
}
