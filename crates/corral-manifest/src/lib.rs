//! Artifacts and the ResultManifest: the content-addressed store, the reader that checks every
//! digest, manifest normalization and `corral verify`'s check.
//!
//! Architecture Invariants:
//! - Every artifact is written (atomically, read-only) before the manifest that names it, and
//!   the manifest itself is stored the same way, as canonical JSON named by its own digest.
//! - Outcome and authority are computed here from facts, never taken from the caller: a run
//!   is `candidate_captured` only when the worker exited 0 and capture found no violation, and
//!   authority is always `{ verification: false, merge: false }`.
//! - Depends on `corral-contract` and `corral-capture` only.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod store;

use std::fs;
use std::path::{Path, PathBuf};

use corral_capture::CaptureResult;
use corral_contract::canonical::{Digest, canonical_json};
use corral_contract::codes::{ReasonCode, Rejection};
use corral_contract::documents::RESULT_MANIFEST_SCHEMA;
use corral_contract::manifest::{
    Authority, CandidateReference, DocumentRef, EgressRecord, ExecutableRecord, ExecutionRecord,
    LogRef, Logs, ModelCallRecord, Outcome, RepositoryRef, ResultManifest, SandboxRecord,
    Termination,
};

pub use store::{ArtifactStore, LocalArtifactBundleReader, ReadError, StoreError};

/// One output stream as the executor kept it.
#[derive(Debug, Clone, Copy)]
pub struct LogCapture<'a> {
    /// The bytes kept (at most `max_output_bytes`).
    pub kept: &'a [u8],
    /// Bytes the worker wrote in total.
    pub total_bytes: u64,
    /// Whether bytes were dropped.
    pub truncated: bool,
}

/// The facts of one admitted run, from which the manifest is normalized.
#[derive(Debug, Clone)]
pub struct RunRecord<'a> {
    /// The admitted WorkUnit's id and digest.
    pub work_unit: DocumentRef,
    /// The admitted AgentPreset's id and digest.
    pub preset: DocumentRef,
    /// The base commit the attempt started from.
    pub base_sha: String,
    /// The backend, its capabilities and the digest of the SandboxPolicy the attempt ran
    /// under.
    pub sandbox: SandboxRecord,
    /// How the worker ended and what it used.
    pub execution: ExecutionRecord,
    /// The executable that ran, as corral hashed it.
    pub executable: ExecutableRecord,
    /// The worker's standard output as the executor kept it.
    pub stdout: LogCapture<'a>,
    /// The worker's standard error as the executor kept it.
    pub stderr: LogCapture<'a>,
    /// The capture, when it ran and completed. `None` (not started, or corral could not
    /// capture) never yields a candidate.
    pub capture: Option<&'a CaptureResult>,
    /// Violations found outside capture (provenance and the like), and the reason capture
    /// failed when it did.
    pub extra_rejections: Vec<Rejection>,
    /// What the worker's egress proxy allowed and refused (allowlist runs).
    pub egress: Vec<EgressRecord>,
    /// The worker's calls to its model endpoint (the credential broker's runs).
    pub model_calls: Vec<ModelCallRecord>,
    /// Calls past the broker's record limit, counted only.
    pub model_calls_unrecorded: u64,
}

/// The contract's outcome rule.
#[must_use]
pub fn outcome_for(
    execution: &ExecutionRecord,
    capture: Option<&CaptureResult>,
    extra_rejections: &[Rejection],
) -> Outcome {
    let worker_ok = execution.termination == Termination::Exited && execution.exit_code == Some(0);
    if !worker_ok {
        return Outcome::AttemptFailed;
    }
    let Some(c) = capture else {
        return Outcome::AttemptFailed;
    };
    // A run that changed nothing is no candidate (code `empty_candidate`): an empty patch is
    // one `git apply` refuses, and "exited 0" alone must never read as success.
    if c.rejections.is_empty()
        && extra_rejections.is_empty()
        && c.patch.is_some()
        && !c.changed_paths.is_empty()
    {
        Outcome::CandidateCaptured
    } else {
        Outcome::CandidateRejected
    }
}

/// A manifest written to the store.
#[derive(Debug, Clone)]
pub struct StoredManifest {
    /// The ResultManifest as stored.
    pub manifest: ResultManifest,
    /// The digest of its canonical JSON bytes, which names it in the store.
    pub digest: Digest,
    /// Where the store keeps it.
    pub path: PathBuf,
    /// The canonical JSON bytes that were stored.
    pub bytes: Vec<u8>,
}

fn store_log(store: &ArtifactStore, log: &LogCapture<'_>) -> Result<LogRef, StoreError> {
    let stored = store.put(log.kept)?;
    let kept = log.kept.len() as u64;
    Ok(LogRef {
        digest: stored.digest,
        bytes: log.total_bytes.max(kept),
        truncated: log.truncated || log.total_bytes > kept,
    })
}

/// Stores the logs and the patch, then builds the manifest (not yet stored).
pub fn build_manifest(
    record: &RunRecord<'_>,
    store: &ArtifactStore,
) -> Result<ResultManifest, StoreError> {
    let logs = Logs {
        stdout: store_log(store, &record.stdout)?,
        stderr: store_log(store, &record.stderr)?,
    };
    let outcome = outcome_for(&record.execution, record.capture, &record.extra_rejections);
    let mut rejections = Vec::new();
    let mut candidate = None;
    let mut ignored_paths = Vec::new();
    if let Some(c) = record.capture {
        rejections.extend(c.rejections.iter().cloned());
        ignored_paths.clone_from(&c.ignored_paths);
        let worker_ok = record.execution.termination == Termination::Exited
            && record.execution.exit_code == Some(0);
        if worker_ok && c.rejections.is_empty() && c.changed_paths.is_empty() {
            rejections.push(Rejection {
                code: ReasonCode::EmptyCandidate,
                path: None,
                detail: "the worker exited 0 but changed nothing in the workspace".into(),
            });
        }
        // A failed attempt's accepted patch is kept as evidence; it never carries authority.
        // No change, no candidate (`candidate: null`).
        if let Some(patch) = c.patch.as_ref().filter(|_| !c.changed_paths.is_empty()) {
            candidate = Some(CandidateReference {
                patch: store.put(patch)?,
                changed_paths: c.changed_paths.clone(),
            });
        }
    }
    rejections.extend(record.extra_rejections.iter().cloned());
    Ok(ResultManifest {
        schema_version: RESULT_MANIFEST_SCHEMA.to_owned(),
        outcome,
        rejections,
        work_unit: record.work_unit.clone(),
        preset: record.preset.clone(),
        repository: RepositoryRef {
            base_sha: record.base_sha.clone(),
        },
        sandbox: record.sandbox.clone(),
        execution: record.execution.clone(),
        logs,
        candidate,
        authority: Authority::default(),
        executable: record.executable.clone(),
        ignored_paths,
        network: record.egress.clone(),
        model_calls: record.model_calls.clone(),
        model_calls_unrecorded: record.model_calls_unrecorded,
    })
}

/// Writes a manifest into the store as canonical JSON, content-addressed.
pub fn write_manifest(
    manifest: &ResultManifest,
    store: &ArtifactStore,
) -> Result<StoredManifest, StoreError> {
    let bytes = canonical_json(manifest);
    let stored = store.put(&bytes)?;
    Ok(StoredManifest {
        manifest: manifest.clone(),
        path: store.path_of(&stored.digest),
        digest: stored.digest,
        bytes,
    })
}

/// Stores every artifact of the run, then the normalized manifest.
pub fn normalize_and_store(
    record: &RunRecord<'_>,
    store: &ArtifactStore,
) -> Result<StoredManifest, StoreError> {
    let manifest = build_manifest(record, store)?;
    write_manifest(&manifest, store)
}

/// Which artifact of a manifest an entry of a [`VerifyReport`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactRole {
    /// The manifest file itself (checked when its name is a digest).
    Manifest,
    /// The candidate's patch ([`CandidateReference::patch`]).
    Patch,
    /// The worker's standard output log.
    Stdout,
    /// The worker's standard error log.
    Stderr,
}

/// The state of one artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyStatus {
    /// Present, with the recorded digest (and size).
    Intact,
    /// No file in the store for the digest.
    Missing,
    /// The bytes hash to another digest.
    Mismatch {
        /// The digest of the bytes found.
        actual: Digest,
    },
    /// The digest matches but the size is not the one the manifest records (more than it
    /// records, for a truncated log).
    SizeMismatch {
        /// Bytes the manifest records.
        recorded: u64,
        /// Bytes found.
        actual: u64,
    },
    /// The store's entry is not a regular file.
    NotRegular,
    /// The manifest file is not the canonical JSON corral writes (re-encoded or edited).
    NotCanonical,
    /// The artifact could not be read; why.
    Unreadable(String),
}

impl VerifyStatus {
    /// The status as the contract's one word (`verify --json`: `intact`, `mismatch`...).
    #[must_use]
    pub fn state(&self) -> corral_contract::reports::ArtifactState {
        use corral_contract::reports::ArtifactState as S;
        match self {
            VerifyStatus::Intact => S::Intact,
            VerifyStatus::Missing => S::Missing,
            VerifyStatus::Mismatch { .. } => S::Mismatch,
            VerifyStatus::SizeMismatch { .. } => S::SizeMismatch,
            VerifyStatus::NotRegular => S::NotRegular,
            VerifyStatus::NotCanonical => S::NotCanonical,
            VerifyStatus::Unreadable(_) => S::Unreadable,
        }
    }
}

/// One checked artifact of a [`VerifyReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyEntry {
    /// Which artifact of the manifest it is.
    pub role: ArtifactRole,
    /// The digest the manifest records for it (for the manifest file: the digest that
    /// names it, or its own when its name is not a digest).
    pub digest: Digest,
    /// What was found.
    pub status: VerifyStatus,
}

impl std::fmt::Display for ArtifactRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ArtifactRole::Manifest => "manifest",
            ArtifactRole::Patch => "patch",
            ArtifactRole::Stdout => "stdout",
            ArtifactRole::Stderr => "stderr",
        })
    }
}

impl VerifyEntry {
    /// What was found, in the contract's words: `intact`, `missing`,
    /// `mismatch: expected sha256:... got sha256:...`.
    #[must_use]
    pub fn detail(&self) -> String {
        match &self.status {
            VerifyStatus::Intact => "intact".to_owned(),
            VerifyStatus::Missing => "missing".to_owned(),
            VerifyStatus::Mismatch { actual } => {
                format!("mismatch: expected {} got {actual}", self.digest)
            }
            VerifyStatus::SizeMismatch { recorded, actual } => format!(
                "size mismatch: the manifest records {recorded} bytes, the file has {actual}"
            ),
            VerifyStatus::NotRegular => "not a regular file".to_owned(),
            VerifyStatus::NotCanonical => "not canonical: these bytes are not the one JSON \
                                           spelling corral writes (re-encoded or edited)"
                .to_owned(),
            VerifyStatus::Unreadable(why) => format!("unreadable: {why}"),
        }
    }
}

/// One line of `corral verify`, in the contract's words: `patch sha256:...: intact`,
/// `stdout sha256:...: mismatch: expected sha256:... got sha256:...`.
impl std::fmt::Display for VerifyEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.role, self.digest, self.detail())
    }
}

/// What `corral verify` found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VerifyReport {
    /// Every artifact checked: the manifest file (when a file was verified), then the patch
    /// (when there is a candidate), stdout and stderr.
    pub entries: Vec<VerifyEntry>,
}

impl VerifyReport {
    /// Whether every entry is [`VerifyStatus::Intact`].
    #[must_use]
    pub fn intact(&self) -> bool {
        self.entries
            .iter()
            .all(|e| e.status == VerifyStatus::Intact)
    }

    /// `corral verify`'s exit code: 0 intact, 1 mismatch or missing.
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        if self.intact() { 0 } else { 1 }
    }
}

fn status_of(
    reader: &LocalArtifactBundleReader,
    digest: &Digest,
    size: Option<(u64, bool)>,
) -> VerifyStatus {
    match reader.check(digest) {
        Ok(actual) => match size {
            // Exact size (patch, or a log that was not truncated).
            Some((recorded, true)) if recorded != actual => {
                VerifyStatus::SizeMismatch { recorded, actual }
            }
            // A truncated log keeps at most what the worker wrote.
            Some((recorded, false)) if actual > recorded => {
                VerifyStatus::SizeMismatch { recorded, actual }
            }
            _ => VerifyStatus::Intact,
        },
        Err(ReadError::Missing(_)) => VerifyStatus::Missing,
        Err(ReadError::Mismatch { actual, .. }) => VerifyStatus::Mismatch { actual },
        Err(ReadError::NotRegular(_)) => VerifyStatus::NotRegular,
        Err(e) => VerifyStatus::Unreadable(e.to_string()),
    }
}

/// Re-hashes every artifact the manifest names (patch, stdout, stderr).
#[must_use]
pub fn verify_manifest(
    manifest: &ResultManifest,
    reader: &LocalArtifactBundleReader,
) -> VerifyReport {
    let mut entries = Vec::new();
    if let Some(c) = &manifest.candidate {
        entries.push(VerifyEntry {
            role: ArtifactRole::Patch,
            digest: c.patch.digest.clone(),
            status: status_of(reader, &c.patch.digest, Some((c.patch.bytes, true))),
        });
    }
    for (role, log) in [
        (ArtifactRole::Stdout, &manifest.logs.stdout),
        (ArtifactRole::Stderr, &manifest.logs.stderr),
    ] {
        entries.push(VerifyEntry {
            role,
            digest: log.digest.clone(),
            status: status_of(reader, &log.digest, Some((log.bytes, !log.truncated))),
        });
    }
    VerifyReport { entries }
}

/// Why a manifest file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The manifest file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is too large or does not parse as a ResultManifest.
    #[error("{path} is not a ResultManifest: {detail}")]
    Invalid {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong, with its line and column when it has one.
        detail: String,
    },
}

/// serde_json's error spelled as every other corral command spells a document's:
/// `line L, column C: message` (serde_json says `message at line L column C`).
fn position_first(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let message = text
        .rfind(" at line ")
        .map_or(text.as_str(), |i| &text[..i]);
    if e.line() == 0 {
        message.to_owned()
    } else {
        format!("line {}, column {}: {message}", e.line(), e.column())
    }
}

/// Longest manifest file read.
pub const MAX_MANIFEST_BYTES: u64 = 64 << 20;

/// Loads and verifies a manifest file: the manifest's own bytes (canonical JSON; and when the
/// file is named by a digest, that digest) plus every artifact it names.
pub fn verify_manifest_file(
    path: &Path,
    reader: &LocalArtifactBundleReader,
) -> Result<(ResultManifest, VerifyReport), LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let len = fs::metadata(path).map_err(io)?.len();
    if len > MAX_MANIFEST_BYTES {
        return Err(LoadError::Invalid {
            path: path.to_path_buf(),
            detail: format!("larger than {MAX_MANIFEST_BYTES} bytes"),
        });
    }
    let file = fs::read(path).map_err(io)?;
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| Digest::from_hex(n).ok());
    // `corral run --json > m.json` ends the document with one newline; a saved copy is those
    // canonical bytes plus it. A file named by its digest (the store's) must be exact.
    let bytes = match file.strip_suffix(b"\n") {
        Some(body) if named.is_none() => body,
        _ => &file[..],
    };
    let manifest: ResultManifest =
        serde_json::from_slice(bytes).map_err(|e| LoadError::Invalid {
            path: path.to_path_buf(),
            detail: position_first(&e),
        })?;
    let mut report = VerifyReport::default();
    let own = Digest::of_bytes(bytes);
    let status = if canonical_json(&manifest) != bytes {
        VerifyStatus::NotCanonical
    } else if named.as_ref().is_some_and(|d| *d != own) {
        VerifyStatus::Mismatch {
            actual: own.clone(),
        }
    } else {
        VerifyStatus::Intact
    };
    report.entries.push(VerifyEntry {
        role: ArtifactRole::Manifest,
        digest: named.unwrap_or_else(|| own.clone()),
        status,
    });
    report
        .entries
        .extend(verify_manifest(&manifest, reader).entries);
    Ok((manifest, report))
}
