//! The immutable per-attempt SandboxPolicy.

use serde::{Deserialize, Serialize};

use crate::destination::Destination;
use crate::path::PathPattern;

/// Network mode the backend must enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// No route anywhere; the sandbox's own loopback only.
    None,
    /// Only corral's egress proxy, which admits exactly `network_allowlist`.
    Allowlist,
}

/// What one attempt may do, passed with every execution. Fields are private and there are no
/// setters: a policy is built once by admission and never changed.
/// Deserializing re-validates every entry (`PathPattern`, `Destination`); a policy read back
/// from JSON is still only data: executing anything requires an `AdmittedRun`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxPolicy {
    /// What network the sandbox has.
    network_mode: NetworkMode,
    /// The canonical destinations the egress proxy admits (empty for `none`).
    network_allowlist: Vec<Destination>,
    /// The WorkUnit's `allowed_paths`: where the worker may write and the candidate may change.
    writable_paths: Vec<PathPattern>,
    /// The WorkUnit's `forbidden_paths`: never changed, even inside `writable_paths`.
    forbidden_paths: Vec<PathPattern>,
}

impl SandboxPolicy {
    /// The policy admission decided. Nothing checks it again here: build one only from
    /// admitted values (an executor also needs an `AdmittedRun`).
    #[must_use]
    pub fn new(
        network_mode: NetworkMode,
        network_allowlist: Vec<Destination>,
        writable_paths: Vec<PathPattern>,
        forbidden_paths: Vec<PathPattern>,
    ) -> Self {
        Self {
            network_mode,
            network_allowlist,
            writable_paths,
            forbidden_paths,
        }
    }

    /// What network the sandbox has.
    #[must_use]
    pub fn network_mode(&self) -> NetworkMode {
        self.network_mode
    }

    /// The canonical destinations the egress proxy admits (empty for `none`).
    #[must_use]
    pub fn network_allowlist(&self) -> &[Destination] {
        &self.network_allowlist
    }

    /// Where the worker may write and the candidate may change files.
    #[must_use]
    pub fn writable_paths(&self) -> &[PathPattern] {
        &self.writable_paths
    }

    /// Where the candidate may never change files.
    #[must_use]
    pub fn forbidden_paths(&self) -> &[PathPattern] {
        &self.forbidden_paths
    }

    /// `sha256:` of the policy's canonical JSON, recorded in every manifest.
    #[must_use]
    pub fn digest(&self) -> crate::Digest {
        crate::canonical::digest_of(self)
    }
}
