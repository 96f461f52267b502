//! Queued host batches pile up under `none` but not under `barrier`, on flex.

mod common;

#[test]
fn queued_host_batches_pile_up_under_none_but_not_under_barrier() {
    common::memory::check(&burn::tensor::Device::flex(), 24, 384);
}
