//! The sandbox's own processes: init (pid 1 of the new PID namespace) and the worker.
//!
//! Both run in a `fork`-like copy of the (possibly multi-threaded) supervisor, so this code
//! must not allocate, lock or touch std's I/O: it only reads the prebuilt [`Plan`] and makes
//! raw system calls. Every failure writes a `(stage, errno)` record to the error pipe and
//! exits 127; the supervisor turns it into a `SandboxError::Setup` naming the stage.

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use crate::landlock::{self, PathBeneathAttr, RulesetAttr};
use crate::seccomp::SockFilter;
use crate::sys::{MOVE_MOUNT_F_EMPTY_PATH, MOVE_MOUNT_T_EMPTY_PATH, MountAttr, OpenHow};

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

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Reports a failed stage and exits. Never returns.
fn fail(err_fd: RawFd, stage: Stage, err: i32) -> ! {
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

/// Moves a detached mount onto `target`.
fn move_mount_to(fd: RawFd, target: &CString) -> libc::c_long {
    // SAFETY: both paths are valid C strings; move_mount reads them only.
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    }
}

fn bind(src: &CString, dst: &CString, flags: libc::c_ulong) -> libc::c_long {
    // SAFETY: valid C strings; NULL fstype and data are allowed for MS_BIND.
    libc::c_long::from(unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | flags,
            std::ptr::null(),
        )
    })
}

fn remount_ro(path: &CStr, extra: libc::c_ulong) -> libc::c_long {
    // SAFETY: valid C string; a bind remount takes no source, type or data.
    libc::c_long::from(unsafe {
        libc::mount(
            std::ptr::null(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | extra,
            std::ptr::null(),
        )
    })
}

fn open_beneath(dir: RawFd, rel: &CString) -> libc::c_long {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: crate::sys::RESOLVE_BENEATH
            | crate::sys::RESOLVE_NO_SYMLINKS
            | crate::sys::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: `rel` is a valid C string and `how` a live OpenHow of the size passed.
    unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            rel.as_ptr(),
            std::ptr::from_ref(&how),
            std::mem::size_of::<OpenHow>(),
        )
    }
}

/// Binds the object `fd` refers to onto itself, optionally read-only (mount-on-fd: no path
/// is resolved again, so a symlink swapped in meanwhile cannot redirect it).
fn bind_fd_on_itself(fd: RawFd, read_only: bool) -> libc::c_long {
    // SAFETY: open_tree on an O_PATH descriptor with an empty path.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            fd,
            c"".as_ptr(),
            crate::sys::OPEN_TREE_CLONE
                | crate::sys::OPEN_TREE_CLOEXEC
                | libc::AT_EMPTY_PATH as u32,
        )
    };
    if tree < 0 {
        return tree;
    }
    let tree = tree as RawFd;
    if read_only {
        let attr = MountAttr {
            attr_set: crate::sys::MOUNT_ATTR_RDONLY,
            ..MountAttr::default()
        };
        // SAFETY: `attr` is a live MountAttr of the size passed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                tree,
                c"".as_ptr(),
                libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
                std::ptr::from_ref(&attr),
                std::mem::size_of::<MountAttr>(),
            )
        };
        if rc < 0 {
            return rc;
        }
    }
    // SAFETY: both descriptors are open; empty paths with the *_EMPTY_PATH flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            fd,
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    // SAFETY: closing a descriptor this function opened.
    unsafe { libc::close(tree) };
    rc
}

pub(crate) fn loopback_up() -> libc::c_long {
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: libc::c_short,
        pad: [u8; 22],
    }
    // SAFETY: plain socket creation.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return -1;
    }
    let mut req = IfReq {
        name: [0; 16],
        flags: 0,
        pad: [0; 22],
    };
    req.name[..2].copy_from_slice(b"lo");
    // SAFETY: `req` is a live ifreq-sized struct; SIOCGIFFLAGS fills `flags`.
    let mut rc = unsafe { libc::ioctl(s, libc::SIOCGIFFLAGS, std::ptr::from_mut(&mut req)) };
    if rc == 0 {
        req.flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        // SAFETY: as above; SIOCSIFFLAGS reads `flags`.
        rc = unsafe { libc::ioctl(s, libc::SIOCSIFFLAGS, std::ptr::from_ref(&req)) };
    }
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(s) };
    libc::c_long::from(rc)
}

/// Init: pid 1 of the sandbox's PID namespace. Never returns.
///
/// # Safety
/// Must run in the child of a `clone` with the namespaces of [`crate::NAMESPACE_FLAGS`],
/// with `plan` built by the supervisor for this child.
pub unsafe fn init_main(p: &Plan) -> ! {
    // SAFETY: (whole block) raw system calls on descriptors and prebuilt C strings owned
    // by `p`, in a single-threaded child; no allocation.
    unsafe {
        // The supervisor dying (even SIGKILL) kills init, and with it the PID namespace.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        let mut next: u32 = 0;
        for &fd in &p.keep_fds {
            let fd = fd as u32;
            if fd > next {
                libc::syscall(libc::SYS_close_range, next, fd - 1, 0u32);
            }
            next = fd + 1;
        }
        libc::syscall(libc::SYS_close_range, next, u32::MAX, 0u32);
        // Keep 0-2 occupied (by /dev/null) so later descriptors (the Landlock ruleset) never
        // land where the worker's stdio goes.
        for _ in 0..3 {
            libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        }
        let mut go = [0u8; 1];
        if libc::read(p.sync_rx, go.as_mut_ptr().cast(), 1) != 1 {
            // The supervisor went away before attaching the cgroup.
            libc::_exit(1);
        }
        libc::close(p.sync_rx);
        // Now inside the run's cgroup: make it the root of a new cgroup namespace.
        check!(
            p,
            Stage::CgroupNs,
            libc::c_long::from(libc::unshare(libc::CLONE_NEWCGROUP))
        );
        for (start, end) in p.wipe {
            if end > start {
                std::ptr::write_bytes(start as *mut u8, 0, end - start);
            }
        }
        libc::prctl(libc::PR_SET_NAME, c"corral-init".as_ptr(), 0, 0, 0);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        check!(
            p,
            Stage::Hostname,
            libc::c_long::from(libc::sethostname(
                p.hostname.as_ptr(),
                p.hostname.as_bytes().len()
            ))
        );
        check!(p, Stage::Loopback, loopback_up());
        check!(
            p,
            Stage::MountPrivate,
            libc::c_long::from(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null()
            ))
        );
        check!(
            p,
            Stage::AttachDisk,
            move_mount_to(p.disk_fd, &p.disk_attach)
        );
        check!(p, Stage::BindRoot, bind(&p.new_root, &p.new_root, 0));
        if let Some(o) = &p.overlay_by_path {
            check!(
                p,
                Stage::MountOverlay,
                move_mount_to(o.lower_fd, &o.lower_point)
            );
            libc::close(o.lower_fd);
            check!(
                p,
                Stage::MountOverlay,
                libc::c_long::from(libc::mount(
                    c"overlay".as_ptr(),
                    o.target.as_ptr(),
                    c"overlay".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    o.data.as_ptr().cast()
                ))
            );
            check!(
                p,
                Stage::MountOverlay,
                libc::c_long::from(libc::umount2(o.lower_point.as_ptr(), libc::MNT_DETACH))
            );
        }
        for t in &p.trees {
            check!(p, Stage::MoveTree, move_mount_to(t.fd, &t.target));
            libc::close(t.fd);
        }
        for (src, dst) in &p.binds {
            check!(p, Stage::BindDisk, bind(src, dst, 0));
        }
        for t in &p.late_trees {
            check!(p, Stage::MoveTree, move_mount_to(t.fd, &t.target));
            libc::close(t.fd);
        }
        check!(
            p,
            Stage::MountProc,
            libc::c_long::from(libc::mount(
                c"proc".as_ptr(),
                p.proc_target.as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null()
            ))
        );
        for path in &p.proc_read_only {
            if bind(path, path, libc::MS_REC) < 0 {
                if errno() == libc::ENOENT {
                    continue;
                }
                fail(p.err_tx, Stage::ProcReadOnly, errno());
            }
            check!(
                p,
                Stage::ProcReadOnly,
                remount_ro(path, libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC)
            );
        }
        for path in &p.proc_masked {
            if bind(&p.dev_null, path, 0) < 0 {
                if errno() == libc::ENOENT {
                    continue;
                }
                fail(p.err_tx, Stage::ProcReadOnly, errno());
            }
        }
        check!(
            p,
            Stage::MountDevpts,
            libc::c_long::from(libc::mount(
                c"devpts".as_ptr(),
                p.devpts_target.as_ptr(),
                c"devpts".as_ptr(),
                libc::MS_NOSUID | libc::MS_NOEXEC,
                p.devpts_options.as_ptr().cast()
            ))
        );
        // pivot_root(".", "."): the old root ends up stacked on the new one and is detached
        // (with the disk tmpfs's full view and every host path).
        check!(
            p,
            Stage::PivotRoot,
            libc::c_long::from(libc::chdir(p.new_root.as_ptr()))
        );
        check!(
            p,
            Stage::PivotRoot,
            libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr())
        );
        check!(
            p,
            Stage::PivotRoot,
            libc::c_long::from(libc::umount2(c".".as_ptr(), libc::MNT_DETACH))
        );
        check!(
            p,
            Stage::PivotRoot,
            libc::c_long::from(libc::chdir(c"/".as_ptr()))
        );

        // Workspace: writable prefixes first, then read-only entries (which may lie inside
        // them), then the overlay's own top mount read-only.
        let ws = check!(
            p,
            Stage::WorkspaceOpen,
            libc::c_long::from(libc::open(
                p.workspace.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC
            ))
        ) as RawFd;
        for rel in &p.ws_writable {
            let fd = check!(p, Stage::WorkspaceWritable, open_beneath(ws, rel)) as RawFd;
            check!(p, Stage::WorkspaceWritable, bind_fd_on_itself(fd, false));
            libc::close(fd);
        }
        for rel in &p.ws_read_only {
            let fd = check!(p, Stage::WorkspaceReadOnly, open_beneath(ws, rel)) as RawFd;
            check!(p, Stage::WorkspaceReadOnly, bind_fd_on_itself(fd, true));
            libc::close(fd);
        }
        libc::close(ws);
        if p.ws_top_read_only {
            let top = check!(
                p,
                Stage::WorkspaceTopReadOnly,
                libc::c_long::from(libc::open(
                    p.workspace.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC
                ))
            ) as RawFd;
            let attr = MountAttr {
                attr_set: crate::sys::MOUNT_ATTR_RDONLY,
                ..MountAttr::default()
            };
            check!(
                p,
                Stage::WorkspaceTopReadOnly,
                libc::syscall(
                    libc::SYS_mount_setattr,
                    top,
                    c"".as_ptr(),
                    libc::AT_EMPTY_PATH,
                    std::ptr::from_ref(&attr),
                    std::mem::size_of::<MountAttr>()
                )
            );
            libc::close(top);
        }
        check!(
            p,
            Stage::RootReadOnly,
            remount_ro(c"/", libc::MS_NOSUID | libc::MS_NODEV)
        );

        let ruleset = match &p.landlock {
            Some(l) => build_landlock(p, l),
            None => -1,
        };

        let worker = libc::syscall(
            libc::SYS_clone,
            libc::SIGCHLD as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        );
        if worker < 0 {
            fail(p.err_tx, Stage::ForkWorker, errno());
        }
        if worker == 0 {
            worker_main(p, ruleset);
        }
        // Init keeps nothing the worker needs: its stdio ends and the error pipe go, so end
        // of file on them means the worker (and its descendants) closed theirs.
        libc::close(p.stdin_r);
        libc::close(p.stdout_w);
        libc::close(p.stderr_w);
        libc::close(p.err_tx);
        if ruleset >= 0 {
            libc::close(ruleset);
        }
        drop_all_caps();
        loop {
            let mut status = 0;
            let r = libc::wait4(-1, &mut status, libc::__WALL, std::ptr::null_mut());
            if r == worker as libc::pid_t {
                let bytes = status.to_ne_bytes();
                libc::write(p.status_tx, bytes.as_ptr().cast(), bytes.len());
                // Exiting pid 1 makes the kernel SIGKILL everything left in the namespace.
                libc::_exit(0);
            }
            if r < 0 && errno() == libc::ECHILD {
                libc::_exit(0);
            }
        }
    }
}

fn drop_all_caps() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    let hdr = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [0u32; 6];
    // SAFETY: capset v3 reads a header and two data structs (6 u32s).
    unsafe { libc::syscall(libc::SYS_capset, std::ptr::from_ref(&hdr), data.as_ptr()) };
}

fn build_landlock(p: &Plan, l: &LandlockPlan) -> RawFd {
    // SAFETY: (whole block) raw Landlock syscalls on prebuilt data; no allocation.
    unsafe {
        let fd = libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::from_ref(&l.attr),
            landlock::attr_size(l.abi),
            0u32,
        );
        if fd < 0 {
            fail(p.err_tx, Stage::Landlock, errno());
        }
        let fd = fd as RawFd;
        for rule in &l.rules {
            let pfd = libc::open(rule.path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            if pfd < 0 {
                if errno() == libc::ENOENT {
                    continue;
                }
                fail(p.err_tx, Stage::Landlock, errno());
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(pfd, &mut st) < 0 {
                fail(p.err_tx, Stage::Landlock, errno());
            }
            let mut rights = rule.rights & l.attr.handled_access_fs;
            if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
                rights &= landlock::file_rights(l.abi);
            }
            let attr = PathBeneathAttr {
                allowed_access: rights,
                parent_fd: pfd,
            };
            if libc::syscall(
                libc::SYS_landlock_add_rule,
                fd,
                landlock::RULE_PATH_BENEATH,
                std::ptr::from_ref(&attr),
                0u32,
            ) < 0
            {
                fail(p.err_tx, Stage::Landlock, errno());
            }
            libc::close(pfd);
        }
        fd
    }
}

const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;

/// The worker: drops everything, then `execve`. Never returns.
fn worker_main(p: &Plan, ruleset: RawFd) -> ! {
    let w = &p.worker;
    // SAFETY: (whole block) raw system calls in a single-threaded child on prebuilt data.
    unsafe {
        // New session: no controlling terminal; TIOCSTI/job control cannot reach a terminal.
        check!(p, Stage::Setsid, libc::c_long::from(libc::setsid()));
        check!(
            p,
            Stage::Stdio,
            libc::c_long::from(libc::dup2(p.stdin_r, 0))
        );
        check!(
            p,
            Stage::Stdio,
            libc::c_long::from(libc::dup2(p.stdout_w, 1))
        );
        check!(
            p,
            Stage::Stdio,
            libc::c_long::from(libc::dup2(p.stderr_w, 2))
        );
        check!(
            p,
            Stage::Chdir,
            libc::c_long::from(libc::chdir(w.cwd.as_ptr()))
        );
        for (res, lim) in &w.rlimits {
            check!(
                p,
                Stage::Rlimit,
                libc::c_long::from(libc::setrlimit(*res, lim))
            );
        }
        check!(
            p,
            Stage::Securebits,
            libc::c_long::from(libc::prctl(
                libc::PR_SET_SECUREBITS,
                SECBIT_NOROOT
                    | SECBIT_NOROOT_LOCKED
                    | SECBIT_NO_SETUID_FIXUP_LOCKED
                    | SECBIT_KEEP_CAPS_LOCKED
                    | SECBIT_NO_CAP_AMBIENT_RAISE
                    | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
                0,
                0,
                0
            ))
        );
        for cap in 0..=w.cap_last {
            if libc::prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0, 0, 0) < 0
                && errno() != libc::EINVAL
            {
                fail(p.err_tx, Stage::CapBounding, errno());
            }
        }
        check!(
            p,
            Stage::Ambient,
            libc::c_long::from(libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0
            ))
        );
        // Raw system calls, not glibc's wrappers: those run the setxid broadcast over the
        // threads glibc believes this process has (the supervisor's, copied by the raw
        // clone) and can wait forever on a futex for a thread that was being created or
        // was exiting at clone time (seen with a busy multi-threaded supervisor).
        check!(
            p,
            Stage::SetGroups,
            libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>())
        );
        check!(
            p,
            Stage::SetGid,
            libc::syscall(libc::SYS_setresgid, w.gid, w.gid, w.gid)
        );
        check!(
            p,
            Stage::SetUid,
            libc::syscall(libc::SYS_setresuid, w.uid, w.uid, w.uid)
        );
        drop_all_caps();
        check!(
            p,
            Stage::NoNewPrivs,
            libc::c_long::from(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        );
        if ruleset >= 0 {
            check!(
                p,
                Stage::LandlockRestrict,
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32)
            );
            libc::close(ruleset);
        }
        // Only 0, 1, 2 and the close-on-exec error pipe survive; then exec closes that too.
        let mut err_fd = p.err_tx;
        if err_fd != 3 {
            check!(
                p,
                Stage::CloseFds,
                libc::c_long::from(libc::dup3(err_fd, 3, libc::O_CLOEXEC))
            );
            err_fd = 3;
        }
        check!(
            p,
            Stage::CloseFds,
            libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32)
        );
        let prog = libc::sock_fprog {
            len: w.filter.len() as u16,
            filter: w.filter.as_ptr().cast_mut().cast(),
        };
        if libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0u32,
            std::ptr::from_ref(&prog),
        ) < 0
        {
            fail(err_fd, Stage::Seccomp, errno());
        }
        libc::execve(w.exe.as_ptr(), w.argv_ptrs.as_ptr(), w.envp_ptrs.as_ptr());
        fail(err_fd, Stage::Exec, errno());
    }
}
