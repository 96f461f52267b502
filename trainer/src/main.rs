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
    // glibc's settings reach only threads that have not allocated yet: set them before any.
    ember::kernels::keep_freed_memory();
    cli::run()
}
