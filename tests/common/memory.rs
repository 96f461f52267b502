//! Host memory under `none` versus `barrier`, shared by `memory_flex.rs` and `memory_wgpu.rs`:
//! RSS is process-wide, so each device runs in a test binary (a process) of its own, with no
//! other test beside it. Barrier runs first, so that none cannot profit from the heap barrier
//! left behind.

use burn::prelude::*;

use crate::common::{Copies, busy_net, run};
use ember_trainer::policy::{NoSync, SyncPolicy, Window};

/// Batches of `rows` × 4096 floats in host memory, and a backend that needs far longer per
/// batch than the frontend needs to copy one. Returns the epoch's peak RSS growth, a batch's
/// size, both in MB, and what a failure should show: the deepest queue and the device pool's
/// peak, which tell queued batches from a pool or allocator that grew on its own.
fn growth_mb(
    device: &Device,
    policy: &mut dyn SyncPolicy,
    batches: usize,
    rows: usize,
    width: usize,
) -> (f64, f64, String) {
    let mut data = Copies::new(rows, 4096, batches);
    let batch_mb = data.template.bytes() as f64 / (1024.0 * 1024.0);
    let trace = run(device, busy_net(width, 4), &mut data, policy, 1e-3).unwrap();
    if std::env::var_os("EMBER_TEST_TRACE").is_some() {
        eprintln!("{:?}", trace.epochs[0]);
        for b in &trace.batches {
            eprintln!("{b:?}");
        }
    }
    let epoch = &trace.epochs[0];
    let context = format!(
        "deepest queue {} batch(es), device pool peak {} MB, RSS per batch {:?} MB",
        epoch.max_depth,
        epoch
            .peak_pool_mb
            .map_or("unknown".to_string(), |mb| format!("{mb:.1}")),
        trace
            .batches
            .iter()
            .map(|b| (b.rss as f64 / (1024.0 * 1024.0)).round())
            .collect::<Vec<_>>()
    );
    (epoch.peak_growth_mb, batch_mb, context)
}

pub fn check(device: &Device, batches: usize, rows: usize, width: usize) {
    // Prime the process: wgpu's staging buffers and the allocator's arenas grow over the first
    // batches of a process whatever the policy; the check is about batches queued later.
    growth_mb(device, &mut Window(1), 4, rows, width);
    let (barrier, batch_mb, barrier_context) =
        growth_mb(device, &mut Window(1), batches, rows, width);
    let (none, _, none_context) = growth_mb(device, &mut NoSync, batches, rows, width);
    let queued = batches as f64 * batch_mb;
    assert!(
        none >= 0.5 * queued,
        "none: RSS grew {none:.1} MB, expected at least half of {batches} x {batch_mb:.1} MB \
         ({none_context})"
    );
    assert!(
        barrier <= 3.0 * batch_mb,
        "barrier: RSS grew {barrier:.1} MB, expected at most 3 x {batch_mb:.1} MB \
         ({barrier_context})"
    );
}
