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
