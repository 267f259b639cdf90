//! The input documents of CONTRACT.md: WorkUnit, AgentPreset, trusted connections.
//!
//! Unknown fields are errors everywhere (`deny_unknown_fields`), so no alias such as `prompt`,
//! `goal` or `title` can carry authority. Fields that admission must report as missing with a
//! reason code (rather than as a parse error) are `Option`s here; the generated JSON Schema
//! still marks them required (see `schema::require_all`).
//!
//! The doc comments of these types are the `description`s of the generated schemas: each
//! says what the field is for and, in parentheses, the reason code admission gives when a
//! rule on it is broken.

use std::collections::BTreeMap;

#[cfg(feature = "schema")]
use crate::schema::{network_rules, require_all};
use serde::{Deserialize, Serialize};

/// `schema_version` of a WorkUnit.
pub const WORK_UNIT_SCHEMA: &str = "corral.work-unit/v1";
/// `schema_version` of an AgentPreset.
pub const AGENT_PRESET_SCHEMA: &str = "corral.agent-preset/v1";
/// `schema_version` of a trusted connections document.
pub const CONNECTIONS_SCHEMA: &str = "corral.connections/v1";
/// `schema_version` of a ResultManifest.
pub const RESULT_MANIFEST_SCHEMA: &str = "corral.result-manifest/v1";

/// One task for one untrusted worker: what to do, with which permissions, budgets and scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(transform = require_all, title = "WorkUnit"))]
pub struct WorkUnit {
    /// The document's kind and version: `corral.work-unit/v1` (schema_version_unsupported).
    #[cfg_attr(feature = "schema", schemars(extend("const" = WORK_UNIT_SCHEMA)))]
    pub schema_version: String,
    /// The WorkUnit's name, recorded in the ResultManifest: 1-200 of `A-Z a-z 0-9 . _ -`, not
    /// starting with `.` (id_invalid).
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Id"))]
    pub id: String,
    /// The canonical task text: the only one the worker receives. Not empty or white space
    /// only (objective_empty).
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Objective"))]
    pub objective: Option<String>,
    /// Which commit the workspace is built from.
    pub repository: Repository,
    /// What the run requires of the sandbox.
    pub security: Security,
    /// What the worker may do.
    pub permissions: Permissions,
    /// The run's ceilings.
    pub budget: Budget,
    /// The path scope: where the candidate may change files.
    pub constraints: Constraints,
}

/// The repository a WorkUnit works on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(transform = require_all))]
pub struct Repository {
    /// The exact commit the workspace is built from: 40 (SHA-1) or 64 (SHA-256) lowercase hex
    /// digits (base_sha_invalid). Whether the repository has it is checked when the run starts.
    #[cfg_attr(
        feature = "schema",
        schemars(regex(pattern = r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$(?!\n)"))
    )]
    pub base_sha: Option<String>,
}

/// What a WorkUnit requires of the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(transform = require_all))]
pub struct Security {
    /// Always `true`: corral runs workers only in its sandbox (sandbox_not_required).
    #[cfg_attr(feature = "schema", schemars(extend("const" = true)))]
    pub sandbox_required: Option<bool>,
}

/// WorkUnit network permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum NetworkPermission {
    /// No network: the sandbox's own loopback only. Needs a `disabled` preset.
    None,
    /// Only the destinations of `network_allowlist`, through corral's egress proxy. Needs an
    /// `allowlisted` or `model_only` preset.
    Allowlist,
    /// Parsed so that admission can name it, and always rejected (network_unrestricted); the
    /// schema leaves it out.
    #[cfg_attr(feature = "schema", schemars(skip))]
    Unrestricted,
}

/// What a WorkUnit's worker may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(
    feature = "schema",
    schemars(transform = require_all, transform = network_rules)
)]
pub struct Permissions {
    /// Always `true`: a coding agent runs programs (process_execution_not_permitted).
    #[cfg_attr(feature = "schema", schemars(extend("const" = true)))]
    pub process_execution: Option<bool>,
    /// Always empty: no secret reaches a worker on this path (secrets_not_permitted).
    #[cfg_attr(feature = "schema", schemars(length(max = 0)))]
    pub secrets: Option<Vec<String>>,
    /// `none` or `allowlist`; `unrestricted` is rejected (network_unrestricted). Which one
    /// fits depends on the preset's `network_policy` (network_policy_mismatch).
    pub network: Option<NetworkPermission>,
    /// The `host:port` destinations the worker may reach: empty for `none`
    /// (network_allowlist_unexpected), at least one for `allowlist` (network_allowlist_empty),
    /// each valid (destination_invalid) and named once (destination_duplicate). A `model_only`
    /// preset's must be destinations of its trusted connection (destination_not_in_connection).
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Vec<crate::Destination>", extend("uniqueItems" = true))
    )]
    pub network_allowlist: Option<Vec<String>>,
    /// Exactly `constraints.allowed_paths`, in the same order (filesystem_write_mismatch).
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Vec<crate::schema::WritablePathPattern>", length(min = 1))
    )]
    pub filesystem_write: Option<Vec<String>>,
}

/// Positive ceilings. A backend may enforce stricter values, never weaker ones. Each is at
/// least 1 (budget_not_positive).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(transform = crate::schema::budget_rule))]
pub struct Budget {
    /// Wall-clock time of the attempt, in seconds; the worker is killed when it runs out.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub wall_seconds: Option<u64>,
    /// CPU time of the whole process tree, in seconds.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub cpu_seconds: Option<u64>,
    /// Memory of the whole process tree (tmpfs, shared memory and memfd included), in bytes.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub memory_bytes: Option<u64>,
    /// Everything the worker may write (workspace, `/tmp`, `HOME`), in bytes.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub disk_bytes: Option<u64>,
    /// Processes and threads alive at once, a count.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_processes: Option<u64>,
    /// Standard output and standard error kept, each, in bytes; the rest is counted and
    /// dropped.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_output_bytes: Option<u64>,
    /// Size of the captured patch, in bytes; a larger candidate is rejected.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_patch_bytes: Option<u64>,
    /// Optional: CPU bandwidth of the whole tree, in thousandths of a CPU (1500 = one and a
    /// half CPUs, enforced by the cgroup's CPU quota). Absent or null: all of the host's CPUs.
    /// The preset's `cpu_millicores` may lower it further; the ResultManifest records the cap
    /// applied (`execution.cpu_cap_millicores`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub cpu_millicores: Option<u64>,
}

impl Budget {
    /// Every required ceiling with its field name, in contract order (`cpu_millicores`, the
    /// one optional field, is not among them).
    #[must_use]
    pub fn fields(&self) -> [(&'static str, Option<u64>); 7] {
        [
            ("wall_seconds", self.wall_seconds),
            ("cpu_seconds", self.cpu_seconds),
            ("memory_bytes", self.memory_bytes),
            ("disk_bytes", self.disk_bytes),
            ("max_processes", self.max_processes),
            ("max_output_bytes", self.max_output_bytes),
            ("max_patch_bytes", self.max_patch_bytes),
        ]
    }
}

/// A WorkUnit's path scope. Entries are repository paths or `fnmatchcase` patterns: no
/// leading `/`, backslash or control character, no empty, `.` or `..` component, one trailing
/// `/` allowed (path_invalid); a literal entry also covers everything below it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(transform = require_all))]
pub struct Constraints {
    /// Where the candidate may change files: at least one entry (allowed_paths_empty), none
    /// naming `.git` or a lookalike (path_protected).
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Vec<crate::schema::WritablePathPattern>", length(min = 1))
    )]
    pub allowed_paths: Option<Vec<String>>,
    /// Where it may not, even inside `allowed_paths`.
    #[cfg_attr(feature = "schema", schemars(with = "Vec<crate::PathPattern>"))]
    pub forbidden_paths: Option<Vec<String>>,
}

/// How the objective reaches the worker. `file` is parsed so that admission can name it,
/// and always rejected until an isolated input mount exists (prompt_transport_file, ADR-0017);
/// the schema leaves it out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PromptTransport {
    /// On standard input, then end of file.
    Stdin {},
    /// As the argument of the preset's own flag (`flag`, `objective`) after the fixed argv.
    Argument {
        /// The option word, such as `--prompt`: `-` and at least one more character, no white
        /// space or control character (prompt_flag_invalid).
        #[cfg_attr(feature = "schema", schemars(with = "crate::schema::PromptFlag"))]
        flag: String,
    },
    /// Always rejected until an isolated input mount exists (ADR-0017).
    #[cfg_attr(feature = "schema", schemars(skip))]
    File {},
}

/// Network policy a maintainer gives a preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PresetNetworkPolicy {
    /// The agent needs no network: WorkUnits with network `none`.
    Disabled,
    /// The agent may reach what a WorkUnit's `network_allowlist` names.
    Allowlisted,
    /// The agent reaches its model only: the destinations of the trusted connection
    /// `model_connection` names.
    ModelOnly,
}

/// A maintainer-owned description of how to run one agent. A WorkUnit can never name an
/// executable, argv or shell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(
    feature = "schema",
    schemars(title = "AgentPreset", transform = crate::schema::model_connection_rule)
)]
pub struct AgentPreset {
    /// The document's kind and version: `corral.agent-preset/v1` (schema_version_unsupported).
    #[cfg_attr(feature = "schema", schemars(extend("const" = AGENT_PRESET_SCHEMA)))]
    pub schema_version: String,
    /// The preset's name, recorded in the ResultManifest: 1-200 of `A-Z a-z 0-9 . _ -`, not
    /// starting with `.` (id_invalid).
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::Id"))]
    pub id: String,
    /// The agent program: a normalized absolute host path (executable_not_absolute). It runs
    /// as installed, read-only, at that path.
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::HostPath"))]
    pub executable: String,
    /// Fixed arguments, never taken from the WorkUnit; none holds a NUL (argv_invalid).
    #[cfg_attr(feature = "schema", schemars(with = "Vec<crate::schema::ArgvEntry>"))]
    pub argv: Vec<String>,
    /// How the objective reaches the worker: `stdin` or `argument`.
    pub prompt_transport: PromptTransport,
    /// Name of an entry of the trusted connections document: required by `model_only` presets
    /// (model_connection_missing), refused on any other (model_connection_unexpected).
    #[serde(default)]
    pub model_connection: Option<String>,
    /// The environment variables a caller may pass to the worker (anything else is refused:
    /// env_not_allowlisted). Never a credential (env_credential_name), a name corral sets
    /// itself or a loader setting (env_name_invalid).
    #[cfg_attr(feature = "schema", schemars(with = "Vec<crate::schema::EnvName>"))]
    pub env_allowlist: Vec<String>,
    /// What network this agent may have; it must fit the WorkUnit's `network`
    /// (network_policy_mismatch).
    pub network_policy: PresetNetworkPolicy,
    /// Host paths the worker may read besides the executable (the agent's install root, say):
    /// normalized absolute paths outside the host's private trees (read_only_path_invalid).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Vec<crate::schema::ReadOnlyPath>")
    )]
    pub read_only_paths: Vec<String>,
    /// Always `candidate_only`: a run produces a candidate and never grants verification or
    /// merge authority (authority_not_candidate_only).
    #[cfg_attr(feature = "schema", schemars(extend("const" = "candidate_only")))]
    pub authority: String,
    /// When set, the executable's bytes must hash to this: `sha256:<64 lowercase hex>` or the
    /// 64 digits alone (executable_digest_invalid; executable_digest_mismatch when the run
    /// starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(regex(pattern = r"^(?:sha256:)?[0-9a-f]{64}$(?!\n)"))
    )]
    pub executable_sha256: Option<String>,
    /// Optional: the most CPU bandwidth this agent gets, in thousandths of a CPU, whatever
    /// the WorkUnit asks (the lower of the two applies; at least 1: budget_not_positive).
    /// Absent: the WorkUnit's, or all of the host's CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub cpu_millicores: Option<u64>,
    /// Optional: fixed, non-secret environment values the agent needs (a setting, never a
    /// key): names as `env_allowlist`'s (env_name_invalid, env_credential_name) and not also
    /// on it; values without a NUL, at most 32 KiB, never naming a container engine
    /// (env_value_invalid, env_container_socket). `{model_` is reserved for placeholders
    /// corral fills in. The caller's `--env` cannot change them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::PresetEnv"))]
    pub env: BTreeMap<String, String>,
    /// Optional: files placed in the worker's private, empty HOME before it starts (an
    /// agent's `~/.codex/config.toml`), owned by the worker, which may change them; at most
    /// 64, 1 MiB each, 4 MiB together, and within the WorkUnit's `disk_bytes`
    /// (home_file_invalid).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64)))]
    pub home_files: Vec<HomeFile>,
}

/// A file a preset places in the worker's HOME: its text in the preset, or in a file beside
/// the preset (maintainer-owned, read when the preset is loaded, so the preset's digest covers
/// its bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(transform = crate::schema::home_file_rule))]
pub struct HomeFile {
    /// Where, relative to HOME: `/`-separated, no leading `/`, no empty, `.` or `..`
    /// component, no backslash or control character, not a folder of another entry, each path
    /// once (home_file_invalid). Folders on the way are made, private to the worker.
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::HomeFilePath"))]
    pub path: String,
    /// The file's UTF-8 text (exactly one of `content` and `source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 1048576)))]
    pub content: Option<String>,
    /// The name of a UTF-8 file in the preset's own folder (no `/`; not a link), whose text
    /// the loader puts in `content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<crate::schema::SourceName>")
    )]
    pub source: Option<String>,
}

/// Maintainer-owned model/execution connections, resolved before admission. Admission reads
/// the entry a `model_only` preset names; the schema checks every entry the same way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(title = "TrustedConnections"))]
pub struct TrustedConnections {
    /// The document's kind and version: `corral.connections/v1` (schema_version_unsupported).
    #[cfg_attr(feature = "schema", schemars(extend("const" = CONNECTIONS_SCHEMA)))]
    pub schema_version: String,
    /// The connections, by the name a preset's `model_connection` uses.
    pub connections: BTreeMap<String, Connection>,
}

/// One trusted connection: where a `model_only` agent's model is served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Connection {
    /// `host:port` destinations this connection may reach, each valid (destination_invalid)
    /// and named once (destination_duplicate).
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Vec<crate::Destination>", extend("uniqueItems" = true))
    )]
    pub destinations: Vec<String>,
    /// Optional: the model upstream corral's credential broker serves (ADR-0095). With it the
    /// worker gets a plain-HTTP model endpoint on its own loopback and a per-run placeholder
    /// token; corral forwards each allowed call over TLS with the real credential, which the
    /// worker never holds (model_upstream_invalid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<ModelUpstream>,
}

/// Where a connection's broker forwards model calls, and what it allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ModelUpstream {
    /// `https://host[:port][/base/path]`: TLS only; no userinfo, query or fragment; the host
    /// as a destination's (one canonical spelling); the base path plain (no `%`, `\`, `//`,
    /// `.` or `..` segment, no trailing `/`).
    #[cfg_attr(
        feature = "schema",
        schemars(regex(pattern = r"^https://[^/?#@]+(?:/[^?#]*)?$(?!\n)"))
    )]
    pub base_url: String,
    /// Methods forwarded: 1-8 of `GET`, `POST`, `PUT`, `PATCH`, `DELETE`, each once.
    #[cfg_attr(
        feature = "schema",
        schemars(
            with = "Vec<crate::schema::UpstreamMethod>",
            length(min = 1, max = 8),
            extend("uniqueItems" = true)
        )
    )]
    pub methods: Vec<String>,
    /// Paths forwarded, below `base_url`: 1-64 plain absolute paths (`/chat/completions`);
    /// a request's path must equal one or lie below it.
    #[cfg_attr(
        feature = "schema",
        schemars(
            with = "Vec<crate::schema::PlainUrlPath>",
            length(min = 1, max = 64),
            extend("uniqueItems" = true)
        )
    )]
    pub path_prefixes: Vec<String>,
    /// Where the real credential comes from: `{"file": "/abs/path"}` (a host file, read by
    /// corral when the run starts), `{"env": "NAME"}` (a variable of corral's own
    /// environment), or `"none"`. Never a WorkUnit field.
    pub credential: CredentialSource,
    /// The header the credential goes in (default `Authorization`): an HTTP token.
    #[serde(default = "default_credential_header")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::HttpToken"))]
    pub credential_header: String,
    /// Written before the credential in that header, with one space (default `Bearer`;
    /// `""`: the credential alone, as `x-api-key` takes it).
    #[serde(default = "default_credential_scheme")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::schema::HttpToken"))]
    pub credential_scheme: String,
    /// A PEM file of the CA certificates to trust for this upstream, instead of the system's
    /// bundle: a normalized absolute host path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<crate::schema::HostPath>"))]
    pub ca_file: Option<String>,
    /// The finite budgets of one run's model calls.
    pub budgets: ModelBudgets,
}

fn default_credential_header() -> String {
    "Authorization".into()
}

fn default_credential_scheme() -> String {
    "Bearer".into()
}

/// Where a broker's real credential comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CredentialSource {
    /// A host file holding the credential (a normalized absolute path), read when the run
    /// starts; one trailing line end is dropped.
    File(#[cfg_attr(feature = "schema", schemars(with = "crate::schema::HostPath"))] String),
    /// A variable of corral's own environment.
    Env(
        #[cfg_attr(
            feature = "schema",
            schemars(regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]{0,255}$(?!\n)"))
        )]
        String,
    ),
    /// No credential: the placeholder header is removed and nothing is added.
    None,
}

/// The budgets of one run's model calls through the broker: all required, all positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ModelBudgets {
    /// Calls forwarded; call N+1 is refused (1-1,000,000).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1_000_000)))]
    pub calls: u64,
    /// Bytes sent upstream, all calls together (1 KiB-16 GiB).
    #[cfg_attr(
        feature = "schema",
        schemars(range(min = 1024, max = 17_179_869_184_u64))
    )]
    pub request_bytes: u64,
    /// Bytes received from upstream, all calls together (1 KiB-16 GiB).
    #[cfg_attr(
        feature = "schema",
        schemars(range(min = 1024, max = 17_179_869_184_u64))
    )]
    pub response_bytes: u64,
    /// One call's time in seconds (1-86,400).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 86_400)))]
    pub call_seconds: u64,
    /// All calls' time in seconds, from the run's start (1-604,800).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 604_800)))]
    pub total_seconds: u64,
}
