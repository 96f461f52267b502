//! `ember devices`: each device, whether it opens here (cuda too, which this build lacks), and
//! what `auto` picks.

use ember::DeviceName;

pub fn run() -> anyhow::Result<()> {
    for name in [DeviceName::Wgpu, DeviceName::Flex, DeviceName::Ndarray] {
        match name.resolve() {
            Ok(picked) => say!("{name:<8} usable    {}", picked.reason),
            Err(err) => match advice(&err) {
                Some(advice) => say!("{name:<8} unusable  {err}. {advice}"),
                None => say!("{name:<8} unusable  {err}"),
            },
        }
    }
    say!("cuda     unusable  {}", ember::device_list::CUDA_MISSING);
    let auto = DeviceName::Auto.resolve()?;
    say!("auto     -> {}    {}", auto.name, auto.reason);
    Ok(())
}

/// What the user can do about a library error, where the command line knows. The library's
/// error says what went wrong; the flags and packages to reach for are the binary's to say.
pub fn advice(err: &ember::Error) -> Option<&'static str> {
    match err {
        ember::Error::NoWgpuAdapter => Some(
            "Install a Vulkan driver (on a CPU-only Debian or Ubuntu machine: `apt-get install \
             -y mesa-vulkan-drivers`, which provides lavapipe), or pass `--device flex`",
        ),
        _ => None,
    }
}
