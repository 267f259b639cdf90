//! One attempt through the whole path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use corral_admission::{AdmittedRun, Rejected, admit};
use corral_capture::{CaptureRequest, CaptureResult, UpperLayer};
use corral_contract::manifest::{
    DocumentRef, ExecutableRecord, ExecutionRecord, SandboxRecord, Termination,
};
use corral_contract::{
    AgentPreset, ReasonCode, Rejection, SandboxCapabilities, TrustedConnections, WorkUnit,
};
use corral_manifest::{ArtifactStore, LogCapture, RunRecord, StoredManifest, normalize_and_store};
use corral_sandbox::{
    CancelToken, ExecuteOptions, LocalSandboxExecutor, SandboxError, SandboxOutcome,
    execute_admitted_with, require_all_capabilities,
};

use corral_checkout::{BaseCache, BaseError, CacheLimits, Isolation};

/// Exit codes of CONTRACT.md.
pub mod exit {
    /// A candidate was captured (`candidate_captured`).
    pub const CAPTURED: u8 = 0;
    /// No candidate was captured (the attempt failed or its candidate was rejected), or
    /// corral failed.
    pub const FAILED: u8 = 1;
    /// Rejected before anything ran: admission, bad input, a refused base commit.
    pub const REJECTED: u8 = 2;
    /// The capability gate refused: not all nine capabilities are enforced on this host.
    pub const CAPABILITY_MISSING: u8 = 3;
}

/// What one `corral run` needs.
#[derive(Debug)]
pub struct RunInputs<'a> {
    /// The WorkUnit, as parsed.
    pub work_unit: &'a WorkUnit,
    /// The AgentPreset, as parsed.
    pub preset: &'a AgentPreset,
    /// The maintainer's trusted connections document, when there is one.
    pub connections: Option<&'a TrustedConnections>,
    /// The explicit caller-supplied environment (`--env`), never the process environment.
    pub env: &'a BTreeMap<String, String>,
    /// The canonical repository; never modified.
    pub repo: &'a Path,
    /// The artifact store root (outside the repository and any workspace).
    pub artifacts: &'a Path,
    /// corral's cache (base checkouts).
    pub cache: &'a Path,
    /// Its bounds (the operator's, never the WorkUnit's).
    pub cache_limits: CacheLimits,
    /// How base checkouts are materialized: the confined helper (`corral` itself) in
    /// production; in-process only in tests.
    pub checkout: &'a Isolation,
}

/// Why a run ended before anything was recorded (exit 2): nothing changed on disk.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Admission rejected the run, or the base commit's tree was refused: every reason.
    #[error("admission rejected")]
    Rejected(Vec<Rejection>),
    /// An unusable input: the repository, the artifact directory, the executable.
    #[error("{0}")]
    BadInput(String),
    /// A WorkUnit field that is well formed but wrong for this repository (exit 2): the
    /// field (`repository.base_sha`) and why.
    #[error("{field}: {detail}")]
    BadWorkUnitField {
        /// The WorkUnit field, dotted (`repository.base_sha`).
        field: &'static str,
        /// Why it is wrong for this repository.
        detail: String,
    },
    /// corral itself failed (exit 1).
    #[error("{0}")]
    Internal(String),
    /// The artifact store could not take the run's artifacts or manifest (exit 1): a full or
    /// failing file system, named with the store. Nothing half-written is visible in it.
    #[error("{0}")]
    Store(String),
}

impl RunError {
    /// The exit code of CONTRACT.md: [`exit::REJECTED`] for a rejection or bad input,
    /// [`exit::FAILED`] for an internal failure.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            RunError::Rejected(_) | RunError::BadInput(_) | RunError::BadWorkUnitField { .. } => {
                exit::REJECTED
            }
            RunError::Internal(_) | RunError::Store(_) => exit::FAILED,
        }
    }
}

/// The result of a run that passed admission: a manifest was written.
#[derive(Debug)]
pub struct RunReport {
    /// The exit code of CONTRACT.md: [`exit::CAPTURED`], [`exit::FAILED`] or
    /// [`exit::CAPABILITY_MISSING`].
    pub exit_code: u8,
    /// The ResultManifest as written to the artifact store.
    pub manifest: StoredManifest,
    /// The patch, when a candidate was captured.
    pub patch: Option<Vec<u8>>,
    /// Whether the base checkout came from the cache (false: made for this run, or never
    /// made).
    pub base_reused: bool,
}

fn not_started(
    capabilities: SandboxCapabilities,
    executor: &dyn LocalSandboxExecutor,
    run: &AdmittedRun,
) -> (SandboxRecord, ExecutionRecord) {
    (
        SandboxRecord {
            backend: executor.backend().to_owned(),
            capabilities,
            policy_digest: run.policy().digest(),
            mode: executor.mode(),
        },
        ExecutionRecord {
            termination: Termination::NotStarted,
            exit_code: None,
            signal: None,
            wall_ms: 0,
            cpu_ms: 0,
            peak_memory_bytes: 0,
            cpu_cap_millicores: None,
        },
    )
}

/// Runs one attempt. Errors are returned only before anything was recorded; every run past
/// admission (and past the input checks) gets a manifest, whatever happens.
pub fn run_attempt(
    inputs: &RunInputs<'_>,
    executor: &dyn LocalSandboxExecutor,
    cancel: &CancelToken,
) -> Result<RunReport, RunError> {
    // `corral run --verbose`: one event per step, with its time (tracing; stderr).
    let t0 = std::time::Instant::now();
    let ms = |t: std::time::Instant| u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX);
    let run = admit(
        inputs.work_unit,
        inputs.preset,
        inputs.connections,
        inputs.env,
    )
    .map_err(|Rejected(r)| {
        tracing::info!(rejections = r.len(), "admission: rejected");
        RunError::Rejected(r)
    })?;
    tracing::info!(
        work_unit = run.work_unit_id(),
        preset = run.preset_id(),
        policy = %run.policy().digest(),
        ms = ms(t0),
        "admission: admitted"
    );
    let repo = inputs
        .repo
        .canonicalize()
        .map_err(|e| RunError::BadInput(format!("--repo {}: {e}", inputs.repo.display())))?;
    let artifacts = std::path::absolute(inputs.artifacts).map_err(|e| {
        RunError::BadInput(format!("--artifacts {}: {e}", inputs.artifacts.display()))
    })?;
    let store = ArtifactStore::open(&artifacts, &[&repo]).map_err(|e| {
        RunError::BadInput(format!("--artifacts {}: {e}", inputs.artifacts.display()))
    })?;
    let inputs = &RunInputs {
        repo: &repo,
        artifacts: &artifacts,
        ..*inputs
    };
    let exe_path = PathBuf::from(&run.exec().executable);
    let t = std::time::Instant::now();
    // Opened once, links followed: the backend runs this very file at its real path.
    let exe = crate::executable::open_and_hash(&exe_path, Some(&inputs.cache.join("executables")))
        .map_err(RunError::BadInput)?;
    let exe_digest = exe.digest.clone();
    tracing::info!(
        executable = %exe_path.display(),
        real_path = %exe.real_path,
        digest = %exe_digest,
        cached = exe.cached,
        ms = ms(t),
        "executable hashed"
    );
    let documents = (
        DocumentRef {
            id: run.work_unit_id().to_owned(),
            digest: run.work_unit_digest().clone(),
        },
        DocumentRef {
            id: run.preset_id().to_owned(),
            digest: run.preset_digest().clone(),
        },
    );
    let executable = ExecutableRecord {
        path: run.exec().executable.clone(),
        digest: exe_digest.clone(),
    };
    let record_without_run = |sandbox: SandboxRecord,
                              execution: ExecutionRecord,
                              rejections: Vec<Rejection>,
                              code: u8,
                              base_reused: bool| {
        let record = RunRecord {
            work_unit: documents.0.clone(),
            preset: documents.1.clone(),
            base_sha: run.base_sha().to_owned(),
            sandbox,
            execution,
            executable: executable.clone(),
            stdout: LogCapture {
                kept: &[],
                total_bytes: 0,
                truncated: false,
            },
            stderr: LogCapture {
                kept: &[],
                total_bytes: 0,
                truncated: false,
            },
            capture: None,
            extra_rejections: rejections,
            egress: Vec::new(),
            model_calls: Vec::new(),
            model_calls_unrecorded: 0,
        };
        let manifest = normalize_and_store(&record, &store).map_err(|e| {
            RunError::Store(format!("storing the run's artifacts and manifest: {e}"))
        })?;
        Ok(RunReport {
            exit_code: code,
            manifest,
            patch: None,
            base_reused,
        })
    };

    // Provider-version drift: a pinned executable that hashes differently never starts.
    let capabilities = executor.capabilities();
    if let Some(pin) = &run.exec().executable_sha256
        && *pin != exe_digest
    {
        let (s, e) = not_started(capabilities, executor, &run);
        let r = Rejection::new(
            ReasonCode::ExecutableDigestMismatch,
            None,
            format!(
                "{} hashes to {exe_digest}, the preset pins {pin}",
                exe_path.display()
            ),
        );
        return record_without_run(s, e, vec![r], exit::FAILED, false);
    }
    // The capability gate, before anything starts (exit 3).
    if let Err(gate) = require_all_capabilities(&capabilities) {
        tracing::info!(missing = gate.missing.len(), "capability gate: refused");
        let rejections = gate
            .missing
            .iter()
            .map(|(cap, why)| {
                Rejection::new(ReasonCode::CapabilityMissing, None, format!("{cap}: {why}"))
            })
            .collect();
        let (s, e) = not_started(capabilities, executor, &run);
        return record_without_run(s, e, rejections, exit::CAPABILITY_MISSING, false);
    }

    // The base checkout only once the worker can run at all: a host that cannot enforce the
    // nine never materializes hostile trees (exit 3 before any of it).
    tracing::info!(
        backend = executor.backend(),
        "capability gate: all nine attested"
    );
    let t = std::time::Instant::now();
    // Checkouts a backend needs owned by its worker live apart from the others, so a cache
    // never mixes owners (ADR-0080).
    let owner = executor.workspace_owner();
    let cache_root = crate::cache_root_for(inputs.cache, owner);
    let cache = BaseCache::open(&cache_root, inputs.cache_limits)
        .map_err(|e| RunError::Internal(e.to_string()))?
        .with_owner(owner);
    // Held until the attempt ends: an entry in use is never evicted.
    let base = cache
        .checkout(inputs.repo, run.base_sha(), inputs.checkout)
        .map_err(|e| match e {
            BaseError::BadInput(m) => RunError::BadInput(m),
            BaseError::BadBase(detail) => RunError::BadWorkUnitField {
                field: "repository.base_sha",
                detail,
            },
            // The base commit itself is refused, before any worker starts.
            BaseError::Refused(r) => RunError::Rejected(vec![Rejection::new(
                r.code,
                Some("work_unit.repository.base_sha".to_owned()),
                format!("the base commit's tree at {:?}: {}", r.path, r.detail),
            )]),
            BaseError::Internal(m) => RunError::Internal(m),
        })?;

    // A preset whose connection names an upstream gets the credential broker (ADR-0095).
    let broker = match model_upstream(inputs) {
        Some((name, u)) => {
            Some(crate::broker::BrokerGateway::for_run(name, u).map_err(RunError::BadInput)?)
        }
        None => None,
    };
    // Allowlist runs reach the network only through corral's egress proxy, which refuses
    // the broker's placeholder anywhere else.
    let gateway = crate::egress::ProxyGateway {
        refused_tokens: broker.iter().map(|b| b.token().to_owned()).collect(),
    };
    let options = ExecuteOptions {
        egress: Some(&gateway),
        model: broker
            .as_ref()
            .map(|b| b as &dyn corral_sandbox::ModelGateway),
        executable: Some(&exe.file),
    };
    tracing::info!(
        base = run.base_sha(),
        reused = !base.created,
        ms = ms(t),
        "base checkout ready"
    );
    let t = std::time::Instant::now();
    let outcome = match execute_admitted_with(executor, &run, &base.dir, cancel, &options) {
        Ok(o) => o,
        Err(err) => {
            let (code, exit_code) = match &err {
                SandboxError::CapabilitiesMissing(_) | SandboxError::Unsupported(_) => {
                    (ReasonCode::CapabilityMissing, exit::CAPABILITY_MISSING)
                }
                _ => (ReasonCode::SandboxFailed, exit::FAILED),
            };
            let (s, e) = not_started(capabilities, executor, &run);
            return record_without_run(
                s,
                e,
                vec![Rejection::new(code, None, err.to_string())],
                exit_code,
                !base.created,
            );
        }
    };
    tracing::info!(
        termination = ?outcome.termination,
        exit_code = ?outcome.exit_code,
        wall_ms = outcome.wall_ms,
        cpu_ms = outcome.cpu_ms,
        peak_memory_bytes = outcome.peak_memory_bytes,
        ms = ms(t),
        "sandbox: the worker's tree is gone"
    );
    let report = finish(
        &run,
        inputs,
        &store,
        outcome,
        documents,
        executable,
        !base.created,
        executor.mode(),
    );
    if let Ok(r) = &report {
        tracing::info!(
            manifest = %r.manifest.path.display(),
            total_ms = ms(t0),
            "manifest stored"
        );
    }
    report
}

#[allow(
    clippy::too_many_arguments,
    reason = "the parts of one manifest, each from a different step"
)]
fn finish(
    run: &AdmittedRun,
    inputs: &RunInputs<'_>,
    store: &ArtifactStore,
    outcome: SandboxOutcome,
    documents: (DocumentRef, DocumentRef),
    executable: ExecutableRecord,
    base_reused: bool,
    mode: Option<corral_contract::SandboxMode>,
) -> Result<RunReport, RunError> {
    let execution = ExecutionRecord {
        termination: outcome.termination,
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        wall_ms: outcome.wall_ms,
        cpu_ms: outcome.cpu_ms,
        peak_memory_bytes: outcome.peak_memory_bytes,
        cpu_cap_millicores: outcome.cpu_cap_millicores,
    };
    let worker_ok = execution.termination == Termination::Exited && execution.exit_code == Some(0);
    let mut extra = Vec::new();
    // Capture runs after the worker's whole tree is gone (the backend returned), by corral.
    let capture: Option<CaptureResult> = match (&outcome.workspace, worker_ok) {
        (Some(layer), true) => {
            let upper = UpperLayer::open(&layer.upper_path())
                .map_err(|e| RunError::Internal(format!("opening the upper layer: {e}")))?;
            let mut req = CaptureRequest::new(
                inputs.repo,
                run.base_sha(),
                &upper,
                run.policy().writable_paths(),
                run.policy().forbidden_paths(),
                run.limits().max_patch_bytes.get(),
            );
            if layer.user_xattrs() {
                req.overlay_xattrs = corral_capture::OverlayXattrs::User;
            }
            // The upper layer is hostile data: it is parsed in the confined capture helper.
            let t = std::time::Instant::now();
            match corral_checkout::capture_isolated(inputs.checkout, &req) {
                Ok(c) => {
                    tracing::info!(
                        changed = c.changed_paths.len(),
                        rejections = c.rejections.len(),
                        patch_bytes = c.patch.as_ref().map_or(0, Vec::len),
                        ms = u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX),
                        "capture done"
                    );
                    Some(c)
                }
                Err(e) => {
                    extra.push(Rejection::new(
                        ReasonCode::CaptureFailed,
                        None,
                        e.to_string(),
                    ));
                    None
                }
            }
        }
        (None, true) => {
            extra.push(Rejection::new(
                ReasonCode::CaptureFailed,
                None,
                "the backend returned no workspace layer",
            ));
            None
        }
        _ => None,
    };
    let record = RunRecord {
        work_unit: documents.0,
        preset: documents.1,
        base_sha: run.base_sha().to_owned(),
        sandbox: SandboxRecord {
            backend: outcome.backend.clone(),
            capabilities: outcome.capabilities.clone(),
            policy_digest: run.policy().digest(),
            mode,
        },
        execution,
        executable,
        stdout: LogCapture {
            kept: &outcome.stdout.bytes,
            total_bytes: outcome.stdout.total_bytes,
            truncated: outcome.stdout.truncated,
        },
        stderr: LogCapture {
            kept: &outcome.stderr.bytes,
            total_bytes: outcome.stderr.total_bytes,
            truncated: outcome.stderr.truncated,
        },
        capture: capture.as_ref(),
        extra_rejections: extra,
        egress: outcome.egress.clone(),
        model_calls: outcome.model_calls.calls.clone(),
        model_calls_unrecorded: outcome.model_calls.unrecorded,
    };
    let manifest = normalize_and_store(&record, store)
        .map_err(|e| RunError::Store(format!("storing the run's artifacts and manifest: {e}")))?;
    // The workspace layer (a detached tmpfs) is freed here, after capture.
    drop(outcome);
    let captured =
        manifest.manifest.outcome == corral_contract::manifest::Outcome::CandidateCaptured;
    let patch = if captured {
        capture.and_then(|c| c.patch)
    } else {
        None
    };
    Ok(RunReport {
        exit_code: if captured {
            exit::CAPTURED
        } else {
            exit::FAILED
        },
        manifest,
        patch,
        base_reused,
    })
}

/// The trusted connection's upstream of a preset that names one (a `model_only` preset).
fn model_upstream<'a>(
    inputs: &RunInputs<'a>,
) -> Option<(&'a str, &'a corral_contract::documents::ModelUpstream)> {
    let name = inputs.preset.model_connection.as_deref()?;
    let connection = inputs.connections?.connections.get(name)?;
    Some((name, connection.upstream.as_ref()?))
}
