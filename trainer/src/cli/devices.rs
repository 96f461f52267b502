//! `ember devices`: each device, whether it opens here (cuda too: whether this build has it,
//! whether the NVIDIA driver is there, and each card), what `auto` picks, which kernels run
//! ember's layers on the CPU (oneDNN or burn-flex, and why), and whether the CPU has bf16
//! instructions. Also the device names that every device flag's help lists, and the advice
//! that the errors of those flags carry.

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
    let host = ember::device::cpu::Cpu::here();
    match host.has_bf16() {
        true => say!(
            "cpu      bf16      {} has bf16 instructions: {}; {}",
            host.model,
            host.bf16.join(", "),
            match cpu.bf16 {
                true => "--precision bf16 runs Dense and the convolutions on oneDNN in bf16",
                false => "ember's kernels here do not use them, so --precision bf16 is refused",
            }
        ),
        false => say!(
            "cpu      no bf16   {} has no bf16 instructions ({})",
            host.model,
            ember::device::cpu::BF16_INSTRUCTIONS
        ),
    }
    Ok(())
}

/// A device flag's help: `what`, then the names it takes ([`names`]) and what `auto` picks.
pub fn help(what: &str, indexed: bool) -> String {
    format!(
        "{what}: {}; `auto` is cuda on an NVIDIA card where the build has it, else wgpu on a GPU \
         card, otherwise flex",
        names(indexed)
    )
}

/// The device names a flag takes, for its help, from ember's own list: `auto, wgpu, flex,
/// ndarray or cuda`. `indexed`, for a flag that takes a device spec (`wgpu:1`) and not only a
/// name, adds `wgpu:N (the N-th adapter)` and `cuda:N (the N-th card)` after their names.
pub fn names(indexed: bool) -> String {
    let mut names = Vec::new();
    for name in DeviceName::ALL {
        names.push(name.to_string());
        if let Some(counted) = name.indexed_by().filter(|_| indexed) {
            names.push(format!("{name}:N (the N-th {counted})"));
        }
    }
    let last = names.pop().expect("ember names its devices");
    format!("{} or {last}", names.join(", "))
}

/// What the user can do about a library error, where the command line knows. The library's
/// error says what went wrong; the packages to reach for are the binary's to say. The device
/// to name instead is said without a flag: the one that named it may be `--device`,
/// `--devices`, `bench --gpu` or `--cpu` (`--device` was advised to `bench --gpu cuda`).
pub fn advice(err: &ember::Error) -> Option<&'static str> {
    match err.root() {
        ember::Error::NoWgpuAdapter => Some(
            "Install a Vulkan driver (on a CPU-only Debian or Ubuntu machine: `apt-get install \
             -y mesa-vulkan-drivers`, which provides lavapipe), or name flex instead",
        ),
        ember::Error::NotBuilt {
            backend: "remote", ..
        } => Some(
            "Build the `ember` binary with its default features (`cargo build --release`), or \
             add `--features ember-trainer/remote`, for `ember serve` and `--devices \
             remote:ws://HOST:PORT`",
        ),
        ember::Error::NotBuilt {
            backend: "CUDA", ..
        } => Some(
            "Build ember with it: `scripts/install-cuda-llvm.sh`, then `cargo build --release \
             --features ember-trainer/cuda`; or, on an NVIDIA card, name wgpu (Vulkan) \
             instead",
        ),
        ember::Error::NoCudaDriver { .. } => Some(
            "Install the NVIDIA driver (CUDA 12 or 13), or name another device instead: wgpu \
             or flex",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_texts_list_ember_s_device_names_with_the_indexed_forms_after_theirs() {
        assert_eq!(names(false), "auto, wgpu, flex, ndarray or cuda");
        assert_eq!(
            names(true),
            "auto, wgpu, wgpu:N (the N-th adapter), flex, ndarray, cuda or cuda:N (the N-th card)"
        );
    }
}
