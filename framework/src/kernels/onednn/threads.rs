//! How many of OpenMP's threads a primitive runs on. Debian's oneDNN runs each primitive on an
//! OpenMP team as wide as the machine, which pays for itself on a large product but not on a
//! small one: there the team's wake-up costs more than the work. In the MLP's loop on 2 cores
//! (`DNNL_VERBOSE`, oneDNN 2.6, AVX2 kernels), the `[256, 256]·[256, 10]` product took 0.062 ms
//! a call on two threads and 0.027 on one, and the bias gradient `[1, 256]·[256, 256]` 0.061
//! against 0.005. So a small primitive is made and run on the calling thread alone, through
//! OpenMP's own `omp_set_num_threads`, which binds the thread that calls it.

use std::ffi::c_int;
use std::sync::OnceLock;

/// Products of fewer floating-point operations than this run on one thread. On 2 cores one
/// thread does about 50 GFLOP/s and a team's wake-up costs about 0.04 ms, so two threads
/// gain from about 4 MFLOP on.
pub const ONE_THREAD_BELOW_FLOP: f64 = 4e6;

/// OpenMP's functions in the runtime oneDNN was built with (already loaded with it).
struct OpenMp {
    set_num_threads: unsafe extern "C" fn(c_int),
    get_max_threads: unsafe extern "C" fn() -> c_int,
    _library: libloading::Library,
}

fn open_mp() -> Option<&'static OpenMp> {
    static OPEN_MP: OnceLock<Option<OpenMp>> = OnceLock::new();
    OPEN_MP
        .get_or_init(|| {
            // SAFETY: libgomp is oneDNN's own dependency, loaded with it; these two functions
            // have these C signatures in every OpenMP runtime.
            unsafe {
                let library = libloading::Library::new("libgomp.so.1").ok()?;
                let set_num_threads = *library
                    .get::<unsafe extern "C" fn(c_int)>(b"omp_set_num_threads\0")
                    .ok()?;
                let get_max_threads = *library
                    .get::<unsafe extern "C" fn() -> c_int>(b"omp_get_max_threads\0")
                    .ok()?;
                Some(OpenMp {
                    set_num_threads,
                    get_max_threads,
                    _library: library,
                })
            }
        })
        .as_ref()
}

/// Runs `f` with oneDNN's primitives on the calling thread alone, and restores the team's
/// width after, even if `f` panics. Without the OpenMP runtime (another oneDNN build) it just
/// runs `f`.
pub fn alone<T>(f: impl FnOnce() -> T) -> T {
    let Some(omp) = open_mp() else {
        return f();
    };
    // SAFETY: OpenMP's API, called from this thread for this thread.
    let before = unsafe { (omp.get_max_threads)() };
    if before <= 1 {
        return f();
    }
    struct Restore<'a>(&'a OpenMp, c_int);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            // SAFETY: as above.
            unsafe { (self.0.set_num_threads)(self.1) };
        }
    }
    let _restore = Restore(omp, before);
    // SAFETY: as above.
    unsafe { (omp.set_num_threads)(1) };
    f()
}

/// The width of the team this thread's primitives run on.
#[cfg(test)]
fn width() -> usize {
    // SAFETY: OpenMP's API, called from this thread for this thread.
    open_mp().map_or(1, |omp| unsafe { (omp.get_max_threads)() }.max(1) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alone_runs_on_one_thread_and_restores_the_width_even_after_a_panic() {
        let wide = width();
        assert!(open_mp().is_some(), "libgomp.so.1 did not load");
        assert_eq!(alone(width), 1);
        assert_eq!(width(), wide);
        let panicked = std::panic::catch_unwind(|| alone(|| panic!("inside")));
        assert!(panicked.is_err());
        assert_eq!(width(), wide, "the width is restored after a panic");
    }
}
