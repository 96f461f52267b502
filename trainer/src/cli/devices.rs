//! `ember devices`: each device, whether it opens here (cuda too: whether this build has it,
//! whether the NVIDIA driver is there, and each card), what `auto` picks, and which kernels
//! run ember's layers on the CPU (oneDNN or burn-flex, and why).

use ember::DeviceName;

pub fn run() -> anyhow::Result<()> {
    for name in [DeviceName::Wgpu, DeviceName::Flex, DeviceName::Ndarray] {
        match name.resolve() {
            Ok(picked) => say!("{name:<8} usable    {}", picked.reason),
            Err(err) => say!("{name:<8} unusable  {}", explain(&err)),
        }
    }
    match ember::device::cuda::cards() {
        Ok(cards) if cards.is_empty() => {
            say!("cuda     unusable  the NVIDIA driver is there, but it reports no CUDA card")
        }
        Ok(cards) => {
            for card in cards {
                say!("cuda     usable    {card}");
            }
        }
        Err(err) => say!("cuda     unusable  {}", explain(&err)),
    }
    let auto = DeviceName::Auto.resolve()?;
    say!("auto     -> {}    {}", auto.name, auto.reason);
    let cpu = ember::kernels::status();
    say!("cpu      {:<8}  {}", cpu.kernels.to_string(), cpu.detail);
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
        } => Some(
            "Build ember with it: `scripts/install-cuda-llvm.sh`, then `cargo build --release \
             --features ember-trainer/cuda`; or, on an NVIDIA card, use wgpu (Vulkan): \
             `--device wgpu`",
        ),
        ember::Error::NoCudaDriver { .. } => Some(
            "Install the NVIDIA driver (CUDA 12 or 13), or use another device: `--device wgpu` \
             or `--device flex`",
        ),
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

/// `--devices` (a [`ember::DeviceList`]) or `--device` (one entry, [`ember::DeviceSpec`]),
/// parsed with [`explain`]'s advice: clap prints a value's error itself, before `run` could
/// add anything.
pub fn parse_device<T: std::str::FromStr<Err = ember::Error>>(s: &str) -> Result<T, String> {
    s.parse().map_err(|err| explain(&err))
}
