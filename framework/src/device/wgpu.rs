//! wgpu's adapters on this machine: found without opening a device, so this never panics on a
//! machine without a Vulkan driver.

use burn::tensor::{Device, DeviceType};

/// The name of the first wgpu adapter on this machine, or `None` when there is none.
///
/// Enumerating adapters does not open a device, so this never panics on a machine without
/// a Vulkan driver.
pub fn adapter() -> Option<String> {
    adapter_info().map(|(name, _)| name)
}

/// The first wgpu adapter's name, and whether it is a card (`false` for a software
/// rasterizer such as lavapipe, which runs on the CPU's cores).
pub fn adapter_info() -> Option<(String, bool)> {
    let devices = Device::enumerate(DeviceType::Wgpu);
    let device = devices.iter().next()?;
    Some(match device.identity() {
        Some(identity) => (identity.name.to_string(), identity.physical.is_some()),
        None => (format!("{device:?}"), false),
    })
}
