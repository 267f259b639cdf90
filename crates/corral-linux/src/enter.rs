//! Step 2b of a run, enter (in the worker, forked by init): drop every capability, lock the
//! securebits, set no_new_privs, apply the Landlock ruleset (which init builds here, in the
//! finished tree, before the fork) and the seccomp filter, switch to the worker's uid and
//! gid, then `execve` the hashed executable.
//!
//! Like `mount.rs`, this runs after `clone` in a copy of the supervisor: no allocation, no
//! locks, no std I/O.

use std::os::fd::RawFd;

use crate::child::{LandlockPlan, Plan, Stage, errno, fail};
use crate::landlock::{self, PathBeneathAttr};

pub(crate) fn drop_all_caps() {
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

pub(crate) fn build_landlock(p: &Plan, l: &LandlockPlan) -> RawFd {
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
pub(crate) fn worker_main(p: &Plan, ruleset: RawFd) -> ! {
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
        if w.drop_groups {
            check!(
                p,
                Stage::SetGroups,
                libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>())
            );
        }
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
