//! A delegated cgroup of corral's own from systemd (issue 12, ADR-0011).
//!
//! On a systemd host corral is often started where it cannot make cgroups of its own: a
//! login session's scope (ssh, sudo) that also holds the user's shell, a service without
//! `Delegate=yes`, or beside a harness in a delegated service. cgroup v2's "no internal
//! processes" rule then forbids enabling controllers for corral's groups, and moving the
//! other processes is not corral's to do. So corral asks systemd, over the system bus, for a
//! transient scope `corral-scope-<pid>-<n>.scope` with `Delegate=yes`, as `systemd-run
//! --scope -p Delegate=yes` does. systemd removes the scope and everything beneath it when
//! its last process exits, a SIGKILLed corral included.
//!
//! What systemd moves into the scope is a [`StandIn`], a forked child that only waits, not
//! corral: corral then moves itself straight into its leaf beneath the scope. A thread that
//! is exiting is not moved with its process (the kernel skips `PF_EXITING` tasks) and keeps
//! its old cgroup populated, invisibly, until its last context switch (Linux 6.19+ defers
//! that unlink); were corral itself moved into the scope, such a thread (the D-Bus
//! library's, a test harness's) would stay in the scope and make enabling its controllers
//! fail with EBUSY while `cgroup.procs` lists nothing (seen in CI on 7.3). The stand-in has
//! one thread, blocked, so it moves whole; corral's own threads never enter the scope
//! itself.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use zbus::blocking::{Connection, Proxy};
use zbus::zvariant::{OwnedObjectPath, Value};

/// How long systemd may take to start the scope (a slow emulated guest takes ~1 s).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether systemd is this host's init (`sd_booted()`'s test).
#[must_use]
pub fn is_init() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// Whether corral may ask systemd's system manager for a scope: systemd is the init and
/// corral runs as root (root mode). An ordinary user's scope comes from the user's manager
/// over the user's bus, asked before corral enters its user namespace
/// (`rootless::choose_mode`); asking the system manager would only meet polkit.
#[must_use]
pub fn may_ask() -> bool {
    // SAFETY: geteuid has no preconditions.
    is_init() && unsafe { libc::geteuid() } == 0 && crate::rootless::active().is_none()
}

/// A child of corral that does nothing but wait: what systemd moves into corral's new scope
/// (see the module's documentation). Dropping it kills and reaps it.
#[derive(Debug)]
pub struct StandIn {
    pid: libc::pid_t,
}

impl StandIn {
    /// Forks the stand-in. It dies with the thread that forked it (`PR_SET_PDEATHSIG`), so a
    /// corral killed meanwhile leaves nothing behind.
    pub fn spawn() -> Result<Self, String> {
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the child of this fork (corral may have other threads) calls only
        // async-signal-safe functions (prctl, getppid, pause, _exit) and never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!(
                "stand-in fork: {}",
                std::io::Error::last_os_error()
            ));
        }
        if pid == 0 {
            // SAFETY: async-signal-safe system calls; the child leaves only by a signal or
            // through _exit.
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                if libc::getppid() != parent {
                    libc::_exit(0);
                }
                loop {
                    libc::pause();
                }
            }
        }
        Ok(Self { pid })
    }

    /// The stand-in's pid.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid.unsigned_abs()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let mut status = 0;
        // SAFETY: `self.pid` is corral's own child and not yet reaped, so the pid is not
        // reused; `status` is a valid out-pointer.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            while libc::waitpid(self.pid, &raw mut status, 0) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
        }
    }
}

/// Asks systemd for a transient scope holding `pid` (corral's [`StandIn`]), delegated to
/// corral, and waits until systemd has moved `pid` there. Returns the unit name. Fails closed
/// (with the reason) when there is no system bus, systemd refuses, or the job does not
/// finish.
pub fn start_delegated_scope(pid: u32) -> Result<String, String> {
    start_delegated_scope_on(Bus::System, pid)
}

/// Which systemd manager to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bus {
    /// The system manager (PID 1), over the system bus: root mode.
    System,
    /// The invoking user's manager (`user@UID.service`), over the user's bus
    /// (`DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`): rootless mode (ADR-0080).
    User,
}

/// [`start_delegated_scope`] from the manager on `bus`.
pub fn start_delegated_scope_on(bus: Bus, pid: u32) -> Result<String, String> {
    let (tx, rx) = mpsc::channel();
    let name = format!(
        "corral-scope-{}-{}.scope",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    );
    let unit = name.clone();
    // The bus conversation runs on a thread of its own, so a systemd that never answers
    // cannot hang corral: the wait below is bounded.
    std::thread::Builder::new()
        .name("corral-systemd".into())
        .spawn(move || {
            let _ = tx.send(start(bus, &unit, pid));
        })
        .map_err(|e| format!("starting the D-Bus thread: {e}"))?;
    match rx.recv_timeout(START_TIMEOUT) {
        Ok(Ok(())) => Ok(name),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!(
            "systemd did not start {name} within {} s",
            START_TIMEOUT.as_secs()
        )),
    }
}

fn start(which: Bus, name: &str, pid: u32) -> Result<(), String> {
    let label = match which {
        Bus::System => "system bus",
        Bus::User => "the user's bus",
    };
    let bus = |e: zbus::Error| format!("{label}: {e}");
    let conn = match which {
        Bus::System => Connection::system(),
        Bus::User => Connection::session(),
    }
    .map_err(bus)?;
    let manager = Proxy::new(
        &conn,
        "org.freedesktop.systemd1",
        "/org/freedesktop/systemd1",
        "org.freedesktop.systemd1.Manager",
    )
    .map_err(bus)?;
    // The match rule is in place before the job exists, so its JobRemoved cannot be missed.
    let mut removed = manager.receive_signal("JobRemoved").map_err(bus)?;
    manager
        .call_method("Subscribe", &())
        .map_err(|e| format!("systemd Subscribe: {e}"))?;
    let props: Vec<(&str, Value<'_>)> = vec![
        (
            "Description",
            Value::from("corral: delegated cgroup for one run"),
        ),
        ("PIDs", Value::from(vec![pid])),
        ("Delegate", Value::from(true)),
        // A failed scope is collected too: nothing is left behind.
        ("CollectMode", Value::from("inactive-or-failed")),
    ];
    let aux: Vec<(&str, Vec<(&str, Value<'_>)>)> = Vec::new();
    let job: OwnedObjectPath = manager
        .call("StartTransientUnit", &(name, "fail", props, aux))
        .map_err(|e| format!("systemd StartTransientUnit {name}: {e}"))?;
    for msg in &mut removed {
        let Ok((_id, path, _unit, result)) = msg
            .body()
            .deserialize::<(u32, OwnedObjectPath, String, String)>()
        else {
            continue;
        };
        if path == job {
            return if result == "done" {
                Ok(())
            } else {
                Err(format!("systemd's job for {name} ended {result:?}"))
            };
        }
    }
    Err(format!("{label} closed before {name} started"))
}
