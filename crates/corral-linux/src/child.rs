//! What the sandbox's own processes follow: the [`Plan`] the supervisor builds, and how init
//! (pid 1 of the new PID namespace, `mount.rs`) and the worker (`enter.rs`) report a failed
//! [`Stage`].
//!
//! Both run in a `fork`-like copy of the (possibly multi-threaded) supervisor, so this code
//! must not allocate, lock or touch std's I/O: it only reads the prebuilt [`Plan`] and makes
//! raw system calls. Every failure writes a `(stage, errno)` record to the error pipe and
//! exits 127; the supervisor turns it into a `SandboxError::Setup` naming the stage.

use std::ffi::CString;
use std::os::fd::RawFd;

use crate::landlock::RulesetAttr;
use crate::seccomp::SockFilter;

/// Setup stages, reported with errno when one fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Stage {
    Sync = 1,
    CgroupNs,
    Hostname,
    Loopback,
    MountPrivate,
    AttachDisk,
    BindRoot,
    MoveTree,
    BindDisk,
    MountProc,
    ProcReadOnly,
    MountDevpts,
    PivotRoot,
    WorkspaceOpen,
    WorkspaceWritable,
    WorkspaceReadOnly,
    WorkspaceTopReadOnly,
    RootReadOnly,
    Landlock,
    ForkWorker,
    Setsid,
    Stdio,
    Chdir,
    Rlimit,
    Securebits,
    CapBounding,
    Ambient,
    SetGroups,
    SetGid,
    SetUid,
    Capset,
    NoNewPrivs,
    LandlockRestrict,
    CloseFds,
    Seccomp,
    Exec,
    /// Appended (stage numbers travel over the error pipe; the order above is kept).
    MountOverlay,
}

impl Stage {
    pub const ALL: [Stage; 37] = [
        Stage::Sync,
        Stage::CgroupNs,
        Stage::Hostname,
        Stage::Loopback,
        Stage::MountPrivate,
        Stage::AttachDisk,
        Stage::BindRoot,
        Stage::MoveTree,
        Stage::BindDisk,
        Stage::MountProc,
        Stage::ProcReadOnly,
        Stage::MountDevpts,
        Stage::PivotRoot,
        Stage::WorkspaceOpen,
        Stage::WorkspaceWritable,
        Stage::WorkspaceReadOnly,
        Stage::WorkspaceTopReadOnly,
        Stage::RootReadOnly,
        Stage::Landlock,
        Stage::ForkWorker,
        Stage::Setsid,
        Stage::Stdio,
        Stage::Chdir,
        Stage::Rlimit,
        Stage::Securebits,
        Stage::CapBounding,
        Stage::Ambient,
        Stage::SetGroups,
        Stage::SetGid,
        Stage::SetUid,
        Stage::Capset,
        Stage::NoNewPrivs,
        Stage::LandlockRestrict,
        Stage::CloseFds,
        Stage::Seccomp,
        Stage::Exec,
        Stage::MountOverlay,
    ];

    #[must_use]
    pub fn from_u32(v: u32) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| *s as u32 == v)
    }
}

/// A path-based workspace overlay (kernels before 6.13): `lower_fd` (the detached, idmapped,
/// read-only lower) is attached at `lower_point` (on the attached disk), overlay is mounted on
/// `target` with `data` (upper and work are directories of the attached disk), then the lower
/// point is detached again (overlay keeps a private clone of each layer).
#[derive(Debug)]
pub struct OverlayByPath {
    pub lower_fd: RawFd,
    pub lower_point: CString,
    pub target: CString,
    pub data: CString,
}

/// One detached mount (a descriptor from `open_tree`/`fsmount`) and where init attaches it.
#[derive(Debug)]
pub struct TreeMount {
    pub fd: RawFd,
    pub target: CString,
}

/// A Landlock rule: a path in the sandbox root and the rights beneath it (directory rights;
/// restricted to file rights automatically when the path is a file).
#[derive(Debug)]
pub struct LandlockRule {
    pub path: CString,
    pub rights: u64,
}

#[derive(Debug)]
pub struct LandlockPlan {
    pub abi: u32,
    pub attr: RulesetAttr,
    pub rules: Vec<LandlockRule>,
}

/// Everything the worker needs, prebuilt.
#[derive(Debug)]
pub struct WorkerPlan {
    pub exe: CString,
    #[allow(dead_code, reason = "owns the strings argv_ptrs points into")]
    pub argv: Vec<CString>,
    pub argv_ptrs: Vec<*const libc::c_char>,
    #[allow(dead_code, reason = "owns the strings envp_ptrs points into")]
    pub envp: Vec<CString>,
    pub envp_ptrs: Vec<*const libc::c_char>,
    pub uid: u32,
    pub gid: u32,
    /// Whether to drop the supplementary groups: not in rootless mode, whose user namespace
    /// denies `setgroups` (an unprivileged gid map must), so the worker keeps the user's.
    pub drop_groups: bool,
    pub cwd: CString,
    pub rlimits: Vec<(libc::__rlimit_resource_t, libc::rlimit)>,
    pub cap_last: u32,
    pub filter: Vec<SockFilter>,
}

/// Everything init needs, prebuilt by the supervisor before `clone`.
#[derive(Debug)]
pub struct Plan {
    pub sync_rx: RawFd,
    pub err_tx: RawFd,
    pub status_tx: RawFd,
    pub stdin_r: RawFd,
    pub stdout_w: RawFd,
    pub stderr_w: RawFd,
    /// `(start, end)` of the inherited argv and environ areas, zeroed in init so
    /// `/proc/1/cmdline` and `/proc/1/environ` show nothing of the caller.
    pub wipe: [(usize, usize); 2],
    pub hostname: CString,
    pub disk_fd: RawFd,
    pub disk_attach: CString,
    pub new_root: CString,
    pub trees: Vec<TreeMount>,
    /// The workspace overlay, when the kernel cannot take its layers by fd: mounted here, by
    /// path, right after the root bind (before every tree and bind below the workspace).
    pub overlay_by_path: Option<OverlayByPath>,
    /// Trees mounted after `binds` (an executable inside the private /tmp or HOME).
    pub late_trees: Vec<TreeMount>,
    /// Classic bind mounts `(source, target)` of the disk's subdirectories.
    pub binds: Vec<(CString, CString)>,
    pub proc_target: CString,
    pub proc_read_only: Vec<CString>,
    /// `/proc` files that leak host state the namespaces do not cover (the kernel keyring
    /// is not namespaced: `/proc/keys` lists every key the sandbox uid can view, host keys of
    /// the sandbox uid included). `/dev/null` is bound over each.
    pub proc_masked: Vec<CString>,
    pub dev_null: CString,
    pub devpts_target: CString,
    pub devpts_options: CString,
    pub workspace: CString,
    /// Relative to `/workspace`: bound on themselves and left writable.
    pub ws_writable: Vec<CString>,
    /// Relative to `/workspace`: bound on themselves read-only (`.git`, forbidden paths).
    pub ws_read_only: Vec<CString>,
    /// Make `/workspace` itself read-only (no writable entry names the whole workspace).
    pub ws_top_read_only: bool,
    pub landlock: Option<LandlockPlan>,
    pub worker: WorkerPlan,
    /// Every descriptor init needs, sorted; init closes all others first (the supervisor's
    /// other pipes, e.g. of concurrent runs, must not be held open by this sandbox).
    pub keep_fds: Vec<RawFd>,
}

pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Reports a failed stage and exits. Never returns.
pub(crate) fn fail(err_fd: RawFd, stage: Stage, err: i32) -> ! {
    let mut rec = [0u8; 8];
    rec[..4].copy_from_slice(&(stage as u32).to_ne_bytes());
    rec[4..].copy_from_slice(&err.to_ne_bytes());
    // SAFETY: `rec` is a valid 8-byte buffer; write and _exit are async-signal-safe.
    unsafe {
        libc::write(err_fd, rec.as_ptr().cast(), rec.len());
        libc::_exit(127)
    }
}

macro_rules! check {
    ($plan:expr, $stage:expr, $rc:expr) => {{
        let rc = $rc;
        if rc < 0 {
            fail($plan.err_tx, $stage, errno());
        }
        rc
    }};
}
