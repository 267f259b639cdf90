//! Step 1 of a run, prepare (in the supervisor, allocation allowed): check the request,
//! lay out the sandbox's skeleton on the run's disk, clone the host trees it shows, open the
//! pipes, and build the [`Plan`] that init and the worker follow after `clone` without
//! allocating (`mount.rs`, `enter.rs`).

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use corral_contract::{
    Destination, ExecSpec, Limits, NetworkMode, PathPattern, SandboxCapabilities,
};
use corral_process::cloexec_pipe;
use corral_sandbox::{AttestedRequest, EgressGateway, SandboxError};

use crate::child::{LandlockPlan, LandlockRule, OverlayByPath, Plan, TreeMount, WorkerPlan};
use crate::config::{PROC_MASKED, SANDBOX_HOME, SANDBOX_PATH, SANDBOX_TMP, no_idmap_message};
use crate::egress::{self};
use crate::landlock;
use crate::layers::{
    create_disk, fd_path, idmap_userns, lower_kind, mount_overlay_by_fd, overlay_data,
    plan_workspace,
};
use crate::sys::{self, MountAttr};
use crate::{LinuxSandboxExecutor, seccomp};

pub(crate) const ATTACH: &str = "/tmp";
pub(crate) const NEW_ROOT: &str = "/tmp/root";
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

pub(crate) fn setup_err(what: &str, e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Setup(format!("{what}: {e}"))
}

pub(crate) fn cstring(s: &str) -> Result<CString, SandboxError> {
    CString::new(s).map_err(|_| SandboxError::InvalidRequest(format!("NUL byte in {s:?}")))
}

/// `(arg_start, arg_end, env_start, env_end)` of this process, from `/proc/self/stat`.
pub(crate) fn wipe_regions() -> [(usize, usize); 2] {
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

pub(crate) fn cap_last() -> u32 {
    static LAST: OnceLock<u32> = OnceLock::new();
    *LAST.get_or_init(|| {
        fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(63)
    })
}

pub(crate) struct Skeleton {
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

/// Owned descriptors and the plan; dropping closes the supervisor's copies.
pub(crate) struct Prepared {
    pub plan: Plan,
    pub disk: OwnedFd,
    pub _keep: Vec<OwnedFd>,
    pub sync_tx: OwnedFd,
    pub err_rx: OwnedFd,
    pub status_rx: OwnedFd,
    pub stdin_w: OwnedFd,
    pub stdout_r: OwnedFd,
    pub stderr_r: OwnedFd,
    /// Child-side pipe ends, closed by the supervisor right after clone.
    pub child_ends: Vec<OwnedFd>,
}

/// Where a host path is mounted in the sandbox's skeleton: beneath the private /tmp or HOME
/// (mounted after the trees, so a path there is mounted last: `late`), or in the root. With
/// `create`, an empty file or folder is made to mount on.
pub(crate) fn mount_point(
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

pub(crate) fn prepare(
    exe: &LinuxSandboxExecutor,
    input: &RunInput<'_>,
) -> Result<Prepared, SandboxError> {
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

/// Places the preset's admitted `home_files` in the worker's new, empty HOME (on the run's
/// own tmpfs, so they count against `disk_bytes`), owned by the worker: folders 0700, files
/// 0600. Every step is one component beneath an open folder, never through a link; a file
/// that exists already is an error (admission refused repeats and file/folder clashes).
pub(crate) fn write_home_files(
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
