//! The input documents of CONTRACT.md: WorkUnit, AgentPreset, trusted connections.
//!
//! Unknown fields are errors everywhere (`deny_unknown_fields`), so no alias such as `prompt`,
//! `goal` or `title` can carry authority. Fields that admission must report as missing with a
//! reason code (rather than as a parse error) are `Option`s here; the generated JSON Schema
//! still marks them required (see `schema::require_all`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::require_all;

pub const WORK_UNIT_SCHEMA: &str = "corral.work-unit/v1";
pub const AGENT_PRESET_SCHEMA: &str = "corral.agent-preset/v1";
pub const CONNECTIONS_SCHEMA: &str = "corral.connections/v1";
pub const RESULT_MANIFEST_SCHEMA: &str = "corral.result-manifest/v1";

/// One task for one untrusted worker: what to do, with which permissions, budgets and scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = require_all, title = "WorkUnit")]
pub struct WorkUnit {
    #[schemars(extend("const" = WORK_UNIT_SCHEMA))]
    pub schema_version: String,
    #[schemars(length(min = 1, max = 200))]
    pub id: String,
    /// The canonical task text: the only one a worker receives.
    pub objective: Option<String>,
    pub repository: Repository,
    pub security: Security,
    pub permissions: Permissions,
    pub budget: Budget,
    pub constraints: Constraints,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = require_all)]
pub struct Repository {
    /// The exact commit the workspace is built from: 40 (SHA-1) or 64 (SHA-256) lowercase hex.
    #[schemars(regex(pattern = r"^([0-9a-f]{40}|[0-9a-f]{64})$"))]
    pub base_sha: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = require_all)]
pub struct Security {
    pub sandbox_required: Option<bool>,
}

/// WorkUnit network permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NetworkPermission {
    None,
    Allowlist,
    Unrestricted,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = require_all)]
pub struct Permissions {
    pub process_execution: Option<bool>,
    pub secrets: Option<Vec<String>>,
    pub network: Option<NetworkPermission>,
    /// `host:port` strings; parsed and canonicalized by admission.
    pub network_allowlist: Option<Vec<String>>,
    pub filesystem_write: Option<Vec<String>>,
}

/// Positive ceilings. A backend may enforce stricter values, never weaker ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = require_all)]
pub struct Budget {
    #[schemars(range(min = 1))]
    pub wall_seconds: Option<u64>,
    #[schemars(range(min = 1))]
    pub cpu_seconds: Option<u64>,
    #[schemars(range(min = 1))]
    pub memory_bytes: Option<u64>,
    #[schemars(range(min = 1))]
    pub disk_bytes: Option<u64>,
    #[schemars(range(min = 1))]
    pub max_processes: Option<u64>,
    #[schemars(range(min = 1))]
    pub max_output_bytes: Option<u64>,
    #[schemars(range(min = 1))]
    pub max_patch_bytes: Option<u64>,
}

impl Budget {
    /// Every ceiling with its field name, in contract order.
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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = require_all)]
pub struct Constraints {
    pub allowed_paths: Option<Vec<String>>,
    pub forbidden_paths: Option<Vec<String>>,
}

/// How the objective reaches the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PromptTransport {
    /// On standard input, then end of file.
    Stdin {},
    /// As the argument of the preset's own flag (`flag`, `objective`) after the fixed argv.
    Argument { flag: String },
    /// Always rejected until an isolated input mount exists (ADR-0017).
    File {},
}

/// Network policy a maintainer gives a preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PresetNetworkPolicy {
    Disabled,
    Allowlisted,
    ModelOnly,
}

/// A maintainer-owned description of how to run one agent. A WorkUnit can never name an
/// executable, argv or shell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "AgentPreset")]
pub struct AgentPreset {
    #[schemars(extend("const" = AGENT_PRESET_SCHEMA))]
    pub schema_version: String,
    #[schemars(length(min = 1, max = 200))]
    pub id: String,
    /// Absolute path of the agent program.
    pub executable: String,
    /// Fixed arguments, never taken from the WorkUnit.
    pub argv: Vec<String>,
    pub prompt_transport: PromptTransport,
    /// Name of an entry of the trusted connections document (`model_only` presets).
    #[serde(default)]
    pub model_connection: Option<String>,
    pub env_allowlist: Vec<String>,
    pub network_policy: PresetNetworkPolicy,
    /// Host paths the worker may read (absolute).
    #[serde(default)]
    pub read_only_paths: Vec<String>,
    #[schemars(extend("const" = "candidate_only"))]
    pub authority: String,
    /// When set, the executable's bytes must hash to this (`sha256:<64 hex>` or 64 hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(sha256:)?[0-9a-f]{64}$"))]
    pub executable_sha256: Option<String>,
}

/// Maintainer-owned model/execution connections, resolved before admission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "TrustedConnections")]
pub struct TrustedConnections {
    #[schemars(extend("const" = CONNECTIONS_SCHEMA))]
    pub schema_version: String,
    pub connections: BTreeMap<String, Connection>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Connection {
    /// `host:port` destinations this connection may reach.
    pub destinations: Vec<String>,
}
