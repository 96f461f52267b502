//! The host's CPU, as the precisions need it: its name, and which bf16 instructions it has.
//!
//! ```
//! let cpu = ember::device::cpu::Cpu::here();
//! assert!(!cpu.model.is_empty());
//! println!("{}: bf16 {}", cpu.model, if cpu.has_bf16() { "yes" } else { "no" });
//! ```

/// The bf16 instructions [`Cpu::bf16`] looks for, as a sentence names them.
pub const BF16_INSTRUCTIONS: &str = "avx512_bf16 on x86, bf16 on Arm";

/// This machine's CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpu {
    /// The model, as the system names it (`/proc/cpuinfo`'s "model name"), or "this CPU".
    pub model: String,
    /// Its bf16 instructions, by the names Linux lists them under: `avx512_bf16` (Zen 4,
    /// Intel's Xeons from Cooper Lake on except Ice Lake, AMX machines among them) or `bf16`
    /// (Arm).
    pub bf16: Vec<&'static str>,
}

impl Cpu {
    /// The CPU this process runs on.
    pub fn here() -> Self {
        Self {
            model: model().unwrap_or_else(|| "this CPU".to_string()),
            bf16: bf16(),
        }
    }

    /// Whether it multiplies bf16 numbers in hardware.
    pub fn has_bf16(&self) -> bool {
        !self.bf16.is_empty()
    }
}

/// The first "model name" (x86) or "Model" (Arm) line of `/proc/cpuinfo`.
fn model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let key = key.trim();
        (key == "model name" || key == "Model")
            .then(|| value.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

fn bf16() -> Vec<&'static str> {
    let mut found = Vec::new();
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512bf16") {
        found.push("avx512_bf16");
    }
    #[cfg(target_arch = "aarch64")]
    if std::arch::is_aarch64_feature_detected!("bf16") {
        found.push("bf16");
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model and the flags agree with what Linux lists in `/proc/cpuinfo`.
    #[test]
    fn the_cpu_is_named_and_its_bf16_agrees_with_the_kernels_flags() {
        let cpu = Cpu::here();
        let info = std::fs::read_to_string("/proc/cpuinfo").expect("Linux lists the CPU");
        assert!(
            info.contains(&cpu.model) || cpu.model == "this CPU",
            "{cpu:?}"
        );
        let flags: Vec<&str> = info
            .lines()
            .find(|l| l.starts_with("flags") || l.starts_with("Features"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.split_whitespace().collect())
            .expect("a flags line");
        let listed = flags.contains(&"avx512_bf16") || flags.contains(&"bf16");
        assert_eq!(cpu.has_bf16(), listed, "{cpu:?}");
    }
}
