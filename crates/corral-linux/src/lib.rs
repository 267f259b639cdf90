//! `LinuxSandboxExecutor`: the Linux backend of `corral-sandbox` (ADR-0010).
//!
//! Process tree: **supervisor** (this process, host namespaces) → **init** (pid 1 of new
//! PID, mount, network, IPC, UTS and cgroup namespaces; in the run's cgroup) → **worker**
//! (a uid/gid of its own, `WORKER_ID_BASE + supervisor pid`; no capabilities in any set, `no_new_privs`, Landlock, seccomp, new
//! session, only fds 0-2). Init dies with the supervisor (`PR_SET_PDEATHSIG`); the whole
//! namespace dies with init; the cgroup is killed (v2 `cgroup.kill`, v1 freeze + kill)
//! after every run, whatever the ending.
//!
//! File system: one size-capped tmpfs per attempt (`size = disk_bytes`, bounded inodes),
//! created with `fsopen`/`fsmount` and never attached to the host's mount table. It holds
//! the sandbox root skeleton, `/tmp`, `HOME`, `/dev/shm` and the overlay upper/work
//! directories. `/workspace` is an overlay whose lower layer is an idmapped, read-only clone
//! of the host checkout. The tmpfs outlives the sandbox through the returned
//! [`corral_sandbox::WorkspaceLayer`].
//!
//! The worker environment is exactly `ExecSpec.env` plus `PATH`
//! (`/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin`), `HOME`
//! (`/home/corral`) and `TMPDIR` (`/tmp`), which override same-named entries; in allowlist
//! mode also the proxy variables (see [`egress`]), with `NO_PROXY`/`no_proxy` removed.
//!
//! Network: mode `none` is the sandbox's own network namespace with only `lo` up. Mode
//! `allowlist` is the same namespace plus the caller's egress proxy, served on a listener the
//! supervisor creates inside it ([`egress`]); it needs an `EgressGateway`
//! (`corral_sandbox::execute_admitted_with`) and is refused without one.
#![warn(missing_docs)]
#![allow(
    unsafe_code,
    reason = "namespaces, mounts, seccomp and Landlock need raw system calls; each block has a SAFETY comment"
)]

/// The unit tests' own mode: as an ordinary user they enter rootless mode before libtest
/// starts its threads, as corral's `main` does (tests/mode/mod.rs does it for the
/// integration tests; ADR-0080). As root: nothing.
#[cfg(test)]
mod test_mode {
    extern "C" fn enter_mode() {
        crate::rootless::choose_mode();
    }
    // SAFETY: `.init_array` entries are called once by the loader, with no arguments, before
    // `main` (glibc initialised first); `enter_mode` only forks, reads and writes files and
    // unshares namespaces.
    #[used]
    #[unsafe(link_section = ".init_array")]
    static ENTER_MODE: extern "C" fn() = enter_mode;
}

pub mod cgroup;
#[macro_use]
mod child;
mod config;
pub mod egress;
mod enter;
pub mod landlock;
mod layers;
mod mount;
mod prepare;
pub mod probe;
pub mod rootless;
pub mod seccomp;
mod supervise;
mod sys;
pub mod systemd;
mod teardown;
pub mod usage;

pub use config::{LinuxConfig, SANDBOX_HOME, SANDBOX_PATH, SANDBOX_TMP, WORKER_ID_BASE};
pub use probe::{Observation, Observations, ProbeReport, capabilities_from};
pub use usage::{LiveUsage, live_usage};

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Mutex;

use corral_contract::SandboxCapabilities;
use corral_sandbox::{
    AttestedRequest, CancelToken, LocalSandboxExecutor, SandboxError, SandboxOutcome,
};

/// Namespaces of init (the cgroup namespace is entered after the cgroup attach).
pub const NAMESPACE_FLAGS: libc::c_int = libc::CLONE_NEWPID
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;

/// The Linux sandbox backend.
#[derive(Debug)]
pub struct LinuxSandboxExecutor {
    config: LinuxConfig,
    report: ProbeReport,
    idmaps: Mutex<HashMap<(u32, u32), OwnedFd>>,
}

impl LinuxSandboxExecutor {
    /// Probes this host (real checks, see [`probe::probe`]) with the default configuration.
    #[must_use]
    pub fn new() -> Self {
        Self::with_config(LinuxConfig::default())
    }

    /// Collects cgroups left by a corral that was killed, then probes this host (real
    /// checks, see [`probe::probe`]) with `config`.
    #[must_use]
    pub fn with_config(config: LinuxConfig) -> Self {
        // Groups left by a corral that was killed before it could clean up.
        if let Ok(h) = cgroup::Hierarchy::detect_host() {
            let _ = h.collect_stale();
        }
        let report = probe::probe(&config);
        Self::with_probe(config, report)
    }

    /// Uses an injected probe report (tests simulate missing kernel features with it).
    #[must_use]
    pub fn with_probe(config: LinuxConfig, report: ProbeReport) -> Self {
        Self {
            config,
            report,
            idmaps: Mutex::new(HashMap::new()),
        }
    }

    /// What the probe saw, and the SandboxCapabilities this executor attests.
    #[must_use]
    pub fn probe_report(&self) -> &ProbeReport {
        &self.report
    }

    /// The backend's tunables.
    #[must_use]
    pub fn config(&self) -> &LinuxConfig {
        &self.config
    }
}

impl Default for LinuxSandboxExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalSandboxExecutor for LinuxSandboxExecutor {
    fn backend(&self) -> &str {
        "linux"
    }

    fn capabilities(&self) -> SandboxCapabilities {
        self.report.capabilities.clone()
    }

    fn workspace_owner(&self) -> Option<(u32, u32)> {
        rootless::workspace_owner().map(|_| (self.config.worker_uid, self.config.worker_gid))
    }

    fn mode(&self) -> Option<corral_contract::SandboxMode> {
        Some(if rootless::active().is_some() {
            corral_contract::SandboxMode::Rootless
        } else {
            corral_contract::SandboxMode::Root
        })
    }

    fn execute(
        &self,
        request: &AttestedRequest<'_>,
        cancel: &CancelToken,
    ) -> Result<SandboxOutcome, SandboxError> {
        if request.policy().network_mode() == corral_contract::NetworkMode::Allowlist {
            let wiring = &self.report.observations.egress_wiring;
            if !wiring.ok {
                return Err(SandboxError::Unsupported(format!(
                    "network mode allowlist: the probe did not observe working egress wiring ({}); refusing (fail closed)",
                    wiring.detail
                )));
            }
        }
        supervise::run(self, &prepare::RunInput::from_request(request), cancel)
    }
}
