//! Fail-closed admission (the seeds' rules, each with a stable reason code).
//!
//! `admit` takes the parsed documents and the caller's explicit environment mapping and
//! returns either an [`AdmittedRun`] or *every* rejection it found. It does no I/O.
//!
//! Architecture Invariant: [`AdmittedRun`] has private fields and no public constructor, so
//! the only way to obtain one, and therefore to reach an executor, is `admit`. This crate
//! knows nothing of sandboxes, capture or the command line.
//!
//! # Example
//!
//! Parse a WorkUnit and an AgentPreset from JSON text with [`parse_document`] (unknown
//! fields are errors), admit them with [`admit`] (no trusted connections, an empty caller
//! environment, as `corral admit` does), and read the SandboxPolicy the run would get:
//!
//! ```
//! use std::collections::BTreeMap;
//!
//! use corral_admission::{admit, parse_document};
//! use corral_contract::{AgentPreset, NetworkMode, ReasonCode, WorkUnit};
//!
//! let work_unit = r#"{
//!   "schema_version": "corral.work-unit/v1",
//!   "id": "wu-0001",
//!   "objective": "Fix the off-by-one in src/range.rs and add a test",
//!   "repository": { "base_sha": "0123456789abcdef0123456789abcdef01234567" },
//!   "security": { "sandbox_required": true },
//!   "permissions": {
//!     "process_execution": true, "secrets": [], "network": "none",
//!     "network_allowlist": [], "filesystem_write": ["src/", "tests/"]
//!   },
//!   "budget": {
//!     "wall_seconds": 600, "cpu_seconds": 600,
//!     "memory_bytes": 2147483648, "disk_bytes": 1073741824,
//!     "max_processes": 256, "max_output_bytes": 1048576, "max_patch_bytes": 1048576
//!   },
//!   "constraints": { "allowed_paths": ["src/", "tests/"], "forbidden_paths": [".github/", "**/*.pem"] }
//! }"#;
//! let preset = r#"{
//!   "schema_version": "corral.agent-preset/v1",
//!   "id": "offline-agent",
//!   "executable": "/usr/local/bin/some-agent",
//!   "argv": ["--non-interactive"],
//!   "prompt_transport": { "kind": "stdin" },
//!   "model_connection": null,
//!   "env_allowlist": ["LANG", "TERM"],
//!   "network_policy": "disabled",
//!   "read_only_paths": ["/opt/some-agent"],
//!   "authority": "candidate_only"
//! }"#;
//!
//! let work_unit: WorkUnit = parse_document(work_unit.as_bytes()).expect("a valid WorkUnit");
//! let preset: AgentPreset = parse_document(preset.as_bytes()).expect("a valid AgentPreset");
//!
//! let run = admit(&work_unit, &preset, None, &BTreeMap::new()).expect("admissible");
//! let policy = run.policy();
//! assert_eq!(policy.network_mode(), NetworkMode::None);
//! assert!(policy.network_allowlist().is_empty());
//! let writable: Vec<&str> = policy.writable_paths().iter().map(|p| p.as_str()).collect();
//! assert_eq!(writable, ["src/", "tests/"]);
//! let forbidden: Vec<&str> = policy.forbidden_paths().iter().map(|p| p.as_str()).collect();
//! assert_eq!(forbidden, [".github/", "**/*.pem"]);
//! println!("policy {}", policy.digest());
//!
//! // The objective travels on stdin (the preset's `prompt_transport`), argv is the preset's.
//! assert_eq!(run.exec().args, ["--non-interactive"]);
//! assert_eq!(run.limits().max_patch_bytes.get(), 1_048_576);
//!
//! // A WorkUnit that does not require the sandbox is rejected, with every reason found.
//! let mut unsandboxed = work_unit.clone();
//! unsandboxed.security.sandbox_required = Some(false);
//! let rejected = admit(&unsandboxed, &preset, None, &BTreeMap::new()).unwrap_err();
//! assert!(rejected.0.iter().any(|r| r.code == ReasonCode::SandboxNotRequired));
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod config;
pub mod env;
pub mod load;
pub mod upstream;

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU64;

use corral_contract::documents::{
    AGENT_PRESET_SCHEMA, CONNECTIONS_SCHEMA, NetworkPermission, PresetNetworkPolicy,
    PromptTransport, WORK_UNIT_SCHEMA,
};
use corral_contract::{
    AgentPreset, Destination, Digest, ExecSpec, Limits, NetworkMode, PathPattern, ReasonCode,
    Rejection, SandboxPolicy, TrustedConnections, WorkUnit, digest_of,
};
use serde::Serialize;

pub use config::{LoadPresetError, load_preset};
pub use env::{build_worker_env, container_engine_reference, forbidden_env_name};
pub use load::{DocumentError, parse_document};

/// A run that passed every admission rule: the immutable policy, what to execute and the
/// limits. Only [`admit`] builds one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdmittedRun {
    work_unit_id: String,
    work_unit_digest: Digest,
    preset_id: String,
    preset_digest: Digest,
    base_sha: String,
    policy: SandboxPolicy,
    exec: ExecSpec,
    limits: Limits,
}

impl AdmittedRun {
    /// The admitted WorkUnit's `id`, as written in the document.
    #[must_use]
    pub fn work_unit_id(&self) -> &str {
        &self.work_unit_id
    }
    /// Digest of the admitted WorkUnit document (`digest_of`), recorded in the ResultManifest.
    #[must_use]
    pub fn work_unit_digest(&self) -> &Digest {
        &self.work_unit_digest
    }
    /// The admitted AgentPreset's `id`, as written in the document.
    #[must_use]
    pub fn preset_id(&self) -> &str {
        &self.preset_id
    }
    /// Digest of the admitted AgentPreset document (`digest_of`), recorded in the ResultManifest.
    #[must_use]
    pub fn preset_digest(&self) -> &Digest {
        &self.preset_digest
    }
    /// The validated base commit (40 or 64 lowercase hex digits) the attempt starts from.
    #[must_use]
    pub fn base_sha(&self) -> &str {
        &self.base_sha
    }
    /// The immutable SandboxPolicy: network mode, egress allowlist and the path scope.
    #[must_use]
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }
    /// What the sandbox executes: the preset's executable and argv (plus the objective when
    /// the prompt is an argument), the built worker environment, stdin and read-only paths.
    #[must_use]
    pub fn exec(&self) -> &ExecSpec {
        &self.exec
    }
    /// The WorkUnit's budget as checked, all-positive limits.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}

/// All rejections of one admission, in document order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("admission rejected ({} reason(s))", .0.len())]
pub struct Rejected(pub Vec<Rejection>);

/// Collects rejections; fields are reported as `work_unit.x.y`, `preset.x`, `connections.x`,
/// `env.NAME` so a caller can name the file.
#[derive(Default)]
struct Findings(Vec<Rejection>);

impl Findings {
    fn add(&mut self, code: ReasonCode, field: impl Into<String>, detail: impl Into<String>) {
        self.0
            .push(Rejection::new(code, Some(field.into()), detail));
    }

    fn missing(&mut self, field: &str) {
        self.add(
            ReasonCode::FieldMissing,
            field,
            format!("{field} is required"),
        );
    }
}

/// Admits a run or returns every reason it cannot run.
///
/// `connections` is the maintainer's trusted connections document, resolved by the caller;
/// `caller_env` is the explicit mapping the worker environment is built from.
pub fn admit(
    work_unit: &WorkUnit,
    preset: &AgentPreset,
    connections: Option<&TrustedConnections>,
    caller_env: &BTreeMap<String, String>,
) -> Result<AdmittedRun, Rejected> {
    let mut f = Findings::default();
    let wu = check_work_unit(work_unit, &mut f);
    let pr = check_preset(preset, &mut f);
    let allowlist = check_network(work_unit, preset, connections, &mut f);
    let env = match build_worker_env(&preset.env_allowlist, caller_env) {
        Ok(env) => Some(env),
        Err(rejections) => {
            f.0.extend(rejections);
            None
        }
    };
    // Preset-owned configuration: fixed values (names never on the caller's allowlist, so
    // the two cannot collide) and files for the worker's HOME.
    // `{model_base_url}` and `{model_token}` are defined only where the credential broker
    // serves the run: a preset whose trusted connection names an upstream (ADR-0095).
    let broker = preset
        .model_connection
        .as_deref()
        .and_then(|n| connections?.connections.get(n))
        .is_some_and(|c| c.upstream.is_some());
    config::check_env(preset, broker, &mut f.0);
    let home_files =
        config::check_home_files(preset, work_unit.budget.disk_bytes, broker, &mut f.0);
    let env = env.map(|mut env| {
        env.extend(preset.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env
    });
    let (Some(wu), Some(pr), Some((mode, allowlist)), Some(env)) = (wu, pr, allowlist, env) else {
        return Err(Rejected(f.0));
    };
    if !f.0.is_empty() {
        return Err(Rejected(f.0));
    }
    let mut args = preset.argv.clone();
    let stdin = match &preset.prompt_transport {
        PromptTransport::Stdin {} => Some(wu.objective.clone().into_bytes()),
        PromptTransport::Argument { flag } => {
            if wu.objective.contains('\0') {
                f.add(
                    ReasonCode::ArgvInvalid,
                    "work_unit.objective",
                    "an objective passed as an argument cannot hold a NUL byte",
                );
                return Err(Rejected(f.0));
            }
            args.push(flag.clone());
            args.push(wu.objective.clone());
            None
        }
        PromptTransport::File {} => return Err(Rejected(f.0)),
    };
    Ok(AdmittedRun {
        work_unit_id: work_unit.id.clone(),
        work_unit_digest: digest_of(work_unit),
        preset_id: preset.id.clone(),
        preset_digest: digest_of(preset),
        base_sha: wu.base_sha,
        policy: SandboxPolicy::new(mode, allowlist, wu.allowed, wu.forbidden),
        exec: ExecSpec {
            executable: preset.executable.clone(),
            args,
            env,
            stdin,
            read_only_paths: preset.read_only_paths.clone(),
            executable_sha256: pr.executable_sha256,
            home_files,
        },
        limits: Limits {
            // The lower of the two: the WorkUnit may ask for less than the preset allows.
            cpu_millicores: match (wu.limits.cpu_millicores, pr.cpu_millicores) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            ..wu.limits
        },
    })
}

/// The checked parts of a WorkUnit.
struct CheckedWorkUnit {
    objective: String,
    base_sha: String,
    allowed: Vec<PathPattern>,
    forbidden: Vec<PathPattern>,
    limits: Limits,
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !id.starts_with('.')
}

fn check_work_unit(wu: &WorkUnit, f: &mut Findings) -> Option<CheckedWorkUnit> {
    let before = f.0.len();
    if wu.schema_version != WORK_UNIT_SCHEMA {
        f.add(
            ReasonCode::SchemaVersionUnsupported,
            "work_unit.schema_version",
            format!("expected {WORK_UNIT_SCHEMA}, found {:?}", wu.schema_version),
        );
    }
    if !valid_id(&wu.id) {
        f.add(
            ReasonCode::IdInvalid,
            "work_unit.id",
            "id must be 1-200 of [A-Za-z0-9._-], not starting with '.'",
        );
    }
    match &wu.objective {
        None => f.missing("work_unit.objective"),
        Some(o) if o.trim().is_empty() => f.add(
            ReasonCode::ObjectiveEmpty,
            "work_unit.objective",
            "objective is empty",
        ),
        Some(_) => {}
    }
    match &wu.repository.base_sha {
        None => f.missing("work_unit.repository.base_sha"),
        Some(sha) if !is_commit_sha(sha) => f.add(
            ReasonCode::BaseShaInvalid,
            "work_unit.repository.base_sha",
            "base_sha must be 40 or 64 lowercase hex digits",
        ),
        Some(_) => {}
    }
    match wu.security.sandbox_required {
        None => f.missing("work_unit.security.sandbox_required"),
        Some(false) => f.add(
            ReasonCode::SandboxNotRequired,
            "work_unit.security.sandbox_required",
            "sandbox_required must be true",
        ),
        Some(true) => {}
    }
    let p = &wu.permissions;
    match p.process_execution {
        None => f.missing("work_unit.permissions.process_execution"),
        Some(false) => f.add(
            ReasonCode::ProcessExecutionNotPermitted,
            "work_unit.permissions.process_execution",
            "process_execution must be true for a coding agent",
        ),
        Some(true) => {}
    }
    match &p.secrets {
        None => f.missing("work_unit.permissions.secrets"),
        Some(s) if !s.is_empty() => f.add(
            ReasonCode::SecretsNotPermitted,
            "work_unit.permissions.secrets",
            "secrets must be [] on this path",
        ),
        Some(_) => {}
    }
    let mut limits = [None; 7];
    for (slot, (name, value)) in limits.iter_mut().zip(wu.budget.fields()) {
        let field = format!("work_unit.budget.{name}");
        match value {
            None => f.missing(&field),
            Some(v) => match NonZeroU64::new(v) {
                None => f.add(
                    ReasonCode::BudgetNotPositive,
                    field,
                    format!("{name} must be positive"),
                ),
                Some(v) => *slot = Some(v),
            },
        }
    }
    let allowed = match &wu.constraints.allowed_paths {
        None => {
            f.missing("work_unit.constraints.allowed_paths");
            Vec::new()
        }
        Some(list) => {
            if list.is_empty() {
                f.add(
                    ReasonCode::AllowedPathsEmpty,
                    "work_unit.constraints.allowed_paths",
                    "allowed_paths must name at least one path",
                );
            }
            check_patterns(list, "work_unit.constraints.allowed_paths", true, f)
        }
    };
    let forbidden = match &wu.constraints.forbidden_paths {
        None => {
            f.missing("work_unit.constraints.forbidden_paths");
            Vec::new()
        }
        Some(list) => check_patterns(list, "work_unit.constraints.forbidden_paths", false, f),
    };
    match (&p.filesystem_write, &wu.constraints.allowed_paths) {
        (None, _) => f.missing("work_unit.permissions.filesystem_write"),
        (Some(write), Some(allowed)) if write != allowed => f.add(
            ReasonCode::FilesystemWriteMismatch,
            "work_unit.permissions.filesystem_write",
            "filesystem_write must exactly equal constraints.allowed_paths",
        ),
        _ => {}
    }
    let cpu_millicores = positive(
        wu.budget.cpu_millicores,
        "work_unit.budget.cpu_millicores",
        f,
    );
    if f.0.len() != before {
        return None;
    }
    let [
        Some(wall),
        Some(cpu),
        Some(mem),
        Some(disk),
        Some(procs),
        Some(out),
        Some(patch),
    ] = limits
    else {
        return None;
    };
    Some(CheckedWorkUnit {
        objective: wu.objective.clone()?,
        base_sha: wu.repository.base_sha.clone()?,
        allowed,
        forbidden,
        limits: Limits {
            wall_seconds: wall,
            cpu_seconds: cpu,
            memory_bytes: mem,
            disk_bytes: disk,
            max_processes: procs,
            max_output_bytes: out,
            max_patch_bytes: patch,
            cpu_millicores,
        },
    })
}

fn is_commit_sha(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn check_patterns(
    list: &[String],
    field: &str,
    writable: bool,
    f: &mut Findings,
) -> Vec<PathPattern> {
    let mut out = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        let at = format!("{field}[{i}]");
        match PathPattern::new(entry) {
            Err(e) => f.add(ReasonCode::PathInvalid, at, format!("{entry:?}: {e}")),
            Ok(p) if writable && p.names_git_dir() => f.add(
                ReasonCode::PathProtected,
                at,
                format!("{entry:?} names the repository's .git (or a lookalike), which is never writable"),
            ),
            Ok(p) => out.push(p),
        }
    }
    out
}

struct CheckedPreset {
    executable_sha256: Option<Digest>,
    cpu_millicores: Option<NonZeroU64>,
}

/// An optional ceiling: absent is no ceiling, 0 is refused (budget_not_positive).
fn positive(value: Option<u64>, field: &str, f: &mut Findings) -> Option<NonZeroU64> {
    let v = value?;
    let n = NonZeroU64::new(v);
    if n.is_none() {
        f.add(
            ReasonCode::BudgetNotPositive,
            field,
            "cpu_millicores must be positive (omit it for all of the host's CPUs)",
        );
    }
    n
}

fn is_normal_absolute(path: &str) -> bool {
    path.len() > 1
        && path.starts_with('/')
        && !path.ends_with('/')
        && !path.chars().any(char::is_control)
        && path[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

// Host trees a preset may never expose to the worker, even read-only (shared with the
// schemas).
use corral_contract::rules::HIDDEN_HOST_TREES;

fn check_preset(preset: &AgentPreset, f: &mut Findings) -> Option<CheckedPreset> {
    let before = f.0.len();
    if preset.schema_version != AGENT_PRESET_SCHEMA {
        f.add(
            ReasonCode::SchemaVersionUnsupported,
            "preset.schema_version",
            format!(
                "expected {AGENT_PRESET_SCHEMA}, found {:?}",
                preset.schema_version
            ),
        );
    }
    if !valid_id(&preset.id) {
        f.add(
            ReasonCode::IdInvalid,
            "preset.id",
            "id must be 1-200 of [A-Za-z0-9._-], not starting with '.'",
        );
    }
    if !is_normal_absolute(&preset.executable) {
        f.add(
            ReasonCode::ExecutableNotAbsolute,
            "preset.executable",
            format!("{:?} is not a normalized absolute path", preset.executable),
        );
    }
    for (i, arg) in preset.argv.iter().enumerate() {
        if arg.contains('\0') {
            f.add(
                ReasonCode::ArgvInvalid,
                format!("preset.argv[{i}]"),
                "argument contains a NUL byte",
            );
        }
    }
    match &preset.prompt_transport {
        PromptTransport::Stdin {} => {}
        PromptTransport::Argument { flag } => {
            if !flag.starts_with('-')
                || flag.len() < 2
                || flag.chars().any(|c| c.is_control() || c.is_whitespace())
            {
                f.add(
                    ReasonCode::PromptFlagInvalid,
                    "preset.prompt_transport.flag",
                    "flag must be one option word starting with '-'",
                );
            }
        }
        PromptTransport::File {} => f.add(
            ReasonCode::PromptTransportFile,
            "preset.prompt_transport.kind",
            "file prompt transport is rejected until an isolated input mount exists",
        ),
    }
    if preset.authority != "candidate_only" {
        f.add(
            ReasonCode::AuthorityNotCandidateOnly,
            "preset.authority",
            format!(
                "authority must be candidate_only, found {:?}",
                preset.authority
            ),
        );
    }
    for (i, name) in preset.env_allowlist.iter().enumerate() {
        if let Some((code, why)) = forbidden_env_name(name) {
            f.add(
                code,
                format!("preset.env_allowlist[{i}]"),
                format!("{name}: {why}"),
            );
        }
    }
    for (i, path) in preset.read_only_paths.iter().enumerate() {
        let hidden = HIDDEN_HOST_TREES
            .iter()
            .any(|t| path == t || path.starts_with(&format!("{t}/")));
        if !is_normal_absolute(path) || hidden {
            f.add(
                ReasonCode::ReadOnlyPathInvalid,
                format!("preset.read_only_paths[{i}]"),
                format!(
                    "{path:?} must be a normalized absolute path outside {HIDDEN_HOST_TREES:?}"
                ),
            );
        }
    }
    let executable_sha256 = match &preset.executable_sha256 {
        None => None,
        Some(s) => {
            let parsed = match s.strip_prefix("sha256:") {
                Some(hex) => Digest::from_hex(hex),
                None => Digest::from_hex(s),
            };
            match parsed {
                Ok(d) => Some(d),
                Err(_) => {
                    f.add(
                        ReasonCode::ExecutableDigestInvalid,
                        "preset.executable_sha256",
                        "executable_sha256 must be sha256:<64 lowercase hex>",
                    );
                    None
                }
            }
        }
    };
    let cpu_millicores = positive(preset.cpu_millicores, "preset.cpu_millicores", f);
    if f.0.len() != before {
        return None;
    }
    Some(CheckedPreset {
        executable_sha256,
        cpu_millicores,
    })
}

fn parse_destinations(list: &[String], field: &str, f: &mut Findings) -> Option<Vec<Destination>> {
    let before = f.0.len();
    let mut out: Vec<Destination> = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, entry) in list.iter().enumerate() {
        match Destination::parse(entry) {
            Err(e) => f.add(
                ReasonCode::DestinationInvalid,
                format!("{field}[{i}]"),
                format!("{entry:?}: {e}"),
            ),
            Ok(d) => {
                if !seen.insert(d.clone()) {
                    f.add(
                        ReasonCode::DestinationDuplicate,
                        format!("{field}[{i}]"),
                        format!("{entry:?} repeats {d}"),
                    );
                }
                out.push(d);
            }
        }
    }
    (f.0.len() == before).then_some(out)
}

/// The seeds' network table, row by row.
fn check_network(
    wu: &WorkUnit,
    preset: &AgentPreset,
    connections: Option<&TrustedConnections>,
    f: &mut Findings,
) -> Option<(NetworkMode, Vec<Destination>)> {
    const WU_NET: &str = "work_unit.permissions.network";
    const WU_LIST: &str = "work_unit.permissions.network_allowlist";
    let before = f.0.len();
    let Some(network) = wu.permissions.network else {
        f.missing(WU_NET);
        return None;
    };
    let Some(list) = &wu.permissions.network_allowlist else {
        f.missing(WU_LIST);
        return None;
    };
    let destinations = parse_destinations(list, WU_LIST, f);
    if preset.model_connection.is_some() && preset.network_policy != PresetNetworkPolicy::ModelOnly
    {
        f.add(
            ReasonCode::ModelConnectionUnexpected,
            "preset.model_connection",
            "only a model_only preset names a model_connection",
        );
    }
    let mode = match (network, preset.network_policy) {
        (NetworkPermission::Unrestricted, _) => {
            f.add(
                ReasonCode::NetworkUnrestricted,
                WU_NET,
                "unrestricted network is not supported",
            );
            None
        }
        (NetworkPermission::None, PresetNetworkPolicy::Disabled) => {
            if !list.is_empty() {
                f.add(
                    ReasonCode::NetworkAllowlistUnexpected,
                    WU_LIST,
                    "network none takes an empty network_allowlist",
                );
            }
            Some(NetworkMode::None)
        }
        (NetworkPermission::Allowlist, PresetNetworkPolicy::Allowlisted) => {
            if list.is_empty() {
                f.add(
                    ReasonCode::NetworkAllowlistEmpty,
                    WU_LIST,
                    "network allowlist names no destination",
                );
            }
            Some(NetworkMode::Allowlist)
        }
        (NetworkPermission::Allowlist, PresetNetworkPolicy::ModelOnly) => {
            // With a credential broker the model needs no destination of the proxy: the
            // broker is the way out (ADR-0095), and an empty list lets nothing else out.
            let brokered = check_model_only(preset, connections, destinations.as_deref(), f);
            if list.is_empty() && !brokered {
                f.add(
                    ReasonCode::NetworkAllowlistEmpty,
                    WU_LIST,
                    "network allowlist names no destination (a model_only preset's \
                     connection without an upstream is reached through the proxy)",
                );
            }
            Some(NetworkMode::Allowlist)
        }
        (wu_net, preset_net) => {
            f.add(
                ReasonCode::NetworkPolicyMismatch,
                WU_NET,
                format!(
                    "WorkUnit network {} does not fit preset network_policy {}",
                    serde_json::to_string(&wu_net).unwrap_or_default(),
                    serde_json::to_string(&preset_net).unwrap_or_default()
                ),
            );
            None
        }
    };
    if f.0.len() != before {
        return None;
    }
    Some((mode?, destinations?))
}

/// Checks a model_only preset's connection; returns whether it resolved and names an
/// upstream (the credential broker).
fn check_model_only(
    preset: &AgentPreset,
    connections: Option<&TrustedConnections>,
    destinations: Option<&[Destination]>,
    f: &mut Findings,
) -> bool {
    let Some(name) = &preset.model_connection else {
        f.add(
            ReasonCode::ModelConnectionMissing,
            "preset.model_connection",
            "a model_only preset must name a trusted connection",
        );
        return false;
    };
    let Some(doc) = connections else {
        f.add(
            ReasonCode::ModelConnectionMissing,
            "preset.model_connection",
            format!(
                "connection {name:?} cannot be resolved: no trusted connections document was given"
            ),
        );
        return false;
    };
    if doc.schema_version != CONNECTIONS_SCHEMA {
        f.add(
            ReasonCode::SchemaVersionUnsupported,
            "connections.schema_version",
            format!(
                "expected {CONNECTIONS_SCHEMA}, found {:?}",
                doc.schema_version
            ),
        );
        return false;
    }
    let Some(connection) = doc.connections.get(name) else {
        f.add(
            ReasonCode::ModelConnectionMissing,
            "preset.model_connection",
            format!("connection {name:?} is not in the trusted connections document"),
        );
        return false;
    };
    let brokered = connection.upstream.is_some();
    if let Some(u) = &connection.upstream {
        upstream::check_upstream(u, &format!("connections.connections.{name}.upstream"), f);
    }
    let field = format!("connections.connections.{name}.destinations");
    let Some(trusted) = parse_destinations(&connection.destinations, &field, f) else {
        return brokered;
    };
    let Some(destinations) = destinations else {
        return brokered;
    };
    for (i, d) in destinations.iter().enumerate() {
        if !trusted.contains(d) {
            f.add(
                ReasonCode::DestinationNotInConnection,
                format!("work_unit.permissions.network_allowlist[{i}]"),
                format!("{d} is not a destination of trusted connection {name:?}"),
            );
        }
    }
    brokered
}
