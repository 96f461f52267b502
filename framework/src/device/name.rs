//! Devices by name (`auto`, `wgpu`, `flex`, `ndarray`, `cuda`, `remote`), an opened device,
//! and what each can do: the one place that knows a backend's properties, so that the rest of
//! ember asks "is it asynchronous?" rather than "is it wgpu?".

use std::fmt;
use std::str::FromStr;

use burn::tensor::Device;

use super::wgpu::adapter_info;
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
    /// a device list (`remote:ws://host:port`, see [`super::DeviceList`]).
    Remote,
    /// burn's CUDA backend on an NVIDIA card, with the `cuda` feature ([`super::cuda`]).
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

/// What a backend can do, as the chapter's experiments and the trainer need to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Operations are queued and run later on a backend of their own (a GPU queue, a remote
    /// server), so the frontend can run ahead; `false` where each operation runs on the
    /// calling thread.
    pub asynchronous: bool,
    /// burn fuses element-wise operations into larger kernels (CubeCL's fusion): the
    /// chapter's "hybridization".
    pub fusion: bool,
    /// The device's own memory pool can be read (bytes reserved and in use), beside the
    /// process's resident memory.
    pub device_memory: bool,
    /// burn records a closure's launches as a graph and replays them ([`crate::hybrid`]): a
    /// CUDA graph on cuda, cubecl's recorded dispatches on wgpu.
    pub graphs: bool,
}

impl DeviceName {
    /// What this backend can do (for `auto`, nothing is known until it is resolved).
    pub fn capabilities(self) -> Capabilities {
        let cubecl = matches!(self, Self::Wgpu | Self::Cuda);
        Capabilities {
            asynchronous: cubecl || self == Self::Remote,
            fusion: cubecl,
            device_memory: cubecl,
            graphs: cubecl,
        }
    }
}

impl DeviceName {
    /// What `NAME:N`'s index counts, for the backends that take one (`wgpu:1`, `cuda:1`).
    pub fn indexed_by(self) -> Option<&'static str> {
        match self {
            Self::Wgpu => Some("adapter"),
            Self::Cuda => Some("card"),
            Self::Flex | Self::Ndarray | Self::Remote | Self::Auto => None,
        }
    }
}

impl PickedDevice {
    /// What the picked device's backend can do.
    pub fn capabilities(&self) -> Capabilities {
        self.name.capabilities()
    }

    /// Whether the device computes on the CPU's cores: flex, ndarray, or a wgpu adapter that
    /// is no card (lavapipe).
    pub fn on_cpu(&self) -> bool {
        match self.name {
            DeviceName::Wgpu => !adapter_info().is_some_and(|(_, card)| card),
            DeviceName::Cuda => false,
            DeviceName::Flex | DeviceName::Ndarray | DeviceName::Remote | DeviceName::Auto => true,
        }
    }

    /// The device as a line names it: `wgpu on <adapter>`, or the backend's name.
    pub fn label(&self) -> String {
        match (self.name, adapter_info()) {
            (DeviceName::Wgpu, Some((adapter, _))) => format!("wgpu on {adapter}"),
            _ => self.name.to_string(),
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
