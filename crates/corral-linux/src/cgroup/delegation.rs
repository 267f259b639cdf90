//! Getting a cgroup corral may use on v2: a delegated transient scope from systemd when
//! corral's own group is shared or its controllers are not delegated, corral's move into its
//! own leaf `corral-supervisor-<pid>` (with its own descendants), and enabling the
//! controllers in `cgroup.subtree_control` (ADR-0011).

use std::fs;
use std::io::{self};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{V2_CONTROLLERS, cgroup_mounts, join_rel, write_file};

/// The transient scope systemd gave this process, or why it could not.
pub(crate) static SYSTEMD_SCOPE: std::sync::OnceLock<Result<String, String>> =
    std::sync::OnceLock::new();

/// Asks systemd for a delegated scope holding a [`crate::systemd::StandIn`], then moves
/// corral, then the stand-in, into the leaf `corral-supervisor-<pid>` beneath it, so the scope
/// itself never holds a thread of corral (see `systemd.rs` for why) and its controllers can
/// be enabled. Returns the unit name.
pub(super) fn join_delegated_scope() -> Result<String, String> {
    let stand_in = crate::systemd::StandIn::spawn()?;
    let unit = crate::systemd::start_delegated_scope(stand_in.pid())?;
    let scope = v2_dir_of(stand_in.pid())?;
    if scope.file_name() != Some(std::ffi::OsStr::new(&unit)) {
        return Err(format!(
            "systemd moved corral's stand-in to {}, not into {unit}",
            scope.display()
        ));
    }
    let leaf = scope.join(format!("corral-supervisor-{}", std::process::id()));
    let moved = fs::create_dir(&leaf).and_then(|()| {
        write_file(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
        write_file(&leaf.join("cgroup.procs"), &stand_in.pid().to_string())
    });
    // The stand-in ends here, in the leaf or in the scope; an empty scope is systemd's to
    // remove, with the leaf beneath it.
    drop(stand_in);
    moved.map_err(|e| format!("moving corral into {}: {e}", leaf.display()))?;
    Ok(unit)
}

/// The cgroup v2 directory process `pid` is in, from `/proc/<pid>/cgroup` and the cgroup2
/// mount in corral's mountinfo.
pub(super) fn v2_dir_of(pid: u32) -> Result<PathBuf, String> {
    let cg = fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| format!("/proc/{pid}/cgroup: {e}"))?;
    let path = cg
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| format!("/proc/{pid}/cgroup names no cgroup v2 path"))?;
    let mi = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    let mounts = cgroup_mounts(&mi);
    let (mp, _, _) = mounts
        .iter()
        .find(|(_, t, _)| t == "cgroup2")
        .ok_or("no cgroup2 mount")?;
    Ok(join_rel(&join_rel(Path::new("/"), mp), path))
}

/// Whether corral's cgroup `group` cannot hold corral's groups as it is: a non-root cgroup
/// (the root is exempt from "no internal processes") whose controllers are not delegated, or
/// that holds processes other than corral and its own descendants (its reaper, which
/// [`enable_controllers`] takes along into corral's leaf). Counting the reaper as another's
/// sent every corral in a `Delegate=yes` service out of its unit into a scope of its own, out
/// of the unit's `MemoryMax` and the other limits its owner set.
pub(super) fn needs_own_scope(group: &Path) -> bool {
    if !group.join("cgroup.type").exists() {
        return false;
    }
    let available = fs::read_to_string(group.join("cgroup.controllers")).unwrap_or_default();
    if !missing_controllers(&available).is_empty() {
        return true;
    }
    let me = std::process::id();
    members(group)
        .iter()
        .filter_map(|p| p.parse::<u32>().ok())
        .any(|p| p != me && !descends_from(p, me))
}

/// [`needs_own_scope`] for this process's own cgroup v2 group (false when it has none).
pub(crate) fn self_needs_own_scope() -> bool {
    v2_dir_of(std::process::id()).is_ok_and(|d| needs_own_scope(&d))
}

/// The pids directly in `group` (its `cgroup.procs`), empty when unreadable.
pub(super) fn members(group: &Path) -> Vec<String> {
    fs::read_to_string(group.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// What asking systemd gave, for a refusal: empty when it was not asked.
pub(super) fn systemd_note() -> String {
    match SYSTEMD_SCOPE.get() {
        Some(Err(e)) => format!(" (asking systemd for a delegated scope failed: {e})"),
        Some(Ok(unit)) => format!(" (in the transient scope {unit} systemd gave corral)"),
        None if crate::systemd::may_ask() => String::new(),
        None if crate::rootless::active().is_some() => {
            " (rootless: corral asks the user's systemd manager for one before it starts)".into()
        }
        None if crate::systemd::is_init() => {
            " (corral asks systemd for one only when run as root)".into()
        }
        None => " (systemd is not this host's init, so corral cannot ask it for one)".into(),
    }
}

/// The controllers of [`V2_CONTROLLERS`] a `cgroup.controllers` text does not list.
pub(crate) fn missing_controllers(available: &str) -> Vec<&'static str> {
    let have: Vec<&str> = available.split_whitespace().collect();
    V2_CONTROLLERS
        .iter()
        .copied()
        .filter(|c| !have.contains(c))
        .collect()
}

/// Enables the controllers corral needs in `parent`'s `cgroup.subtree_control`. On cgroup v2 a
/// group with processes of its own cannot delegate controllers ("no internal processes"), which
/// is the usual case for a CLI in a `Delegate=yes` service or a login session's scope: then
/// corral first moves itself into a leaf `corral-supervisor-<pid>` beneath its own cgroup (the
/// systemd delegation pattern) and tries again. The leaf is removed by
/// [`Hierarchy::collect_stale`] once corral has exited. What cannot work is refused in one
/// line that says what is missing where, and how to fix it.
pub(super) fn enable_controllers(parent: &Path) -> io::Result<()> {
    let available = fs::read_to_string(parent.join("cgroup.controllers")).unwrap_or_default();
    let missing = missing_controllers(&available);
    if !missing.is_empty() {
        return Err(io::Error::other(format!(
            "cgroup v2: controller(s) {} not delegated to corral's cgroup {} (its \
             cgroup.controllers: {:?}){}; run corral in a unit that delegates them, for example \
             `systemd-run --scope -p Delegate=yes corral ...`, or enable them in the parent's \
             cgroup.subtree_control",
            missing.join(", "),
            parent.display(),
            available.trim(),
            systemd_note()
        )));
    }
    match ensure_subtree_control(parent) {
        Err(e) if crate::sys::errno(&e) == Some(libc::EBUSY) => {
            let leaf = parent.join(format!("corral-supervisor-{}", std::process::id()));
            match fs::create_dir(&leaf) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
            // Every thread of corral (cgroup.procs moves the whole process).
            write_file(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
            move_own_descendants(parent, &leaf);
            match enable_once_exited_threads_left(parent) {
                Err(e) if crate::sys::errno(&e) == Some(libc::EBUSY) => {
                    let others = other_members(parent);
                    // Back where corral was, with every descendant it took along (its
                    // reaper), and nothing left behind.
                    let _ = write_file(
                        &parent.join("cgroup.procs"),
                        &std::process::id().to_string(),
                    );
                    for pid in members(&leaf) {
                        let _ = write_file(&parent.join("cgroup.procs"), &pid);
                    }
                    let _ = fs::remove_dir(&leaf);
                    Err(io::Error::other(format!(
                        "cgroup v2: corral's cgroup {} also holds processes that are not \
                         corral's ({}){}, so it cannot delegate controllers to corral's groups; \
                         run corral in a cgroup of its own, for example `systemd-run --scope \
                         -p Delegate=yes corral ...`",
                        parent.display(),
                        others,
                        systemd_note()
                    )))
                }
                other => other,
            }
        }
        other => other,
    }
}

/// How long corral waits for its own threads that were exiting as it moved into its leaf to
/// leave its old cgroup. A bound on a hang, not a pace: they are past the point of no return
/// and leave at their next context switch; a low-priority one on a busy host may take a few
/// hundred milliseconds to be scheduled.
pub(super) const EXITED_THREADS_WAIT: Duration = Duration::from_secs(10);

/// Enables the controllers in `parent` once corral has left it for its leaf. A thread of
/// corral that was exiting as corral moved is not moved with its process (the kernel skips
/// `PF_EXITING` tasks) and keeps `parent` populated until it is gone (since Linux 6.19 until
/// its last context switch): EBUSY while `cgroup.procs` lists nothing. Those tasks are a
/// finite set, all corral's and all ending, so corral waits for them, as the kernel's own
/// `rmdir` waits for dying tasks. Anything listed is a live process in the way: no waiting,
/// the caller refuses and names it.
pub(super) fn enable_once_exited_threads_left(parent: &Path) -> io::Result<()> {
    let deadline = Instant::now() + EXITED_THREADS_WAIT;
    let mut pause = Duration::from_millis(1);
    loop {
        match ensure_subtree_control(parent) {
            Err(e)
                if crate::sys::errno(&e) == Some(libc::EBUSY)
                    && members(parent).is_empty()
                    && Instant::now() < deadline =>
            {
                // Sleeping, not spinning, leaves the CPU to the tasks that must finish.
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Moves into `leaf` the processes directly in `parent` that corral itself started (its
/// descendants). A thread of corral that forked between systemd moving corral into its scope
/// and corral moving itself into `leaf` left a child in `parent` (a library user's `git`, a
/// test's `ip`); it is corral's, and it would block the controllers. Once corral is in `leaf`
/// its new children start there, so what is left in `parent` is a finite set that a few
/// passes empty (a moved process's own children, forked before it moved, are found on the
/// next pass). Anything else stays and is named in the refusal.
pub(super) fn move_own_descendants(parent: &Path, leaf: &Path) {
    let me = std::process::id();
    // A bound, not a pace: each pass moves every descendant it sees.
    for _ in 0..16 {
        let ours: Vec<String> = members(parent)
            .into_iter()
            .filter(|p| p.parse().is_ok_and(|pid| descends_from(pid, me)))
            .collect();
        if ours.is_empty() {
            return;
        }
        for pid in ours {
            // A child that has exited meanwhile (ESRCH) is not in the way any more.
            let _ = write_file(&leaf.join("cgroup.procs"), &pid);
        }
    }
}

/// Whether `pid`'s chain of parents (`/proc/<pid>/stat`) reaches `ancestor`.
pub(super) fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut at = pid;
    // Pid chains are short; the bound only guards against a cycle read during reuse.
    for _ in 0..64 {
        match parent_pid(at) {
            Some(p) if p == ancestor => return true,
            Some(p) if p > 1 => at = p,
            _ => return false,
        }
    }
    false
}

/// The parent pid of `pid` (field 4 of `/proc/<pid>/stat`, after the `(comm)` that may hold
/// spaces and parentheses), or `None` when it has exited.
pub(super) fn parent_pid(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Up to five `pid (comm)` of the processes directly in `group`, for a refusal.
pub(super) fn other_members(group: &Path) -> String {
    let list: Vec<String> = members(group)
        .into_iter()
        .take(5)
        .map(|pid| {
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            format!("pid {pid} {}", comm.trim())
        })
        .collect();
    if list.is_empty() {
        // What cgroup.procs hides but the kernel still counts: tasks that were exiting as
        // corral moved (Linux 6.19+ counts one until its last context switch), still there
        // after `EXITED_THREADS_WAIT`.
        format!(
            "none listed: only tasks that were exiting as corral moved, still there after {} s",
            EXITED_THREADS_WAIT.as_secs()
        )
    } else {
        list.join(", ")
    }
}

pub(super) fn ensure_subtree_control(parent: &Path) -> io::Result<()> {
    let current = fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
    let have: Vec<&str> = current.split_whitespace().collect();
    let need: Vec<String> = V2_CONTROLLERS
        .iter()
        .filter(|c| !have.contains(c))
        .map(|c| format!("+{c}"))
        .collect();
    if need.is_empty() {
        return Ok(());
    }
    write_file(&parent.join("cgroup.subtree_control"), &need.join(" "))
}
