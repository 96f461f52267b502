//! `--precision`: where the command line trains in bf16. The library computes in bf16 on every
//! device whose burn backend has the arithmetic ([`ember::Precision::check`], which `Fit` runs
//! too), burn-flex's emulation on the CPU among them. The command line takes the CPU only where
//! ember's oneDNN kernels multiply in bf16 (a CPU with bf16 instructions), and refuses it
//! elsewhere saying which reason holds on this machine; it refuses a remote device, whose
//! machine it cannot see. It checks device names, so that nothing need be opened but oneDNN.

use anyhow::bail;
use ember::device::cpu::Cpu;
use ember::kernels::{self, Kernels, Status};
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
            DeviceName::Flex => match on_the_cpu(&Cpu::here(), &kernels::status()) {
                Some(why) => why,
                None => continue,
            },
            DeviceName::Ndarray => "ember's bf16 products run on flex (--device flex); \
                                    burn-ndarray would convert to f32 and back around an f32 \
                                    product"
                .to_string(),
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
        // A build without CUDA cannot take the card's way out (hostile pass).
        let card = match ember::device::cuda::BUILT {
            true => ", or on a card (--device cuda)",
            false => "",
        };
        bail!(
            "{flag} {precision} on {device}: {why}. Train in f32 there ({flag} f32){card}; \
             `ember devices` lists what this machine has"
        );
    }
    Ok(())
}

/// Why bf16 is refused on the CPU `cpu` with the kernels `status`, or `None` where oneDNN
/// multiplies in bf16 there.
fn on_the_cpu(cpu: &Cpu, status: &Status) -> Option<String> {
    if status.bf16 {
        return None;
    }
    Some(match (cpu.has_bf16(), status.kernels) {
        (false, _) => format!(
            "this CPU ({}) has no bf16 instructions ({})",
            cpu.model,
            ember::device::cpu::BF16_INSTRUCTIONS
        ),
        (true, Kernels::Flex) => format!(
            "this CPU ({}) has bf16 instructions ({}), but ember's layers run on {}, which \
             convert to f32 and back around an f32 product",
            cpu.model,
            cpu.bf16.join(", "),
            status.detail
        ),
        (true, Kernels::OneDnn) => format!(
            "this CPU ({}) has bf16 instructions ({}), but oneDNN's instruction set here has \
             no bf16 products ({}; a DNNL_MAX_CPU_ISA cap, or an OS without AVX-512's state, \
             would do that)",
            cpu.model,
            cpu.bf16.join(", "),
            status.detail
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(kernels: Kernels, bf16: bool) -> Status {
        Status {
            kernels,
            detail: "oneDNN 2.6.3 (libdnnl.so.2, AVX2)".to_string(),
            bf16,
        }
    }

    #[test]
    fn the_cpu_is_taken_where_onednn_multiplies_bf16_and_refused_with_the_reason_that_holds() {
        let without = Cpu {
            model: "AMD EPYC".to_string(),
            bf16: Vec::new(),
        };
        let text = on_the_cpu(&without, &status(Kernels::OneDnn, false)).unwrap();
        assert!(
            text.contains("this CPU (AMD EPYC) has no bf16 instructions"),
            "{text}"
        );
        let with = Cpu {
            model: "Intel Xeon Platinum 8480+".to_string(),
            bf16: vec!["avx512_bf16"],
        };
        assert_eq!(on_the_cpu(&with, &status(Kernels::OneDnn, true)), None);
        let text = on_the_cpu(&with, &status(Kernels::OneDnn, false)).unwrap();
        assert!(
            text.contains("(Intel Xeon Platinum 8480+) has bf16 instructions (avx512_bf16)")
                && text.contains("no bf16 products (oneDNN 2.6.3 (libdnnl.so.2, AVX2)")
                && text.contains("DNNL_MAX_CPU_ISA"),
            "{text}"
        );
        let flex = Status {
            detail: "burn-flex's kernels, as chosen".to_string(),
            ..status(Kernels::Flex, false)
        };
        let text = on_the_cpu(&with, &flex).unwrap();
        assert!(
            text.contains("but ember's layers run on burn-flex's kernels, as chosen, which"),
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
        // flex: taken or refused as this machine's oneDNN says.
        assert_eq!(
            check(Precision::Bf16, &[Flex]).is_ok(),
            kernels::status().bf16
        );
        for (device, why) in [
            (Ndarray, "ember's bf16 products run on flex"),
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
