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

/// The memory available to a new allocation, in bytes: `MemAvailable` of `/proc/meminfo`
/// (`None` where the platform does not tell).
pub fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}
