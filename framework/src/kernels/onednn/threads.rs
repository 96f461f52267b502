//! How many of OpenMP's threads a primitive runs on. Debian's oneDNN runs each primitive on an
//! OpenMP team as wide as the machine, which pays for itself on a large product but not on a
//! small one: there the team's wake-up costs more than the work. In the MLP's loop on 2 cores
//! (`DNNL_VERBOSE`, oneDNN 2.6, AVX2 kernels), the `[256, 256]·[256, 10]` product took 0.062 ms
//! a call on two threads and 0.027 on one, and the bias gradient `[1, 256]·[256, 256]` 0.061
//! against 0.005. So a small primitive is made and run on the calling thread alone, through
//! OpenMP's own `omp_set_num_threads`, which binds the thread that calls it.
//!
//! Every thread that runs a primitive on more than one thread gets a team of its own from GNU
//! OpenMP, which lives as long as that thread. Once the process holds more of OpenMP's threads
//! than the machine has CPUs, libgomp cuts every waiting thread's spin from 300,000 pauses (8.3
//! ms on a 2-core AMD EPYC) to 100, and its threads sleep in the kernel between two primitives
//! and must be woken for the next. A training loop's frontend that ran one primitive (inferring
//! sizes, evaluating after an epoch) did that to its backend's team for the rest of the run:
//! [`release_team`] ends such a team.

use std::ffi::c_int;
#[cfg(test)]
use std::ffi::c_void;
use std::sync::OnceLock;

/// Products of fewer floating-point operations than this run on one thread. On 2 cores one
/// thread does about 50 GFLOP/s and a team's wake-up costs about 0.04 ms, so two threads
/// gain from about 4 MFLOP on. On a Zen 5 with AVX-512 and the backend's team kept awake, the
/// team won per call down to 0.17 MFLOP, but whole epochs did not follow (LeNet 5 % slower
/// with every product on the team, the MLP 2 % faster: bench/RESULTS.md, 2026-11-27).
pub const ONE_THREAD_BELOW_FLOP: f64 = 4e6;

/// OpenMP's functions in the runtime oneDNN was built with (already loaded with it).
struct OpenMp {
    set_num_threads: unsafe extern "C" fn(c_int),
    get_max_threads: unsafe extern "C" fn() -> c_int,
    /// OpenMP 5.0's `omp_pause_resource_all` (GCC 9 on): absent from older runtimes.
    pause_resource_all: Option<unsafe extern "C" fn(c_int) -> c_int>,
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
                let pause_resource_all = library
                    .get::<unsafe extern "C" fn(c_int) -> c_int>(b"omp_pause_resource_all\0")
                    .ok()
                    .map(|f| *f);
                Some(OpenMp {
                    set_num_threads,
                    get_max_threads,
                    pause_resource_all,
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
    at_most(1, f)
}

/// Runs `f` with oneDNN's primitives on teams of at most `width` threads (at least one), and
/// restores the width after, even if `f` panics. Without the OpenMP runtime it just runs `f`.
pub fn at_most<T>(width: usize, f: impl FnOnce() -> T) -> T {
    let Some(omp) = open_mp() else {
        return f();
    };
    // SAFETY: OpenMP's API, called from this thread for this thread.
    let before = unsafe { (omp.get_max_threads)() };
    let width = c_int::try_from(width.max(1)).unwrap_or(c_int::MAX);
    if before <= width {
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
    unsafe { (omp.set_num_threads)(width) };
    f()
}

/// The widest OpenMP team beside which [`one_pool`] keeps burn-flex's work on one thread: the
/// machines it was measured on (2 cores). On a wider one, burn-flex's products, reductions
/// and element-wise work that oneDNN does not take would give up more threads, which may cost
/// more than the team's waits: unmeasured, so they keep rayon's pool.
pub const ONE_POOL_UP_TO_WIDTH: usize = 2;

/// Runs `f` on a thread that is a rayon pool of its own, named as the calling thread, which
/// waits for it: burn-flex's parallel work in `f` runs on that thread, serially, rather than
/// on rayon's global pool beside oneDNN's team, whose threads it took off their cores
/// (docs/allocator-and-threads.md). The thread's team ends with `f`, as the thread does.
pub fn one_pool<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let name = std::thread::current().name().map(str::to_string);
    let mut builder = rayon::ThreadPoolBuilder::new().num_threads(1);
    if let Some(name) = name {
        builder = builder.thread_name(move |_| name.clone());
    }
    match builder.build() {
        Ok(pool) => pool.install(|| {
            let out = f();
            release_team();
            out
        }),
        // No thread to be had: burn-flex's work goes to rayon's global pool, as elsewhere.
        Err(_) => f(),
    }
}

/// The widest team this thread's primitives would run on now (1 without OpenMP).
pub fn width() -> usize {
    // SAFETY: OpenMP's API, called from this thread for this thread.
    open_mp().map_or(1, |omp| unsafe { (omp.get_max_threads)() }.max(1) as usize)
}

/// OpenMP's `omp_pause_soft`.
const OMP_PAUSE_SOFT: c_int = 1;

/// Ends the calling thread's OpenMP team, if it has one: its threads exit (libgomp joins
/// them), they no longer count against the machine's CPUs, and the next wide primitive this
/// thread runs starts a team again. Call it on a thread that ran primitives and will not run
/// more for a while, such as a training loop's frontend. It does nothing inside a primitive,
/// where this process has not opened oneDNN, and without the function (an OpenMP older than
/// 5.0). The runtime is the one named `libgomp.so.1`, GNU OpenMP, which Debian's oneDNN is
/// built with; LLVM's libomp, where installed under that name, pauses every thread's team
/// instead, and each starts again at its next primitive.
pub fn release_team() {
    if !super::library::opened() {
        return;
    }
    if let Some(pause) = open_mp().and_then(|omp| omp.pause_resource_all) {
        // SAFETY: OpenMP's API, called from this thread; on the host, libgomp frees the
        // calling thread's pool only, and refuses (returns -1) inside a parallel region.
        unsafe { pause(OMP_PAUSE_SOFT) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The threads of this process named `name` (a thread libgomp starts takes the name of the
    /// thread whose team it joins).
    fn named(name: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter(|task| {
                let comm = task.as_ref().unwrap().path().join("comm");
                std::fs::read_to_string(comm).is_ok_and(|c| c.trim_end() == name)
            })
            .count()
    }

    /// [`named`] once it is at most `most`, or after a second: a joined thread leaves
    /// `/proc/self/task` a moment after `pthread_join` returns.
    fn named_within(name: &str, most: usize) -> usize {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        loop {
            let count = named(name);
            if count <= most || std::time::Instant::now() > deadline {
                return count;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn release_team_ends_the_calling_threads_team_only() {
        // It acts only where oneDNN is open.
        assert!(
            super::super::library::runtime().is_ok(),
            "oneDNN did not open"
        );
        assert!(open_mp().is_some_and(|omp| omp.pause_resource_all.is_some()));
        // SAFETY: libgomp's entry point for `#pragma omp parallel num_threads(2)`; the
        // function runs on both threads and does nothing.
        let parallel = unsafe {
            let library = libloading::Library::new("libgomp.so.1").unwrap();
            let f = *library
                .get::<unsafe extern "C" fn(extern "C" fn(*mut c_void), *mut c_void, u32, u32)>(
                    b"GOMP_parallel\0",
                )
                .unwrap();
            std::mem::forget(library);
            f
        };
        extern "C" fn nothing(_: *mut c_void) {}
        // SAFETY: as above.
        let team = move || unsafe { parallel(nothing, std::ptr::null_mut(), 2, 0) };
        let on = |name: &str, f: Box<dyn FnOnce() -> (usize, usize) + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .unwrap()
                .join()
                .unwrap()
        };
        let (kept_before, kept_after) = on(
            "omp-kept",
            Box::new(move || {
                team();
                let before = named("omp-kept");
                let (with, without) = on(
                    "omp-released",
                    Box::new(move || {
                        team();
                        let with = named("omp-released");
                        release_team();
                        (with, named_within("omp-released", 1))
                    }),
                );
                assert_eq!(with, 2, "the thread and the one its team started");
                assert_eq!(without, 1, "the team's thread is gone");
                (before, named("omp-kept"))
            }),
        );
        assert_eq!(kept_before, 2);
        assert_eq!(kept_after, 2, "another thread's team is left as it was");
    }

    #[test]
    fn at_most_narrows_the_team_and_never_widens_it() {
        let wide = width();
        assert!(wide >= 2, "one core: nothing to narrow");
        assert_eq!(at_most(wide - 1, width), wide - 1);
        assert_eq!(at_most(wide + 1, width), wide, "never wider than it was");
        assert_eq!(at_most(0, width), 1);
        assert_eq!(width(), wide);
    }

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
