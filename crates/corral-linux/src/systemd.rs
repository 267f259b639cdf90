//! A delegated cgroup of corral's own from systemd (issue 12, ADR-0011).
//!
//! On a systemd host corral is often started where it cannot make cgroups of its own: a
//! login session's scope (ssh, sudo) that also holds the user's shell, a service without
//! `Delegate=yes`, or beside a harness in a delegated service. cgroup v2's "no internal
//! processes" rule then forbids enabling controllers for corral's groups, and moving the
//! other processes is not corral's to do. So corral asks systemd, over the system bus, for a
//! transient scope `corral-scope-<pid>-<n>.scope` with `Delegate=yes` holding only itself,
//! as `systemd-run --scope -p Delegate=yes` does. systemd removes the scope and everything
//! beneath it when its last process exits, a SIGKILLed corral included.

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
/// corral runs as root. An ordinary user's scope would come from the user manager over the
/// user bus (rootless mode, not built yet); asking the system manager would only meet
/// polkit.
#[must_use]
pub fn may_ask() -> bool {
    // SAFETY: geteuid has no preconditions.
    is_init() && unsafe { libc::geteuid() } == 0
}

/// Asks systemd for a transient scope holding this process, delegated to it, and waits until
/// systemd has moved the process there. Returns the unit name. Fails closed (with the reason)
/// when there is no system bus, systemd refuses, or the job does not finish.
pub fn start_delegated_scope() -> Result<String, String> {
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
            let _ = tx.send(start(&unit));
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

fn start(name: &str) -> Result<(), String> {
    let bus = |e: zbus::Error| format!("system bus: {e}");
    let conn = Connection::system().map_err(bus)?;
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
        ("PIDs", Value::from(vec![std::process::id()])),
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
    Err(format!("the system bus closed before {name} started"))
}
