//! glibc's allocator, set for training: freed blocks kept for the next step, one arena.

use std::sync::Once;

/// Every layer allocates its outputs and gradients anew each step, megabytes at a time. glibc
/// serves such blocks from fresh `mmap`s and hands them back on free, so each step paid for
/// page faults and the kernel's zeroing of every page (half of a LeNet epoch here). Keeping
/// blocks of up to 32 MiB on the heap, and the heap's free top, lets the next step reuse them.
///
/// That holds for the main heap only: a thread other than the main one (the engine's backend
/// thread, rayon's workers, a data loader's) gets an arena of its own, made of 64 MiB `mmap`ed
/// heaps that glibc unmaps as soon as they empty, whatever the trim threshold. A small
/// ResNet's epoch made and unmapped about 3,600 of them, 6.9 million page faults (18 s of
/// system time). One arena for all threads keeps every block on the main heap; ember's threads
/// allocate a few times per layer, so they hardly contend for its lock.
///
/// A thread keeps the arena it first allocated from, so this must run before a run starts its
/// threads: the `ember` binary calls it first thing in `main`, `Fit::run` before it makes the
/// first batch (whose synthetic rows are drawn on rayon's threads), and opening oneDNN. Later
/// calls do nothing. Without the `onednn` feature, or off glibc, it does nothing.
pub fn keep_freed_memory() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(all(feature = "onednn", target_os = "linux", target_env = "gnu"))]
        // SAFETY: mallopt only changes glibc's thresholds; 32 MiB is its largest mmap threshold.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
            libc::mallopt(libc::M_ARENA_MAX, 1);
        }
    });
}
