//! What to execute and within which limits: plain data that admission fills in.

use std::collections::BTreeMap;
use std::num::NonZeroU64;

use serde::{Deserialize, Serialize};

/// The program a worker runs, fixed by the preset, plus its explicit input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(transform = crate::schema::require_keys))]
pub struct ExecSpec {
    /// Absolute path, from the preset.
    pub executable: String,
    /// Arguments after argv\[0\] (argv\[0\] is the executable path).
    pub args: Vec<String>,
    /// The complete worker environment, built only from admitted names. The backend adds
    /// nothing but the fixed `PATH`, `HOME` and `TMPDIR` (and the proxy variables in allowlist
    /// mode), and documents each.
    pub env: BTreeMap<String, String>,
    /// Bytes for standard input; `None` gives an empty stdin (immediate end of file).
    #[serde(skip)]
    pub stdin: Option<Vec<u8>>,
    /// Extra host paths the worker may read (preset `read_only_paths`), absolute.
    pub read_only_paths: Vec<String>,
    /// Required `sha256:` of the executable's bytes, when the preset pins one.
    pub executable_sha256: Option<crate::Digest>,
    /// Files the backend places in the worker's empty HOME before start: path relative to
    /// HOME -> UTF-8 text (the preset's admitted `home_files`).
    #[serde(default)]
    pub home_files: BTreeMap<String, String>,
}

/// The CFS bandwidth that holds a tree to `millicores` thousandths of a CPU: `(quota_us,
/// period_us)` with `period_us` as given, unless the quota would fall under the kernel's 1 ms
/// minimum (below 10 millicores at 100 ms); then the longest period the kernel takes, 1 s, so
/// even 1 millicore is exact, never rounded up to more bandwidth than the budget allows. The
/// Linux backend writes it to the run's cgroup and the OCI export to `linux.resources.cpu`.
#[must_use]
pub fn cfs_bandwidth(millicores: u64, period_us: u64) -> (u64, u64) {
    const MIN_QUOTA_US: u64 = 1_000;
    const MAX_PERIOD_US: u64 = 1_000_000;
    let quota = millicores.saturating_mul(period_us) / 1000;
    if quota >= MIN_QUOTA_US {
        (quota, period_us)
    } else {
        (
            millicores.saturating_mul(MAX_PERIOD_US) / 1000,
            MAX_PERIOD_US,
        )
    }
}

/// Positive ceilings from the WorkUnit budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock time of the attempt, in seconds.
    pub wall_seconds: NonZeroU64,
    /// CPU time of the whole process tree, in seconds.
    pub cpu_seconds: NonZeroU64,
    /// Memory of the whole process tree, in bytes.
    pub memory_bytes: NonZeroU64,
    /// Everything the worker may write, in bytes.
    pub disk_bytes: NonZeroU64,
    /// Processes and threads alive at once, a count.
    pub max_processes: NonZeroU64,
    /// Standard output and standard error kept, each, in bytes.
    pub max_output_bytes: NonZeroU64,
    /// Size of the captured patch, in bytes.
    pub max_patch_bytes: NonZeroU64,
    /// CPU bandwidth, in thousandths of a CPU: the lower of the WorkUnit's and the preset's
    /// `cpu_millicores`; absent when neither sets one (the backend gives all of the host's
    /// CPUs). A backend never gives more than the host has.
    #[serde(default)]
    pub cpu_millicores: Option<NonZeroU64>,
}

#[cfg(test)]
mod tests {
    use super::cfs_bandwidth;

    /// Every cap is written exactly: a quota under the kernel's 1 ms minimum moves to the
    /// 1 s period instead of being rounded up to more bandwidth.
    #[test]
    fn the_cpu_bandwidth_is_exact_down_to_one_millicore() {
        assert_eq!(cfs_bandwidth(2000, 100_000), (200_000, 100_000));
        assert_eq!(cfs_bandwidth(1500, 100_000), (150_000, 100_000));
        assert_eq!(cfs_bandwidth(10, 100_000), (1_000, 100_000));
        assert_eq!(cfs_bandwidth(9, 100_000), (9_000, 1_000_000));
        assert_eq!(cfs_bandwidth(1, 100_000), (1_000, 1_000_000));
        for m in 1..=64_000u64 {
            let (q, p) = cfs_bandwidth(m, 100_000);
            assert!(q >= 1_000 && p <= 1_000_000, "{m}: {q}/{p}");
            assert_eq!(q * 1000, m * p, "{m}: {q}/{p} is not {m} millicores");
        }
    }
}
