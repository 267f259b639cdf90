//! The last step of a run, tear down: whatever the ending, kill init (and with it the PID
//! namespace) and anything left in the cgroup, reap, read what init and the worker reported
//! on their pipes, and name the ending. The cgroup itself is removed by the supervisor once
//! the outcome's figures are read from it.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use corral_contract::manifest::Termination;

use crate::cgroup::CgroupOps;
use crate::child::Stage;
use crate::sys;

/// Kills and reaps init on drop (error paths and panics included).
pub(crate) struct InitGuard {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    reaped: Option<i32>,
}

impl InitGuard {
    /// Guards init `pid`, cloned by this process; without a pidfd it is killed by pid at once
    /// (it is this process's own unreaped child, so the pid cannot have been reused).
    pub(crate) fn new(pid: libc::pid_t) -> io::Result<Self> {
        match corral_process::pidfd_open(pid) {
            Ok(pidfd) => Ok(Self {
                pid,
                pidfd,
                reaped: None,
            }),
            Err(e) => {
                // SAFETY: `pid` is our own unreaped child; kill(2) has no memory effects.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                let _ = sys::waitpid(pid);
                Err(e)
            }
        }
    }
    pub(crate) fn pidfd(&self) -> BorrowedFd<'_> {
        self.pidfd.as_fd()
    }
    fn kill(&self) {
        let _ = sys::pidfd_send_signal(self.pidfd.as_fd(), libc::SIGKILL);
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

/// How supervision stopped before the worker ended on its own (all false: it ended).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ending {
    pub timed_out: bool,
    pub cancelled: bool,
    pub cpu_exceeded: bool,
}

/// Ends the sandbox whatever the ending, and returns init's raw wait status. Killing init
/// kills the whole PID namespace (the kernel kills and reaps every task in it before init
/// is reaped); then the whole cgroup is killed too if anything is still in it. Skipping the
/// v1 freeze-kill-thaw for an empty group keeps a normal ending cheap.
pub(crate) fn end_sandbox(cg: &dyn CgroupOps, init: &mut InitGuard, ending: Ending) -> Option<i32> {
    if ending.timed_out || ending.cancelled || ending.cpu_exceeded {
        // Over a budget: every task gets SIGKILL now, and the CPU limit is lifted so the
        // throttled ones die at once instead of after the next quota period.
        let _ = cg.end_now();
    }
    init.kill();
    let status = init.reap();
    if cg.populated().unwrap_or(true) {
        let _ = cg.kill_all();
    }
    status
}

/// The worker's raw wait status, as init reported it on the status pipe (none if init never
/// saw the worker end).
pub(crate) fn worker_status(status_rx: BorrowedFd<'_>) -> Option<i32> {
    let mut buf = [0u8; 4];
    match sys::read_some(status_rx, &mut buf) {
        Ok(4) => Some(i32::from_ne_bytes(buf)),
        _ => None,
    }
}

/// The `(stage, errno)` record init or the worker wrote on the error pipe when set-up
/// failed, as "<Stage> failed: <error>"; none when the worker reached its first instruction.
pub(crate) fn setup_failure(err_rx: BorrowedFd<'_>) -> Option<String> {
    let mut buf = [0u8; 8];
    match sys::read_some(err_rx, &mut buf) {
        Ok(8) => {
            let stage = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
            let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
            Some(format!(
                "{} failed: {}",
                Stage::from_u32(stage)
                    .map_or_else(|| format!("stage {stage}"), |s| format!("{s:?}")),
                io::Error::from_raw_os_error(errno)
            ))
        }
        _ => None,
    }
}

/// What the worker's ending was, from how supervision stopped and what the kernel recorded.
pub(crate) struct Verdict {
    pub termination: Termination,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Said in the outcome's notes.
    pub note: Option<String>,
}

/// Names the ending. A budget that supervision enforced wins; then a CPU-limit signal, then
/// a kernel OOM kill in the run's group, then the worker's own exit or signal.
pub(crate) fn verdict(
    ending: Ending,
    worker_status: Option<i32>,
    init_status: Option<i32>,
    cpu_usec: u64,
    cpu_limit_usec: u64,
    oom_kills: u64,
) -> Verdict {
    let (mut exit_code, mut signal, mut note) = (None, None, None);
    if let Some(st) = worker_status {
        if libc::WIFEXITED(st) {
            exit_code = Some(libc::WEXITSTATUS(st));
        } else if libc::WIFSIGNALED(st) {
            signal = Some(libc::WTERMSIG(st));
        }
    } else if let Some(st) = init_status {
        note = Some(format!(
            "init ended without reporting the worker (raw status {st:#x})"
        ));
        signal = Some(libc::SIGKILL);
    }
    let termination = if ending.cancelled {
        Termination::Cancelled
    } else if ending.timed_out {
        Termination::WallTimeout
    } else if ending.cpu_exceeded
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
    Verdict {
        termination,
        exit_code,
        signal,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KILLED: i32 = libc::SIGKILL; // raw status of a task killed by SIGKILL
    const EXIT_3: i32 = 3 << 8;

    #[test]
    fn an_enforced_budget_names_the_ending_over_what_the_worker_did() {
        let cancelled = Ending {
            cancelled: true,
            timed_out: true,
            ..Ending::default()
        };
        let v = verdict(cancelled, Some(EXIT_3), None, 0, 1, 1);
        assert_eq!(v.termination, Termination::Cancelled);
        assert_eq!(v.exit_code, Some(3));
        let timed_out = Ending {
            timed_out: true,
            ..Ending::default()
        };
        assert_eq!(
            verdict(timed_out, Some(KILLED), None, 5, 1, 1).termination,
            Termination::WallTimeout
        );
    }

    #[test]
    fn cpu_then_memory_then_the_workers_own_ending() {
        let none = Ending::default();
        assert_eq!(
            verdict(none, Some(libc::SIGXCPU), None, 0, 10, 0).termination,
            Termination::CpuLimit
        );
        // SIGKILL counts as the CPU limit only once the budget is spent.
        assert_eq!(
            verdict(none, Some(KILLED), None, 10, 10, 0).termination,
            Termination::CpuLimit
        );
        assert_eq!(
            verdict(none, Some(KILLED), None, 9, 10, 1).termination,
            Termination::MemoryLimit
        );
        assert_eq!(
            verdict(none, Some(KILLED), None, 9, 10, 0).termination,
            Termination::Signaled
        );
        let v = verdict(none, Some(EXIT_3), None, 9, 10, 0);
        assert_eq!((v.termination, v.exit_code), (Termination::Exited, Some(3)));
    }

    #[test]
    fn init_ending_without_a_worker_report_is_a_kill_and_says_so() {
        let v = verdict(Ending::default(), None, Some(0x9), 0, 10, 0);
        assert_eq!(v.signal, Some(libc::SIGKILL));
        assert!(v.note.is_some_and(|n| n.contains("raw status 0x9")));
    }
}
