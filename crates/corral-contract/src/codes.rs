//! Stable reason codes. A code, once published, keeps its meaning; new codes may be added.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! reason_codes {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, )*) => {
        /// Why something was rejected. Serialized as the snake_case string on the right.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        pub enum ReasonCode {
            $( $(#[$doc])* #[serde(rename = $name)] $variant, )*
        }

        impl ReasonCode {
            /// Every code, in the order they are declared.
            pub const ALL: &'static [ReasonCode] = &[$(ReasonCode::$variant),*];

            /// The stable snake_case name, as serialized.
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self { $(ReasonCode::$variant => $name,)* }
            }
        }
    };
}

reason_codes! {
    // Documents.
    /// `schema_version` is not the one this corral reads.
    SchemaVersionUnsupported => "schema_version_unsupported",
    /// A field the seeds require is absent or null.
    FieldMissing => "field_missing",
    // WorkUnit.
    /// `objective` is empty or white space only.
    ObjectiveEmpty => "objective_empty",
    /// `security.sandbox_required` is not `true`.
    SandboxNotRequired => "sandbox_not_required",
    /// `permissions.process_execution` is not `true` (a coding agent runs programs).
    ProcessExecutionNotPermitted => "process_execution_not_permitted",
    /// `permissions.secrets` is not empty: no secret reaches a worker.
    SecretsNotPermitted => "secrets_not_permitted",
    /// `permissions.network` is `unrestricted`, which corral never grants.
    NetworkUnrestricted => "network_unrestricted",
    /// A budget ceiling is 0.
    BudgetNotPositive => "budget_not_positive",
    /// `constraints.allowed_paths` names nothing.
    AllowedPathsEmpty => "allowed_paths_empty",
    /// `permissions.filesystem_write` is not exactly `constraints.allowed_paths`.
    FilesystemWriteMismatch => "filesystem_write_mismatch",
    /// A path or pattern breaks the RepoPath rules.
    PathInvalid => "path_invalid",
    /// A writable scope entry names `.git` or a lookalike.
    PathProtected => "path_protected",
    /// `repository.base_sha` is not 40 or 64 lowercase hex digits.
    BaseShaInvalid => "base_sha_invalid",
    /// An `id` is not 1-200 of `[A-Za-z0-9._-]` not starting with `.`.
    IdInvalid => "id_invalid",
    // Network table.
    /// A destination is not a valid `host:port`.
    DestinationInvalid => "destination_invalid",
    /// A destination is named twice (after canonicalization).
    DestinationDuplicate => "destination_duplicate",
    /// Network `none` with a non-empty `network_allowlist`.
    NetworkAllowlistUnexpected => "network_allowlist_unexpected",
    /// Network `allowlist` with an empty `network_allowlist`.
    NetworkAllowlistEmpty => "network_allowlist_empty",
    /// The WorkUnit's `network` does not fit the preset's `network_policy`.
    NetworkPolicyMismatch => "network_policy_mismatch",
    /// A `model_only` preset's trusted connection is not named, not given or not found.
    ModelConnectionMissing => "model_connection_missing",
    /// A preset that is not `model_only` names a `model_connection`.
    ModelConnectionUnexpected => "model_connection_unexpected",
    /// A `model_only` WorkUnit destination is not one of its trusted connection's.
    DestinationNotInConnection => "destination_not_in_connection",
    /// A trusted connection's `upstream` (the credential broker's, ADR-0095): a base URL that
    /// is not `https://host[:port][/plain/path]`, a method or path prefix outside the rules, a
    /// credential source or header that is not well-formed, a budget out of range.
    ModelUpstreamInvalid => "model_upstream_invalid",
    // AgentPreset.
    /// `executable` is not a normalized absolute path.
    ExecutableNotAbsolute => "executable_not_absolute",
    /// `executable_sha256` is not `sha256:<64 lowercase hex>` (or the 64 digits).
    ExecutableDigestInvalid => "executable_digest_invalid",
    /// An argument (a preset's `argv` entry, or an objective passed as one) holds a NUL.
    ArgvInvalid => "argv_invalid",
    /// The `file` prompt transport, refused until an isolated input mount exists.
    PromptTransportFile => "prompt_transport_file",
    /// The `argument` transport's `flag` is not one option word starting with `-`.
    PromptFlagInvalid => "prompt_flag_invalid",
    /// `authority` is not `candidate_only`.
    AuthorityNotCandidateOnly => "authority_not_candidate_only",
    /// An environment name carries credentials (`GITHUB_TOKEN`, `AWS_*`, `*_KEY`...).
    EnvCredentialName => "env_credential_name",
    /// An environment name is malformed, set by corral itself, or a loader setting.
    EnvNameInvalid => "env_name_invalid",
    /// A `read_only_paths` entry is not normalized and absolute, or lies in a hidden host tree.
    ReadOnlyPathInvalid => "read_only_path_invalid",
    /// A preset's `home_files` entry: a bad or repeated path, not exactly one of `content`
    /// and `source`, a source that cannot be read beside the preset, or over a size bound
    /// (each, all together, or the WorkUnit's `disk_bytes`).
    HomeFileInvalid => "home_file_invalid",
    // Worker environment.
    /// The caller passes a variable the preset's `env_allowlist` does not name.
    EnvNotAllowlisted => "env_not_allowlisted",
    /// A variable's value holds a NUL.
    EnvValueInvalid => "env_value_invalid",
    /// A variable's value points at a container engine (docker, containerd, podman, CRI).
    EnvContainerSocket => "env_container_socket",
    // Sandbox and execution.
    /// The host does not enforce one of the nine capabilities; nothing runs.
    CapabilityMissing => "capability_missing",
    /// The executable's bytes do not hash to the preset's `executable_sha256`.
    ExecutableDigestMismatch => "executable_digest_mismatch",
    /// The sandbox could not be set up; the worker never ran.
    SandboxFailed => "sandbox_failed",
    // Capture.
    /// A changed path lies outside `allowed_paths` (or is a code-running file not named exactly).
    PathOutOfScope => "path_out_of_scope",
    /// A changed path matches `forbidden_paths`.
    PathForbidden => "path_forbidden",
    /// A changed path is not valid UTF-8.
    PathNotUtf8 => "path_not_utf8",
    /// A changed symbolic link points outside the repository.
    SymlinkEscape => "symlink_escape",
    /// A changed entry is a device, fifo or socket.
    SpecialFile => "special_file",
    /// The patch is larger than `max_patch_bytes`.
    PatchTooLarge => "patch_too_large",
    /// The change exceeds what capture reads (entries, bytes or depth).
    CaptureLimit => "capture_limit",
    /// A changed file has the setuid or setgid bit.
    SetuidFile => "setuid_file",
    /// The worker changed the repository's `.git`.
    GitMetadataChanged => "git_metadata_changed",
    /// corral itself could not capture the candidate (fails closed: no candidate).
    CaptureFailed => "capture_failed",
    /// The worker exited 0 but changed nothing: there is no candidate to capture.
    EmptyCandidate => "empty_candidate",
    // Base checkout.
    /// The base commit's tree holds an entry corral refuses to write (a name that is not one
    /// path component, `.git` under any spelling, a name twice, an unknown mode, bad order).
    BaseTreeInvalid => "base_tree_invalid",
    /// The base checkout would exceed its entry or byte ceiling.
    BaseCheckoutLimit => "base_checkout_limit",
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reason something was rejected: the code, where (a document field or a repository
/// path), and a human sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    /// The stable reason code.
    pub code: ReasonCode,
    /// Repository path (capture) or document field (admission), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What is wrong, in plain words.
    pub detail: String,
}

impl Rejection {
    /// A rejection with a code, where (when known) and a sentence.
    #[must_use]
    pub fn new(code: ReasonCode, path: Option<String>, detail: impl Into<String>) -> Self {
        Self {
            code,
            path,
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_snake_case() {
        let mut seen = std::collections::BTreeSet::new();
        for code in ReasonCode::ALL {
            let s = code.as_str();
            assert!(
                s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{s}"
            );
            assert!(seen.insert(s), "duplicate {s}");
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{s}\""));
        }
    }
}
