//! Step 2 of a run, mount (in init, pid 1 of the sandbox's PID namespace, after `clone`):
//! wait for the supervisor, make the mount tree from the prebuilt [`Plan`] (trees, overlay,
//! `/proc`, `/dev`, the private `/tmp` and HOME), `pivot_root`, bring up loopback, build the
//! Landlock ruleset, then fork the worker (`enter.rs`) and reap until it ends.
//!
//! This runs in a `fork`-like copy of the (possibly multi-threaded) supervisor: no
//! allocation, no locks, no std I/O; only the plan and raw system calls.

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use crate::child::{Plan, Stage, errno, fail};
use crate::enter::{build_landlock, drop_all_caps, worker_main};
use crate::sys::{MOVE_MOUNT_F_EMPTY_PATH, MOVE_MOUNT_T_EMPTY_PATH, MountAttr, OpenHow};

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
