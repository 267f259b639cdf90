//! The sandbox boundary: the [`LocalSandboxExecutor`] trait, the capability gate, and the
//! outcome of one sandboxed attempt.
//!
//! Architecture Invariant: the only public way to run a worker is [`execute_admitted`],
//! which takes an [`AdmittedRun`] (only `corral_admission::admit` builds one) and passes the
//! capability gate ([`require_all_capabilities`]) before any process starts. A backend's
//! [`LocalSandboxExecutor::execute`] receives an [`AttestedRequest`], which has no public
//! constructor: nothing un-admitted or un-attested can reach it.
//!
//! This crate depends on `corral-contract`, `corral-admission` and `corral-process` only.
//! It has no platform code; backends (e.g. `corral-linux`) implement the trait.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::fmt;
use std::io;
use std::io::Write as _;
use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use corral_admission::AdmittedRun;
use corral_contract::manifest::Termination;
pub use corral_contract::manifest::{EgressRecord, ModelCallRecord};
use corral_contract::{
    Capability, Destination, ExecSpec, Limits, SandboxCapabilities, SandboxPolicy,
};
pub use corral_process::CapturedStream;

mod raw;
pub use raw::RawProcessExecutor;

/// A cancellation handle: clone it, give a clone to another thread, call [`cancel`].
/// Backends poll [`wait_fd`] (readable once cancelled) alongside the worker.
///
/// [`cancel`]: CancelToken::cancel
/// [`wait_fd`]: CancelToken::wait_fd
#[derive(Debug, Clone)]
pub struct CancelToken {
    inner: Arc<CancelInner>,
}

#[derive(Debug)]
struct CancelInner {
    cancelled: AtomicBool,
    tx: UnixStream,
    rx: UnixStream,
}

impl CancelToken {
    /// A new, not yet cancelled token.
    pub fn new() -> std::io::Result<Self> {
        let (tx, rx) = UnixStream::pair()?;
        rx.set_nonblocking(true)?;
        Ok(Self {
            inner: Arc::new(CancelInner {
                cancelled: AtomicBool::new(false),
                tx,
                rx,
            }),
        })
    }

    /// Requests cancellation; idempotent, callable from any thread.
    pub fn cancel(&self) {
        if !self.inner.cancelled.swap(true, Ordering::SeqCst) {
            let _ = (&self.inner.tx).write_all(b"c");
        }
    }

    /// Whether [`CancelToken::cancel`] was called on this token or any clone of it.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// A descriptor that becomes readable once [`CancelToken::cancel`] was called.
    #[must_use]
    pub fn wait_fd(&self) -> BorrowedFd<'_> {
        self.inner.rx.as_fd()
    }
}

/// The egress proxy as the sandbox sees it (ADR-0030): something outside the sandbox's
/// authority that serves a listening socket the backend created *inside* the sandbox's
/// network namespace, admitting exactly the admitted allowlist.
///
/// Backends call [`EgressGateway::serve`] once per attempt in `allowlist` mode, before the
/// worker starts, and [`EgressSession::finish`] on every ending. The implementation (for
/// example an adapter over `corral_egress::start`) lives with the caller, so this crate and
/// the backends do not depend on the proxy.
pub trait EgressGateway: Send + Sync {
    /// Starts serving `listener` (already bound and listening; it lives in the sandbox's
    /// network namespace, the proxy's upstream connections come from the caller's) for at
    /// most `wall`.
    fn serve(
        &self,
        listener: TcpListener,
        allowlist: &[Destination],
        wall: Duration,
    ) -> io::Result<Box<dyn EgressSession>>;
}

/// One attempt's proxy session, ended by the backend after the sandbox is gone.
pub trait EgressSession: Send {
    /// Stops serving, closes every relay, and returns what was asked for and relayed.
    fn finish(self: Box<Self>) -> Vec<EgressRecord>;
}

/// The worker's model endpoint (ADR-0095): corral's credential broker, outside the
/// sandbox's authority, serving a listening socket the backend created inside the sandbox's
/// network namespace at `127.0.0.1:`[`MODEL_ENDPOINT_PORT`]. The worker reaches it in either
/// network mode; it reaches nothing else through it.
pub trait ModelGateway: Send + Sync {
    /// Starts serving `listener` for at most `wall`.
    fn serve(&self, listener: TcpListener, wall: Duration) -> io::Result<Box<dyn ModelSession>>;

    /// The text the backend puts in place of each placeholder of the worker's environment
    /// values and HOME files: `({model_base_url}, http://127.0.0.1:PORT)`,
    /// `({model_token}, <the run's token>)`.
    fn placeholders(&self) -> Vec<(String, String)>;
}

/// One attempt's broker session, ended by the backend after the sandbox is gone.
pub trait ModelSession: Send {
    /// Stops serving, cuts every call in flight, and returns the calls.
    fn finish(self: Box<Self>) -> ModelCalls;
}

/// What a model session recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelCalls {
    /// The calls, in the order they ended (at most the gateway's record limit).
    pub calls: Vec<ModelCallRecord>,
    /// Calls past that limit: refused or served all the same, counted only.
    pub unrecorded: u64,
}

/// The model endpoint's port on the sandbox's loopback (`127.0.0.1`).
pub const MODEL_ENDPOINT_PORT: u16 = 3129;

/// `http://127.0.0.1:3129`: what `{model_base_url}` becomes.
#[must_use]
pub fn model_endpoint_url() -> String {
    format!("http://127.0.0.1:{MODEL_ENDPOINT_PORT}")
}

/// Optional parts of a run (all off by default).
#[derive(Default, Clone, Copy)]
pub struct ExecuteOptions<'a> {
    /// The egress proxy for `allowlist` policies. Without it, a backend refuses an
    /// `allowlist` policy (fail closed).
    pub egress: Option<&'a dyn EgressGateway>,
    /// The credential broker, for a preset whose connection names an `upstream`. Without
    /// it, a worker environment or HOME file holding a `{model_` placeholder is refused
    /// (fail closed).
    pub model: Option<&'a dyn ModelGateway>,
    /// The preset's executable as the caller opened it (symbolic links followed) and hashed
    /// it. A backend runs exactly this file, so the bytes that run are the bytes recorded
    /// and checked against the preset's pin, whatever happens to the path meanwhile.
    /// Without it the backend opens the preset's path itself.
    pub executable: Option<&'a std::fs::File>,
}

impl fmt::Debug for ExecuteOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecuteOptions")
            .field("egress", &self.egress.map(|_| "EgressGateway"))
            .field("model", &self.model.map(|_| "ModelGateway"))
            .field("executable", &self.executable)
            .finish()
    }
}

/// The sandbox's own trees, over which every backend mounts its own: a host file beneath
/// one cannot be made visible to the worker (an executable or a `read_only_paths` entry
/// there is refused before anything starts).
pub const SANDBOX_OWN_TREES: &[&str] = &["/workspace", "/proc", "/dev"];

/// The tree of [`SANDBOX_OWN_TREES`] that `path` (absolute, normalized) lies in, if any.
#[must_use]
pub fn sandbox_own_tree(path: &str) -> Option<&'static str> {
    SANDBOX_OWN_TREES
        .iter()
        .copied()
        .find(|t| path == *t || path.starts_with(&format!("{t}/")))
}

/// The tree an executable's real path may not lie in, if it does: the sandbox's own trees,
/// and `/sys` (kernel attribute files are regular files, never an agent).
fn unshowable_executable_tree(path: &str) -> Option<&'static str> {
    sandbox_own_tree(path)
        .or_else(|| (path == "/sys" || path.starts_with("/sys/")).then_some("/sys"))
}

/// Where a sandbox shows an executable opened on the host: its real path, as the kernel
/// names the open file (every link resolved). Refused, with the reason in words that
/// follow "executable PATH: ": not a regular file, unlinked since it was opened, or under
/// a tree the sandbox cannot show it in.
pub fn executable_real_path(file: &std::fs::File) -> Result<String, String> {
    let m = file.metadata().map_err(|e| e.to_string())?;
    if !m.is_file() {
        return Err("not a regular file".into());
    }
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(|e| format!("its real path: {e}"))?;
    let real = real
        .to_str()
        .filter(|r| r.starts_with('/'))
        .ok_or_else(|| format!("its real path {real:?} is not a path the sandbox can show"))?
        .to_owned();
    // The kernel names an unlinked file so: the file opened is no longer installed there.
    if real.ends_with(" (deleted)") {
        return Err(format!(
            "{real}: the file was removed or replaced since it was opened and hashed; run again"
        ));
    }
    if let Some(t) = unshowable_executable_tree(&real) {
        return Err(format!(
            "it resolves to {real}, under {t}, which the sandbox cannot show as an executable: \
             install the agent elsewhere"
        ));
    }
    Ok(real)
}

/// A request that passed the capability gate. Only [`execute_admitted`] builds one.
pub struct AttestedRequest<'a> {
    run: &'a AdmittedRun,
    workspace: &'a Path,
    capabilities: SandboxCapabilities,
    egress: Option<&'a dyn EgressGateway>,
    model: Option<&'a dyn ModelGateway>,
    executable: Option<&'a std::fs::File>,
}

impl fmt::Debug for AttestedRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttestedRequest")
            .field("run", &self.run)
            .field("workspace", &self.workspace)
            .field("capabilities", &self.capabilities)
            .field("egress", &self.egress.map(|_| "EgressGateway"))
            .field("model", &self.model.map(|_| "ModelGateway"))
            .field("executable", &self.executable)
            .finish()
    }
}

impl AttestedRequest<'_> {
    /// The credential broker, when the caller supplied one.
    #[must_use]
    pub fn model(&self) -> Option<&dyn ModelGateway> {
        self.model
    }
    /// The executable as the caller opened and hashed it ([`ExecuteOptions::executable`]).
    #[must_use]
    pub fn executable(&self) -> Option<&std::fs::File> {
        self.executable
    }
    /// The egress gateway for `allowlist` mode, when the caller supplied one.
    #[must_use]
    pub fn egress(&self) -> Option<&dyn EgressGateway> {
        self.egress
    }
    /// The admitted run (policy, exec spec, limits, ids and digests).
    #[must_use]
    pub fn run(&self) -> &AdmittedRun {
        self.run
    }
    /// The immutable policy the backend must enforce.
    #[must_use]
    pub fn policy(&self) -> &SandboxPolicy {
        self.run.policy()
    }
    /// What to execute, with the explicit environment and stdin.
    #[must_use]
    pub fn exec(&self) -> &ExecSpec {
        self.run.exec()
    }
    /// The admitted limits (the WorkUnit's budget) the backend must apply.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        self.run.limits()
    }
    /// The host directory holding the base checkout; the backend exposes it read-only
    /// and keeps the worker's changes elsewhere (see [`WorkspaceLayer`]).
    #[must_use]
    pub fn workspace(&self) -> &Path {
        self.workspace
    }
    /// The capabilities the gate saw (all nine enforced).
    #[must_use]
    pub fn capabilities(&self) -> &SandboxCapabilities {
        &self.capabilities
    }
}

/// The capability gate refused: each missing capability with the backend's evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityGateError {
    /// Each capability that is not enforced, with the backend's evidence for it.
    pub missing: Vec<(Capability, String)>,
}

impl fmt::Display for CapabilityGateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sandbox capability missing:")?;
        for (i, (cap, why)) in self.missing.iter().enumerate() {
            let sep = if i == 0 { " " } else { "; " };
            write!(f, "{sep}{cap} ({why})")?;
        }
        Ok(())
    }
}

impl std::error::Error for CapabilityGateError {}

/// The gate: every one of the nine capabilities must be enforced; otherwise a hard error
/// naming each missing one.
pub fn require_all_capabilities(caps: &SandboxCapabilities) -> Result<(), CapabilityGateError> {
    let missing: Vec<(Capability, String)> = caps
        .missing()
        .into_iter()
        .map(|c| (c, caps.get(c).evidence.clone()))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(CapabilityGateError { missing })
    }
}

/// Why an attempt did not produce an outcome. Every variant means the worker never ran
/// (`not_started` in the manifest).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The capability gate refused: not every one of the nine capabilities is enforced.
    #[error(transparent)]
    CapabilitiesMissing(#[from] CapabilityGateError),
    /// The policy asks for something this backend cannot enforce (fail closed).
    #[error("policy not supported by this backend: {0}")]
    Unsupported(String),
    /// The request is malformed (bad workspace, executable, path).
    #[error("invalid sandbox request: {0}")]
    InvalidRequest(String),
    /// Setting up the sandbox failed before the worker's first instruction.
    #[error("sandbox setup failed: {0}")]
    Setup(String),
    /// An I/O error before the worker started.
    #[error("sandbox I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// The worker's writable layer, handed back after the sandbox is gone. The backend keeps the
/// file system that holds it alive through `dir` (an owned directory descriptor, e.g. on a
/// detached mount that was never attached to the host's mount table): nothing is left on the
/// host, and dropping this value frees it.
///
/// `upper` is an overlayfs upper directory relative to `dir`: new and modified files appear
/// as themselves, deletions as whiteouts (character devices 0:0), replaced directories carry
/// the `trusted.overlay.opaque` xattr (`user.overlay.opaque` for an overlay mounted in a user
/// namespace, see [`WorkspaceLayer::user_xattrs`]). `lower` is the read-only base checkout it
/// sits on.
#[derive(Debug)]
pub struct WorkspaceLayer {
    dir: OwnedFd,
    upper: PathBuf,
    lower: PathBuf,
    user_xattrs: bool,
}

impl WorkspaceLayer {
    /// For backends: an overlay whose own xattrs are `trusted.overlay.*`.
    #[must_use]
    pub fn new(dir: OwnedFd, upper: PathBuf, lower: PathBuf) -> Self {
        Self {
            dir,
            upper,
            lower,
            user_xattrs: false,
        }
    }
    /// For backends: the overlay was mounted with `userxattr` (in a user namespace), so its
    /// own xattrs, opaque directories among them, are `user.overlay.*`.
    #[must_use]
    pub fn with_user_xattrs(mut self, user_xattrs: bool) -> Self {
        self.user_xattrs = user_xattrs;
        self
    }
    /// Whether the overlay's own xattrs are `user.overlay.*` (else `trusted.overlay.*`): what
    /// capture must read to see opaque directories.
    #[must_use]
    pub fn user_xattrs(&self) -> bool {
        self.user_xattrs
    }
    /// The directory the upper layer is relative to.
    #[must_use]
    pub fn dir_fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }
    /// The upper directory, relative to [`WorkspaceLayer::dir_fd`].
    #[must_use]
    pub fn upper_relative(&self) -> &Path {
        &self.upper
    }
    /// A path to the upper directory usable with `std::fs` by this process while `self`
    /// lives (`/proc/self/fd/<dir>/<upper>`).
    #[must_use]
    pub fn upper_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd())).join(&self.upper)
    }
    /// The read-only base checkout on the host.
    #[must_use]
    pub fn lower_path(&self) -> &Path {
        &self.lower
    }
}

/// The outcome of one attempt that started.
#[derive(Debug)]
pub struct SandboxOutcome {
    /// The backend's name ([`LocalSandboxExecutor::backend`]), recorded in the manifest.
    pub backend: String,
    /// The capabilities (with evidence) this attempt ran under.
    pub capabilities: SandboxCapabilities,
    /// How the attempt ended (exited, signaled, a limit, cancelled).
    pub termination: Termination,
    /// The worker's exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended the worker, when it was killed by one.
    pub signal: Option<i32>,
    /// Wall-clock time of the attempt, in milliseconds.
    pub wall_ms: u64,
    /// CPU time the attempt used, in milliseconds, as the backend measured it (0 when it
    /// measures none).
    pub cpu_ms: u64,
    /// Peak memory of the attempt, in bytes, as the backend measured it (0 when it measures
    /// none).
    pub peak_memory_bytes: u64,
    /// The CPU bandwidth the attempt was held to, in thousandths of a CPU (`None` when the
    /// backend holds it to none).
    pub cpu_cap_millicores: Option<u64>,
    /// The worker's standard output, bounded by `max_output_bytes`.
    pub stdout: CapturedStream,
    /// The worker's standard error, bounded by `max_output_bytes`.
    pub stderr: CapturedStream,
    /// The worker's changes, readable after the sandbox is gone.
    pub workspace: Option<WorkspaceLayer>,
    /// Backend notes about this attempt (what was enforced, limits applied), for the manifest
    /// or logs.
    pub notes: Vec<String>,
    /// What the worker asked the egress proxy for (allowlist mode; empty otherwise).
    pub egress: Vec<EgressRecord>,
    /// The worker's calls to its model endpoint (with a [`ModelGateway`]; empty otherwise).
    pub model_calls: ModelCalls,
}

/// A platform backend that runs one worker under all nine capabilities.
pub trait LocalSandboxExecutor: Send + Sync {
    /// Backend name recorded in the manifest (`sandbox.backend`).
    fn backend(&self) -> &str;

    /// What this backend enforces on this host, from a probe (never from a flag).
    fn capabilities(&self) -> SandboxCapabilities;

    /// Who the backend runs as (recorded in the manifest): `None` for a backend without
    /// modes.
    fn mode(&self) -> Option<corral_contract::SandboxMode> {
        None
    }

    /// The uid and gid a base checkout must belong to, when the backend cannot map the
    /// checkout's owner to its worker (Linux's rootless mode with subordinate ids: no
    /// idmapped mounts without host root). `None`: any owner.
    fn workspace_owner(&self) -> Option<(u32, u32)> {
        None
    }

    /// Runs one attested request. Only reachable through [`execute_admitted`].
    fn execute(
        &self,
        request: &AttestedRequest<'_>,
        cancel: &CancelToken,
    ) -> Result<SandboxOutcome, SandboxError>;
}

/// The public way to run a worker: an admitted run, through the capability gate.
pub fn execute_admitted(
    executor: &dyn LocalSandboxExecutor,
    run: &AdmittedRun,
    workspace: &Path,
    cancel: &CancelToken,
) -> Result<SandboxOutcome, SandboxError> {
    execute_admitted_with(executor, run, workspace, cancel, &ExecuteOptions::default())
}

/// [`execute_admitted`] with options (the egress gateway for `allowlist` policies).
pub fn execute_admitted_with(
    executor: &dyn LocalSandboxExecutor,
    run: &AdmittedRun,
    workspace: &Path,
    cancel: &CancelToken,
    options: &ExecuteOptions<'_>,
) -> Result<SandboxOutcome, SandboxError> {
    let capabilities = executor.capabilities();
    require_all_capabilities(&capabilities)?;
    let request = AttestedRequest {
        run,
        workspace,
        capabilities,
        egress: options.egress,
        model: options.model,
        executable: options.executable,
    };
    executor.execute(&request, cancel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_contract::CapabilityEvidence;

    #[test]
    fn gate_names_each_missing_capability() {
        let mut caps = SandboxCapabilities::none("not probed");
        caps.cpu_limit = CapabilityEvidence {
            enforced: true,
            evidence: "x".into(),
        };
        let err = require_all_capabilities(&caps).unwrap_err();
        assert_eq!(err.missing.len(), 8);
        let text = err.to_string();
        for cap in Capability::ALL {
            if cap != Capability::CpuLimit {
                assert!(text.contains(cap.name()), "{text}");
            }
        }
        assert!(!text.contains("cpu_limit"));
    }

    #[test]
    fn gate_passes_when_all_nine_hold() {
        let mut caps = SandboxCapabilities::none("");
        for cap in Capability::ALL {
            *caps.get_mut(cap) = CapabilityEvidence {
                enforced: true,
                evidence: "probed".into(),
            };
        }
        assert!(require_all_capabilities(&caps).is_ok());
    }

    #[test]
    fn cancel_token_is_shared() {
        let t = CancelToken::new().unwrap();
        let t2 = t.clone();
        assert!(!t.is_cancelled());
        std::thread::spawn(move || t2.cancel()).join().unwrap();
        assert!(t.is_cancelled());
        let ready =
            corral_process::poll_readable(&[t.wait_fd()], Some(std::time::Duration::ZERO)).unwrap();
        assert!(ready[0]);
    }
}
