//! `--precision`: where the command line trains in bf16. The library computes in bf16 on every
//! device whose burn backend has the arithmetic ([`ember::Precision::check`], which `Fit` runs
//! too), burn-flex's emulation on the CPU among them. The command line also refuses the CPU,
//! where no fast path exists yet, saying which reason holds on this machine, and a remote
//! device, whose machine it cannot see. It checks device names, so that nothing need be opened.

use anyhow::bail;
use ember::device::cpu::Cpu;
use ember::{DeviceName, Precision};

use super::flags::Flag;

/// Refuses `precision` on any of `devices` that cannot train in it here, naming the device
/// and why (for the CPU, the CPU).
pub fn check(precision: Precision, devices: &[DeviceName]) -> anyhow::Result<()> {
    if precision == Precision::F32 {
        return Ok(());
    }
    let flag = Flag::PRECISION;
    for &device in devices {
        let why = match device {
            DeviceName::Flex | DeviceName::Ndarray => on_the_cpu(&Cpu::here()),
            DeviceName::Wgpu => {
                "burn's wgpu has no bf16 arithmetic (its shaders, WGSL, have no such type)"
                    .to_string()
            }
            DeviceName::Remote => {
                "a remote device computes on its server's backend, which this process cannot \
                 check"
                    .to_string()
            }
            DeviceName::Cuda | DeviceName::Auto => continue,
        };
        bail!(
            "{flag} {precision} on {device}: {why}. Train in f32 there ({flag} f32), or on a \
             card (--device cuda); `ember devices` lists what this machine has"
        );
    }
    Ok(())
}

/// Why bf16 is refused on the CPU `cpu`.
fn on_the_cpu(cpu: &Cpu) -> String {
    if cpu.has_bf16() {
        format!(
            "this CPU ({}) has bf16 instructions ({}), but ember's oneDNN kernels have no bf16 \
             products yet, and burn-flex's convert to f32 and back around an f32 product",
            cpu.model,
            cpu.bf16.join(", ")
        )
    } else {
        format!(
            "this CPU ({}) has no bf16 instructions ({})",
            cpu.model,
            ember::device::cpu::BF16_INSTRUCTIONS
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_is_refused_with_the_reason_that_holds() {
        let without = Cpu {
            model: "AMD EPYC".to_string(),
            bf16: Vec::new(),
        };
        let text = on_the_cpu(&without);
        assert!(
            text.contains("this CPU (AMD EPYC) has no bf16 instructions"),
            "{text}"
        );
        let with = Cpu {
            model: "Intel Xeon Platinum 8480+".to_string(),
            bf16: vec!["avx512_bf16"],
        };
        let text = on_the_cpu(&with);
        assert!(
            text.contains("(Intel Xeon Platinum 8480+) has bf16 instructions (avx512_bf16)")
                && text.contains("no bf16 products yet"),
            "{text}"
        );
    }

    #[test]
    fn each_device_is_refused_by_name_for_its_own_reason_and_f32_never() {
        use DeviceName::*;
        for device in [Flex, Ndarray, Wgpu, Remote, Cuda] {
            assert!(check(Precision::F32, &[device]).is_ok());
        }
        assert!(check(Precision::Bf16, &[Cuda]).is_ok());
        for (device, why) in [
            (Flex, "this CPU ("),
            (Ndarray, "this CPU ("),
            (Wgpu, "burn's wgpu has no bf16"),
            (Remote, "a remote device computes on its server's backend"),
        ] {
            let err = check(Precision::Bf16, &[Cuda, device])
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(&format!("--precision bf16 on {device}: {why}"))
                    && err.contains("--precision f32"),
                "{err}"
            );
        }
    }
}
