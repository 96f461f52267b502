//! burn's CUDA backend, where this build has it (the `cuda` cargo feature): which NVIDIA cards
//! the machine has, and opening one as `cuda` or `cuda:N`.
//!
//! Without the feature every question is [`Error::NotBuilt`]. With it, a machine without the
//! NVIDIA driver answers [`Error::NoCudaDriver`], naming the library cudarc looked for; burn
//! loads the driver at run time, so the same binary runs on machines with and without a card.
//!
//! ```
//! // On a build without the feature, or a machine without the driver, it says which.
//! match ember::device::cuda::cards() {
//!     Ok(cards) => println!("{} CUDA card(s)", cards.len()),
//!     Err(e) => println!("no CUDA: {e}"),
//! }
//! ```

#[cfg(feature = "cuda")]
use super::name::DeviceName;
use super::name::PickedDevice;
use crate::error::{Error, Result};

/// Whether this build has burn's CUDA backend.
pub const BUILT: bool = cfg!(feature = "cuda");

/// One NVIDIA card, as the CUDA driver reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaCard {
    /// Its CUDA ordinal: `cuda:N`.
    pub index: usize,
    /// Its name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Its memory, in bytes.
    pub memory: u64,
}

impl std::fmt::Display for CudaCard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cuda:{} {} ({:.1} GiB)",
            self.index,
            self.name,
            self.memory as f64 / (1u64 << 30) as f64
        )
    }
}

/// `cuda` (or `cuda:7`) on a build without burn's CUDA backend.
pub fn not_built(device: &str) -> Error {
    Error::NotBuilt {
        device: device.to_string(),
        backend: "CUDA",
        why: "it was compiled without the `cuda` feature, whose build links a static LLVM \
              (burn 0.22's cubecl-llvm)",
    }
}

/// The machine's CUDA cards, in ordinal order (none on a machine with the driver but no card).
///
/// # Errors
/// [`Error::NotBuilt`] on a build without the `cuda` feature; [`Error::NoCudaDriver`] when the
/// NVIDIA driver's library cannot be loaded; [`Error::Execution`] with the driver's words when
/// it fails to answer.
pub fn cards() -> Result<Vec<CudaCard>> {
    #[cfg(feature = "cuda")]
    return driver::cards();
    #[cfg(not(feature = "cuda"))]
    Err(not_built("cuda"))
}

/// Opens `cuda:index` (`as_given` is how the user named it), checked against the cards there
/// are.
///
/// # Errors
/// As [`cards`], and [`Error::InvalidValue`] naming `as_given` when there is no such card.
pub fn open(index: usize, as_given: &str) -> Result<PickedDevice> {
    #[cfg(not(feature = "cuda"))]
    {
        let _ = index;
        Err(not_built(as_given))
    }
    #[cfg(feature = "cuda")]
    {
        // The count first, then the named card alone: reading every card's name opened a
        // context on each, cards the run was not asked for (hostile pass, issue 62).
        let count = driver::count().map_err(|e| match e {
            // The device as asked for: `cuda:3` was named `cuda` (hostile pass).
            Error::NoCudaDriver { looked_for, .. } => Error::NoCudaDriver {
                device: Some(as_given.to_string()),
                looked_for,
            },
            other => other,
        })?;
        if index >= count {
            return Err(Error::InvalidValue {
                name: "device",
                value: as_given.to_string(),
                reason: match count {
                    0 => "the NVIDIA driver is there, but it reports no CUDA card".to_string(),
                    n => format!(
                        "this machine has {n} CUDA card(s), cuda:0 to cuda:{}",
                        n - 1
                    ),
                },
            });
        }
        let card = driver::card(index)?;
        Ok(picked(&card, format!("cuda on {card}")))
    }
}

/// `auto`'s pick: the first CUDA card, where the build has the backend and the machine a card;
/// else, where the build has it, why not, in a few words (`None` in a build without it).
pub(crate) fn auto() -> std::result::Result<PickedDevice, Option<String>> {
    #[cfg(feature = "cuda")]
    {
        let why = |e: Error| {
            Some(match e {
                Error::NoCudaDriver { .. } => "no NVIDIA driver".to_string(),
                Error::Device { reason, .. } => reason,
                e => e.to_string(),
            })
        };
        // The first card only: another card that fails to open is no reason to pass over it.
        if driver::count().map_err(why)? == 0 {
            return Err(Some(
                "the NVIDIA driver is there, but it reports no CUDA card".to_string(),
            ));
        }
        let card = &driver::card(0).map_err(why)?;
        Ok(picked(
            card,
            format!(
                "auto: picked cuda, NVIDIA card {card} found (burn's CUDA backend, faster \
                 there than wgpu)"
            ),
        ))
    }
    #[cfg(not(feature = "cuda"))]
    Err(None)
}

#[cfg(feature = "cuda")]
fn picked(card: &CudaCard, reason: String) -> PickedDevice {
    PickedDevice {
        name: DeviceName::Cuda,
        device: burn::tensor::Device::cuda(card.index),
        reason,
    }
}

/// The most CUDA ordinals [`ordinals`] looks among.
#[cfg(feature = "cuda")]
const MAX_ORDINALS: usize = 256;

/// The CUDA ordinal of each of `devices` (autodiff or not), `None` for a device that is not a
/// CUDA card (and always on a build without the feature). The driver is not asked: a device is
/// `Device::cuda(N)` or not whatever it says, and asking would load it, and run `cuInit`, in
/// runs that never asked for a card (a driver that hangs there hung `--device flex`).
pub fn ordinals(devices: &[burn::tensor::Device]) -> Vec<Option<usize>> {
    #[cfg(feature = "cuda")]
    {
        devices
            .iter()
            .map(|device| {
                let device = device.clone().inner();
                (0..MAX_ORDINALS).find(|&index| burn::tensor::Device::cuda(index) == device)
            })
            .collect()
    }
    #[cfg(not(feature = "cuda"))]
    vec![None; devices.len()]
}

/// Whether NCCL's library, which burn's CUDA backend loads at run time for its collectives,
/// loads here; if not, why, naming the libraries looked for.
pub fn nccl() -> std::result::Result<(), String> {
    #[cfg(feature = "cuda")]
    {
        // SAFETY: this only tries to dlopen each of the library's names.
        if unsafe { cudarc::nccl::sys::is_culib_present() } {
            return Ok(());
        }
        Err(format!(
            "no NCCL: none of {} could be loaded; install NCCL (the nvidia-nccl wheel or \
             libnccl2) to all-reduce on the cards",
            cudarc::get_lib_name_candidates("nccl").join(", ")
        ))
    }
    #[cfg(not(feature = "cuda"))]
    Err(not_built("cuda").to_string())
}

#[cfg(feature = "cuda")]
mod driver {
    use cudarc::driver::CudaContext;

    use super::CudaCard;
    use crate::error::{Error, Result};

    /// The driver's error in its own words and name: `no CUDA-capable device is detected
    /// (CUDA_ERROR_NO_DEVICE)`; cudarc's `Display` is its debug text (`DriverError(…)`).
    fn driver(e: cudarc::driver::DriverError) -> Error {
        let words = e
            .error_string()
            .ok()
            .map(|s| s.to_string_lossy().into_owned());
        let code = format!("{:?}", e.0);
        Error::Device {
            device: "cuda".to_string(),
            reason: match words {
                Some(words) => format!("CUDA driver: {words} ({code})"),
                None => format!("CUDA driver: {code}"),
            },
        }
    }

    /// How many cards the driver reports, without opening them.
    pub(super) fn count() -> Result<usize> {
        // cudarc loads libcuda on first use and panics when it is missing: ask first.
        // SAFETY: this only tries to dlopen each of the library's names.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            // Each name once: cudarc lists some under several patterns.
            let mut looked_for = cudarc::get_lib_name_candidates("cuda");
            let mut seen = std::collections::BTreeSet::new();
            looked_for.retain(|name| seen.insert(name.clone()));
            return Err(Error::NoCudaDriver {
                device: None,
                looked_for,
            });
        }
        // A library of that name that is no driver (a stray file, a partial install) loads,
        // and cudarc panicked at its first call to a function it lacks (hostile pass).
        not_a_driver()?;
        Ok(CudaContext::device_count().map_err(driver)?.max(0) as usize)
    }

    /// The driver's functions a card's count needs, looked up in the library cudarc loads
    /// (the first of its names that opens): an error naming the library and the function it
    /// lacks.
    fn not_a_driver() -> Result<()> {
        // cudarc's order: the "cuda" names, then the "nvcuda" ones.
        let names = ["cuda", "nvcuda"]
            .into_iter()
            .flat_map(cudarc::get_lib_name_candidates);
        for name in names {
            // SAFETY: loading the driver library runs its initializers, as cudarc's own load
            // does next; nothing of it is called here.
            let Ok(library) = (unsafe { libloading::Library::new(&name) }) else {
                continue;
            };
            for symbol in [
                "cuInit",
                "cuDeviceGetCount",
                "cuDeviceGet",
                "cuDevicePrimaryCtxRetain",
                // Its errors' words, which every error of the driver's is read through.
                "cuGetErrorString",
            ] {
                // SAFETY: the symbol is only looked up, never called.
                let found = unsafe { library.get::<unsafe extern "C" fn()>(symbol.as_bytes()) };
                if found.is_err() {
                    return Err(Error::Device {
                        device: "cuda".to_string(),
                        reason: format!(
                            "{name} loads but is no NVIDIA driver: it has no {symbol}; remove \
                             it from the library path or reinstall the NVIDIA driver"
                        ),
                    });
                }
            }
            return Ok(());
        }
        Ok(())
    }

    pub(super) fn cards() -> Result<Vec<CudaCard>> {
        (0..count()?).map(card).collect()
    }

    /// Card `index`, its name and memory read through a context on it alone.
    pub(super) fn card(index: usize) -> Result<CudaCard> {
        let context = CudaContext::new(index).map_err(driver)?;
        Ok(CudaCard {
            index,
            name: context.name().map_err(driver)?,
            memory: context.total_mem().map_err(driver)? as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_says_whether_it_is_built_and_whether_a_driver_answers() {
        match (cards(), BUILT) {
            (Err(Error::NotBuilt { backend, .. }), false) => {
                assert_eq!(backend, "CUDA");
                let err = open(7, "cuda:7").unwrap_err();
                assert!(err.to_string().starts_with("cuda:7: "), "{err}");
            }
            (Err(Error::NoCudaDriver { looked_for, .. }), true) => {
                assert!(
                    looked_for.iter().any(|l| l.contains("libcuda")),
                    "{looked_for:?}"
                );
                let err = open(3, "cuda:3").unwrap_err().to_string();
                assert!(err.starts_with("cuda:3: no NVIDIA driver"), "{err}");
            }
            (Ok(cards), true) => {
                let beyond = format!("cuda:{}", cards.len());
                let err = open(cards.len(), &beyond).unwrap_err().to_string();
                assert!(err.contains(&beyond), "{err}");
            }
            (Err(other), built) => panic!("unexpected with the feature built {built}: {other}"),
            (Ok(cards), false) => panic!("{} card(s) without the feature", cards.len()),
        }
    }
}
