//! The `ember` command line.

mod cli;

fn main() -> std::process::ExitCode {
    // Mesa's Vulkan drivers (lavapipe included) print "XDG_RUNTIME_DIR is invalid or not set"
    // once per device probe when the variable is missing, as it is under CI and in containers.
    // ember opens no window, so any writable directory will do.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // SAFETY: no other thread exists yet this early in main.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir()) };
    }
    // burn puts what it makes without being given a device on its default one: the optimizer
    // state a checkpoint restores (burn-optim's `load_record`) lands there until the first step
    // moves it to each parameter's device. In a build with `cuda` that default is the card, so
    // resuming an Adam run on flex opened CUDA, and panicked on a machine without a driver
    // (issue 62). ember names every device it computes on, so burn's default is the CPU's.
    // SAFETY: as above, no other thread exists yet.
    unsafe { std::env::set_var("BURN_DEVICE", "flex") };
    // A panic on the engine's backend thread, a replica's or a wait on a remote device is
    // caught there and reported as the run's error, its message included: the default hook's
    // lines said it a first time, in burn's words and with a backtrace where RUST_BACKTRACE
    // asks for one, before the error (a remote server killed under `--devices
    // flex,remote:…`, issue 62). They still print where RUST_BACKTRACE asks, and for every
    // other thread.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let reported = std::thread::current().name().is_some_and(|name| {
            name == "ember-backend"
                || name.starts_with("ember-replica-")
                || name == ember::device::remote::WAITER
        });
        let asked = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
        if !reported || asked {
            default_hook(info);
        }
    }));
    // glibc's settings reach only threads that have not allocated yet: set them before any.
    ember::kernels::keep_freed_memory();
    cli::run()
}
