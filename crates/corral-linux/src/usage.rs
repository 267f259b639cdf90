//! Live resource use of this process's running sandbox, for progress displays.

use std::fs;
use std::path::{Path, PathBuf};

use crate::cgroup::Hierarchy;

/// What the running attempt uses right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveUsage {
    /// CPU time used so far, in milliseconds (0 on cgroup v1 when `cpuacct` cannot be read).
    pub cpu_ms: u64,
    /// Memory in use now, in bytes.
    pub memory_bytes: u64,
    /// Tasks in the attempt's cgroup now.
    pub processes: u64,
}

fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn keyed(path: &Path, key: &str) -> Option<u64> {
    fs::read_to_string(path)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The group of a run of this process below `parent` (`corral-<pid>-<n>`), if one exists.
fn own_group(parent: &Path) -> Option<PathBuf> {
    let prefix = format!("corral-{}-", std::process::id());
    fs::read_dir(parent)
        .ok()?
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
}

/// The use of the attempt this process is running now, or `None` when none is running.
#[must_use]
pub fn live_usage() -> Option<LiveUsage> {
    match Hierarchy::detect_host().ok()? {
        Hierarchy::V2 { parent } => {
            let g = own_group(&parent)?;
            Some(LiveUsage {
                cpu_ms: keyed(&g.join("cpu.stat"), "usage_usec")? / 1000,
                memory_bytes: read_u64(&g.join("memory.current"))?,
                processes: read_u64(&g.join("pids.current"))?,
            })
        }
        Hierarchy::V1 { parents } => {
            let dir = |c: &str| {
                parents
                    .iter()
                    .find(|(n, _)| n == c)
                    .and_then(|(_, p)| own_group(p))
            };
            let cpu_ns = dir("cpuacct").and_then(|g| read_u64(&g.join("cpuacct.usage")));
            Some(LiveUsage {
                cpu_ms: cpu_ns.unwrap_or(0) / 1_000_000,
                memory_bytes: read_u64(&dir("memory")?.join("memory.usage_in_bytes"))?,
                processes: read_u64(&dir("pids")?.join("pids.current"))?,
            })
        }
    }
}
