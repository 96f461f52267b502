//! wgpu's adapters on this machine: found without opening a device, so this never panics on a
//! machine without a Vulkan driver.
//!
//! They are asked of wgpu and of cubecl's wgpu runtime alone. burn's
//! `Device::enumerate(DeviceType::Wgpu)` asks every cubecl runtime for its devices and keeps
//! wgpu's: in a build with the `cuda` feature that loads the NVIDIA driver and runs `cuInit`,
//! for a run that never asked for a card (a driver that hung there hung `--device wgpu` and
//! `wgpu:1`).

use std::sync::OnceLock;

use burn::tensor::wgpu::wgpu;

/// The name of the first wgpu adapter on this machine, or `None` when there is none.
///
/// Enumerating adapters does not open a device, so this never panics on a machine without
/// a Vulkan driver.
pub fn adapter() -> Option<String> {
    adapter_info().map(|(name, _)| name)
}

/// The first wgpu adapter's name, and whether it is a card (`false` for a software
/// rasterizer such as lavapipe, which runs on the CPU's cores). Asked once per process.
pub fn adapter_info() -> Option<(String, bool)> {
    static FOUND: OnceLock<Option<(String, bool)>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let mut software = None;
            for api in apis() {
                let adapters = probe(api);
                if let Some(card) = adapters
                    .iter()
                    .find(|a| a.device_type != wgpu::DeviceType::Cpu)
                {
                    return Some((card.name.clone(), true));
                }
                if software.is_none() {
                    software = adapters.into_iter().next().map(|a| (a.name, false));
                }
            }
            software
        })
        .clone()
}

/// The devices of wgpu's adapters, as `wgpu:N` numbers them: cubecl's wgpu runtime's own
/// list (each adapter once, on the graphics API it settles on), which is the order burn's
/// `Device::enumerate(DeviceType::Wgpu)` gives without asking the other runtimes.
pub(super) fn adapter_devices() -> Vec<burn::tensor::Device> {
    use cubecl_common::device::Device as _;
    use cubecl_runtime::runtime::Runtime as _;
    <cubecl_wgpu::WgpuRuntime>::enumerate_all_devices()
        .into_iter()
        .map(|id| burn::tensor::Device::new(cubecl_wgpu::WgpuDevice::from_id(id)))
        .collect()
}

/// The graphics APIs cubecl's `Auto` tries, best first.
fn apis() -> Vec<wgpu::Backend> {
    if cfg!(target_os = "macos") {
        vec![wgpu::Backend::Metal]
    } else {
        vec![
            wgpu::Backend::Vulkan,
            wgpu::Backend::Dx12,
            wgpu::Backend::Gl,
        ]
    }
}

/// The adapters `api` has here, through an instance limited to it. The instance is kept for
/// the process's life: the Vulkan loader crashes when instances come and go on several threads
/// at once, and burn's own come up on other threads.
fn probe(api: wgpu::Backend) -> Vec<wgpu::AdapterInfo> {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        backends: api.into(),
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let adapters = ready(instance.enumerate_adapters(api.into()));
    let infos = adapters.iter().map(wgpu::Adapter::get_info).collect();
    std::mem::forget(adapters);
    std::mem::forget(instance);
    infos
}

/// The value of `future`, which on a native target is ready at its first poll.
fn ready<T>(future: impl std::future::Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(value) = future.as_mut().poll(&mut context) {
            return value;
        }
        std::thread::yield_now();
    }
}
