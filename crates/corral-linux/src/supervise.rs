//! The supervisor side of one run: cgroup, disk, overlay and mount trees are prepared here
//! (allocation allowed), then init is cloned into its namespaces with a prebuilt plan.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use corral_contract::manifest::Termination;
use corral_contract::{
    Destination, ExecSpec, Limits, NetworkMode, PathPattern, SandboxCapabilities,
};
use corral_process::{OutputCapture, StdinFeeder, cloexec_pipe, pidfd_open, poll_readable};
use corral_sandbox::{
    AttestedRequest, CancelToken, EgressGateway, SandboxError, SandboxOutcome, WorkspaceLayer,
};

use crate::cgroup::{CgroupLimits, CgroupOps as _};
use crate::child::{LandlockPlan, LandlockRule, OverlayByPath, Plan, Stage, TreeMount, WorkerPlan};
use crate::egress::{self, SessionGuard};
use crate::landlock;
use crate::sys::{self, MountAttr};
use crate::{LinuxSandboxExecutor, NAMESPACE_FLAGS, seccomp};

/// Tunables of the backend. Defaults are what `corral` uses.
#[derive(Debug, Clone)]
pub struct LinuxConfig {
    /// The worker's uid and gid. The workspace owner is idmapped to it. Default:
    /// `WORKER_ID_BASE + pid of this process`, an id no host user and no other live
    /// supervisor has, so the kernel's per-user counters (inotify instances, keyring quota,
    /// pipe pages, message-queue bytes, RLIMIT_NPROC) are never shared with a host user or
    /// another corral (RES-PID-02; ADR-0010).
    pub worker_uid: u32,
    /// The worker's gid. Default: the same id as `worker_uid`.
    pub worker_gid: u32,
    /// The most CPU bandwidth a run gets, in thousandths of a CPU (default: all of the CPUs
    /// this process may use). A budget's `cpu_millicores` lowers it, never raises it.
    pub cpu_bandwidth_millicores: u64,
    /// The period of the CPU bandwidth cap, in microseconds (default 100 ms).
    pub cpu_period_us: u64,
    /// How often the supervisor checks the cgroup's CPU usage against `cpu_seconds`.
    pub cpu_check_interval: Duration,
    /// How long output readers wait for end of file after the sandbox is gone.
    pub drain_grace: Duration,
    /// Where the probe makes its throwaway workspace and idmapped lower: the file system the
    /// base checkouts live on (corral's cache), so idmapped mounts are tested where runs need
    /// them. `None`: the system temp folder.
    pub probe_dir: Option<std::path::PathBuf>,
}

/// The one-line refusal when the workspace's file system cannot be idmapped (`dir` is on it).
pub(crate) fn no_idmap_message(dir: &Path) -> String {
    format!(
        "the file system of {} has no idmapped mounts (tmpfs gained them in Linux 6.3; ext4, \
         xfs and btrfs have them since 5.12 to 5.19): put corral's cache on one that has them \
         (XDG_CACHE_HOME), or use Linux 6.3 or later",
        dir.display()
    )
}

/// First id of the range the worker's uid/gid come from (`+ pid`, pid_max <= 2^22): above
/// every regular, system, systemd dynamic (61184-65519) and nspawn dynamic
/// (0x00080000-0x6FFFFFFF) range, below systemd's container base (0x7FFF0000).
pub const WORKER_ID_BASE: u32 = 2_000_000_000;

impl Default for LinuxConfig {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get) as u64;
        let id = WORKER_ID_BASE + std::process::id();
        Self {
            worker_uid: id,
            worker_gid: id,
            cpu_bandwidth_millicores: cpus * 1000,
            cpu_period_us: 100_000,
            cpu_check_interval: Duration::from_millis(20),
            drain_grace: Duration::from_millis(100),
            probe_dir: None,
        }
    }
}

/// The worker's `PATH`.
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
/// The worker's `HOME`, private to the sandbox.
pub const SANDBOX_HOME: &str = "/home/corral";

/// `/proc` files masked with `/dev/null` in the sandbox: the kernel keyring is not namespaced
/// (`keys`, `key-users` list what the sandbox uid can view on the host), and the rest expose
/// host-wide timers, scheduler and kernel memory state (adversarial case CRED-06).
pub const PROC_MASKED: &[&str] = &[
    "keys",
    "key-users",
    "timer_list",
    "sched_debug",
    "kcore",
    "latency_stats",
];
/// The worker's `TMPDIR`, private to the sandbox.
pub const SANDBOX_TMP: &str = "/tmp";
const ATTACH: &str = "/tmp";
const NEW_ROOT: &str = "/tmp/root";
const SYSTEM_TREES: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];
const ETC_DIRS: &[&str] = &[
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/alternatives",
];
const ETC_FILES: &[&str] = &["/etc/ld.so.cache", "/etc/localtime", "/etc/os-release"];
const DEV_NODES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// What one run needs, independent of how it was admitted (the probe builds one too).
pub(crate) struct RunInput<'a> {
    pub exec: &'a ExecSpec,
    pub network_mode: NetworkMode,
    /// The admitted destinations (allowlist mode).
    pub allowlist: &'a [Destination],
    /// Serves the in-namespace proxy listener (required in allowlist mode).
    pub egress: Option<&'a dyn EgressGateway>,
    pub writable: &'a [PathPattern],
    pub forbidden: &'a [PathPattern],
    pub limits: Limits,
    pub workspace: &'a Path,
    pub capabilities: SandboxCapabilities,
    /// The executable as the caller opened and hashed it; `None`: opened here.
    pub executable: Option<&'a fs::File>,
}

impl<'a> RunInput<'a> {
    pub fn from_request(r: &'a AttestedRequest<'a>) -> Self {
        Self {
            exec: r.exec(),
            network_mode: r.policy().network_mode(),
            allowlist: r.policy().network_allowlist(),
            egress: r.egress(),
            writable: r.policy().writable_paths(),
            forbidden: r.policy().forbidden_paths(),
            limits: *r.limits(),
            workspace: r.workspace(),
            capabilities: r.capabilities().clone(),
            executable: r.executable(),
        }
    }
}

fn setup_err(what: &str, e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Setup(format!("{what}: {e}"))
}

fn cstring(s: &str) -> Result<CString, SandboxError> {
    CString::new(s).map_err(|_| SandboxError::InvalidRequest(format!("NUL byte in {s:?}")))
}

/// `(arg_start, arg_end, env_start, env_end)` of this process, from `/proc/self/stat`.
fn wipe_regions() -> [(usize, usize); 2] {
    static REGIONS: OnceLock<[(usize, usize); 2]> = OnceLock::new();
    *REGIONS.get_or_init(|| {
        let stat = fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let Some((_, post)) = stat.rsplit_once(") ") else {
            return [(0, 0); 2];
        };
        let f: Vec<usize> = post
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        // Fields 48..=51 of proc(5); `post` starts at field 3.
        match (f.get(45), f.get(46), f.get(47), f.get(48)) {
            (Some(a), Some(b), Some(c), Some(d)) => [(*a, *b), (*c, *d)],
            _ => [(0, 0); 2],
        }
    })
}

fn cap_last() -> u32 {
    static LAST: OnceLock<u32> = OnceLock::new();
    *LAST.get_or_init(|| {
        fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(63)
    })
}

/// A user namespace whose uid/gid maps send `owner` to the worker, for the idmapped lower
/// layer (cached per owner).
fn idmap_userns(exe: &LinuxSandboxExecutor, owner: (u32, u32)) -> Result<OwnedFd, SandboxError> {
    let mut cache = exe
        .idmaps
        .lock()
        .map_err(|_| setup_err("idmap cache", "poisoned"))?;
    if let Some(fd) = cache.get(&owner) {
        return fd.try_clone().map_err(|e| setup_err("idmap dup", e));
    }
    let fd = create_idmap_userns(owner, (exe.config.worker_uid, exe.config.worker_gid))
        .map_err(|e| setup_err("idmap user namespace", e))?;
    let dup = fd.try_clone()?;
    cache.insert(owner, fd);
    Ok(dup)
}

/// A user namespace mapping `from` (uid, gid) to `to`, as a descriptor.
pub(crate) fn create_idmap_userns(from: (u32, u32), to: (u32, u32)) -> io::Result<OwnedFd> {
    let (r, w) = cloexec_pipe()?;
    // SAFETY: fork-like clone into a new user namespace; the child only blocks in read(2)
    // and exits, touching no locks or allocations.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let mut b = [0u8; 1];
        // SAFETY: blocking read on an inherited pipe, then _exit; async-signal-safe.
        unsafe {
            libc::read(r.as_raw_fd(), b.as_mut_ptr().cast(), 1);
            libc::_exit(0);
        }
    }
    let pid = pid as libc::pid_t;
    let result = (|| {
        fs::write(
            format!("/proc/{pid}/uid_map"),
            format!("{} {} 1\n", from.0, to.0),
        )?;
        fs::write(
            format!("/proc/{pid}/gid_map"),
            format!("{} {} 1\n", from.1, to.1),
        )?;
        let f = fs::File::open(format!("/proc/{pid}/ns/user"))?;
        Ok::<OwnedFd, io::Error>(OwnedFd::from(f))
    })();
    // The child holds a copy of `w` too, so it needs a byte, not end of file.
    let _ = sys::write_all(w.as_fd(), b"x");
    drop(w);
    drop(r);
    let _ = sys::waitpid(pid);
    result
}

/// The per-attempt disk: a detached, size-capped tmpfs.
pub(crate) fn create_disk(disk_bytes: u64) -> Result<OwnedFd, SandboxError> {
    let inodes = (disk_bytes / 4096).clamp(4096, 1_000_000) + 256;
    let fs_fd = sys::fsopen("tmpfs").map_err(|e| setup_err("disk", e))?;
    sys::fsconfig_string(fs_fd.as_fd(), "size", &disk_bytes.to_string())
        .map_err(|e| setup_err("disk", e))?;
    sys::fsconfig_string(fs_fd.as_fd(), "nr_inodes", &inodes.to_string())
        .map_err(|e| setup_err("disk", e))?;
    sys::fsconfig_string(fs_fd.as_fd(), "mode", "0755").map_err(|e| setup_err("disk", e))?;
    sys::fsconfig_create(fs_fd.as_fd()).map_err(|e| setup_err("disk", e))?;
    sys::fsmount(
        fs_fd.as_fd(),
        sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
    )
    .map_err(|e| setup_err("disk", e))
}

pub(crate) fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// How the overlay's layers reached the kernel (the probe's evidence names it).
pub(crate) const OVERLAY_BY_FD: &str = "layers by fd (lowerdir+/upperdir/workdir)";
pub(crate) const OVERLAY_BY_PATH: &str = "layers attached in the sandbox's own mount \
     namespace and mounted by path (kernel before 6.13: no lowerdir+ by fd, no detached layers)";

/// The overlay options corral always sets.
pub(crate) const OVERLAY_OPTIONS: &str = "metacopy=off,redirect_dir=off,index=off";

/// Mounts overlayfs (metacopy, redirect_dir and index off) with `lower` read-only below
/// `upper` and `work`, as a detached mount, with the layers by fd (`FSCONFIG_SET_FD` on
/// `lowerdir+`, Linux 6.13 and later). `Ok(None)` when the kernel cannot take layers that
/// way: Linux 6.1 does not know `lowerdir+` (EINVAL/EOPNOTSUPP), 6.12 takes it only as a
/// string (EBADF), and both refuse layers on a detached mount ("failed to clone upperpath":
/// a layer's mount must be in the caller's namespace). Then the caller mounts overlay by path
/// inside a mount namespace of its own where the layers are attached (the sandbox's init does
/// it before `pivot_root`; see [`OverlayByPath`]): nothing is ever mounted where the host
/// sees it, and every path is one of corral's own mount points in that namespace.
pub(crate) fn mount_overlay_by_fd(
    lower: &OwnedFd,
    upper: &OwnedFd,
    work: &OwnedFd,
) -> io::Result<Option<OwnedFd>> {
    let by_fd = (|| {
        let ovl = sys::fsopen("overlay")?;
        for (k, v) in [
            ("metacopy", "off"),
            ("redirect_dir", "off"),
            ("index", "off"),
        ] {
            sys::fsconfig_string(ovl.as_fd(), k, v)?;
        }
        sys::fsconfig_fd(ovl.as_fd(), "lowerdir+", lower.as_fd())?;
        sys::fsconfig_fd(ovl.as_fd(), "upperdir", upper.as_fd())?;
        sys::fsconfig_fd(ovl.as_fd(), "workdir", work.as_fd())?;
        sys::fsconfig_create(ovl.as_fd())?;
        Ok::<_, io::Error>(ovl)
    })();
    match by_fd {
        Ok(ovl) => Ok(Some(sys::fsmount(
            ovl.as_fd(),
            sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        )?)),
        Err(e)
            if matches!(
                sys::errno(&e),
                Some(libc::EINVAL | libc::EOPNOTSUPP | libc::EBADF)
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The `mount(2)` data of a path-based overlay.
pub(crate) fn overlay_data(lower: &str, upper: &str, work: &str) -> String {
    format!("lowerdir={lower},upperdir={upper},workdir={work},{OVERLAY_OPTIONS}")
}

struct Skeleton {
    base: PathBuf,
}

impl Skeleton {
    fn dir(&self, rel: &str, mode: u32) -> io::Result<()> {
        let p = self.base.join(rel.trim_start_matches('/'));
        fs::create_dir_all(&p)?;
        fs::set_permissions(&p, fs::Permissions::from_mode(mode))
    }
    fn file(&self, rel: &str, contents: &[u8], mode: u32) -> io::Result<()> {
        let p = self.base.join(rel.trim_start_matches('/'));
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&p, contents)?;
        fs::set_permissions(&p, fs::Permissions::from_mode(mode))
    }
    fn symlink(&self, rel: &str, target: &Path) -> io::Result<()> {
        std::os::unix::fs::symlink(target, self.base.join(rel.trim_start_matches('/')))
    }
}

/// The workspace plan: which relative paths become writable or read-only binds.
#[derive(Debug, Default)]
pub(crate) struct WorkspacePlan {
    pub root_writable: bool,
    pub writable: Vec<String>,
    pub read_only: Vec<String>,
    /// Writable prefixes missing from the base tree: created in the upper layer.
    pub create: Vec<String>,
}

fn lower_kind(lower: &Path, rel: &str) -> io::Result<Option<fs::Metadata>> {
    match fs::symlink_metadata(lower.join(rel)) {
        Ok(m) => Ok(Some(m)),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

pub(crate) fn plan_workspace(
    lower: &Path,
    writable: &[PathPattern],
    forbidden: &[PathPattern],
) -> Result<WorkspacePlan, SandboxError> {
    let mut plan = WorkspacePlan::default();
    let mut prefixes: BTreeSet<Vec<String>> = BTreeSet::new();
    for p in writable {
        let comps: Vec<String> = p.literal_prefix().into_iter().map(str::to_owned).collect();
        if comps.is_empty() {
            plan.root_writable = true;
        }
        prefixes.insert(comps);
    }
    if !plan.root_writable {
        let all: Vec<Vec<String>> = prefixes.iter().cloned().collect();
        for comps in &all {
            let nested = all.iter().any(|o| o != comps && comps.starts_with(o));
            if nested {
                continue;
            }
            let rel = comps.join("/");
            let mut missing = false;
            for i in 1..=comps.len() {
                let partial = comps[..i].join("/");
                match lower_kind(lower, &partial).map_err(|e| setup_err("workspace", e))? {
                    None => {
                        missing = true;
                        break;
                    }
                    Some(m) if m.file_type().is_symlink() => {
                        return Err(SandboxError::InvalidRequest(format!(
                            "writable path {rel:?} crosses a symbolic link ({partial:?}) in the base tree"
                        )));
                    }
                    Some(m) if !m.is_dir() && i < comps.len() => {
                        return Err(SandboxError::InvalidRequest(format!(
                            "writable path {rel:?}: {partial:?} is not a directory in the base tree"
                        )));
                    }
                    Some(_) => {}
                }
            }
            if missing {
                plan.create.push(rel.clone());
            }
            plan.writable.push(rel);
        }
    }
    let covered = |rel: &str| {
        plan.root_writable
            || plan.writable.iter().any(|w| {
                rel == w || rel.starts_with(&format!("{w}/")) || w.starts_with(&format!("{rel}/"))
            })
    };
    let mut ro = Vec::new();
    let git = if covered(".git") {
        lower_kind(lower, ".git").map_err(|e| setup_err("workspace", e))?
    } else {
        None
    };
    if let Some(m) = git {
        if m.file_type().is_symlink() {
            return Err(SandboxError::InvalidRequest(
                ".git is a symbolic link in the base tree".into(),
            ));
        }
        ro.push(".git".to_owned());
    }
    for f in forbidden.iter().filter(|f| f.is_literal()) {
        let rel = f.as_str().trim_end_matches('/').to_owned();
        if !covered(&rel) {
            continue;
        }
        // Existing, symlink-free paths are bound read-only. A directory entry (`secret/`)
        // missing from the base is created empty in the upper layer and bound read-only, so
        // nothing can be written below it either (an empty directory is no change to capture).
        // Anything else is enforced by the exact pattern at capture.
        let comps: Vec<&str> = rel.split('/').collect();
        let mut state = Some(true);
        for i in 1..=comps.len() {
            match lower_kind(lower, &comps[..i].join("/")).map_err(|e| setup_err("workspace", e))? {
                Some(m) if m.file_type().is_symlink() => {
                    state = None;
                    break;
                }
                Some(m) if i < comps.len() && !m.is_dir() => {
                    state = None;
                    break;
                }
                Some(_) => {}
                None => {
                    state = Some(false);
                    break;
                }
            }
        }
        match state {
            Some(true) => ro.push(rel),
            Some(false) if f.as_str().ends_with('/') => {
                plan.create.push(rel.clone());
                ro.push(rel);
            }
            _ => {}
        }
    }
    plan.read_only = ro;
    Ok(plan)
}

/// Owned descriptors and the plan; dropping closes the supervisor's copies.
struct Prepared {
    plan: Plan,
    disk: OwnedFd,
    _keep: Vec<OwnedFd>,
    sync_tx: OwnedFd,
    err_rx: OwnedFd,
    status_rx: OwnedFd,
    stdin_w: OwnedFd,
    stdout_r: OwnedFd,
    stderr_r: OwnedFd,
    /// Child-side pipe ends, closed by the supervisor right after clone.
    child_ends: Vec<OwnedFd>,
}

/// Where a host path is mounted in the sandbox's skeleton: beneath the private /tmp or HOME
/// (mounted after the trees, so a path there is mounted last: `late`), or in the root. With
/// `create`, an empty file or folder is made to mount on.
fn mount_point(
    sk: &Skeleton,
    base: &Path,
    late: &mut Vec<String>,
    p: &str,
    is_dir: bool,
    create: bool,
) -> io::Result<()> {
    let private = [(SANDBOX_TMP, "tmp"), (SANDBOX_HOME, "home")]
        .into_iter()
        .find_map(|(dir, disk_dir)| {
            p.strip_prefix(&format!("{dir}/"))
                .map(|rest| (disk_dir, rest))
        });
    let (at, rel) = match private {
        Some((disk_dir, rest)) => {
            late.push(p.to_owned());
            (
                Skeleton {
                    base: base.join(disk_dir),
                },
                rest,
            )
        }
        None => (
            Skeleton {
                base: sk.base.clone(),
            },
            p,
        ),
    };
    match (create, is_dir) {
        (false, _) => Ok(()),
        (true, true) => at.dir(rel, 0o755),
        (true, false) => at.file(rel, b"", 0o644),
    }
}

fn prepare(exe: &LinuxSandboxExecutor, input: &RunInput<'_>) -> Result<Prepared, SandboxError> {
    let cfg = &exe.config;
    let ws_meta = fs::metadata(input.workspace).map_err(|e| {
        SandboxError::InvalidRequest(format!("workspace {}: {e}", input.workspace.display()))
    })?;
    if !ws_meta.is_dir() {
        return Err(SandboxError::InvalidRequest(format!(
            "workspace {} is not a directory",
            input.workspace.display()
        )));
    }
    let exe_path = &input.exec.executable;
    if !exe_path.starts_with('/') {
        return Err(SandboxError::InvalidRequest(format!(
            "executable {exe_path:?} is not absolute"
        )));
    }
    // The file that runs is the one the caller hashed (symbolic links followed, as npm and
    // pip install agents: `/usr/local/bin/codex -> ../lib/node_modules/...`). It is bound
    // read-only at its real path, over whatever that path shows, and the worker execs that
    // path: the bytes that run are the bytes recorded, and the install root beside the file
    // (its modules, its interpreter) is where the agent looks for it.
    let opened;
    let exe_file = match input.executable {
        Some(f) => f,
        None => {
            let bad =
                |e: String| SandboxError::InvalidRequest(format!("executable {exe_path:?}: {e}"));
            // Opening a FIFO would wait for a writer.
            if !fs::metadata(exe_path)
                .map_err(|e| bad(e.to_string()))?
                .is_file()
            {
                return Err(bad("not a regular file".into()));
            }
            opened = fs::File::open(exe_path).map_err(|e| bad(e.to_string()))?;
            &opened
        }
    };
    let exe_real = corral_sandbox::executable_real_path(exe_file)
        .map_err(|why| SandboxError::InvalidRequest(format!("executable {exe_path:?}: {why}")))?;
    let exe_visible = SYSTEM_TREES
        .iter()
        .copied()
        .chain(input.exec.read_only_paths.iter().map(String::as_str))
        .any(|t| exe_real == t || exe_real.starts_with(&format!("{t}/")));
    let ws_plan = plan_workspace(input.workspace, input.writable, input.forbidden)?;

    // The disk and its layout.
    let disk = create_disk(input.limits.disk_bytes.get())?;
    let base = fd_path(&disk);
    let sk = Skeleton {
        base: base.join("root"),
    };
    let (uid, gid) = (cfg.worker_uid, cfg.worker_gid);
    let mk = |r: io::Result<()>, what: &str| r.map_err(|e| setup_err(what, e));
    mk(fs::create_dir(base.join("root")), "root")?;
    for d in [
        "etc",
        "dev",
        "dev/pts",
        "dev/shm",
        "proc",
        "tmp",
        "home",
        "workspace",
    ] {
        mk(sk.dir(d, 0o755), d)?;
    }
    mk(sk.dir(SANDBOX_HOME, 0o755), "home")?;
    for (name, mode) in [
        ("tmp", 0o1777),
        ("shm", 0o1777),
        ("home", 0o700),
        ("work", 0o700),
    ] {
        let p = base.join(name);
        mk(fs::create_dir(&p), name)?;
        mk(
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)),
            name,
        )?;
    }
    mk(sys::lchown(&base.join("home"), uid, gid), "home owner")?;
    write_home_files(&base.join("home"), &input.exec.home_files, uid, gid)?;
    // The worker's login shell: agents run `$SHELL -lc` or the passwd shell (codex does),
    // and their commands are bash more often than not. /bin is the host's, bound read-only.
    let shell = if Path::new("/bin/bash").is_file() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    let passwd = format!(
        "root:x:0:0:root:/root:/usr/sbin/nologin\ncorral:x:{uid}:{gid}:corral sandbox:{SANDBOX_HOME}:{shell}\n"
    );
    let group = format!("root:x:0:\ncorral:x:{gid}:\n");
    mk(sk.file("etc/passwd", passwd.as_bytes(), 0o644), "passwd")?;
    mk(sk.file("etc/group", group.as_bytes(), 0o644), "group")?;
    mk(
        sk.file(
            "etc/hosts",
            b"127.0.0.1 localhost corral\n::1 localhost ip6-localhost ip6-loopback\n",
            0o644,
        ),
        "hosts",
    )?;
    mk(sk.file("etc/hostname", b"corral\n", 0o644), "hostname")?;
    mk(
        sk.file(
            "etc/nsswitch.conf",
            b"passwd: files\ngroup: files\nhosts: files\n",
            0o644,
        ),
        "nsswitch",
    )?;
    for link in [
        ("dev/fd", "/proc/self/fd"),
        ("dev/stdin", "/proc/self/fd/0"),
        ("dev/stdout", "/proc/self/fd/1"),
        ("dev/stderr", "/proc/self/fd/2"),
        ("dev/ptmx", "pts/ptmx"),
    ] {
        mk(sk.symlink(link.0, Path::new(link.1)), link.0)?;
    }

    let mut keep: Vec<OwnedFd> = Vec::new();
    let mut trees: Vec<TreeMount> = Vec::new();
    // Every clone of a host tree is made private: a clone of a shared mount (systemd makes
    // `/` shared) is a peer of the host's, so a mount made on top of it in the sandbox (the
    // executable, bound over its own path) would propagate to the host, and host mounts
    // would appear in a running sandbox.
    let private = libc::MS_PRIVATE;
    let ro_attr = MountAttr {
        attr_set: sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        propagation: private,
        ..MountAttr::default()
    };
    let mut add_tree = |host: &str,
                        target_rel: &str,
                        recursive: bool,
                        attr: &MountAttr|
     -> Result<(), SandboxError> {
        let fd = sys::open_tree_clone(host, recursive).map_err(|e| setup_err("bind", e))?;
        sys::mount_setattr(fd.as_fd(), recursive, attr)
            .map_err(|e| setup_err(&format!("mount_setattr {host}"), e))?;
        trees.push(TreeMount {
            fd: fd.as_raw_fd(),
            target: cstring(&format!(
                "{NEW_ROOT}/{}",
                target_rel.trim_start_matches('/')
            ))?,
        });
        keep.push(fd);
        Ok(())
    };
    for t in SYSTEM_TREES {
        match fs::symlink_metadata(t) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(t).map_err(|e| setup_err(t, e))?;
                mk(sk.symlink(t, &target), t)?;
            }
            Ok(m) if m.is_dir() => {
                mk(sk.dir(t, 0o755), t)?;
                add_tree(t, t, true, &ro_attr)?;
            }
            _ => {}
        }
    }
    for d in ETC_DIRS {
        if fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()) {
            mk(sk.dir(d, 0o755), d)?;
            add_tree(d, d, true, &ro_attr)?;
        }
    }
    for f in ETC_FILES {
        match fs::symlink_metadata(f) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(f).map_err(|e| setup_err(f, e))?;
                mk(sk.symlink(f, &target), f)?;
            }
            Ok(m) if m.is_file() => {
                mk(sk.file(f, b"", 0o644), f)?;
                add_tree(f, f, false, &ro_attr)?;
            }
            _ => {}
        }
    }
    let dev_attr = MountAttr {
        attr_set: sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC,
        propagation: private,
        ..MountAttr::default()
    };
    for n in DEV_NODES {
        let rel = format!("dev/{n}");
        mk(sk.file(&rel, b"", 0o666), &rel)?;
        add_tree(&format!("/dev/{n}"), &rel, false, &dev_attr)?;
    }
    let mut late: Vec<String> = Vec::new();
    for p in input.exec.read_only_paths.iter().map(String::as_str) {
        if SYSTEM_TREES
            .iter()
            .any(|t| p == *t || p.starts_with(&format!("{t}/")))
        {
            continue;
        }
        let m = fs::metadata(p)
            .map_err(|e| SandboxError::InvalidRequest(format!("read_only_path {p}: {e}")))?;
        if let Some(t) = corral_sandbox::sandbox_own_tree(p) {
            return Err(SandboxError::InvalidRequest(format!(
                "{p} lies under {t}, which the sandbox mounts over, so the worker could not see it"
            )));
        }
        mk(mount_point(&sk, &base, &mut late, p, m.is_dir(), true), p)?;
        add_tree(p, p, true, &ro_attr)?;
    }
    // The executable as hashed, at its real path: a mount point only where no tree above
    // shows that path; under a private /tmp or HOME it is mounted last, as those trees are.
    let exe_tree = sys::open_tree_clone_fd(exe_file.as_fd())
        .map_err(|e| setup_err(&format!("bind the executable {exe_real}"), e))?;
    sys::mount_setattr(exe_tree.as_fd(), false, &ro_attr)
        .map_err(|e| setup_err(&format!("mount_setattr {exe_real}"), e))?;
    mk(
        mount_point(&sk, &base, &mut late, &exe_real, false, !exe_visible),
        &exe_real,
    )?;
    trees.push(TreeMount {
        fd: exe_tree.as_raw_fd(),
        target: cstring(&format!("{NEW_ROOT}/{}", exe_real.trim_start_matches('/')))?,
    });
    keep.push(exe_tree);

    let late_targets: Vec<CString> = late
        .iter()
        .map(|p| cstring(&format!("{NEW_ROOT}/{}", p.trim_start_matches('/'))))
        .collect::<Result<_, _>>()?;
    let (late_trees, mut trees): (Vec<TreeMount>, Vec<TreeMount>) = trees
        .into_iter()
        .partition(|t| late_targets.contains(&t.target));

    // The workspace: idmapped read-only lower, upper and work on the disk.
    let owner = (ws_meta.uid(), ws_meta.gid());
    let lower = sys::open_tree_clone(&input.workspace.to_string_lossy(), false)
        .map_err(|e| setup_err("workspace", e))?;
    let mut lower_attr = ro_attr;
    let idmapped = owner != (uid, gid);
    let userns;
    if idmapped {
        userns = idmap_userns(exe, owner)?;
        lower_attr.attr_set |= sys::MOUNT_ATTR_IDMAP;
        lower_attr.userns_fd = userns.as_raw_fd() as u64;
    }
    sys::mount_setattr(lower.as_fd(), false, &lower_attr).map_err(|e| {
        if idmapped && sys::errno(&e) == Some(libc::EINVAL) {
            setup_err(
                "idmapped workspace lower layer",
                io::Error::other(no_idmap_message(input.workspace)),
            )
        } else {
            setup_err("idmapped workspace lower layer", e)
        }
    })?;
    let map_owner = |m: &fs::Metadata| {
        if (m.uid(), m.gid()) == owner {
            (uid, gid)
        } else {
            (m.uid(), m.gid())
        }
    };
    let upper = base.join("upper");
    mk(fs::create_dir(&upper), "upper")?;
    mk(
        fs::set_permissions(&upper, fs::Permissions::from_mode(ws_meta.mode() & 0o7777)),
        "upper",
    )?;
    let (ou, og) = map_owner(&ws_meta);
    mk(sys::lchown(&upper, ou, og), "upper owner")?;
    for rel in &ws_plan.create {
        let mut cur = String::new();
        for comp in rel.split('/') {
            if !cur.is_empty() {
                cur.push('/');
            }
            cur.push_str(comp);
            let up = upper.join(&cur);
            if up.exists() {
                continue;
            }
            mk(fs::create_dir(&up), "writable dir")?;
            let (mode, (u, g)) =
                match lower_kind(input.workspace, &cur).map_err(|e| setup_err("workspace", e))? {
                    Some(m) => (m.mode() & 0o7777, map_owner(&m)),
                    None => (0o755, (uid, gid)),
                };
            mk(
                fs::set_permissions(&up, fs::Permissions::from_mode(mode)),
                "writable dir",
            )?;
            mk(sys::lchown(&up, u, g), "writable dir owner")?;
        }
    }
    let upper_fd = OwnedFd::from(fs::File::open(&upper).map_err(|e| setup_err("upper", e))?);
    let work_fd =
        OwnedFd::from(fs::File::open(base.join("work")).map_err(|e| setup_err("work", e))?);
    let mut overlay_by_path = None;
    match mount_overlay_by_fd(&lower, &upper_fd, &work_fd).map_err(|e| setup_err("overlay", e))? {
        Some(ovl_mnt) => {
            trees.push(TreeMount {
                fd: ovl_mnt.as_raw_fd(),
                target: cstring(&format!("{NEW_ROOT}/workspace"))?,
            });
            keep.push(ovl_mnt);
        }
        None => {
            // Init attaches the lower here (on the disk, outside every bind the worker sees),
            // mounts overlay by path, and detaches it again.
            mk(fs::create_dir(base.join(".lower")), "overlay lower point")?;
            overlay_by_path = Some(OverlayByPath {
                lower_fd: lower.as_raw_fd(),
                lower_point: cstring(&format!("{ATTACH}/.lower"))?,
                target: cstring(&format!("{NEW_ROOT}/workspace"))?,
                data: cstring(&overlay_data(
                    &format!("{ATTACH}/.lower"),
                    &format!("{ATTACH}/upper"),
                    &format!("{ATTACH}/work"),
                ))?,
            });
            // Open until init has attached it.
            keep.push(lower);
        }
    }

    // Pipes: sync (supervisor -> init), error and status (init/worker -> supervisor), stdio.
    let (sync_rx, sync_tx) = cloexec_pipe()?;
    let (err_rx, err_tx) = cloexec_pipe()?;
    let (status_rx, status_tx) = cloexec_pipe()?;
    let (stdin_r, stdin_w) = cloexec_pipe()?;
    let (stdout_r, stdout_w) = cloexec_pipe()?;
    let (stderr_r, stderr_w) = cloexec_pipe()?;

    // Worker environment: exactly ExecSpec.env plus the fixed PATH, HOME and TMPDIR.
    let mut env = input.exec.env.clone();
    env.insert("PATH".into(), SANDBOX_PATH.into());
    env.insert("HOME".into(), SANDBOX_HOME.into());
    env.insert("TMPDIR".into(), SANDBOX_TMP.into());
    if input.network_mode == NetworkMode::Allowlist {
        egress::set_proxy_env(&mut env);
    }
    let envp: Vec<CString> = env
        .iter()
        .map(|(k, v)| cstring(&format!("{k}={v}")))
        .collect::<Result<_, _>>()?;
    let mut argv = vec![cstring(exe_path)?];
    for a in &input.exec.args {
        argv.push(cstring(a)?);
    }
    let ptrs = |v: &[CString]| {
        v.iter()
            .map(|c| c.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect::<Vec<_>>()
    };
    let cpu = input.limits.cpu_seconds.get();
    let worker = WorkerPlan {
        exe: cstring(&exe_real)?,
        argv_ptrs: ptrs(&argv),
        argv,
        envp_ptrs: ptrs(&envp),
        envp,
        uid,
        gid,
        cwd: cstring("/workspace")?,
        rlimits: vec![
            // A backstop one second past the budget, not the budget itself: the kernel judges
            // RLIMIT_CPU on tick-sampled utime+stime, which on this VM ran ahead of the
            // cgroup's exact accounting and sent SIGXCPU at 894 ms of a 1 s budget. The
            // supervisor's cgroup check is what ends a run at its budget (CpuLimit); this
            // layer only acts if the supervisor cannot.
            (
                libc::RLIMIT_CPU,
                libc::rlimit {
                    rlim_cur: cpu + 1,
                    rlim_max: cpu + 2,
                },
            ),
            (
                libc::RLIMIT_CORE,
                libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                },
            ),
        ],
        cap_last: cap_last(),
        filter: seccomp::worker_filter().map_err(|e| setup_err("seccomp", e))?,
    };

    let abi = exe.report.landlock_abi;
    let landlock_plan = (abi >= 1).then(|| {
        let all = landlock::handled_fs(abi);
        let dev_rights = landlock::file_rights(abi) & !landlock::ACCESS_FS_EXECUTE;
        let mut rules = vec![LandlockRule {
            path: CString::from(c"/"),
            rights: landlock::read_rights(abi),
        }];
        let mut writable_dirs: Vec<String> =
            vec![SANDBOX_TMP.into(), SANDBOX_HOME.into(), "/dev/shm".into()];
        if ws_plan.root_writable {
            writable_dirs.push("/workspace".into());
        } else {
            writable_dirs.extend(ws_plan.writable.iter().map(|w| format!("/workspace/{w}")));
        }
        for d in writable_dirs {
            if let Ok(c) = CString::new(d) {
                rules.push(LandlockRule {
                    path: c,
                    rights: all,
                });
            }
        }
        for n in DEV_NODES {
            if let Ok(c) = CString::new(format!("/dev/{n}")) {
                rules.push(LandlockRule {
                    path: c,
                    rights: dev_rights,
                });
            }
        }
        rules.push(LandlockRule {
            path: CString::from(c"/dev/pts"),
            rights: dev_rights | landlock::ACCESS_FS_READ_DIR,
        });
        LandlockPlan {
            abi,
            attr: landlock::RulesetAttr {
                handled_access_fs: all,
                handled_access_net: 0,
                scoped: landlock::scopes(abi),
            },
            rules,
        }
    });

    let mut keep_fds: Vec<RawFd> = vec![
        sync_rx.as_raw_fd(),
        err_tx.as_raw_fd(),
        status_tx.as_raw_fd(),
        stdin_r.as_raw_fd(),
        stdout_w.as_raw_fd(),
        stderr_w.as_raw_fd(),
        disk.as_raw_fd(),
    ];
    keep_fds.extend(trees.iter().chain(&late_trees).map(|t| t.fd));
    keep_fds.extend(overlay_by_path.as_ref().map(|o| o.lower_fd));
    keep_fds.sort_unstable();
    keep_fds.dedup();
    let plan = Plan {
        keep_fds,
        sync_rx: sync_rx.as_raw_fd(),
        err_tx: err_tx.as_raw_fd(),
        status_tx: status_tx.as_raw_fd(),
        stdin_r: stdin_r.as_raw_fd(),
        stdout_w: stdout_w.as_raw_fd(),
        stderr_w: stderr_w.as_raw_fd(),
        wipe: wipe_regions(),
        hostname: CString::from(c"corral"),
        disk_fd: disk.as_raw_fd(),
        disk_attach: cstring(ATTACH)?,
        new_root: cstring(NEW_ROOT)?,
        trees,
        overlay_by_path,
        late_trees,
        binds: vec![
            (
                cstring(&format!("{ATTACH}/tmp"))?,
                cstring(&format!("{NEW_ROOT}/tmp"))?,
            ),
            (
                cstring(&format!("{ATTACH}/home"))?,
                cstring(&format!("{NEW_ROOT}{SANDBOX_HOME}"))?,
            ),
            (
                cstring(&format!("{ATTACH}/shm"))?,
                cstring(&format!("{NEW_ROOT}/dev/shm"))?,
            ),
        ],
        proc_target: cstring(&format!("{NEW_ROOT}/proc"))?,
        proc_read_only: ["sys", "sysrq-trigger", "irq", "bus"]
            .iter()
            .map(|p| cstring(&format!("{NEW_ROOT}/proc/{p}")))
            .collect::<Result<_, _>>()?,
        proc_masked: PROC_MASKED
            .iter()
            .map(|p| cstring(&format!("{NEW_ROOT}/proc/{p}")))
            .collect::<Result<_, _>>()?,
        dev_null: cstring(&format!("{NEW_ROOT}/dev/null"))?,
        devpts_target: cstring(&format!("{NEW_ROOT}/dev/pts"))?,
        devpts_options: cstring("newinstance,ptmxmode=0666,mode=0620")?,
        workspace: cstring("/workspace")?,
        ws_writable: ws_plan
            .writable
            .iter()
            .map(|w| cstring(w))
            .collect::<Result<_, _>>()?,
        ws_read_only: ws_plan
            .read_only
            .iter()
            .map(|w| cstring(w))
            .collect::<Result<_, _>>()?,
        ws_top_read_only: !ws_plan.root_writable,
        landlock: landlock_plan,
        worker,
    };
    Ok(Prepared {
        plan,
        disk,
        _keep: keep,
        sync_tx,
        err_rx,
        status_rx,
        stdin_w,
        stdout_r,
        stderr_r,
        child_ends: vec![sync_rx, err_tx, status_tx, stdin_r, stdout_w, stderr_w],
    })
}

fn errno_name(e: i32) -> String {
    io::Error::from_raw_os_error(e).to_string()
}

/// Kills and reaps init on drop (error paths and panics included).
struct InitGuard {
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    reaped: Option<i32>,
}

impl InitGuard {
    fn kill(&self) {
        if let Some(fd) = &self.pidfd {
            let _ = sys::pidfd_send_signal(fd.as_fd(), libc::SIGKILL);
        }
    }
    fn reap(&mut self) -> Option<i32> {
        if self.reaped.is_none() {
            self.reaped = sys::waitpid(self.pid).ok();
        }
        self.reaped
    }
}

impl Drop for InitGuard {
    fn drop(&mut self) {
        if self.reaped.is_none() {
            self.kill();
            let _ = self.reap();
        }
    }
}

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
        unsafe { crate::child::init_main(&plan) }
    }
    let pid = pid as libc::pid_t;
    let mut init = InitGuard {
        pid,
        pidfd: None,
        reaped: None,
    };
    init.pidfd = Some(pidfd_open(pid).map_err(|e| setup_err("pidfd_open", e))?);
    drop(child_ends);
    drop(_keep);
    cg.attach(pid).map_err(|e| setup_err("cgroup attach", e))?;
    // Allowlist mode: the proxy's listener inside the sandbox's network namespace, served
    // from here, before init (and so the worker) is released.
    let mut session = SessionGuard(None);
    if let Some(gw) = gateway {
        let pidfd = init
            .pidfd
            .as_ref()
            .map(AsFd::as_fd)
            .ok_or_else(|| setup_err("pidfd", "missing"))?;
        let listener =
            egress::listener_in_netns(pidfd).map_err(|e| setup_err("egress listener", e))?;
        let wall = Duration::from_secs(limits.wall_seconds.get()).saturating_sub(start.elapsed());
        session.0 = Some(
            gw.serve(listener, input.allowlist, wall)
                .map_err(|e| setup_err("egress gateway", e))?,
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
    let (mut timed_out, mut cancelled, mut cpu_exceeded) = (false, false, false);
    let pidfd = init
        .pidfd
        .as_ref()
        .map(AsFd::as_fd)
        .ok_or_else(|| setup_err("pidfd", "missing"))?;
    let mut tick = Duration::from_millis(2);
    loop {
        let now = Instant::now();
        if now >= deadline {
            timed_out = true;
            break;
        }
        let wait = (deadline - now).min(tick);
        let ready = poll_readable(&[pidfd, cancel.wait_fd()], Some(wait))?;
        if ready[0] {
            break;
        }
        if ready[1] || cancel.is_cancelled() {
            cancelled = true;
            break;
        }
        if cg.cpu_usage_usec().unwrap_or(0) >= cpu_limit_usec {
            cpu_exceeded = true;
            break;
        }
        tick = (tick * 2).min(exe.config.cpu_check_interval);
    }
    // Whatever the ending: kill init, and with it the whole PID namespace (the kernel kills
    // and reaps every task in it before init is reaped); then kill the whole cgroup too if
    // anything is still in it. Skipping the v1 freeze-kill-thaw for an empty group keeps a
    // normal ending cheap.
    if timed_out || cancelled || cpu_exceeded {
        // Over a budget: every task gets SIGKILL now, and the CPU limit is lifted so the
        // throttled ones die at once instead of after the next quota period.
        let _ = cg.end_now();
    }
    init.kill();
    let init_status = init.reap();
    if cg.populated().unwrap_or(true) {
        let _ = cg.kill_all();
    }
    let wall = start.elapsed();
    // The sandbox is gone: nothing can use the proxy any more.
    let egress_records = session.finish();
    let mut status_buf = [0u8; 4];
    let worker_status = match sys::read_some(status_rx.as_fd(), &mut status_buf) {
        Ok(4) => Some(i32::from_ne_bytes(status_buf)),
        _ => None,
    };
    let mut err_buf = [0u8; 8];
    let setup_failure = match sys::read_some(err_rx.as_fd(), &mut err_buf) {
        Ok(8) => {
            let stage = u32::from_ne_bytes([err_buf[0], err_buf[1], err_buf[2], err_buf[3]]);
            let errno = i32::from_ne_bytes([err_buf[4], err_buf[5], err_buf[6], err_buf[7]]);
            Some(format!(
                "{} failed: {}",
                Stage::from_u32(stage)
                    .map_or_else(|| format!("stage {stage}"), |s| format!("{s:?}")),
                errno_name(errno)
            ))
        }
        _ => None,
    };
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
    if gateway.is_some() {
        notes.push(format!(
            "network allowlist: egress proxy listener {} inside the sandbox's network namespace (lo only), {} destination(s) admitted, {} egress record(s)",
            egress::proxy_url(),
            input.allowlist.len(),
            egress_records.len()
        ));
    }
    let (mut exit_code, mut signal) = (None, None);
    if let Some(st) = worker_status {
        if libc::WIFEXITED(st) {
            exit_code = Some(libc::WEXITSTATUS(st));
        } else if libc::WIFSIGNALED(st) {
            signal = Some(libc::WTERMSIG(st));
        }
    } else if let Some(st) = init_status {
        notes.push(format!(
            "init ended without reporting the worker (raw status {st:#x})"
        ));
        signal = Some(libc::SIGKILL);
    }
    let termination = if cancelled {
        Termination::Cancelled
    } else if timed_out {
        Termination::WallTimeout
    } else if cpu_exceeded
        || signal == Some(libc::SIGXCPU)
        || (signal == Some(libc::SIGKILL) && cpu_usec >= cpu_limit_usec)
    {
        Termination::CpuLimit
    } else if oom_kills > 0 {
        Termination::MemoryLimit
    } else if exit_code.is_some() {
        Termination::Exited
    } else {
        Termination::Signaled
    };
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
        workspace: Some(WorkspaceLayer::new(
            disk,
            PathBuf::from("upper"),
            input.workspace.to_path_buf(),
        )),
        notes,
        egress: egress_records,
    })
}

/// Places the preset's admitted `home_files` in the worker's new, empty HOME (on the run's
/// own tmpfs, so they count against `disk_bytes`), owned by the worker: folders 0700, files
/// 0600. Every step is one component beneath an open folder, never through a link; a file
/// that exists already is an error (admission refused repeats and file/folder clashes).
fn write_home_files(
    home: &Path,
    files: &std::collections::BTreeMap<String, String>,
    uid: u32,
    gid: u32,
) -> Result<(), SandboxError> {
    use std::io::Write as _;
    use std::os::fd::AsFd as _;
    if files.is_empty() {
        return Ok(());
    }
    let err = |path: &str, e: io::Error| SandboxError::Setup(format!("HOME file {path:?}: {e}"));
    let root = fs::File::open(home).map_err(|e| err(".", e))?;
    for (path, text) in files {
        let mut parts: Vec<&str> = path.split('/').collect();
        let Some(name) = parts.pop() else { continue };
        let mut dir = root
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| err(path, e))?;
        for part in parts {
            if part.is_empty() || part == "." || part == ".." {
                return Err(err(path, io::Error::from_raw_os_error(libc::EINVAL)));
            }
            sys::mkdir_at(dir.as_fd(), part, 0o700).map_err(|e| err(path, e))?;
            let next = sys::open_dir_at(dir.as_fd(), part).map_err(|e| err(path, e))?;
            sys::fchown(next.as_fd(), uid, gid).map_err(|e| err(path, e))?;
            dir = next;
        }
        if name.is_empty() || name == "." || name == ".." {
            return Err(err(path, io::Error::from_raw_os_error(libc::EINVAL)));
        }
        let mut f = sys::create_file_at(dir.as_fd(), name, 0o600).map_err(|e| err(path, e))?;
        f.write_all(text.as_bytes()).map_err(|e| err(path, e))?;
        sys::fchown(f.as_fd(), uid, gid).map_err(|e| err(path, e))?;
    }
    Ok(())
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
    use std::num::NonZeroU64;

    /// Runs `executable` with `read_only_paths: [read_only]` straight through the backend,
    /// below admission (whose `read_only_paths` rule keeps the tests' `/tmp` out).
    fn run_below_admission(
        exe: &LinuxSandboxExecutor,
        workspace: &Path,
        executable: String,
        read_only: String,
    ) -> Result<SandboxOutcome, SandboxError> {
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
