//! Process memory, as the book measures it: the resident set size.

/// Resident set size of this process in bytes (0 where the platform does not report it).
pub fn rss_bytes() -> u64 {
    memory_stats::memory_stats()
        .map(|stats| stats.physical_mem as u64)
        .unwrap_or(0)
}

/// Bytes to MB (2^20), as the book prints memory.
pub fn mb(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

/// The memory available to a new allocation, in bytes: `MemAvailable` of `/proc/meminfo`,
/// bounded by what this process may still map under its address-space limit (`ulimit -v`)
/// and by its cgroup's memory limit (`None` where the platform does not tell).
pub fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    let available = kib.checked_mul(1024)?;
    Some(
        [address_space_left(), cgroup_left()]
            .into_iter()
            .flatten()
            .fold(available, u64::min),
    )
}

/// `ulimit -v` less what the process has mapped already.
fn address_space_left() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let limit: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mapped: u64 = status
        .lines()
        .find(|l| l.starts_with("VmSize:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(limit.saturating_sub(mapped.saturating_mul(1024)))
}

/// The cgroup's `memory.max` less its `memory.current` (cgroup v2).
fn cgroup_left() -> Option<u64> {
    let read = |file: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{file}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some(read("memory.max")?.saturating_sub(read("memory.current")?))
}
