//! Step 3 of a run, supervise: create the run's cgroup, prepare (`prepare.rs`), clone init
//! into its namespaces (it mounts, `mount.rs`, and starts the worker, `enter.rs`), serve the
//! egress proxy, watch the budgets and cancellation, then tear down (`teardown.rs`).

use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use corral_contract::NetworkMode;
use corral_process::{OutputCapture, StdinFeeder, poll_readable};
use corral_sandbox::{CancelToken, SandboxError, SandboxOutcome, WorkspaceLayer};

use crate::cgroup::{CgroupLimits, CgroupOps as _};
use crate::egress::{self, SessionGuard};
use crate::prepare::{Prepared, RunInput, prepare, setup_err};
use crate::sys::{self};
use crate::teardown::{self, Ending, InitGuard, Verdict};
use crate::{LinuxSandboxExecutor, NAMESPACE_FLAGS};
pub(crate) fn run(
    exe: &LinuxSandboxExecutor,
    input: &RunInput<'_>,
    cancel: &CancelToken,
) -> Result<SandboxOutcome, SandboxError> {
    let gateway = match input.network_mode {
        NetworkMode::None => None,
        NetworkMode::Allowlist => Some(input.egress.ok_or_else(|| {
            SandboxError::Unsupported(
                "network mode allowlist needs an egress gateway (the caller supplied none); refusing (fail closed)".into(),
            )
        })?),
    };
    let hierarchy = exe
        .report
        .hierarchy
        .as_ref()
        .ok_or_else(|| SandboxError::Setup("no usable cgroup hierarchy".into()))?;
    let start = Instant::now();
    // Process-wide, not per executor: several executors may run at once in one process and
    // their groups must not collide.
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let run_id = format!("{}-{n}", std::process::id());
    let limits = input.limits;
    let cpu_cap = cpu_cap_millicores(exe.config.cpu_bandwidth_millicores, limits.cpu_millicores);
    let (cpu_quota_us, cpu_period_us) =
        corral_contract::exec::cfs_bandwidth(cpu_cap, exe.config.cpu_period_us);
    let cg_limits = CgroupLimits {
        memory_bytes: limits.memory_bytes.get(),
        pids_max: limits.max_processes.get(),
        cpu_quota_us,
        cpu_period_us,
    };
    let mut cg = hierarchy
        .create(&run_id, &cg_limits)
        .map_err(|e| setup_err("cgroup", e))?;
    let prepared = prepare(exe, input)?;
    let Prepared {
        plan,
        disk,
        _keep,
        sync_tx,
        err_rx,
        status_rx,
        stdin_w,
        stdout_r,
        stderr_r,
        child_ends,
    } = prepared;

    // SAFETY: fork-like clone into new namespaces; the child runs only `init_main`, which
    // uses prebuilt data and raw system calls (no allocation, no locks) and never returns.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (NAMESPACE_FLAGS | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid < 0 {
        return Err(setup_err("clone(namespaces)", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: we are the freshly cloned child with the namespaces init expects.
        unsafe { crate::mount::init_main(&plan) }
    }
    let pid = pid as libc::pid_t;
    let mut init = InitGuard::new(pid).map_err(|e| setup_err("pidfd_open", e))?;
    drop(child_ends);
    drop(_keep);
    cg.attach(pid).map_err(|e| setup_err("cgroup attach", e))?;
    // Allowlist mode: the proxy's listener inside the sandbox's network namespace, served
    // from here, before init (and so the worker) is released.
    let mut session = SessionGuard(None);
    if let Some(gw) = gateway {
        let listener =
            egress::listener_in_netns(init.pidfd()).map_err(|e| setup_err("egress listener", e))?;
        let wall = Duration::from_secs(limits.wall_seconds.get()).saturating_sub(start.elapsed());
        session.0 = Some(
            gw.serve(listener, input.allowlist, wall)
                .map_err(|e| setup_err("egress gateway", e))?,
        );
    }
    // The credential broker's endpoint (ADR-0095), in either network mode: the worker's
    // model calls go there and nowhere else.
    let mut model_session = egress::ModelSessionGuard(None);
    if let Some(gw) = input.model {
        let listener =
            egress::listener_in_netns_at(init.pidfd(), corral_sandbox::MODEL_ENDPOINT_PORT)
                .map_err(|e| setup_err("model endpoint listener", e))?;
        let wall = Duration::from_secs(limits.wall_seconds.get()).saturating_sub(start.elapsed());
        model_session.0 = Some(
            gw.serve(listener, wall)
                .map_err(|e| setup_err("model gateway", e))?,
        );
    }
    sys::write_all(sync_tx.as_fd(), b"g").map_err(|e| setup_err("sync", e))?;
    drop(sync_tx);

    let capture = OutputCapture::spawn(stdout_r, stderr_r, limits.max_output_bytes.get())?;
    let feeder = match &input.exec.stdin {
        Some(bytes) if !bytes.is_empty() => Some(StdinFeeder::spawn(stdin_w, bytes.clone())?),
        _ => {
            drop(stdin_w);
            None
        }
    };

    let deadline = start + Duration::from_secs(limits.wall_seconds.get());
    let cpu_limit_usec = limits.cpu_seconds.get().saturating_mul(1_000_000);
    let mut ending = Ending::default();
    let pidfd = init.pidfd();
    let mut tick = Duration::from_millis(2);
    loop {
        let now = Instant::now();
        if now >= deadline {
            ending.timed_out = true;
            break;
        }
        let wait = (deadline - now).min(tick);
        let ready = poll_readable(&[pidfd, cancel.wait_fd()], Some(wait))?;
        if ready[0] {
            break;
        }
        if ready[1] || cancel.is_cancelled() {
            ending.cancelled = true;
            break;
        }
        if cg.cpu_usage_usec().unwrap_or(0) >= cpu_limit_usec {
            ending.cpu_exceeded = true;
            break;
        }
        tick = (tick * 2).min(exe.config.cpu_check_interval);
    }
    let init_status = teardown::end_sandbox(&cg, &mut init, ending);
    let wall = start.elapsed();
    // The sandbox is gone: nothing can use the proxy any more.
    let egress_records = session.finish();
    let model_calls = model_session.finish();
    let worker_status = teardown::worker_status(status_rx.as_fd());
    let setup_failure = teardown::setup_failure(err_rx.as_fd());
    let cpu_usec = cg.cpu_usage_usec().unwrap_or(0);
    let peak = cg.memory_peak_bytes().unwrap_or(0);
    let oom_kills = cg.oom_kills().unwrap_or(0);
    let (stdout, stderr) = capture.finish(exe.config.drain_grace);
    if let Some(f) = feeder {
        f.finish(Duration::ZERO);
    }
    cg.destroy().map_err(|e| setup_err("cgroup cleanup", e))?;
    if let Some(msg) = setup_failure {
        // The worker never reached its first instruction.
        return Err(SandboxError::Setup(msg));
    }
    let mut notes = vec![format!(
        "run corral-{run_id}: {}; memory.max={} pids.max={} cpu={}us/{}us; disk tmpfs size={}",
        hierarchy.describe(),
        cg_limits.memory_bytes,
        cg_limits.pids_max,
        cg_limits.cpu_quota_us,
        cg_limits.cpu_period_us,
        limits.disk_bytes
    )];
    if oom_kills > 0 {
        notes.push(format!("kernel OOM kills in the run's cgroup: {oom_kills}"));
    }
    if input.model.is_some() {
        notes.push(format!(
            "model endpoint {} inside the sandbox's network namespace, served by corral's credential broker: {} call(s)",
            corral_sandbox::model_endpoint_url(),
            model_calls.calls.len() as u64 + model_calls.unrecorded
        ));
    }
    if gateway.is_some() {
        notes.push(format!(
            "network allowlist: egress proxy listener {} inside the sandbox's network namespace (lo only), {} destination(s) admitted, {} egress record(s)",
            egress::proxy_url(),
            input.allowlist.len(),
            egress_records.len()
        ));
    }
    let Verdict {
        termination,
        exit_code,
        signal,
        note,
    } = teardown::verdict(
        ending,
        worker_status,
        init_status,
        cpu_usec,
        cpu_limit_usec,
        oom_kills,
    );
    notes.extend(note);
    Ok(SandboxOutcome {
        backend: "linux".into(),
        capabilities: input.capabilities.clone(),
        termination,
        exit_code,
        signal,
        wall_ms: u64::try_from(wall.as_millis()).unwrap_or(u64::MAX),
        cpu_ms: cpu_usec / 1000,
        peak_memory_bytes: peak,
        cpu_cap_millicores: Some(cpu_cap),
        stdout,
        stderr,
        workspace: Some(
            WorkspaceLayer::new(disk, PathBuf::from("upper"), input.workspace.to_path_buf())
                .with_user_xattrs(crate::rootless::active().is_some()),
        ),
        notes,
        egress: egress_records,
        model_calls,
    })
}

/// The CPU bandwidth a run gets: the budget's cap when it sets one, never more than the
/// backend's ceiling (the host's CPUs), at least one thousandth of a CPU.
fn cpu_cap_millicores(ceiling: u64, budget: Option<std::num::NonZeroU64>) -> u64 {
    budget.map_or(ceiling, |b| b.get().min(ceiling)).max(1)
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::fs;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::Path;

    use corral_contract::{ExecSpec, Limits, SandboxCapabilities};
    use std::num::NonZeroU64;

    /// Runs `executable` with `read_only_paths: [read_only]` straight through the backend,
    /// below admission (whose `read_only_paths` rule keeps the tests' `/tmp` out).
    fn run_below_admission(
        exe: &LinuxSandboxExecutor,
        workspace: &Path,
        executable: String,
        read_only: String,
    ) -> Result<SandboxOutcome, SandboxError> {
        // Rootless mode with subordinate ids: the lower layer must be the worker's (ADR-0080).
        if let Some((uid, gid)) = crate::rootless::workspace_owner() {
            std::os::unix::fs::lchown(workspace, Some(uid), Some(gid)).unwrap();
        }
        let spec = ExecSpec {
            executable,
            args: vec![],
            env: Default::default(),
            stdin: None,
            read_only_paths: vec![read_only],
            executable_sha256: None,
            home_files: Default::default(),
        };
        let n = |v: u64| NonZeroU64::new(v).unwrap();
        let input = RunInput {
            exec: &spec,
            network_mode: NetworkMode::None,
            allowlist: &[],
            egress: None,
            model: None,
            writable: &[],
            forbidden: &[],
            limits: Limits {
                wall_seconds: n(300),
                cpu_seconds: n(60),
                memory_bytes: n(64 << 20),
                disk_bytes: n(8 << 20),
                max_processes: n(16),
                max_output_bytes: n(4096),
                max_patch_bytes: n(1),
                cpu_millicores: None,
            },
            workspace,
            capabilities: SandboxCapabilities::none("test"),
            executable: None,
        };
        run(exe, &input, &CancelToken::new().unwrap())
    }

    /// The cap is the budget's, never above the host's CPUs; without one, all of them.
    #[test]
    fn the_cpu_cap_follows_the_budget_within_the_host() {
        let n = |v: u64| NonZeroU64::new(v);
        assert_eq!(cpu_cap_millicores(2000, None), 2000);
        assert_eq!(cpu_cap_millicores(2000, n(500)), 500);
        assert_eq!(cpu_cap_millicores(2000, n(64_000)), 2000);
        assert_eq!(cpu_cap_millicores(2000, n(1)), 1);
    }

    /// A link in a shown folder whose target lies outside every tree the sandbox shows: as
    /// `/usr/local/bin/codex -> /opt/node/lib/node_modules/...` with only `/usr` shown. The
    /// link was left dangling in the sandbox ("Exec failed: No such file or directory");
    /// the file it names runs now, and nothing beside that file is shown. (Built here, below
    /// admission, whose `read_only_paths` rule keeps `/tmp` out: a test cannot write `/usr`.)
    #[test]
    fn a_link_in_a_shown_folder_to_a_file_outside_it_runs() {
        let exe = LinuxSandboxExecutor::new();
        let missing = exe.probe_report().capabilities.missing();
        assert!(missing.is_empty(), "this host lacks {missing:?}");
        let t = std::env::temp_dir().join(format!("corral-exe-dangling-{}", std::process::id()));
        let _ = fs::remove_dir_all(&t);
        fs::create_dir_all(t.join("bin")).unwrap();
        fs::create_dir_all(t.join("pkg")).unwrap();
        fs::create_dir_all(t.join("ws")).unwrap();
        fs::write(
            t.join("pkg/agent.sh"),
            "#!/bin/sh\necho ran; ls \"$(dirname \"$0\")\" 2>&1\n",
        )
        .unwrap();
        fs::write(t.join("pkg/secret"), "beside the agent\n").unwrap();
        fs::set_permissions(t.join("pkg/agent.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("../pkg/agent.sh", t.join("bin/agent")).unwrap();
        let bin = t.join("bin").to_str().unwrap().to_owned();
        let o = run_below_admission(&exe, &t.join("ws"), format!("{bin}/agent"), bin);
        let _ = fs::remove_dir_all(&t);
        let o = o.unwrap_or_else(|e| panic!("sandbox error: {e}"));
        let out = String::from_utf8_lossy(&o.stdout.bytes).into_owned();
        assert_eq!(o.exit_code, Some(0), "{out} {:?}", o.termination);
        assert!(out.starts_with("ran\n"), "{out}");
        assert!(
            !out.contains("secret"),
            "the package beside the file is shown: {out}"
        );
    }

    /// On the hosts users have, systemd makes `/` a shared mount, so a clone of a host tree
    /// is a peer of the host's mount: a mount made on top of it inside the sandbox would
    /// propagate back to the host (a 6.1 guest's suite saw `/usr/bin/true` mounted on the
    /// host). A shared mount of the test's own stands in for systemd's `/`.
    #[test]
    fn the_executables_mount_never_reaches_the_host() {
        let exe = LinuxSandboxExecutor::new();
        let missing = exe.probe_report().capabilities.missing();
        assert!(missing.is_empty(), "this host lacks {missing:?}");
        let t = std::env::temp_dir().join(format!("corral-exe-shared-{}", std::process::id()));
        let _ = fs::remove_dir_all(&t);
        fs::create_dir_all(t.join("bin")).unwrap();
        fs::create_dir_all(t.join("ws")).unwrap();
        fs::write(t.join("bin/agent"), "#!/bin/sh\necho ran\n").unwrap();
        fs::set_permissions(t.join("bin/agent"), fs::Permissions::from_mode(0o755)).unwrap();
        let tc = CString::new(t.to_str().unwrap()).unwrap();
        // SAFETY: valid C strings; a bind mount of the test's own folder onto itself.
        let rc = unsafe {
            libc::mount(
                tc.as_ptr(),
                tc.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            )
        };
        assert_eq!(
            rc,
            0,
            "bind {}: {}",
            t.display(),
            io::Error::last_os_error()
        );
        // SAFETY: as above; a propagation change of that mount only.
        let rc = unsafe {
            libc::mount(
                std::ptr::null(),
                tc.as_ptr(),
                std::ptr::null(),
                libc::MS_SHARED,
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "make-shared: {}", io::Error::last_os_error());
        let bin = t.join("bin").to_str().unwrap().to_owned();
        let agent = format!("{bin}/agent");
        let o = run_below_admission(&exe, &t.join("ws"), agent.clone(), bin);
        let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
        let leaked: Vec<&str> = mounts
            .lines()
            .filter(|l| l.split(' ').nth(4) == Some(agent.as_str()))
            .collect();
        // Remove the test's own mounts (a leaked one sits on the shared folder's subtree).
        // SAFETY: valid C string; detaches the test's own bind mount and what lies on it.
        let rc = unsafe { libc::umount2(tc.as_ptr(), libc::MNT_DETACH) };
        let _ = fs::remove_dir_all(&t);
        assert_eq!(rc, 0, "umount: {}", io::Error::last_os_error());
        let o = o.unwrap_or_else(|e| panic!("sandbox error: {e}"));
        assert_eq!(
            (
                o.exit_code,
                String::from_utf8_lossy(&o.stdout.bytes).as_ref()
            ),
            (Some(0), "ran\n")
        );
        assert!(
            leaked.is_empty(),
            "the sandbox's mounts reached the host: {leaked:?}"
        );
    }
}
