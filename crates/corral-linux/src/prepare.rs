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
use corral_sandbox::{AttestedRequest, EgressGateway, ModelGateway, SandboxError};

use crate::child::{LandlockPlan, LandlockRule, OverlayByPath, Plan, TreeMount, WorkerPlan};
use crate::config::{PROC_MASKED, SANDBOX_HOME, SANDBOX_PATH, SANDBOX_TMP, no_idmap_message};
use crate::egress::{self};
use crate::landlock;
use crate::layers::{
    WorkspacePlan, create_disk, fd_path, idmap_userns, lower_kind, mount_overlay_by_fd,
    overlay_data, plan_workspace,
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
    /// Serves the in-namespace model endpoint (the credential broker), when there is one.
    pub model: Option<&'a dyn ModelGateway>,
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
            model: r.model(),
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

/// The read-only flags of every host tree the sandbox shows (private propagation: a clone of
/// a shared mount would be a peer of the host's).
fn ro_attr() -> MountAttr {
    MountAttr {
        attr_set: sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        propagation: libc::MS_PRIVATE,
        ..MountAttr::default()
    }
}

/// The workspace folder's metadata; it must be a folder.
fn check_workspace(input: &RunInput<'_>) -> Result<fs::Metadata, SandboxError> {
    let ws_meta = fs::metadata(input.workspace).map_err(|e| {
        SandboxError::InvalidRequest(format!("workspace {}: {e}", input.workspace.display()))
    })?;
    if !ws_meta.is_dir() {
        return Err(SandboxError::InvalidRequest(format!(
            "workspace {} is not a directory",
            input.workspace.display()
        )));
    }
    Ok(ws_meta)
}

/// The executable that runs: the file the caller hashed (or opened here), its real path, and
/// whether a tree the sandbox shows already holds that path.
struct Executable<'a> {
    file: ExeFile<'a>,
    real: String,
    visible: bool,
}

/// The caller's open file, or the one opened here.
enum ExeFile<'a> {
    Given(&'a fs::File),
    Opened(fs::File),
}

impl Executable<'_> {
    fn file(&self) -> &fs::File {
        match &self.file {
            ExeFile::Given(f) => f,
            ExeFile::Opened(f) => f,
        }
    }
}

/// The file that runs is the one the caller hashed (symbolic links followed, as npm and pip
/// install agents: `/usr/local/bin/codex -> ../lib/node_modules/...`). It is bound read-only
/// at its real path, over whatever that path shows, and the worker execs that path: the bytes
/// that run are the bytes recorded, and the install root beside the file (its modules, its
/// interpreter) is where the agent looks for it.
fn executable<'a>(input: &RunInput<'a>) -> Result<Executable<'a>, SandboxError> {
    let exe_path = &input.exec.executable;
    if !exe_path.starts_with('/') {
        return Err(SandboxError::InvalidRequest(format!(
            "executable {exe_path:?} is not absolute"
        )));
    }
    let file = match input.executable {
        Some(f) => ExeFile::Given(f),
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
            ExeFile::Opened(fs::File::open(exe_path).map_err(|e| bad(e.to_string()))?)
        }
    };
    let mut exe = Executable {
        file,
        real: String::new(),
        visible: false,
    };
    exe.real = corral_sandbox::executable_real_path(exe.file())
        .map_err(|why| SandboxError::InvalidRequest(format!("executable {exe_path:?}: {why}")))?;
    exe.visible = SYSTEM_TREES
        .iter()
        .copied()
        .chain(input.exec.read_only_paths.iter().map(String::as_str))
        .any(|t| exe.real == t || exe.real.starts_with(&format!("{t}/")));
    Ok(exe)
}

/// The sandbox's own files on the run's disk: the root's folders, the private /tmp, /dev/shm,
/// HOME (with the preset's `home_files`) and the overlay's work folder, the worker's passwd
/// and group, hosts, hostname, nsswitch.conf and /dev's links.
fn lay_out_skeleton(
    base: &Path,
    (uid, gid): (u32, u32),
    input: &RunInput<'_>,
) -> Result<Skeleton, SandboxError> {
    let sk = Skeleton {
        base: base.join("root"),
    };
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
    let mut home_files = input.exec.home_files.clone();
    for text in home_files.values_mut() {
        *text = fill_placeholders(input, text, "a HOME file")?;
    }
    write_home_files(&base.join("home"), &home_files, uid, gid)?;
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
    Ok(sk)
}

/// The detached clones of host trees init mounts into the new root, the descriptors that keep
/// them, and the paths beneath the private /tmp or HOME (mounted after those, `late`).
#[derive(Default)]
struct Trees {
    trees: Vec<TreeMount>,
    keep: Vec<OwnedFd>,
    late: Vec<String>,
}

impl Trees {
    /// Clones `host` (with what is mounted beneath it when `recursive`), sets `attr` on the
    /// clone, and plans it at `target_rel` in the new root.
    fn add(
        &mut self,
        host: &str,
        target_rel: &str,
        recursive: bool,
        attr: &MountAttr,
    ) -> Result<(), SandboxError> {
        let fd = sys::open_tree_clone(host, recursive).map_err(|e| setup_err("bind", e))?;
        sys::mount_setattr(fd.as_fd(), recursive, attr)
            .map_err(|e| setup_err(&format!("mount_setattr {host}"), e))?;
        self.push(fd, target_rel)
    }

    fn push(&mut self, fd: OwnedFd, target_rel: &str) -> Result<(), SandboxError> {
        self.trees.push(TreeMount {
            fd: fd.as_raw_fd(),
            target: cstring(&format!(
                "{NEW_ROOT}/{}",
                target_rel.trim_start_matches('/')
            ))?,
        });
        self.keep.push(fd);
        Ok(())
    }
}

/// The host's trees the sandbox shows, read-only: the system folders, a few of /etc, the
/// device nodes, the preset's `read_only_paths`, and the executable as hashed at its real
/// path (a mount point only where no tree above shows that path).
fn host_trees(
    sk: &Skeleton,
    base: &Path,
    input: &RunInput<'_>,
    exe: &Executable<'_>,
) -> Result<Trees, SandboxError> {
    let mk = |r: io::Result<()>, what: &str| r.map_err(|e| setup_err(what, e));
    let mut t = Trees::default();
    // Every clone of a host tree is made private: a clone of a shared mount (systemd makes
    // `/` shared) is a peer of the host's, so a mount made on top of it in the sandbox (the
    // executable, bound over its own path) would propagate to the host, and host mounts
    // would appear in a running sandbox.
    let ro = ro_attr();
    for tree in SYSTEM_TREES {
        match fs::symlink_metadata(tree) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(tree).map_err(|e| setup_err(tree, e))?;
                mk(sk.symlink(tree, &target), tree)?;
            }
            Ok(m) if m.is_dir() => {
                mk(sk.dir(tree, 0o755), tree)?;
                t.add(tree, tree, true, &ro)?;
            }
            _ => {}
        }
    }
    for d in ETC_DIRS {
        if fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()) {
            mk(sk.dir(d, 0o755), d)?;
            t.add(d, d, true, &ro)?;
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
                t.add(f, f, false, &ro)?;
            }
            _ => {}
        }
    }
    let dev_attr = MountAttr {
        attr_set: sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NOEXEC,
        propagation: libc::MS_PRIVATE,
        ..MountAttr::default()
    };
    for n in DEV_NODES {
        let rel = format!("dev/{n}");
        mk(sk.file(&rel, b"", 0o666), &rel)?;
        t.add(&format!("/dev/{n}"), &rel, false, &dev_attr)?;
    }
    for p in input.exec.read_only_paths.iter().map(String::as_str) {
        if SYSTEM_TREES
            .iter()
            .any(|t| p == *t || p.starts_with(&format!("{t}/")))
        {
            continue;
        }
        let m = fs::metadata(p)
            .map_err(|e| SandboxError::InvalidRequest(format!("read_only_path {p}: {e}")))?;
        if let Some(own) = corral_sandbox::sandbox_own_tree(p) {
            return Err(SandboxError::InvalidRequest(format!(
                "{p} lies under {own}, which the sandbox mounts over, so the worker could not see it"
            )));
        }
        mk(mount_point(sk, base, &mut t.late, p, m.is_dir(), true), p)?;
        t.add(p, p, true, &ro)?;
    }
    // The executable as hashed, at its real path: a mount point only where no tree above
    // shows that path; under a private /tmp or HOME it is mounted last, as those trees are.
    let exe_tree = sys::open_tree_clone_fd(exe.file().as_fd())
        .map_err(|e| setup_err(&format!("bind the executable {}", exe.real), e))?;
    sys::mount_setattr(exe_tree.as_fd(), false, &ro)
        .map_err(|e| setup_err(&format!("mount_setattr {}", exe.real), e))?;
    mk(
        mount_point(sk, base, &mut t.late, &exe.real, false, !exe.visible),
        &exe.real,
    )?;
    t.push(exe_tree, &exe.real)?;
    Ok(t)
}

/// The workspace: its read-only lower layer (idmapped to the worker when another user owns
/// it), the upper and work folders on the run's disk with the writable folders the base tree
/// lacks, and the overlay: a detached mount added to `t`, or (a kernel without overlay by
/// descriptor) what init needs to mount it by path.
fn workspace_layers(
    exe: &LinuxSandboxExecutor,
    input: &RunInput<'_>,
    ws_meta: &fs::Metadata,
    ws_plan: &WorkspacePlan,
    base: &Path,
    t: &mut Trees,
) -> Result<Option<OverlayByPath>, SandboxError> {
    let (uid, gid) = (exe.config.worker_uid, exe.config.worker_gid);
    let mk = |r: io::Result<()>, what: &str| r.map_err(|e| setup_err(what, e));
    let owner = (ws_meta.uid(), ws_meta.gid());
    let lower = sys::open_tree_clone(&input.workspace.to_string_lossy(), false)
        .map_err(|e| setup_err("workspace", e))?;
    let mut lower_attr = ro_attr();
    let idmapped = owner != (uid, gid);
    if idmapped && crate::rootless::active().is_some() {
        // An idmapped mount of a host file system needs host root (ADR-0080).
        return Err(setup_err(
            "workspace lower layer",
            io::Error::other(format!(
                "{} belongs to uid {} gid {}, not to the worker's uid {uid} gid {gid}: in \
                 rootless mode the lower layer cannot be idmapped, so the worker must own it",
                input.workspace.display(),
                owner.0,
                owner.1
            )),
        ));
    }
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
    let (ou, og) = map_owner(ws_meta);
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
    match mount_overlay_by_fd(&lower, &upper_fd, &work_fd).map_err(|e| setup_err("overlay", e))? {
        Some(ovl_mnt) => {
            t.push(ovl_mnt, "/workspace")?;
            Ok(None)
        }
        None => {
            // Init attaches the lower here (on the disk, outside every bind the worker sees),
            // mounts overlay by path, and detaches it again.
            mk(fs::create_dir(base.join(".lower")), "overlay lower point")?;
            let by_path = OverlayByPath {
                lower_fd: lower.as_raw_fd(),
                lower_point: cstring(&format!("{ATTACH}/.lower"))?,
                target: cstring(&format!("{NEW_ROOT}/workspace"))?,
                data: cstring(&overlay_data(
                    &format!("{ATTACH}/.lower"),
                    &format!("{ATTACH}/upper"),
                    &format!("{ATTACH}/work"),
                ))?,
            };
            // Open until init has attached it.
            t.keep.push(lower);
            Ok(Some(by_path))
        }
    }
}

/// What the worker execs with: the executable's real path, argv, exactly ExecSpec.env plus
/// the fixed PATH, HOME and TMPDIR (and the proxy's variables in allowlist mode), its ids,
/// rlimits and the seccomp filter.
fn worker_plan(
    input: &RunInput<'_>,
    exe_real: &str,
    (uid, gid): (u32, u32),
) -> Result<WorkerPlan, SandboxError> {
    let mut env = input.exec.env.clone();
    for value in env.values_mut() {
        *value = fill_placeholders(input, value, "the worker environment")?;
    }
    env.insert("PATH".into(), SANDBOX_PATH.into());
    env.insert("HOME".into(), SANDBOX_HOME.into());
    env.insert("TMPDIR".into(), SANDBOX_TMP.into());
    if input.network_mode == NetworkMode::Allowlist {
        egress::set_proxy_env(&mut env);
    }
    if input.model.is_some() {
        // The model endpoint is on the sandbox's own loopback: clients that honour the proxy
        // variables (httpx, undici, curl) must reach it directly, not ask the proxy for it.
        // Nothing is opened by this: a worker can always connect to loopback itself.
        for k in egress::NO_PROXY_VARS {
            env.insert((*k).to_owned(), "127.0.0.1,localhost".to_owned());
        }
    }
    let envp: Vec<CString> = env
        .iter()
        .map(|(k, v)| cstring(&format!("{k}={v}")))
        .collect::<Result<_, _>>()?;
    let mut argv = vec![cstring(&input.exec.executable)?];
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
    Ok(WorkerPlan {
        exe: cstring(exe_real)?,
        argv_ptrs: ptrs(&argv),
        argv,
        envp_ptrs: ptrs(&envp),
        envp,
        uid,
        gid,
        drop_groups: crate::rootless::active().is_none_or(|r| r.subids.is_some()),
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
    })
}

/// The worker's Landlock ruleset at this ABI (`None` below ABI 1): read and execute beneath
/// `/`; everything beneath the private /tmp, HOME, /dev/shm and the writable workspace
/// folders; the device nodes' file rights but execute; `/dev/pts` as well as its listing.
/// Pure: what a path gets is decided here, init only opens the paths.
fn landlock_plan(abi: u32, ws_plan: &WorkspacePlan) -> Option<LandlockPlan> {
    (abi >= 1).then(|| {
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
    })
}

/// Step 1: everything a run needs before `clone`, in the order the sandbox is built: the
/// request's checks, the run's disk and its skeleton, the host's trees, the workspace's
/// layers, the pipes, the worker's exec, Landlock, and the [`Plan`] init follows.
pub(crate) fn prepare(
    exe: &LinuxSandboxExecutor,
    input: &RunInput<'_>,
) -> Result<Prepared, SandboxError> {
    let cfg = &exe.config;
    let ids = (cfg.worker_uid, cfg.worker_gid);
    let ws_meta = check_workspace(input)?;
    let executable = executable(input)?;
    let ws_plan = plan_workspace(input.workspace, input.writable, input.forbidden)?;

    let disk = create_disk(input.limits.disk_bytes.get())?;
    let base = fd_path(&disk);
    let sk = lay_out_skeleton(&base, ids, input)?;
    let mut t = host_trees(&sk, &base, input, &executable)?;
    let overlay_by_path = workspace_layers(exe, input, &ws_meta, &ws_plan, &base, &mut t)?;
    let late_targets: Vec<CString> = t
        .late
        .iter()
        .map(|p| cstring(&format!("{NEW_ROOT}/{}", p.trim_start_matches('/'))))
        .collect::<Result<_, _>>()?;
    let (late_trees, trees): (Vec<TreeMount>, Vec<TreeMount>) = t
        .trees
        .into_iter()
        .partition(|t| late_targets.contains(&t.target));
    let keep = t.keep;

    // Pipes: sync (supervisor -> init), error and status (init/worker -> supervisor), stdio.
    let (sync_rx, sync_tx) = cloexec_pipe()?;
    let (err_rx, err_tx) = cloexec_pipe()?;
    let (status_rx, status_tx) = cloexec_pipe()?;
    let (stdin_r, stdin_w) = cloexec_pipe()?;
    let (stdout_r, stdout_w) = cloexec_pipe()?;
    let (stderr_r, stderr_w) = cloexec_pipe()?;

    let worker = worker_plan(input, &executable.real, ids)?;
    let landlock_plan = landlock_plan(exe.report.landlock_abi, &ws_plan);

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

/// `text` with the model gateway's placeholders filled in (`{model_base_url}`,
/// `{model_token}`, ADR-0095). Without a gateway, or with a `{model_` left over, the run is
/// refused: a worker must never start with a setting that silently names nothing.
pub(crate) fn fill_placeholders(
    input: &RunInput<'_>,
    text: &str,
    what: &str,
) -> Result<String, SandboxError> {
    const PREFIX: &str = corral_contract::rules::RESERVED_PLACEHOLDER_PREFIX;
    if !text.contains(PREFIX) {
        return Ok(text.to_owned());
    }
    let Some(model) = input.model else {
        return Err(SandboxError::Unsupported(format!(
            "{what} holds a {PREFIX}...}} placeholder but the run has no model gateway (the credential broker); refusing (fail closed)"
        )));
    };
    let mut out = text.to_owned();
    for (name, value) in model.placeholders() {
        out = out.replace(&name, &value);
    }
    if out.contains(PREFIX) {
        return Err(SandboxError::Unsupported(format!(
            "{what} holds a {PREFIX}...}} placeholder the model gateway does not define; refusing"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::landlock::{
        ACCESS_FS_EXECUTE, ACCESS_FS_MAKE_REG, ACCESS_FS_READ_FILE, ACCESS_FS_WRITE_FILE,
    };

    fn rules(plan: &LandlockPlan) -> Vec<(String, u64)> {
        plan.rules
            .iter()
            .map(|r| (r.path.to_string_lossy().into_owned(), r.rights))
            .collect()
    }

    /// Only the writable folders of the scope get write rights: `/` is read and execute, a
    /// device node (or a terminal in `/dev/pts`) never executes, and a workspace whose top is not writable has no rule for
    /// `/workspace` itself. Control: a scope that allows the whole tree gets `/workspace`.
    #[test]
    fn landlock_writes_only_where_the_scope_allows() {
        let abi = 2;
        let scoped = WorkspacePlan {
            writable: vec!["src".into(), "docs/api".into()],
            ..WorkspacePlan::default()
        };
        let plan = landlock_plan(abi, &scoped).unwrap();
        let r = rules(&plan);
        let write = |p: &str| {
            r.iter()
                .any(|(path, rights)| path == p && rights & ACCESS_FS_WRITE_FILE != 0)
        };
        for p in [
            "/workspace/src",
            "/workspace/docs/api",
            SANDBOX_TMP,
            SANDBOX_HOME,
            "/dev/shm",
        ] {
            assert!(write(p), "{p}: {r:?}");
        }
        assert!(!r.iter().any(|(p, _)| p == "/workspace"), "{r:?}");
        let root = r.iter().find(|(p, _)| p == "/").unwrap().1;
        assert_eq!(
            root & (ACCESS_FS_WRITE_FILE | ACCESS_FS_MAKE_REG),
            0,
            "{r:?}"
        );
        assert_ne!(root & ACCESS_FS_READ_FILE, 0, "{r:?}");
        let nodes: Vec<String> = DEV_NODES.iter().map(|n| format!("/dev/{n}")).collect();
        for (p, rights) in r
            .iter()
            .filter(|(p, _)| nodes.contains(p) || p == "/dev/pts")
        {
            assert_eq!(rights & ACCESS_FS_EXECUTE, 0, "{p}: {r:?}");
        }
        assert_eq!(plan.attr.handled_access_fs, landlock::handled_fs(abi));
        // Control: the whole tree writable.
        let whole = WorkspacePlan {
            root_writable: true,
            ..WorkspacePlan::default()
        };
        let r = rules(&landlock_plan(abi, &whole).unwrap());
        assert!(
            r.iter()
                .any(|(p, rights)| p == "/workspace" && rights & ACCESS_FS_WRITE_FILE != 0),
            "{r:?}"
        );
        // No Landlock, no plan (the probe has refused such a host already).
        assert!(landlock_plan(0, &whole).is_none());
    }
}
