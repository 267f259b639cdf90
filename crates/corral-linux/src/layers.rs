//! Step 1b of a run, the supervisor's file-system material: the run's disk (a detached,
//! size-capped tmpfs), the idmapped read-only lower layer, the overlay of the workspace, and
//! the workspace plan (which paths become writable or read-only). Allocation allowed.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use corral_contract::PathPattern;
use corral_process::cloexec_pipe;
use corral_sandbox::SandboxError;

use crate::LinuxSandboxExecutor;
use crate::prepare::setup_err;
use crate::sys::{self};

/// A user namespace whose uid/gid maps send `owner` to the worker, for the idmapped lower
/// layer (cached per owner).
pub(crate) fn idmap_userns(
    exe: &LinuxSandboxExecutor,
    owner: (u32, u32),
) -> Result<OwnedFd, SandboxError> {
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

/// The overlay options corral sets as root.
pub(crate) const OVERLAY_OPTIONS: &str = "metacopy=off,redirect_dir=off,index=off";
/// The overlay options corral sets in rootless mode: overlay in a user namespace keeps its
/// own xattrs as `user.overlay.*` (`trusted.*` is the host root's; without `userxattr` the
/// mount is refused with EPERM), and `userxattr` accepts no redirects to follow
/// (`redirect_dir=nofollow`: none made, none followed). Measured on Linux 6.12 (ADR-0080).
pub(crate) const OVERLAY_OPTIONS_ROOTLESS: &str =
    "userxattr,metacopy=off,redirect_dir=nofollow,index=off";

/// The overlay options for this process's mode.
pub(crate) fn overlay_options() -> &'static str {
    if crate::rootless::active().is_some() {
        OVERLAY_OPTIONS_ROOTLESS
    } else {
        OVERLAY_OPTIONS
    }
}

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
        for opt in overlay_options().split(',') {
            match opt.split_once('=') {
                Some((k, v)) => sys::fsconfig_string(ovl.as_fd(), k, v)?,
                None => sys::fsconfig_flag(ovl.as_fd(), opt)?,
            }
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
    format!(
        "lowerdir={lower},upperdir={upper},workdir={work},{}",
        overlay_options()
    )
}

#[derive(Debug, Default)]
pub(crate) struct WorkspacePlan {
    pub root_writable: bool,
    pub writable: Vec<String>,
    pub read_only: Vec<String>,
    /// Writable prefixes missing from the base tree: created in the upper layer.
    pub create: Vec<String>,
}

pub(crate) fn lower_kind(lower: &Path, rel: &str) -> io::Result<Option<fs::Metadata>> {
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
