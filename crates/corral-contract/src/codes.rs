//! Stable reason codes. A code, once published, keeps its meaning; new codes may be added.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

macro_rules! reason_codes {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, )*) => {
        /// Why something was rejected. Serialized as the snake_case string on the right.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum ReasonCode {
            $( $(#[$doc])* #[serde(rename = $name)] $variant, )*
        }

        impl ReasonCode {
            pub const ALL: &'static [ReasonCode] = &[$(ReasonCode::$variant),*];

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
    ObjectiveEmpty => "objective_empty",
    SandboxNotRequired => "sandbox_not_required",
    ProcessExecutionNotPermitted => "process_execution_not_permitted",
    SecretsNotPermitted => "secrets_not_permitted",
    NetworkUnrestricted => "network_unrestricted",
    BudgetNotPositive => "budget_not_positive",
    AllowedPathsEmpty => "allowed_paths_empty",
    FilesystemWriteMismatch => "filesystem_write_mismatch",
    /// A path or pattern breaks the RepoPath rules.
    PathInvalid => "path_invalid",
    /// A writable scope entry names `.git` or a lookalike.
    PathProtected => "path_protected",
    BaseShaInvalid => "base_sha_invalid",
    IdInvalid => "id_invalid",
    // Network table.
    DestinationInvalid => "destination_invalid",
    DestinationDuplicate => "destination_duplicate",
    NetworkAllowlistUnexpected => "network_allowlist_unexpected",
    NetworkAllowlistEmpty => "network_allowlist_empty",
    NetworkPolicyMismatch => "network_policy_mismatch",
    ModelConnectionMissing => "model_connection_missing",
    ModelConnectionUnexpected => "model_connection_unexpected",
    DestinationNotInConnection => "destination_not_in_connection",
    // AgentPreset.
    ExecutableNotAbsolute => "executable_not_absolute",
    ExecutableDigestInvalid => "executable_digest_invalid",
    ArgvInvalid => "argv_invalid",
    PromptTransportFile => "prompt_transport_file",
    PromptFlagInvalid => "prompt_flag_invalid",
    AuthorityNotCandidateOnly => "authority_not_candidate_only",
    EnvCredentialName => "env_credential_name",
    EnvNameInvalid => "env_name_invalid",
    ReadOnlyPathInvalid => "read_only_path_invalid",
    // Worker environment.
    EnvNotAllowlisted => "env_not_allowlisted",
    EnvValueInvalid => "env_value_invalid",
    EnvContainerSocket => "env_container_socket",
    // Sandbox and execution.
    CapabilityMissing => "capability_missing",
    ExecutableDigestMismatch => "executable_digest_mismatch",
    /// The sandbox could not be set up; the worker never ran.
    SandboxFailed => "sandbox_failed",
    // Capture.
    PathOutOfScope => "path_out_of_scope",
    PathForbidden => "path_forbidden",
    PathNotUtf8 => "path_not_utf8",
    SymlinkEscape => "symlink_escape",
    SpecialFile => "special_file",
    PatchTooLarge => "patch_too_large",
    CaptureLimit => "capture_limit",
    SetuidFile => "setuid_file",
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    pub code: ReasonCode,
    /// Repository path (capture) or document field (admission), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub detail: String,
}

impl Rejection {
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
