//! Devices: names and what each backend can do ([`DeviceName`], [`Capabilities`]), opening
//! them ([`DeviceName::resolve`], [`DeviceSpec::open`]), lists of them for data parallelism
//! ([`DeviceList`]), discovery of wgpu adapters and CUDA cards, and the host's CPU.
//!
//! The arrows run one way: `name` knows what a backend is; `wgpu` and `cuda` find adapters and
//! cards; `open` and `list` open them.
//!
//! ```
//! use ember::device::DeviceName;
//! let picked = DeviceName::Flex.resolve().unwrap();
//! assert_eq!(picked.name, DeviceName::Flex);
//! assert!(!picked.capabilities().asynchronous);
//! ```

pub mod cpu;
pub mod cuda;
mod list;
mod name;
mod open;
pub mod remote;
pub mod wgpu;

pub use list::{DeviceList, DeviceSpec};
pub use name::{Capabilities, DeviceName, PickedDevice};
pub use open::remote_missing;
