//! `ember devices`: each device, whether it opens here (cuda too, which this build lacks), and
//! what `auto` picks.

use ember::DeviceName;

pub fn run() -> anyhow::Result<()> {
    for name in [DeviceName::Wgpu, DeviceName::Flex, DeviceName::Ndarray] {
        match name.resolve() {
            Ok(picked) => say!("{name:<8} usable    {}", picked.reason),
            Err(err) => say!("{name:<8} unusable  {}", explain(&err)),
        }
    }
    let cuda = ember::device_list::cuda_missing("cuda");
    say!("cuda     unusable  {}", explain(&cuda));
    let auto = DeviceName::Auto.resolve()?;
    say!("auto     -> {}    {}", auto.name, auto.reason);
    Ok(())
}

/// What the user can do about a library error, where the command line knows. The library's
/// error says what went wrong; the flags and packages to reach for are the binary's to say.
pub fn advice(err: &ember::Error) -> Option<&'static str> {
    match err.root() {
        ember::Error::NoWgpuAdapter => Some(
            "Install a Vulkan driver (on a CPU-only Debian or Ubuntu machine: `apt-get install \
             -y mesa-vulkan-drivers`, which provides lavapipe), or pass `--device flex`",
        ),
        ember::Error::NotBuilt {
            backend: "remote", ..
        } => Some(
            "Build ember with `cargo build --release --features ember-trainer/remote` for \
             `ember serve` and `--devices remote:ws://HOST:PORT`",
        ),
        ember::Error::NotBuilt {
            backend: "CUDA", ..
        } => Some("On NVIDIA cards use wgpu (Vulkan): `--device wgpu`"),
        ember::Error::Unreachable { .. } => {
            Some("Is `ember serve` running there, and listening on that port?")
        }
        _ => None,
    }
}

/// A library error as the command line says it: the error, then [`advice`] where there is some.
pub fn explain(err: &ember::Error) -> String {
    match advice(err) {
        Some(advice) => format!("{err}. {advice}"),
        None => err.to_string(),
    }
}

/// `--devices`, parsed with [`explain`]'s advice: clap prints a value's error itself, before
/// `run` could add anything.
pub fn device_list(s: &str) -> Result<ember::DeviceList, String> {
    s.parse().map_err(|err| explain(&err))
}
