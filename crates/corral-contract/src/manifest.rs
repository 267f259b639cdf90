//! ResultManifest and CandidateReference (CONTRACT.md).

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::canonical::Digest;
use crate::capabilities::SandboxCapabilities;
use crate::codes::Rejection;
use crate::documents::RESULT_MANIFEST_SCHEMA;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The worker exited 0 and every check passed.
    CandidateCaptured,
    /// The worker exited 0 but a scope, path, size or provenance check failed.
    CandidateRejected,
    /// Any other termination.
    AttemptFailed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    Exited,
    Signaled,
    WallTimeout,
    CpuLimit,
    MemoryLimit,
    Cancelled,
    NotStarted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentRef {
    pub id: String,
    pub digest: Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RepositoryRef {
    pub base_sha: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxRecord {
    pub backend: String,
    pub capabilities: SandboxCapabilities,
    pub policy_digest: Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionRecord {
    pub termination: Termination,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub wall_ms: u64,
    pub cpu_ms: u64,
    pub peak_memory_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogRef {
    pub digest: Digest,
    /// Bytes the worker wrote to the stream (may exceed what was kept).
    pub bytes: u64,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Logs {
    pub stdout: LogRef,
    pub stderr: LogRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactRef {
    pub digest: Digest,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    TypeChanged,
    ModeChanged,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangedPath {
    pub path: String,
    pub change: ChangeKind,
}

/// The captured candidate: one patch in the artifact store and the paths it changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CandidateReference {
    pub patch: ArtifactRef,
    pub changed_paths: Vec<ChangedPath>,
}

/// A boolean that can only be `false`: a run never grants authority, and a document that
/// claims otherwise does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NoAuthority;

impl Serialize for NoAuthority {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(false)
    }
}

impl<'de> Deserialize<'de> for NoAuthority {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if bool::deserialize(d)? {
            Err(serde::de::Error::custom(
                "a run never grants authority; expected false",
            ))
        } else {
            Ok(NoAuthority)
        }
    }
}

impl JsonSchema for NoAuthority {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoAuthority".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "const": false })
    }
}

/// Always `{ "verification": false, "merge": false }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Authority {
    pub verification: NoAuthority,
    pub merge: NoAuthority,
}

/// The record of one run that passed admission, whatever happened after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "ResultManifest")]
pub struct ResultManifest {
    #[schemars(extend("const" = RESULT_MANIFEST_SCHEMA))]
    pub schema_version: String,
    pub outcome: Outcome,
    pub rejections: Vec<Rejection>,
    pub work_unit: DocumentRef,
    pub preset: DocumentRef,
    pub repository: RepositoryRef,
    pub sandbox: SandboxRecord,
    pub execution: ExecutionRecord,
    pub logs: Logs,
    pub candidate: Option<CandidateReference>,
    pub authority: Authority,
    /// The executable that ran and its digest (provider-version drift evidence).
    pub executable: ExecutableRecord,
    /// Changed paths that the base tree's ignore rules cover: scope-checked, not in the patch.
    #[serde(default)]
    pub ignored_paths: Vec<String>,
    /// Every destination the worker asked corral's egress proxy for (allowlist runs): allowed
    /// or refused with the reason, and the bytes relayed.
    #[serde(default)]
    pub network: Vec<EgressRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutableRecord {
    pub path: String,
    pub digest: Digest,
}

/// One line of a run's egress record (allowlist mode, ADR-0030): what the worker asked the
/// egress proxy for, whether it was allowed, and the bytes relayed. Aggregated per
/// `(destination, allowed, reason)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EgressRecord {
    /// Canonical `host:port`, or the escaped raw authority when it could not be parsed
    /// (`-` when no request could be read).
    pub destination: String,
    pub allowed: bool,
    /// Why it was refused or failed (a stable code such as `not_on_allowlist`); `None` when
    /// allowed and relayed.
    pub reason: Option<String>,
    pub connections: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
}
