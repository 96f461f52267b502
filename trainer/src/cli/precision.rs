//! `--precision`: where the command line trains in bf16. The library computes in bf16 on every
//! device whose burn backend has the arithmetic ([`ember::Precision::check`]), burn-flex's
//! emulation on the CPU among them; the command line also refuses the CPU, where that would be
//! slower than f32 and no faster path exists yet, saying which of the two reasons holds here.

use anyhow::bail;
use ember::device::cpu::Cpu;
use ember::{DeviceName, PickedDevice, Precision};

use super::flags::Flag;

/// Refuses `precision` on any of `devices` that cannot train in it, naming the device, and for
/// the CPU, the CPU.
pub fn check(precision: Precision, devices: &[PickedDevice]) -> anyhow::Result<()> {
    if precision == Precision::F32 {
        return Ok(());
    }
    for picked in devices {
        if let Err(err) = precision.check(&picked.device) {
            bail!(
                "{} {precision} on {}: {}",
                Flag::PRECISION,
                picked.label(),
                reason(err)
            );
        }
        if matches!(picked.name, DeviceName::Flex | DeviceName::Ndarray) {
            bail!("{}", on_the_cpu(precision, &Cpu::here(), picked.name));
        }
    }
    Ok(())
}

/// Why `precision` is refused on `cpu` (as `device`).
fn on_the_cpu(precision: Precision, cpu: &Cpu, device: DeviceName) -> String {
    let flag = Flag::PRECISION;
    let why = if cpu.has_bf16() {
        format!(
            "this CPU ({}) has bf16 instructions ({}), but ember's oneDNN kernels have no bf16 \
             products yet, and burn-flex's round to bf16 but multiply in f32, which is slower \
             than f32",
            cpu.model,
            cpu.bf16.join(", ")
        )
    } else {
        format!(
            "this CPU ({}) has no bf16 instructions (avx512_bf16 on x86, bf16 on Arm)",
            cpu.model
        )
    };
    format!(
        "{flag} {precision} on {device}: {why}. Train in f32 here ({flag} f32), or on a card \
         (--device cuda); `ember devices` lists what this machine has"
    )
}

fn reason(err: ember::Error) -> String {
    match err {
        ember::Error::InvalidValue { reason, .. } => reason,
        other => other.to_string(),
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
        let text = on_the_cpu(Precision::Bf16, &without, DeviceName::Flex);
        assert!(
            text.contains("--precision bf16 on flex")
                && text.contains("this CPU (AMD EPYC) has no bf16 instructions")
                && text.contains("--precision f32"),
            "{text}"
        );
        let with = Cpu {
            model: "Intel Xeon Platinum 8480+".to_string(),
            bf16: vec!["avx512_bf16"],
        };
        let text = on_the_cpu(Precision::Bf16, &with, DeviceName::Flex);
        assert!(
            text.contains("(Intel Xeon Platinum 8480+) has bf16 instructions (avx512_bf16)")
                && text.contains("no bf16 products yet"),
            "{text}"
        );
    }

    #[test]
    fn f32_is_never_refused() {
        let flex = DeviceName::Flex.resolve().unwrap();
        assert!(check(Precision::F32, &[flex.clone()]).is_ok());
        assert!(check(Precision::Bf16, &[flex]).is_err());
    }
}
