//! The report documents the CLI prints with `--json` (`probe`, `admit`, `verify`): typed, so
//! that their JSON Schemas come from the same types that write them. Every key is present in
//! every report, whatever the outcome; what is not known is `null` or empty.

use serde::{Deserialize, Serialize};

use crate::canonical::Digest;
use crate::capabilities::SandboxCapabilities;
use crate::codes::Rejection;
use crate::exec::{ExecSpec, Limits};
use crate::policy::SandboxPolicy;

/// `schema_version` of `corral probe --json`.
pub const PROBE_REPORT_SCHEMA: &str = "corral.probe-report/v1";
/// `schema_version` of `corral admit --json`.
pub const ADMISSION_REPORT_SCHEMA: &str = "corral.admission-report/v1";
/// `schema_version` of `corral verify --json`.
pub const VERIFY_REPORT_SCHEMA: &str = "corral.verify-report/v1";

/// What `corral probe --json` prints: the capabilities this host's backend enforces, each
/// with the evidence that showed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(title = "ProbeReport"))]
pub struct ProbeReportDocument {
    /// The report's kind and version: `corral.probe-report/v1`.
    #[cfg_attr(feature = "schema", schemars(extend("const" = PROBE_REPORT_SCHEMA)))]
    pub schema_version: String,
    /// The sandbox backend that was probed (`linux`).
    pub backend: String,
    /// Each of the nine capabilities: enforced or not, and what showed it.
    pub capabilities: SandboxCapabilities,
    /// The Landlock ABI version the kernel offers; 0 when it offers none.
    pub landlock_abi: u32,
    /// Whether all nine capabilities are enforced: the condition for any run.
    pub all_enforced: bool,
}

/// A document admission looked at: its `id` and the `sha256:` of its canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DocumentRef {
    /// The document's `id`, as written.
    pub id: String,
    /// The `sha256:` of its canonical JSON.
    pub digest: Digest,
}

/// What `corral admit --json` prints, admitted or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(title = "AdmissionReport", transform = crate::schema::require_keys))]
pub struct AdmissionReport {
    /// The report's kind and version: `corral.admission-report/v1`.
    #[cfg_attr(feature = "schema", schemars(extend("const" = ADMISSION_REPORT_SCHEMA)))]
    pub schema_version: String,
    /// Whether the pair (and the connections) were admitted.
    pub admissible: bool,
    /// Inputs that could not be read or parsed, one line each naming the file and field;
    /// when there are any, nothing else was decided.
    pub bad_input: Vec<String>,
    /// The WorkUnit, once parsed.
    pub work_unit: Option<DocumentRef>,
    /// The AgentPreset, once parsed.
    pub preset: Option<DocumentRef>,
    /// Every reason admission rejected the pair (empty when admitted).
    pub rejections: Vec<Rejection>,
    /// The SandboxPolicy a run would get (admitted only).
    pub policy: Option<SandboxPolicy>,
    /// The policy's `sha256:` digest (admitted only).
    pub policy_digest: Option<Digest>,
    /// What would be executed (admitted only).
    pub exec: Option<ExecSpec>,
    /// The run's ceilings (admitted only).
    pub limits: Option<Limits>,
}

impl AdmissionReport {
    /// A report with nothing decided yet.
    #[must_use]
    pub fn empty() -> Self {
        Self {
            schema_version: ADMISSION_REPORT_SCHEMA.to_owned(),
            admissible: false,
            bad_input: Vec::new(),
            work_unit: None,
            preset: None,
            rejections: Vec::new(),
            policy: None,
            policy_digest: None,
            exec: None,
            limits: None,
        }
    }
}

/// The state of one stored artifact, as one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ArtifactState {
    /// Present, and its bytes hash to the recorded digest.
    Intact,
    /// Not in the artifact store.
    Missing,
    /// Its bytes hash to another digest.
    Mismatch,
    /// Its digest matches, but its size is not the one the manifest records.
    SizeMismatch,
    /// The store's entry is not a regular file.
    NotRegular,
    /// The manifest file is not the canonical JSON corral writes (re-encoded or edited).
    NotCanonical,
    /// It could not be read.
    Unreadable,
}

/// One artifact a manifest names, as `verify` found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct VerifyReportEntry {
    /// `manifest`, `patch`, `stdout` or `stderr`.
    pub role: String,
    /// The `sha256:` the manifest records.
    pub digest: Digest,
    /// What `verify` found, as one word.
    pub status: ArtifactState,
    /// The same in words (`mismatch: expected sha256:... got sha256:...`).
    pub detail: String,
}

/// What `corral verify --json` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(title = "VerifyReport", transform = crate::schema::require_keys))]
pub struct VerifyReport {
    /// The report's kind and version: `corral.verify-report/v1`.
    #[cfg_attr(feature = "schema", schemars(extend("const" = VERIFY_REPORT_SCHEMA)))]
    pub schema_version: String,
    /// The manifest file as given.
    pub manifest: String,
    /// Whether the manifest and every artifact it names are intact.
    pub intact: bool,
    /// The manifest file and each artifact it names, as found.
    pub entries: Vec<VerifyReportEntry>,
    /// Why the manifest could not be verified at all (then `entries` is empty).
    pub error: Option<String>,
}
