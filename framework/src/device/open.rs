//! Opening devices: a name ([`DeviceName::resolve`]), the N-th wgpu adapter, several logical
//! devices on one adapter, a burn-remote server's device.

use burn::tensor::wgpu::{WgpuSetup, wgpu};
use burn::tensor::{Device, DeviceKind};

use super::cuda;
use super::name::{DeviceName, PickedDevice};
use super::wgpu::{adapter, adapter_info};
use crate::block_on::block_on;
use crate::error::{Error, Result};

impl DeviceName {
    /// Opens the device. `auto` picks the fastest: cuda on an NVIDIA card where the build has
    /// it (burn's fastest backend there), else wgpu on a GPU card, otherwise flex (a software
    /// adapter such as lavapipe computes on the same CPU cores, far slower than flex), and
    /// says why in [`PickedDevice::reason`]. Asking for `wgpu` with no adapter is
    /// [`Error::NoWgpuAdapter`]; for `cuda`, see [`cuda::open`].
    pub fn resolve(self) -> Result<PickedDevice> {
        match self {
            // Where the build has CUDA, why it was passed over (hostile pass: `auto` said
            // nothing of it).
            Self::Auto => Ok(cuda::auto().unwrap_or_else(|why| {
                let mut picked = auto_without_cuda();
                if let Some(why) = why {
                    picked.reason.push_str(&format!(" (not cuda: {why})"));
                }
                picked
            })),
            Self::Cuda => cuda::open(0, "cuda"),
            Self::Wgpu => {
                let adapter = adapter().ok_or(Error::NoWgpuAdapter)?;
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

/// `auto` without a CUDA card: wgpu on a GPU card, otherwise flex.
fn auto_without_cuda() -> PickedDevice {
    match adapter_info() {
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

/// `remote:` on a build without ember's `remote` feature.
pub fn remote_missing(device: &str) -> Error {
    Error::NotBuilt {
        device: device.to_string(),
        backend: "remote",
        why: "it was compiled without ember's `remote` feature (burn-remote's WebSocket client)",
    }
}

/// Device 0 of the burn-remote server at `address`, connected now (`as_given`: the entry as
/// the user wrote it, for messages).
#[cfg(feature = "remote")]
pub(super) fn remote_device(as_given: &str, address: &str) -> Result<PickedDevice> {
    use burn::tensor::remote::RemoteHost;
    // A server that was stopped takes the connection and never answers its handshake: the
    // connection gets the device's bound too (it hung until the server went away).
    let host = RemoteHost::websocket(address);
    let device = super::remote::within(as_given, "connecting", move || {
        Device::remote_options(&host)
            .init()
            .map_err(|e| e.to_string())
    })
    .map_err(|e| super::remote::connecting(e, as_given))?
    .map_err(|reason| Error::Unreachable {
        device: as_given.to_string(),
        reason,
    })?;
    super::remote::opened(&device, as_given.to_string());
    Ok(PickedDevice {
        name: DeviceName::Remote,
        device,
        reason: format!("remote device 0 of the server at {address} (burn-remote, WebSocket)"),
    })
}

#[cfg(not(feature = "remote"))]
pub(super) fn remote_device(as_given: &str, _address: &str) -> Result<PickedDevice> {
    Err(remote_missing(as_given))
}

/// The `index`-th wgpu adapter.
pub(super) fn wgpu_adapter_device(index: usize) -> Result<PickedDevice> {
    let adapters = super::wgpu::adapter_devices();
    if adapters.is_empty() {
        return Err(Error::NoWgpuAdapter);
    }
    let count = adapters.len();
    let device = adapters
        .get(index)
        .cloned()
        .ok_or_else(|| Error::InvalidValue {
            name: "device",
            value: format!("wgpu:{index}"),
            reason: format!(
                "this machine has {count} wgpu adapter{}, wgpu:0 to wgpu:{}; list plain wgpu \
                 several times (wgpu,wgpu) for several devices on the first adapter",
                if count == 1 { "" } else { "s" },
                count - 1
            ),
        })?;
    let name = device
        .identity()
        .map(|identity| identity.name.to_string())
        .unwrap_or_else(|| format!("{device:?}"));
    Ok(PickedDevice {
        name: DeviceName::Wgpu,
        device,
        reason: format!("wgpu:{index} on adapter {name}"),
    })
}

/// `count` logical devices on the first wgpu adapter, each its own wgpu device and queue,
/// registered with burn as a runtime of its own.
pub(super) fn logical_wgpu_devices(count: usize) -> Result<Vec<PickedDevice>> {
    let (adapter_name, _) = adapter_info().ok_or(Error::NoWgpuAdapter)?;
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: wgpu::Backends::PRIMARY,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let adapter = block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }))
    .map_err(|e| Error::Device {
        device: "wgpu".to_string(),
        reason: format!("no adapter for several devices: {e}"),
    })?;
    let backend = adapter.get_info().backend;
    (0..count)
        .map(|n| {
            let (device, queue) = block_on(
                adapter.request_device(&wgpu::DeviceDescriptor {
                    label: Some("ember replica"),
                    required_features: adapter
                        .features()
                        .difference(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS),
                    required_limits: adapter.limits(),
                    memory_hints: wgpu::MemoryHints::MemoryUsage,
                    ..Default::default()
                }),
            )
            .map_err(|e| Error::Device {
                device: format!("wgpu device {n}"),
                reason: format!("making it: {e}"),
            })?;
            let setup = WgpuSetup {
                instance: instance.clone(),
                adapter: adapter.clone(),
                device,
                queue,
                backend,
            };
            let device = Device::wgpu_options()
                .setup(setup)
                .init()
                .map_err(|e| Error::Device {
                    device: format!("wgpu device {n}"),
                    reason: format!("registering it with burn: {e}"),
                })?;
            Ok(PickedDevice {
                name: DeviceName::Wgpu,
                device,
                reason: format!("wgpu device {} of {count} on adapter {adapter_name}", n + 1),
            })
        })
        .collect()
}
