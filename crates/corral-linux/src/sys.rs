//! Thin wrappers over the Linux system calls the supervisor uses (new mount API, pidfds).
//! The sandbox's own processes use the raw calls in `child.rs` instead (no allocation there).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

pub const FSOPEN_CLOEXEC: u32 = 1;
pub const FSCONFIG_SET_FLAG: u32 = 0;
pub const FSCONFIG_SET_STRING: u32 = 1;
pub const FSCONFIG_SET_FD: u32 = 5;
pub const FSCONFIG_CMD_CREATE: u32 = 6;
pub const FSMOUNT_CLOEXEC: u32 = 1;
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;
pub const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
pub const OPEN_TREE_CLONE: u32 = 1;
pub const OPEN_TREE_CLOEXEC: u32 = libc::O_CLOEXEC as u32;
pub const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;
pub const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x40;
pub const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
pub const RESOLVE_NO_SYMLINKS: u64 = 0x04;
pub const RESOLVE_BENEATH: u64 = 0x08;

/// `struct mount_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MountAttr {
    pub attr_set: u64,
    pub attr_clr: u64,
    pub propagation: u64,
    pub userns_fd: u64,
}

/// `struct open_how`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenHow {
    pub flags: u64,
    pub mode: u64,
    pub resolve: u64,
}

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("NUL in {s:?}")))
}

/// A failed call: the message names the call, and the errno stays readable through
/// [`errno`] (a plain `io::Error::new` wrapper would lose it, and with it every fallback that
/// branches on it).
#[derive(Debug)]
pub struct SysError {
    message: String,
    errno: i32,
}

impl std::fmt::Display for SysError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SysError {}

/// The errno of `e`, also through a [`SysError`].
#[must_use]
pub fn errno(e: &io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<SysError>())
            .map(|s| s.errno)
    })
}

/// `e` with `what` in front of its message, its errno kept (see [`errno`]).
pub fn with_context(what: &str, e: &io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        SysError {
            message: format!("{what}: {e}"),
            errno: errno(e).unwrap_or(0),
        },
    )
}

fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOSYS) => with_context(&format!("{what}{}", missing_syscall(what)), &e),
        _ => with_context(what, &e),
    }
}

/// The Linux version that added each system call this module makes, for an `ENOSYS` that
/// says which kernel feature is missing and since when it exists (issue 12: "the probe names
/// the kernel feature and the minimum version").
const SYSCALL_SINCE: &[(&str, &str, &str)] = &[
    ("fsopen", "the new mount API (fsopen)", "5.2"),
    ("fsconfig", "the new mount API (fsconfig)", "5.2"),
    ("fsmount", "the new mount API (fsmount)", "5.2"),
    ("open_tree", "detached mounts (open_tree)", "5.2"),
    ("move_mount", "detached mounts (move_mount)", "5.2"),
    (
        "mount_setattr",
        "mount_setattr (per-mount attributes, idmapped mounts)",
        "5.12",
    ),
    ("pidfd_send_signal", "pidfd_send_signal", "5.1"),
];

/// `" (needs <feature>, Linux >= X.Y; this kernel is R)"` for a call named at the start of
/// `what`, else `""`.
fn missing_syscall(what: &str) -> String {
    let name = what.split(['(', ' ', ':']).next().unwrap_or(what);
    SYSCALL_SINCE
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, feature, since)| {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            format!(
                " (needs {feature}, Linux >= {since}; this kernel is {})",
                release.trim()
            )
        })
        .unwrap_or_default()
}

fn fd_result(rc: libc::c_long, what: &str) -> io::Result<OwnedFd> {
    if rc < 0 {
        return Err(last_error(what));
    }
    let fd = RawFd::try_from(rc).map_err(io::Error::other)?;
    // SAFETY: the kernel returned a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn unit_result(rc: libc::c_long, what: &str) -> io::Result<()> {
    if rc < 0 {
        return Err(last_error(what));
    }
    Ok(())
}

pub fn fsopen(fstype: &str) -> io::Result<OwnedFd> {
    let name = cstr(fstype)?;
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    let rc = unsafe { libc::syscall(libc::SYS_fsopen, name.as_ptr(), FSOPEN_CLOEXEC) };
    fd_result(rc, &format!("fsopen({fstype})"))
}

pub fn fsconfig_string(fs: BorrowedFd<'_>, key: &str, value: &str) -> io::Result<()> {
    let (k, v) = (cstr(key)?, cstr(value)?);
    // SAFETY: both strings are valid NUL-terminated C strings for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_SET_STRING,
            k.as_ptr(),
            v.as_ptr(),
            0,
        )
    };
    unit_result(rc, &format!("fsconfig({key}={value})"))
}

/// `fsconfig(FSCONFIG_SET_FLAG, key)`: a flag option such as overlay's `userxattr`.
pub fn fsconfig_flag(fs: BorrowedFd<'_>, key: &str) -> io::Result<()> {
    let k = cstr(key)?;
    // SAFETY: `k` is a valid C string; the value is NULL and aux 0, as FSCONFIG_SET_FLAG
    // requires.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_SET_FLAG,
            k.as_ptr(),
            std::ptr::null::<libc::c_char>(),
            0,
        )
    };
    unit_result(rc, &format!("fsconfig({key})"))
}

pub fn fsconfig_fd(fs: BorrowedFd<'_>, key: &str, fd: BorrowedFd<'_>) -> io::Result<()> {
    let k = cstr(key)?;
    // SAFETY: `k` is a valid C string; the value pointer is NULL as FSCONFIG_SET_FD requires.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_SET_FD,
            k.as_ptr(),
            std::ptr::null::<libc::c_void>(),
            fd.as_raw_fd(),
        )
    };
    unit_result(rc, &format!("fsconfig({key}=fd)"))
}

pub fn fsconfig_create(fs: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: FSCONFIG_CMD_CREATE takes no pointers.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    };
    unit_result(rc, "fsconfig(create)")
}

pub fn fsmount(fs: BorrowedFd<'_>, attrs: u64) -> io::Result<OwnedFd> {
    // SAFETY: fsmount takes a descriptor and flags only.
    let rc = unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) };
    fd_result(rc, "fsmount")
}

/// `open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC [| AT_RECURSIVE])`: a
/// detached copy of the mount tree at `path`.
pub fn open_tree_clone(path: &str, recursive: bool) -> io::Result<OwnedFd> {
    let p = cstr(path)?;
    let mut flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC;
    if recursive {
        flags |= libc::AT_RECURSIVE as u32;
    }
    // SAFETY: `p` is a valid C string for the call.
    let rc = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, p.as_ptr(), flags) };
    fd_result(rc, &format!("open_tree({path})"))
}

/// `open_tree(fd, "", OPEN_TREE_CLONE | AT_EMPTY_PATH)`: a detached bind mount of exactly
/// the file `fd` is open on (not whatever its path names by now).
pub fn open_tree_clone_fd(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | libc::AT_EMPTY_PATH as u32;
    // SAFETY: `fd` is a valid open descriptor and the path an empty C string.
    let rc = unsafe { libc::syscall(libc::SYS_open_tree, fd.as_raw_fd(), c"".as_ptr(), flags) };
    fd_result(rc, "open_tree(the executable's descriptor)")
}

/// `move_mount(fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)`: attaches the detached
/// mount `fd` at `target` in the caller's mount namespace.
pub fn move_mount_to(fd: BorrowedFd<'_>, target: &str) -> io::Result<()> {
    let t = cstr(target)?;
    // SAFETY: both paths are valid C strings for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            0x0000_0004u32, // MOVE_MOUNT_F_EMPTY_PATH
        )
    };
    unit_result(rc, &format!("move_mount(-> {target})"))
}

/// `mount(2)` with a file system type and a data string (`source` is a name only).
pub fn mount_fs(
    source: &str,
    target: &str,
    fstype: &str,
    flags: u64,
    data: &str,
) -> io::Result<()> {
    let (s, t, f, d) = (cstr(source)?, cstr(target)?, cstr(fstype)?, cstr(data)?);
    // SAFETY: all four are valid C strings for the call.
    let rc = unsafe { libc::mount(s.as_ptr(), t.as_ptr(), f.as_ptr(), flags, d.as_ptr().cast()) };
    unit_result(
        libc::c_long::from(rc),
        &format!("mount {fstype} on {target}"),
    )
}

/// Makes every mount of the caller's namespace private (`MS_REC | MS_PRIVATE` on `/`).
pub fn make_mounts_private() -> io::Result<()> {
    // SAFETY: NULL source, type and data are allowed for a propagation change.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    unit_result(libc::c_long::from(rc), "making / private")
}

/// `unshare(flags)` for the calling thread.
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes flags only.
    let rc = unsafe { libc::unshare(flags) };
    unit_result(libc::c_long::from(rc), "unshare")
}

/// `mount_setattr(fd, "", AT_EMPTY_PATH [| AT_RECURSIVE], attr)`.
pub fn mount_setattr(fd: BorrowedFd<'_>, recursive: bool, attr: &MountAttr) -> io::Result<()> {
    let mut flags = libc::AT_EMPTY_PATH;
    if recursive {
        flags |= libc::AT_RECURSIVE;
    }
    // SAFETY: the empty path is a valid C string; `attr` points to a live MountAttr of the
    // size passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            flags,
            std::ptr::from_ref(attr),
            std::mem::size_of::<MountAttr>(),
        )
    };
    unit_result(rc, "mount_setattr")
}

pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: i32) -> io::Result<()> {
    // SAFETY: no pointers besides NULL siginfo.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    unit_result(rc, "pidfd_send_signal")
}

/// `waitpid(pid, &status, 0)`, retrying on EINTR; returns the raw status.
pub fn waitpid(pid: libc::pid_t) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid int the kernel writes to.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        if rc == pid {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Reads from a descriptor (non-retrying on EOF), returning the bytes read.
pub fn read_some(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for `buf.len()` writable bytes.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return usize::try_from(n).map_err(io::Error::other);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Writes all bytes.
pub fn write_all(fd: BorrowedFd<'_>, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for `buf.len()` readable bytes.
        let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[usize::try_from(n).map_err(io::Error::other)?..];
    }
    Ok(())
}

/// Landlock ABI version, or 0 when unavailable.
#[must_use]
pub fn landlock_abi() -> u32 {
    // SAFETY: the version query takes a NULL attribute and size 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            crate::landlock::CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(rc).unwrap_or(0)
}

/// Opens the folder `name` directly in `dir` (one component), never through a link.
pub fn open_dir_at(dir: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    let c = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call; `dir` is an open fd.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes the folder `name` in `dir` (one component) with `mode`; an existing one is fine.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &str, mode: u32) -> io::Result<()> {
    let c = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call; `dir` is an open fd.
    let rc = unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(e);
        }
    }
    Ok(())
}

/// Creates the file `name` in `dir` (one component): it must not exist yet, and a link is
/// never followed.
pub fn create_file_at(dir: BorrowedFd<'_>, name: &str, mode: u32) -> io::Result<std::fs::File> {
    let c = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call; `dir` is an open fd.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// `fchown` of an open file or folder.
pub fn fchown(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::fchown(fd, Some(uid), Some(gid))
}

/// `fchown` through a path (no symlink following).
pub fn lchown(path: &std::path::Path, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
}

#[cfg(test)]
mod tests {
    use super::missing_syscall;

    #[test]
    fn enosys_names_the_feature_and_the_version_that_added_it() {
        let m = missing_syscall("mount_setattr");
        assert!(
            m.contains("mount_setattr") && m.contains("Linux >= 5.12"),
            "{m}"
        );
        assert!(missing_syscall("fsopen(overlay)").contains("Linux >= 5.2"));
        // A call not in the table adds nothing (no guessed version).
        assert_eq!(missing_syscall("unshare"), "");
    }
}
