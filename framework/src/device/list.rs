//! Several devices by name, for data parallelism: `flex,flex`, `wgpu:0,wgpu:1`, `wgpu,wgpu`.
//!
//! - `flex` and `ndarray` have one device each (as in burn): listing one twice makes two
//!   replicas on the same CPU, which still split, move and sum as on two cards.
//! - `wgpu:N` is the N-th wgpu adapter of this machine (a second GPU card, say).
//! - plain `wgpu` listed several times opens that many logical devices on the first adapter,
//!   each with its own queue and memory pool (wgpu's `request_device`, registered with burn's
//!   `Device::wgpu_options().setup(..)`): several devices on one lavapipe, or on one card.
//! - `remote:ws://HOST:PORT` is device 0 of a burn-remote WebSocket server (`ember serve`
//!   runs one), with the `remote` cargo feature.
//! - `cuda:N` is the N-th CUDA card, with the `cuda` cargo feature ([`super::cuda`]); a build
//!   without it refuses `cuda` with the reason ([`Error::NotBuilt`]).
//!
//! One entry alone (`ember train --device wgpu:1`) opens with [`DeviceSpec::open`].
//!
//! ```
//! use ember::DeviceList;
//! let list: DeviceList = "flex,flex".parse().unwrap();
//! let devices = list.open().unwrap();
//! assert_eq!(devices.len(), 2);
//! assert!("flex,tpu".parse::<DeviceList>().is_err());
//! ```

use std::fmt;
use std::str::FromStr;

use super::cuda;
use super::name::{DeviceName, PickedDevice};
use super::open::{logical_wgpu_devices, remote_device, remote_missing, wgpu_adapter_device};
use crate::error::{Error, Result};

/// One entry of a device list: a name and, where given, an index or a server's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSpec {
    /// The backend.
    pub name: DeviceName,
    /// `wgpu:1`'s 1: which adapter.
    pub index: Option<usize>,
    /// `remote:ws://host:3000`'s address.
    pub address: Option<String>,
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.address, self.index) {
            (Some(address), _) => write!(f, "{}:{address}", self.name),
            (None, Some(index)) => write!(f, "{}:{index}", self.name),
            (None, None) => write!(f, "{}", self.name),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        if let Some(address) = s.trim().strip_prefix("remote:") {
            if !cfg!(feature = "remote") {
                return Err(remote_missing(s.trim()));
            }
            if !address.starts_with("ws://") || address.len() <= "ws://".len() {
                return Err(Error::InvalidValue {
                    name: "device",
                    value: s.to_string(),
                    reason: "expected remote:ws://HOST:PORT, the address of a burn-remote server"
                        .to_string(),
                });
            }
            // The port as `ember serve --listen` takes it: checked now, not after 15 s of
            // connection attempts.
            let port = address["ws://".len()..]
                .rsplit_once(':')
                .map(|(_, port)| port.trim_end_matches('/'));
            if !port.is_some_and(|p| p.parse::<u16>().is_ok_and(|p| p > 0)) {
                return Err(Error::InvalidValue {
                    name: "device",
                    value: s.to_string(),
                    reason: "expected remote:ws://HOST:PORT with a port from 1 to 65535"
                        .to_string(),
                });
            }
            return Ok(Self {
                name: DeviceName::Remote,
                index: None,
                address: Some(address.to_string()),
            });
        }
        let (name, index) = match s.trim().split_once(':') {
            Some((name, index)) => (name, Some(index)),
            None => (s.trim(), None),
        };
        if name.trim().eq_ignore_ascii_case("cuda") && !cuda::BUILT {
            return Err(cuda::not_built(s.trim()));
        }
        let name: DeviceName = name.parse()?;
        let index = index
            .map(|index| {
                index
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| Error::InvalidValue {
                        name: "device index",
                        value: s.to_string(),
                        reason: "expected a device name, then optionally ':' and a number, as \
                             wgpu:1"
                            .to_string(),
                    })
            })
            .transpose()?;
        if let Some(index @ 1..) = index
            && !matches!(name, DeviceName::Wgpu | DeviceName::Cuda)
        {
            return Err(Error::InvalidValue {
                name: "device",
                value: s.to_string(),
                reason: format!(
                    "{name} has a single device, {name}:0; list it several times ({name},{name}) \
                     for several replicas on it, or use wgpu:{index} for a second adapter"
                ),
            });
        }
        Ok(Self {
            name,
            index,
            address: None,
        })
    }
}

/// A comma-separated list of devices, the first one main.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceList(pub Vec<DeviceSpec>);

impl fmt::Display for DeviceList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.pad(&names.join(","))
    }
}

impl FromStr for DeviceList {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        // Every entry must name a device, so an empty list or entry is an unknown device ''.
        s.split(',')
            .map(str::parse)
            .collect::<Result<_>>()
            .map(Self)
    }
}

impl DeviceList {
    /// How many devices.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the list is empty (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Opens every device, in order (without autodiff).
    ///
    /// # Errors
    /// [`Error::NoWgpuAdapter`] for wgpu on a machine without an adapter,
    /// [`Error::InvalidValue`] naming a `wgpu:N` or `cuda:N` beyond this machine's adapters or
    /// cards, [`Error::NoCudaDriver`] for cuda without the NVIDIA driver, or wgpu's error when
    /// it cannot make a device.
    pub fn open(&self) -> Result<Vec<PickedDevice>> {
        let plain_wgpu = self
            .0
            .iter()
            .filter(|spec| spec.name == DeviceName::Wgpu && spec.index.is_none())
            .count();
        let mut logical = if plain_wgpu > 1 {
            logical_wgpu_devices(plain_wgpu)?.into_iter()
        } else {
            Vec::new().into_iter()
        };
        self.0
            .iter()
            .map(|spec| match (spec.name, spec.index) {
                (DeviceName::Wgpu, Some(index)) => wgpu_adapter_device(index),
                (DeviceName::Wgpu, None) if plain_wgpu > 1 => {
                    logical.next().ok_or_else(|| Error::Device {
                        device: "wgpu".to_string(),
                        reason: "fewer logical devices were made than asked".to_string(),
                    })
                }
                _ => spec.open(),
            })
            .collect()
    }
}

impl DeviceSpec {
    /// Opens this one device (without autodiff): `wgpu:N` the N-th adapter, `cuda:N` the N-th
    /// card, a name alone as [`DeviceName::resolve`] opens it.
    ///
    /// # Errors
    /// As [`DeviceList::open`].
    pub fn open(&self) -> Result<PickedDevice> {
        match (self.name, self.index) {
            (DeviceName::Wgpu, Some(index)) => wgpu_adapter_device(index),
            (DeviceName::Remote, _) => remote_device(
                &self.to_string(),
                self.address.as_deref().unwrap_or_default(),
            ),
            (DeviceName::Cuda, index) => cuda::open(index.unwrap_or(0), &self.to_string()),
            (name, _) => name.resolve(),
        }
    }
}

impl From<DeviceName> for DeviceSpec {
    fn from(name: DeviceName) -> Self {
        Self {
            name,
            index: None,
            address: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_bad_entries_are_errors_naming_them() {
        let list: DeviceList = "flex, wgpu:1,ndarray".parse().unwrap();
        assert_eq!(list.to_string(), "flex,wgpu:1,ndarray");
        let err = "flex,tpu".parse::<DeviceList>().unwrap_err().to_string();
        assert!(err.contains("'tpu'"), "{err}");
        let err = "cuda:0,cuda:1"
            .parse::<DeviceList>()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cuda:0") && err.contains("no CUDA backend"),
            "{err}"
        );
        let err = "flex:1".parse::<DeviceList>().unwrap_err().to_string();
        assert!(
            err.contains("flex:1") && err.contains("single device"),
            "{err}"
        );
        let err = "wgpu:x".parse::<DeviceList>().unwrap_err().to_string();
        assert!(err.contains("wgpu:x"), "{err}");
        let remote = "flex,remote:ws://127.0.0.1:3000".parse::<DeviceList>();
        if cfg!(feature = "remote") {
            assert_eq!(
                remote.unwrap().to_string(),
                "flex,remote:ws://127.0.0.1:3000"
            );
            let err = "remote:127.0.0.1"
                .parse::<DeviceList>()
                .unwrap_err()
                .to_string();
            assert!(err.contains("remote:ws://HOST:PORT"), "{err}");
            // A port past 65535, or none, is refused at once: the client tried it for 15 s.
            for bad in [
                "remote:ws://127.0.0.1:99999",
                "remote:ws://127.0.0.1",
                "remote:ws://h:0",
            ] {
                let err = bad.parse::<DeviceList>().unwrap_err().to_string();
                assert!(
                    err.contains("a port from 1 to 65535") && err.contains(bad),
                    "{err}"
                );
            }
        } else {
            let err = remote.unwrap_err();
            assert!(
                matches!(&err, Error::NotBuilt { backend: "remote", device, .. } if device == "remote:ws://127.0.0.1:3000"),
                "{err}"
            );
        }
        assert!("".parse::<DeviceList>().is_err());
        assert!("flex,,flex".parse::<DeviceList>().is_err());
    }
}
