//! `run_bounded_process()`: the execution-neutral bounded subprocess primitive of the seeds.
//!
//! # THIS IS NOT A SANDBOX
//!
//! A process started here runs with the caller's user, file system, network, kernel keyring
//! and resource limits. It can read the caller's home directory, connect anywhere, fork
//! without bound and leave daemons behind in another session. What this crate guarantees is
//! only:
//!
//! * the child starts in a new POSIX session (it has no controlling terminal);
//! * a wall-clock timeout, after which the child's process group is killed;
//! * bounded, concurrent capture of stdout and stderr (no deadlock when both pipes fill),
//!   with the total byte count and a truncation flag per stream;
//! * best-effort process-group cleanup (`SIGKILL` to the group) on *every* exit, not only on
//!   timeout;
//! * the child dies with its caller: `PR_SET_PDEATHSIG` sends it `SIGKILL` if the caller's
//!   thread dies first (a caller killed with `SIGKILL` leaves no helper running);
//! * no hang when a background process keeps the output pipes open: the status comes from
//!   `wait`, and the readers stop after a short grace period.
//!
//! It is never a valid `LocalSandboxExecutor` (ADR-0017). The capture and stdin helpers
//! ([`OutputCapture`], [`StdinFeeder`]) are shared with real sandbox backends, which add the
//! isolation themselves.
#![warn(missing_docs)]
#![allow(
    unsafe_code,
    reason = "poll(2), pidfd_open(2), killpg(2) and setsid(2) in pre_exec have no safe std wrapper"
)]

use std::ffi::OsString;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One captured output stream: the first `cap` bytes, the total the process wrote, and
/// whether anything was dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapturedStream {
    /// The kept bytes (at most the cap), verbatim: NUL and invalid UTF-8 are kept as bytes.
    pub bytes: Vec<u8>,
    /// Bytes the process wrote to the stream (may exceed `bytes.len()`).
    pub total_bytes: u64,
    /// `total_bytes > bytes.len()`.
    pub truncated: bool,
}

impl CapturedStream {
    fn push(&mut self, chunk: &[u8], cap: u64) {
        self.total_bytes = self.total_bytes.saturating_add(chunk.len() as u64);
        let room =
            usize::try_from(cap.saturating_sub(self.bytes.len() as u64)).unwrap_or(usize::MAX);
        let keep = room.min(chunk.len());
        self.bytes.extend_from_slice(&chunk[..keep]);
        if keep < chunk.len() {
            self.truncated = true;
        }
    }
}

/// Creates a pipe with both ends close-on-exec: `(read, write)`.
pub fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid, writable array of two c_ints, as pipe2 requires.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns; F_GETFL takes no pointer argument.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above; F_SETFL takes an int argument.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `poll(2)` on a set of descriptors for readability; returns which are ready. `None` waits
/// forever.
pub fn poll_readable(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = match timeout {
        None => -1,
        Some(d) => i32::try_from(d.as_millis().max(u128::from(!d.is_zero()))).unwrap_or(i32::MAX),
    };
    loop {
        // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structs for the whole call.
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
        if rc >= 0 {
            return Ok(pfds.iter().map(|p| p.revents != 0).collect());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Concurrent, bounded capture of two output pipes in one thread (no deadlock when both
/// fill). Keeps draining after the cap so the writer never blocks on a full pipe.
#[derive(Debug)]
pub struct OutputCapture {
    stop_tx: Option<OwnedFd>,
    thread: Option<JoinHandle<(CapturedStream, CapturedStream)>>,
}

impl OutputCapture {
    /// Starts reading `stdout` and `stderr` (the read ends), keeping at most `cap` bytes each.
    pub fn spawn(stdout: OwnedFd, stderr: OwnedFd, cap: u64) -> io::Result<Self> {
        set_nonblocking(stdout.as_raw_fd())?;
        set_nonblocking(stderr.as_raw_fd())?;
        let (stop_rx, stop_tx) = cloexec_pipe()?;
        let thread = std::thread::Builder::new()
            .name("corral-capture".into())
            .spawn(move || capture_loop([stdout, stderr], &stop_rx, cap))?;
        Ok(Self {
            stop_tx: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Waits up to `grace` for both streams to reach end of file, then stops reading (a
    /// descendant that keeps a pipe open cannot make this hang) and returns both streams.
    pub fn finish(mut self, grace: Duration) -> (CapturedStream, CapturedStream) {
        let deadline = Instant::now() + grace;
        if let Some(t) = &self.thread {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        self.stop();
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }

    fn stop(&mut self) {
        if let Some(tx) = self.stop_tx.take() {
            let mut f = std::fs::File::from(tx);
            let _ = f.write_all(b"x");
        }
    }
}

impl Drop for OutputCapture {
    fn drop(&mut self) {
        self.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn capture_loop(fds: [OwnedFd; 2], stop: &OwnedFd, cap: u64) -> (CapturedStream, CapturedStream) {
    let mut out = [CapturedStream::default(), CapturedStream::default()];
    let mut open = [true, true];
    let mut buf = vec![0u8; 64 * 1024];
    let mut stopping = false;
    while open[0] || open[1] {
        let mut watch: Vec<BorrowedFd<'_>> = Vec::with_capacity(3);
        let mut idx = Vec::with_capacity(2);
        for (i, fd) in fds.iter().enumerate() {
            if open[i] {
                watch.push(fd.as_fd());
                idx.push(i);
            }
        }
        if !stopping {
            watch.push(stop.as_fd());
        }
        let ready = match poll_readable(&watch, if stopping { Some(Duration::ZERO) } else { None })
        {
            Ok(r) => r,
            Err(_) => break,
        };
        if !stopping && ready.last().copied().unwrap_or(false) {
            stopping = true;
        }
        let ready: Vec<bool> = ready.iter().map(|r| *r || stopping).collect();
        for (k, &i) in idx.iter().enumerate() {
            if !ready[k] {
                continue;
            }
            // Read what is there now; the fd is non-blocking.
            loop {
                // SAFETY: `buf` is valid for `buf.len()` writable bytes; the fd is open.
                let n =
                    unsafe { libc::read(fds[i].as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n > 0 {
                    let n = usize::try_from(n).unwrap_or(0);
                    out[i].push(&buf[..n], cap);
                    if n < buf.len() {
                        break;
                    }
                    continue;
                }
                if n == 0 {
                    open[i] = false;
                    break;
                }
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                if e.kind() != io::ErrorKind::WouldBlock {
                    open[i] = false;
                }
                break;
            }
        }
        if stopping {
            // One last drain pass after the stop request; a writer that never stops (a
            // leftover daemon) cannot keep this loop alive.
            break;
        }
    }
    let [o, e] = out;
    (o, e)
}

/// Writes exactly the given bytes to a pipe from a thread, then closes it (end of file).
/// A reader that exits early is fine (EPIPE is ignored; SIGPIPE must be ignored, as Rust
/// programs do by default).
#[derive(Debug)]
pub struct StdinFeeder {
    thread: Option<JoinHandle<()>>,
}

impl StdinFeeder {
    /// Starts a thread that writes `bytes` to `write_end` and then drops it, so the reader sees
    /// end of file. Fails only when the thread cannot be spawned.
    pub fn spawn(write_end: OwnedFd, bytes: Vec<u8>) -> io::Result<Self> {
        let thread = std::thread::Builder::new()
            .name("corral-stdin".into())
            .spawn(move || {
                let mut f = std::fs::File::from(write_end);
                let _ = f.write_all(&bytes);
            })?;
        Ok(Self {
            thread: Some(thread),
        })
    }

    /// Waits for the writer only if it already finished or finishes within `grace`;
    /// otherwise leaves it (it ends with EPIPE once the pipe's readers are gone).
    pub fn finish(mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        if let Some(t) = self.thread.take() {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

/// A process to run with [`run_bounded_process`]. The environment is exactly `env`; nothing
/// is inherited from the caller.
#[derive(Debug, Clone)]
pub struct BoundedCommand {
    /// The executable to run (looked up like [`std::process::Command::new`] does).
    pub program: PathBuf,
    /// Arguments after argv\[0\].
    pub args: Vec<OsString>,
    /// The complete environment of the child; the caller's environment is cleared first.
    pub env: Vec<(OsString, OsString)>,
    /// Working directory of the child; `None` keeps the caller's.
    pub cwd: Option<PathBuf>,
    /// Bytes for stdin, then end of file; `None` is `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    /// Wall-clock limit, counted from before the spawn; when it fires the process group is
    /// killed and the exit is [`ProcessExit::TimedOut`].
    pub wall_timeout: Duration,
    /// Bytes kept per stream.
    pub max_output_bytes: u64,
    /// How long the readers wait for end of file after the process exits.
    pub drain_grace: Duration,
    /// Descriptors the caller keeps open for the call that the child gets as fd 3, 4, ...
    /// in this order (every other descriptor is close-on-exec).
    pub inherit_fds: Vec<RawFd>,
}

impl BoundedCommand {
    /// A command for `program` with no arguments, an empty environment, the caller's working
    /// directory, stdin from `/dev/null`, a 60 s wall timeout, 1 MiB kept per stream, a 200 ms
    /// drain grace and no inherited descriptors.
    #[must_use]
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            stdin: None,
            wall_timeout: Duration::from_secs(60),
            max_output_bytes: 1 << 20,
            drain_grace: Duration::from_millis(200),
            inherit_fds: Vec::new(),
        }
    }
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessExit {
    /// Exited normally with this exit code.
    Exited(i32),
    /// Killed by this signal number (before the wall timeout).
    Signaled(i32),
    /// The wall timeout fired; the process group was killed.
    TimedOut,
}

/// The result of [`run_bounded_process`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundedOutcome {
    /// How the process ended.
    pub exit: ProcessExit,
    /// Wall-clock time from before the spawn until the process was reaped.
    pub wall: Duration,
    /// The captured standard output.
    pub stdout: CapturedStream,
    /// The captured standard error.
    pub stderr: CapturedStream,
}

/// Opens a pidfd for `pid` (Linux 5.3+).
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Runs a process in a new session with a wall timeout and bounded capture. **Not a
/// sandbox**: see the crate documentation.
pub fn run_bounded_process(cmd: &BoundedCommand) -> io::Result<BoundedOutcome> {
    let start = Instant::now();
    let (out_r, out_w) = cloexec_pipe()?;
    let (err_r, err_w) = cloexec_pipe()?;
    let mut command = Command::new(&cmd.program);
    command
        .args(&cmd.args)
        .env_clear()
        .envs(cmd.env.iter().map(|(k, v)| (k, v)));
    if let Some(cwd) = &cmd.cwd {
        command.current_dir(cwd);
    }
    command
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::from(err_w));
    let stdin_pipe = match &cmd.stdin {
        None => {
            command.stdin(Stdio::null());
            None
        }
        Some(bytes) => {
            let (r, w) = cloexec_pipe()?;
            command.stdin(Stdio::from(r));
            Some((w, bytes.clone()))
        }
    };
    // Inherited descriptors are first duplicated above every target number (close-on-exec),
    // so moving them onto 3, 4, ... in the child never overwrites one not yet moved.
    if cmd.inherit_fds.len() > 32 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "more than 32 inherited descriptors",
        ));
    }
    let mut high = Vec::with_capacity(cmd.inherit_fds.len());
    for &fd in &cmd.inherit_fds {
        // SAFETY: fcntl(F_DUPFD_CLOEXEC) only duplicates `fd` (which the caller keeps open
        // for the call, as documented on the field) or fails.
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 64) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel returned a new descriptor that nobody else owns.
        high.push(unsafe { OwnedFd::from_raw_fd(dup) });
    }
    let moves: Vec<(RawFd, RawFd)> = high
        .iter()
        .zip(3..)
        .map(|(fd, target)| (fd.as_raw_fd(), target))
        .collect();
    // SAFETY: getpid(2) has no preconditions.
    let caller = unsafe { libc::getpid() };
    // SAFETY: the closure only calls setsid(2), prctl(2), getppid(2), dup2(2), close_range(2)
    // and fcntl(2), which are async-signal-safe, between fork and exec; it touches no locks or
    // allocations (`moves` was built before).
    unsafe {
        command.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            // The child dies with the thread that waits for it, so a caller killed with
            // SIGKILL leaves no child running (this thread blocks until the child exits, so
            // the signal never fires early). Checked after: the caller may already be gone.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != caller {
                // The caller exited before the child started (no allocation here).
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            for &(from, to) in &moves {
                // dup2 leaves the new descriptor without close-on-exec.
                if libc::dup2(from, to) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            // Whatever this process itself inherited without close-on-exec (a shell's or a
            // build tool's descriptors) stops at exec: the child gets 0-2 and its list only.
            // Marked close-on-exec, not closed: std's own pipe that reports a failed exec is
            // among them, and closed it turns "exec failed" into an abort of the child
            // (`output.write(&bytes).is_ok()`), which hides why.
            let first = 3 + moves.len() as libc::c_uint;
            if libc::syscall(
                libc::SYS_close_range,
                first,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) < 0
            {
                // Linux before 5.11: one by one.
                for fd in first..4096 {
                    libc::fcntl(fd as libc::c_int, libc::F_SETFD, libc::FD_CLOEXEC);
                }
            }
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    drop(command);
    drop(high);
    let pid = libc::pid_t::try_from(child.id()).map_err(io::Error::other)?;
    let feeder = match stdin_pipe {
        Some((w, bytes)) => Some(StdinFeeder::spawn(w, bytes)?),
        None => None,
    };
    let capture = OutputCapture::spawn(out_r, err_r, cmd.max_output_bytes)?;
    let pidfd = pidfd_open(pid)?;
    let deadline = start + cmd.wall_timeout;
    let mut timed_out = false;
    loop {
        let now = Instant::now();
        if now >= deadline {
            timed_out = true;
            break;
        }
        if poll_readable(&[pidfd.as_fd()], Some(deadline - now))?[0] {
            break;
        }
    }
    // Process-group cleanup on every exit: the child is the group leader (setsid), so its
    // pid is the group id. Best effort: members that left the group survive (not a sandbox).
    // SAFETY: killpg only sends a signal; the group id is the child's own pid.
    unsafe { libc::killpg(pid, libc::SIGKILL) };
    let status = child.wait()?;
    let wall = start.elapsed();
    let (stdout, stderr) = capture.finish(cmd.drain_grace);
    if let Some(f) = feeder {
        f.finish(Duration::ZERO);
    }
    let exit = if timed_out {
        ProcessExit::TimedOut
    } else if let Some(code) = status.code() {
        ProcessExit::Exited(code)
    } else {
        ProcessExit::Signaled(status.signal().unwrap_or(0))
    };
    Ok(BoundedOutcome {
        exit,
        wall,
        stdout,
        stderr,
    })
}

/// Reads a whole small file (helper for callers reading procfs/cgroupfs values).
pub fn read_small(path: &std::path::Path) -> io::Result<String> {
    let mut s = String::new();
    std::fs::File::open(path)?.read_to_string(&mut s)?;
    Ok(s)
}

/// Takes ownership of descriptor `fd`, which this process inherited from its parent (see
/// [`BoundedCommand::inherit_fds`]: the child gets them as 3, 4, ...), and marks it
/// close-on-exec so nothing this process starts inherits it in turn. Fails when `fd` is not
/// open, lies outside 3..35, or was taken before.
pub fn take_inherited_fd(fd: RawFd) -> io::Result<OwnedFd> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static TAKEN: AtomicU64 = AtomicU64::new(0);
    if !(3..35).contains(&fd) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("descriptor {fd} is not an inherited one (3 to 34)"),
        ));
    }
    let bit = 1u64 << fd;
    if TAKEN.fetch_or(bit, Ordering::SeqCst) & bit != 0 {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("descriptor {fd} was already taken"),
        ));
    }
    // SAFETY: F_GETFD only reads the descriptor's flags (fails with EBADF when it is not open).
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: F_SETFD only sets the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor is open (checked above), was inherited for this process to own,
    // and the TAKEN set guarantees no second OwnedFd is ever made for it here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A namespace [`unshare_namespace`] can give the calling thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    /// `CLONE_NEWNS`: a mount namespace of its own (a helper confining itself before it reads
    /// hostile data, as corral-checkout's does).
    Mount,
    /// `CLONE_NEWNET`: a network namespace of its own (the egress lab's tests).
    Network,
    /// `CLONE_NEWUSER`: a user namespace of its own (the confinement tests' attack: it must
    /// be refused; the kernel also refuses it to a multi-threaded caller).
    User,
}

/// `unshare(2)` for one namespace: the calling thread gets a new one of that kind. Only
/// namespace flags: never one that would split the file descriptor table or the file system
/// attributes between threads, which is what makes the general call unsafe (rustix's
/// `unshare_unsafe`). It lives here so that the crates above keep `forbid(unsafe_code)`
/// (ADR-0093).
///
/// # Errors
/// The system call's error (`EPERM` without `CAP_SYS_ADMIN` in the caller's user namespace).
pub fn unshare_namespace(ns: Namespace) -> io::Result<()> {
    let flag = match ns {
        Namespace::Mount => libc::CLONE_NEWNS,
        Namespace::Network => libc::CLONE_NEWNET,
        Namespace::User => libc::CLONE_NEWUSER,
    };
    // SAFETY: unshare(2) with a single namespace flag takes no pointer and changes only
    // which namespace this thread is in; no memory or descriptor another thread holds is
    // affected.
    if unsafe { libc::unshare(flag) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The largest peak resident set size, in KiB, among the caller's children that have ended
/// and been waited for (`getrusage(RUSAGE_CHILDREN)`'s `ru_maxrss`): what the benchmarks
/// report of the helpers' memory.
///
/// # Errors
/// The system call's error.
pub fn children_peak_rss_kib() -> io::Result<u64> {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the call's duration.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &raw mut usage) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::try_from(usage.ru_maxrss).unwrap_or(0))
}
