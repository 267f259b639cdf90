//! ResultManifest and CandidateReference (CONTRACT.md).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::canonical::Digest;
use crate::capabilities::SandboxCapabilities;
use crate::codes::Rejection;
#[cfg(feature = "schema")]
use crate::documents::RESULT_MANIFEST_SCHEMA;

/// How a run that passed admission ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The worker exited 0 and every check passed.
    CandidateCaptured,
    /// The worker exited 0 but a scope, path, size or provenance check failed.
    CandidateRejected,
    /// Any other termination.
    AttemptFailed,
}

/// How the worker's process tree ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// The worker exited by itself (`exit_code`).
    Exited,
    /// A signal ended the worker (`signal`), not one of corral's limits.
    Signaled,
    /// `wall_seconds` ran out and corral killed the tree.
    WallTimeout,
    /// `cpu_seconds` ran out.
    CpuLimit,
    /// The tree hit `memory_bytes` and the kernel killed a process of it.
    MemoryLimit,
    /// The run was cancelled (corral was interrupted) and the tree killed.
    Cancelled,
    /// The worker never ran (the sandbox could not be set up, say).
    NotStarted,
}

/// An input document of the run: its `id` and the `sha256:` of its canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DocumentRef {
    /// The document's `id`, as written.
    pub id: String,
    /// The `sha256:` of its canonical JSON.
    pub digest: Digest,
}

/// The repository state the attempt started from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RepositoryRef {
    /// The base commit (40 or 64 lowercase hex digits).
    pub base_sha: String,
}

/// The sandbox the worker ran in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxRecord {
    /// The sandbox backend (`linux`).
    pub backend: String,
    /// The capabilities probed before the run, each with its evidence (all enforced, or
    /// nothing ran).
    pub capabilities: SandboxCapabilities,
    /// The `sha256:` of the SandboxPolicy's canonical JSON.
    pub policy_digest: Digest,
    /// Who corral ran as (ADR-0080). Absent for a backend without modes (or in manifests
    /// written before corral recorded it).
    #[serde(default)]
    pub mode: Option<SandboxMode>,
}

/// Who corral ran as, and so what a bug in corral or an escape from the sandbox could reach
/// (ADR-0080).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// corral ran as root; the worker had a uid and gid of its own.
    Root,
    /// corral ran as an ordinary user, mapped to 0 in a user namespace of its own; the
    /// worker was that user's one id there, without capabilities.
    Rootless,
}

/// What the worker's execution used and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ExecutionRecord {
    /// How the process tree ended.
    pub termination: Termination,
    /// The worker's exit status, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended the worker, when one did.
    pub signal: Option<i32>,
    /// Wall-clock time, in milliseconds.
    pub wall_ms: u64,
    /// CPU time of the whole tree, in milliseconds.
    pub cpu_ms: u64,
    /// Peak memory of the whole tree, in bytes.
    pub peak_memory_bytes: u64,
    /// The CPU bandwidth the tree was held to, in thousandths of a CPU: the budget's
    /// `cpu_millicores`, or all of the host's CPUs. Absent when the worker never started (or
    /// in manifests written before corral recorded it).
    #[serde(default)]
    pub cpu_cap_millicores: Option<u64>,
}

/// One stored output stream of the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LogRef {
    /// The `sha256:` of the bytes kept, in the artifact store.
    pub digest: Digest,
    /// Bytes the worker wrote to the stream (may exceed what was kept).
    pub bytes: u64,
    /// Whether more was written than `max_output_bytes` kept.
    pub truncated: bool,
}

/// The worker's standard output and standard error, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Logs {
    /// Standard output.
    pub stdout: LogRef,
    /// Standard error.
    pub stderr: LogRef,
}

/// An artifact in the content-addressed store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ArtifactRef {
    /// The `sha256:` of its bytes: its name in the store.
    pub digest: Digest,
    /// Its size, in bytes.
    pub bytes: u64,
}

/// How one path of the candidate changed against the base commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// New.
    Added,
    /// Other content.
    Modified,
    /// Gone.
    Deleted,
    /// A file became a symbolic link or the other way round.
    TypeChanged,
    /// Same content, other mode (the executable bit).
    ModeChanged,
}

/// One path the candidate changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ChangedPath {
    /// The repository path.
    pub path: String,
    /// How it changed.
    pub change: ChangeKind,
}

/// The captured candidate: one patch in the artifact store and the paths it changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CandidateReference {
    /// The patch (`git apply`-able against the base commit) in the artifact store.
    pub patch: ArtifactRef,
    /// Every path it changes.
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

#[cfg(feature = "schema")]
impl schemars::JsonSchema for NoAuthority {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoAuthority".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "const": false })
    }
}

/// Always `{ "verification": false, "merge": false }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Authority {
    /// Always `false`: the candidate is not verified by this run.
    pub verification: NoAuthority,
    /// Always `false`: the candidate may not be merged on this run's word.
    pub merge: NoAuthority,
}

/// The record of one run that passed admission, whatever happened after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(title = "ResultManifest"))]
pub struct ResultManifest {
    /// The document's kind and version: `corral.result-manifest/v1`.
    #[cfg_attr(feature = "schema", schemars(extend("const" = RESULT_MANIFEST_SCHEMA)))]
    pub schema_version: String,
    /// How the run ended.
    pub outcome: Outcome,
    /// Why the candidate was rejected or the attempt failed (empty when captured).
    pub rejections: Vec<Rejection>,
    /// The admitted WorkUnit.
    pub work_unit: DocumentRef,
    /// The admitted AgentPreset.
    pub preset: DocumentRef,
    /// The base commit.
    pub repository: RepositoryRef,
    /// The sandbox and the policy it enforced.
    pub sandbox: SandboxRecord,
    /// What the worker used and how it ended.
    pub execution: ExecutionRecord,
    /// The worker's stored output.
    pub logs: Logs,
    /// The captured candidate (`candidate_captured` only).
    pub candidate: Option<CandidateReference>,
    /// What the run grants: nothing.
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
    /// Every call the worker made to its model endpoint (a connection with an `upstream`:
    /// corral's credential broker, ADR-0095), in the order they ended; never a header value
    /// or a body.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_calls: Vec<ModelCallRecord>,
    /// Calls past the broker's record limit (4096 per run: a worker retrying after its
    /// budget is spent cannot grow the manifest without bound), counted only; absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub model_calls_unrecorded: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One call to the credential broker (ADR-0095).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ModelCallRecord {
    /// Milliseconds from the broker's start (before the worker's) to the call's head.
    pub started_ms: u64,
    /// The method as sent (escaped).
    pub method: String,
    /// The path as sent, without its query (escaped).
    pub path: String,
    /// The status the worker got: the upstream's, or the broker's own refusal; 0 when the
    /// call was cut before a response head.
    pub status: u16,
    /// Sent upstream for this call, in bytes.
    pub bytes_up: u64,
    /// Received from upstream for this call, in bytes.
    pub bytes_down: u64,
    /// From the call's head to its end.
    pub duration_ms: u64,
    /// Why the broker refused or cut the call: a rule (`placeholder_mismatch`,
    /// `path_not_allowed`, `method_not_allowed`, `upstream_tls`, ...) or a budget (`calls`,
    /// `request_bytes`, `response_bytes`, `call_time`, `total_time`); absent when it ran to
    /// its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// Whether the call reached the upstream.
    pub forwarded: bool,
}

/// The program the worker ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ExecutableRecord {
    /// The preset's executable path.
    pub path: String,
    /// The `sha256:` of the bytes that ran.
    pub digest: Digest,
}

/// One line of a run's egress record (allowlist mode, ADR-0030): what the worker asked the
/// egress proxy for, whether it was allowed, and the bytes relayed. Aggregated per
/// `(destination, allowed, reason)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct EgressRecord {
    /// Canonical `host:port`, or the escaped raw authority when it could not be parsed
    /// (`-` when no request could be read).
    pub destination: String,
    /// Whether the proxy let it through.
    pub allowed: bool,
    /// Why it was refused or failed (a stable code such as `not_on_allowlist`); `None` when
    /// allowed and relayed.
    pub reason: Option<String>,
    /// Connections to the proxy this line aggregates, a count.
    pub connections: u64,
    /// Relayed from the worker to the destination, in bytes.
    pub bytes_up: u64,
    /// Relayed from the destination to the worker, in bytes.
    pub bytes_down: u64,
}
