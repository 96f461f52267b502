//! Devices by name: `auto`, `wgpu`, `flex`, `ndarray`, and `cuda` where the build has it.
//!
//! ```
//! use ember::device::DeviceName;
//! let picked = DeviceName::Flex.resolve().unwrap();
//! assert_eq!(picked.name, DeviceName::Flex);
//! ```

use std::fmt;
use std::str::FromStr;

use burn::tensor::{Device, DeviceKind, DeviceType};

use crate::error::{Error, Result};

/// A device as a user names it on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceName {
    /// cuda on an NVIDIA card where the build has it, else wgpu on a GPU card, else flex.
    Auto,
    /// burn's wgpu backend: asynchronous, on a GPU or on lavapipe.
    Wgpu,
    /// burn's flex backend: pure Rust, on the CPU, executes on the calling thread.
    Flex,
    /// burn's ndarray backend (deprecated by burn in favour of flex), on the CPU.
    Ndarray,
    /// A device of another process or machine through burn-remote, named with its address in
    /// a device list (`remote:ws://host:port`, see [`crate::device_list`]).
    Remote,
    /// burn's CUDA backend on an NVIDIA card, with the `cuda` feature ([`crate::cuda`]).
    Cuda,
}

impl DeviceName {
    /// Every name, in the order `ember devices` lists them.
    pub const ALL: [DeviceName; 5] = [
        Self::Auto,
        Self::Wgpu,
        Self::Flex,
        Self::Ndarray,
        Self::Cuda,
    ];

    /// The name as typed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Wgpu => "wgpu",
            Self::Flex => "flex",
            Self::Ndarray => "ndarray",
            Self::Remote => "remote",
            Self::Cuda => "cuda",
        }
    }

    /// Opens the device. `auto` picks the fastest: cuda on an NVIDIA card where the build has
    /// it (burn's fastest backend there), else wgpu on a GPU card, otherwise flex (a software
    /// adapter such as lavapipe computes on the same CPU cores, far slower than flex), and
    /// says why in [`PickedDevice::reason`]. Asking for `wgpu` with no adapter is
    /// [`Error::NoWgpuAdapter`]; for `cuda`, see [`crate::cuda::open`].
    pub fn resolve(self) -> Result<PickedDevice> {
        match self {
            Self::Auto => Ok(crate::cuda::auto().unwrap_or_else(auto_without_cuda)),
            Self::Cuda => crate::cuda::open(0, "cuda"),
            Self::Wgpu => {
                let adapter = wgpu_adapter().ok_or(Error::NoWgpuAdapter)?;
                Ok(PickedDevice {
                    name: Self::Wgpu,
                    device: Device::wgpu(DeviceKind::DefaultDevice),
                    reason: format!("wgpu on adapter {adapter}"),
                })
            }
            Self::Flex => Ok(PickedDevice {
                name: Self::Flex,
                device: Device::flex(),
                reason: "flex (pure-Rust CPU backend)".to_string(),
            }),
            Self::Remote => Err(Error::InvalidValue {
                name: "device",
                value: "remote".to_string(),
                reason: "a remote device needs its server's address, as remote:ws://HOST:PORT"
                    .to_string(),
            }),
            #[allow(deprecated)]
            Self::Ndarray => Ok(PickedDevice {
                name: Self::Ndarray,
                device: Device::ndarray(),
                reason: "ndarray (CPU backend)".to_string(),
            }),
        }
    }
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl FromStr for DeviceName {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|name| name.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| Error::UnknownDevice(s.to_string()))
    }
}

/// `auto` without a CUDA card: wgpu on a GPU card, otherwise flex.
fn auto_without_cuda() -> PickedDevice {
    match wgpu_adapter_info() {
        Some((adapter, true)) => PickedDevice {
            name: DeviceName::Wgpu,
            device: Device::wgpu(DeviceKind::DefaultDevice),
            reason: format!("auto: picked wgpu, GPU adapter {adapter} found"),
        },
        Some((adapter, false)) => PickedDevice {
            name: DeviceName::Flex,
            device: Device::flex(),
            reason: format!(
                "auto: picked flex; the only wgpu adapter, {adapter}, is a software \
                 rasterizer on these CPU cores, where flex is faster"
            ),
        },
        None => PickedDevice {
            name: DeviceName::Flex,
            device: Device::flex(),
            reason: "auto: picked flex, no wgpu adapter found".to_string(),
        },
    }
}

/// A device that was opened, with the name it resolved to and why.
#[derive(Debug, Clone)]
pub struct PickedDevice {
    /// The concrete backend (never `Auto`).
    pub name: DeviceName,
    /// The burn device.
    pub device: Device,
    /// One line: which device, and why.
    pub reason: String,
}

/// The name of the first wgpu adapter on this machine, or `None` when there is none.
///
/// Enumerating adapters does not open a device, so this never panics on a machine without
/// a Vulkan driver.
pub fn wgpu_adapter() -> Option<String> {
    wgpu_adapter_info().map(|(name, _)| name)
}

/// The first wgpu adapter's name, and whether it is a card (`false` for a software
/// rasterizer such as lavapipe, which runs on the CPU's cores).
pub fn wgpu_adapter_info() -> Option<(String, bool)> {
    let devices = Device::enumerate(DeviceType::Wgpu);
    let device = devices.iter().next()?;
    Some(match device.identity() {
        Some(identity) => (identity.name.to_string(), identity.physical.is_some()),
        None => (format!("{device:?}"), false),
    })
}

impl PickedDevice {
    /// Whether the device computes on the CPU's cores: flex, ndarray, or a wgpu adapter that
    /// is no card (lavapipe).
    pub fn on_cpu(&self) -> bool {
        match self.name {
            DeviceName::Wgpu => !wgpu_adapter_info().is_some_and(|(_, card)| card),
            DeviceName::Cuda => false,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_names_are_errors() {
        assert_eq!("FLEX".parse::<DeviceName>().unwrap(), DeviceName::Flex);
        assert_eq!("wgpu".parse::<DeviceName>().unwrap(), DeviceName::Wgpu);
        let err = "cuda9".parse::<DeviceName>().unwrap_err().to_string();
        assert!(err.contains("'cuda9'") && err.contains("flex"), "{err}");
    }
}
