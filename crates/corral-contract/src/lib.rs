//! corral's outside contract as types (CONTRACT.md and the seeds' vocabulary).
//!
//! Architecture Invariant: this crate knows no other corral crate, does no I/O and holds no
//! policy beyond what a value must satisfy to exist (a `RepoPath` is valid, a `Digest` is
//! well-formed). What is *admissible* is `corral-admission`'s business.
//!
//! Feature `schema` (off by default) derives JSON Schemas from these types (module `schema`:
//! what `corral schema NAME` prints and the repository's `schemas/` hold); without it,
//! parsing and admitting documents compiles serde and serde_json, not schemars.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod canonical;
pub mod capabilities;
pub mod codes;
pub mod destination;
pub mod documents;
pub mod exec;
pub mod glob;
pub mod manifest;
pub mod path;
pub mod policy;
pub mod reports;
pub mod rules;
#[cfg(feature = "schema")]
pub mod schema;

pub use canonical::{Digest, canonical_json, digest_of};
pub use capabilities::{Capability, CapabilityEvidence, SandboxCapabilities};
pub use codes::{ReasonCode, Rejection};
pub use destination::{Destination, Host};
pub use documents::{AgentPreset, TrustedConnections, WorkUnit};
pub use exec::{ExecSpec, Limits};
pub use glob::{Glob, fnmatchcase};
pub use manifest::{CandidateReference, ResultManifest, SandboxMode};
pub use path::{PathPattern, RepoPath};
pub use policy::{NetworkMode, SandboxPolicy};
pub use reports::{AdmissionReport, ProbeReportDocument, VerifyReport, VerifyReportEntry};
