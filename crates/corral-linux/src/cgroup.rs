//! A small in-house cgroupfs layer over cgroup v1 and v2, chosen at run time (ADR-0011).
//!
//! * [`Hierarchy::detect`] reads `/proc/self/cgroup` and `/proc/self/mountinfo` (passed in
//!   as text, with the file system root injectable, so tests run against a fake tree) and
//!   picks v2 when the unified hierarchy has the `cpu`, `memory` and `pids` controllers,
//!   else v1 when the `cpu`, `cpuacct`, `memory`, `pids` and `freezer` hierarchies exist.
//! * Groups are created **beneath the cgroup this process runs in** (per controller on v1),
//!   named `corral-<run id>`, never at a hierarchy root, and removed by [`RunCgroup`]'s
//!   `Drop` (kill, wait empty, rmdir) also on error paths and panics. Nothing else is
//!   touched, except that v2 may enable `+cpu +memory +pids` in the parent's
//!   `cgroup.subtree_control` when they are not enabled yet (required to use them).

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Which cgroup version a hierarchy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// cgroup v1: one hierarchy per controller.
    V1,
    /// cgroup v2: the unified hierarchy.
    V2,
}

/// Limits written to a run's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Memory limit in bytes (`memory.max`, or `memory.limit_in_bytes` on v1); swap is
    /// not allowed on top of it.
    pub memory_bytes: u64,
    /// Most tasks the group may hold (`pids.max`).
    pub pids_max: u64,
    /// CPU bandwidth: `quota_us` per `period_us`.
    pub cpu_quota_us: u64,
    /// The period of the CPU bandwidth limit, in microseconds.
    pub cpu_period_us: u64,
}

const V1_CONTROLLERS: [&str; 5] = ["memory", "pids", "cpu", "cpuacct", "freezer"];
pub(crate) const V2_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];

/// Where the usable hierarchy is and where this process sits in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hierarchy {
    /// The parent directory (this process's cgroup) on the unified hierarchy.
    V2 {
        /// This process's cgroup directory.
        parent: PathBuf,
    },
    /// Per controller (`memory`, `pids`, `cpu`, `cpuacct`, `freezer`): this process's cgroup
    /// directory.
    V1 {
        /// `(controller, directory)` pairs.
        parents: Vec<(String, PathBuf)>,
    },
}

fn join_rel(base: &Path, rel: &str) -> PathBuf {
    let rel = rel.trim_start_matches('/');
    if rel.is_empty() {
        base.to_path_buf()
    } else {
        base.join(rel)
    }
}

/// Parses mountinfo into `(mount point, fstype, super options)`.
fn cgroup_mounts(mountinfo: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((pre, post)) = line.split_once(" - ") else {
            continue;
        };
        let pre: Vec<&str> = pre.split(' ').collect();
        let post: Vec<&str> = post.split(' ').collect();
        if pre.len() < 5 || post.len() < 3 {
            continue;
        }
        let fstype = post[0];
        if fstype == "cgroup" || fstype == "cgroup2" {
            out.push((
                pre[4].replace("\\040", " "),
                fstype.to_owned(),
                post[2].to_owned(),
            ));
        }
    }
    out
}

impl Hierarchy {
    /// Picks the hierarchy from `/proc/self/cgroup` and mountinfo text. `root` is prefixed to
    /// every mount point (`/` on a real host, a temporary directory in tests).
    pub fn detect(root: &Path, proc_self_cgroup: &str, mountinfo: &str) -> Result<Self, String> {
        Self::detect_for(root, proc_self_cgroup, mountinfo, std::process::id())
    }

    /// [`Self::detect`] for the corral process `supervisor`: its leaf
    /// `corral-supervisor-<supervisor>` is not where its groups go (the reaper, a child of
    /// corral, may sit in its parent's leaf).
    fn detect_for(
        root: &Path,
        proc_self_cgroup: &str,
        mountinfo: &str,
        supervisor: u32,
    ) -> Result<Self, String> {
        let mounts = cgroup_mounts(mountinfo);
        let mut v2_path = None;
        let mut v1_paths: Vec<(String, String)> = Vec::new();
        for line in proc_self_cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if ctrls.is_empty() {
                // corral's own leaf (see `enable_controllers`) is not where its groups go:
                // they are its siblings, beneath the cgroup corral was started in.
                let own_leaf = format!("/corral-supervisor-{supervisor}");
                v2_path = Some(path.strip_suffix(&own_leaf).unwrap_or(path).to_owned());
            } else {
                for c in ctrls.split(',') {
                    v1_paths.push((c.to_owned(), path.to_owned()));
                }
            }
        }
        let mut why = Vec::new();
        if let Some(path) = &v2_path {
            if let Some((mp, _, _)) = mounts.iter().find(|(_, t, _)| t == "cgroup2") {
                let mount = join_rel(root, mp);
                let available =
                    fs::read_to_string(mount.join("cgroup.controllers")).unwrap_or_default();
                let have: Vec<&str> = available.split_whitespace().collect();
                let missing = missing_controllers(&available);
                if missing.is_empty() {
                    return Ok(Hierarchy::V2 {
                        parent: join_rel(&mount, path),
                    });
                }
                why.push(format!(
                    "cgroup2 at {} lacks controllers {missing:?} (has {have:?})",
                    mount.display()
                ));
            } else {
                why.push("no cgroup2 mount".to_owned());
            }
        }
        let mut parents = Vec::new();
        for ctrl in V1_CONTROLLERS {
            let Some((_, rel)) = v1_paths.iter().find(|(c, _)| c == ctrl) else {
                why.push(format!("v1 controller {ctrl} not in /proc/self/cgroup"));
                continue;
            };
            let Some((mp, _, _)) = mounts
                .iter()
                .find(|(_, t, opts)| t == "cgroup" && opts.split(',').any(|o| o == ctrl))
            else {
                why.push(format!("v1 controller {ctrl} not mounted"));
                continue;
            };
            parents.push((ctrl.to_owned(), join_rel(&join_rel(root, mp), rel)));
        }
        if parents.len() == V1_CONTROLLERS.len() {
            return Ok(Hierarchy::V1 { parents });
        }
        Err(why.join("; "))
    }

    /// Detects the host's hierarchy. On cgroup v2, when corral's cgroup cannot hold groups of
    /// its own (its controllers are not delegated, or it also holds processes that are not
    /// corral's) and systemd is the init, corral first asks systemd for a delegated transient
    /// scope of its own (once per process; [`crate::systemd`]) and detects again.
    pub fn detect_host() -> Result<Self, String> {
        let h = Self::detect_host_in_place()?;
        if let Hierarchy::V2 { parent } = &h
            && needs_own_scope(parent)
            && crate::systemd::may_ask()
            && SYSTEMD_SCOPE.get_or_init(join_delegated_scope).is_ok()
        {
            return Self::detect_host_in_place();
        }
        Ok(h)
    }

    fn detect_host_in_place() -> Result<Self, String> {
        Self::detect_host_for(std::process::id())
    }

    /// The hierarchy the corral process `supervisor` made its groups in, seen from its reaper
    /// (a child that shares its cgroup, see [`Self::collect_dead`]). Never asks systemd for a
    /// scope: groups in a scope systemd gave corral go with the scope.
    pub fn detect_host_for(supervisor: u32) -> Result<Self, String> {
        let cg = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let mi = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        Self::detect_for(Path::new("/"), &cg, &mi, supervisor)
    }

    /// Which cgroup version this hierarchy is.
    #[must_use]
    pub fn version(&self) -> CgroupVersion {
        match self {
            Hierarchy::V2 { .. } => CgroupVersion::V2,
            Hierarchy::V1 { .. } => CgroupVersion::V1,
        }
    }

    /// Human-readable description for evidence strings.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Hierarchy::V2 { parent } => match SYSTEMD_SCOPE.get() {
                Some(Ok(unit)) => format!(
                    "cgroup v2 beneath {} (the transient scope {unit} systemd delegated to \
                     corral over D-Bus)",
                    parent.display()
                ),
                _ => format!("cgroup v2 beneath {}", parent.display()),
            },
            Hierarchy::V1 { parents } => {
                let list: Vec<String> = parents
                    .iter()
                    .map(|(c, p)| format!("{c}:{}", p.display()))
                    .collect();
                format!("cgroup v1 beneath {}", list.join(","))
            }
        }
    }

    /// The (not yet created) group `dirname` in this hierarchy.
    fn group(&self, dirname: &str) -> RunCgroup {
        match self {
            Hierarchy::V2 { parent } => RunCgroup::V2(V2Group {
                dir: parent.join(dirname),
                removed: false,
            }),
            Hierarchy::V1 { parents } => RunCgroup::V1(V1Group {
                dirs: parents
                    .iter()
                    .map(|(c, p)| (c.clone(), p.join(dirname)))
                    .collect(),
                removed: false,
            }),
        }
    }

    /// Creates `corral-<name>` with the limits. The returned guard removes it on drop.
    pub fn create(&self, name: &str, limits: &CgroupLimits) -> io::Result<RunCgroup> {
        let dirname = format!("corral-{name}");
        let mut cg = self.group(&dirname);
        match &mut cg {
            RunCgroup::V2(g) => {
                if let Hierarchy::V2 { parent } = self {
                    enable_controllers(parent)?;
                }
                fs::create_dir(&g.dir)?;
                g.apply(limits)?;
            }
            RunCgroup::V1(g) => {
                for (_, d) in &g.dirs {
                    fs::create_dir(d)?;
                }
                g.apply(limits)?;
            }
        }
        Ok(cg)
    }

    /// Removes `corral-*` groups whose owning corral process no longer exists: a supervisor
    /// killed with SIGKILL cannot clean up after itself (its sandbox dies with it through
    /// `PR_SET_PDEATHSIG`; the empty groups stay). Only names corral creates are considered,
    /// and only when their owner's pid is gone; any task still inside is killed first.
    /// Returns the names removed.
    pub fn collect_stale(&self) -> Vec<String> {
        self.collect_where(|name| {
            stale_owner(name).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        })
    }

    /// Removes the groups the corral process `pid` created (`corral-<pid>-<n>`,
    /// `corral-probe-<pid>-<n>`), killing any task still inside: what corral's reaper does once
    /// `pid` has exited, however it died (ADR-0092). Never `corral-supervisor-<pid>`: on cgroup
    /// v2 that leaf holds the reaper itself, and a process cannot remove its own group; systemd
    /// removes it with the unit, or the next corral with [`Self::collect_stale`].
    pub fn collect_dead(&self, pid: u32) -> Vec<String> {
        self.collect_where(|name| {
            !name.starts_with("corral-supervisor-") && stale_owner(name) == Some(pid)
        })
    }

    fn collect_where(&self, pick: impl Fn(&str) -> bool) -> Vec<String> {
        let parents: Vec<&Path> = match self {
            Hierarchy::V2 { parent } => vec![parent.as_path()],
            Hierarchy::V1 { parents } => parents.iter().map(|(_, p)| p.as_path()).collect(),
        };
        let mut names = std::collections::BTreeSet::new();
        for parent in parents {
            let Ok(entries) = fs::read_dir(parent) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if pick(&name) {
                    names.insert(name);
                }
            }
        }
        let mut removed = Vec::new();
        for name in names {
            let mut g = self.group(&name);
            if let RunCgroup::V1(v1) = &mut g {
                // A controller hierarchy may lack this group (partially created): skip those.
                v1.dirs.retain(|(_, d)| d.is_dir());
            }
            if g.destroy().is_ok() {
                removed.push(name);
            }
        }
        removed
    }
}

/// The pid in a group name corral creates: `corral-<pid>-<n>`, `corral-probe-<pid>-<n>`,
/// `corral-supervisor-<pid>`; `None` for any other name.
#[must_use]
pub fn stale_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("corral-")?;
    let rest = rest
        .strip_prefix("probe-")
        .or_else(|| rest.strip_prefix("supervisor-"))
        .unwrap_or(rest);
    let pid = rest.split('-').next()?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// The transient scope systemd gave this process, or why it could not.
static SYSTEMD_SCOPE: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();

/// Asks systemd for a delegated scope holding a [`crate::systemd::StandIn`], then moves
/// corral, then the stand-in, into the leaf `corral-supervisor-<pid>` beneath it, so the scope
/// itself never holds a thread of corral (see `systemd.rs` for why) and its controllers can
/// be enabled. Returns the unit name.
fn join_delegated_scope() -> Result<String, String> {
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
fn v2_dir_of(pid: u32) -> Result<PathBuf, String> {
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
fn needs_own_scope(group: &Path) -> bool {
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

/// The pids directly in `group` (its `cgroup.procs`), empty when unreadable.
fn members(group: &Path) -> Vec<String> {
    fs::read_to_string(group.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// What asking systemd gave, for a refusal: empty when it was not asked.
fn systemd_note() -> String {
    match SYSTEMD_SCOPE.get() {
        Some(Err(e)) => format!(" (asking systemd for a delegated scope failed: {e})"),
        Some(Ok(unit)) => format!(" (in the transient scope {unit} systemd gave corral)"),
        None if crate::systemd::may_ask() => String::new(),
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
fn enable_controllers(parent: &Path) -> io::Result<()> {
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
const EXITED_THREADS_WAIT: Duration = Duration::from_secs(10);

/// Enables the controllers in `parent` once corral has left it for its leaf. A thread of
/// corral that was exiting as corral moved is not moved with its process (the kernel skips
/// `PF_EXITING` tasks) and keeps `parent` populated until it is gone (since Linux 6.19 until
/// its last context switch): EBUSY while `cgroup.procs` lists nothing. Those tasks are a
/// finite set, all corral's and all ending, so corral waits for them, as the kernel's own
/// `rmdir` waits for dying tasks. Anything listed is a live process in the way: no waiting,
/// the caller refuses and names it.
fn enable_once_exited_threads_left(parent: &Path) -> io::Result<()> {
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
fn move_own_descendants(parent: &Path, leaf: &Path) {
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
fn descends_from(pid: u32, ancestor: u32) -> bool {
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
fn parent_pid(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Up to five `pid (comm)` of the processes directly in `group`, for a refusal.
fn other_members(group: &Path) -> String {
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

fn ensure_subtree_control(parent: &Path) -> io::Result<()> {
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

fn write_file(path: &Path, value: &str) -> io::Result<()> {
    let mut f = fs::OpenOptions::new().write(true).open(path)?;
    // The errno stays readable (`sys::errno`): the EBUSY branch above depends on it.
    f.write_all(value.as_bytes()).map_err(|e| {
        crate::sys::with_context(&format!("write {value:?} to {}", path.display()), &e)
    })
}

fn read_u64(path: &Path) -> io::Result<u64> {
    let s = fs::read_to_string(path)?;
    s.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {s:?}", path.display()),
        )
    })
}

fn keyed(path: &Path, key: &str) -> io::Result<u64> {
    let s = fs::read_to_string(path)?;
    for line in s.lines() {
        let mut it = line.split_whitespace();
        if it.next() == Some(key) {
            return it.next().and_then(|v| v.parse().ok()).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {key}", path.display()),
                )
            });
        }
    }
    Ok(0)
}

fn rmdir_retry(dir: &Path) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if Instant::now() < deadline && crate::sys::errno(&e) == Some(libc::EBUSY) => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("rmdir {}: {e}", dir.display()),
                ));
            }
        }
    }
}

/// The operations the executor needs on one run's cgroup, for either version.
pub trait CgroupOps {
    /// Moves `pid` into the group (every controller on v1).
    fn attach(&self, pid: i32) -> io::Result<()>;
    /// CPU time used by every task of the group, in microseconds.
    fn cpu_usage_usec(&self) -> io::Result<u64>;
    /// Highest memory use seen, in bytes.
    fn memory_peak_bytes(&self) -> io::Result<u64>;
    /// How many tasks the kernel OOM-killed in the group.
    fn oom_kills(&self) -> io::Result<u64>;
    /// Kills every task (v2 `cgroup.kill`; v1 freeze, SIGKILL each, thaw).
    fn kill_all(&self) -> io::Result<()>;
    /// Ends a run that is over its budget at once: SIGKILL to every task (v2 `cgroup.kill`,
    /// v1 each listed task), then lift the CPU bandwidth limit so the dying tasks are
    /// scheduled and exit now, instead of each waiting for the next quota period (a group at
    /// its CPU quota otherwise keeps spinning for a period or more after the kill: RES-CPU-01).
    /// The tasks already hold SIGKILL when the limit goes, so none runs user code again.
    fn end_now(&self) -> io::Result<()>;
    /// Does the group still hold a task?
    fn populated(&self) -> io::Result<bool>;
    /// Kills, waits for the group to empty and removes it.
    fn destroy(&mut self) -> io::Result<()>;
    /// Directories of the group (for tests and evidence).
    fn dirs(&self) -> Vec<PathBuf>;
}

/// One run's cgroup (v1 or v2); removed on drop.
#[derive(Debug)]
pub enum RunCgroup {
    /// A group on cgroup v1.
    V1(V1Group),
    /// A group on cgroup v2.
    V2(V2Group),
}

impl RunCgroup {
    fn ops(&self) -> &dyn CgroupOps {
        match self {
            RunCgroup::V1(g) => g,
            RunCgroup::V2(g) => g,
        }
    }
    fn ops_mut(&mut self) -> &mut dyn CgroupOps {
        match self {
            RunCgroup::V1(g) => g,
            RunCgroup::V2(g) => g,
        }
    }
}

impl CgroupOps for RunCgroup {
    fn attach(&self, pid: i32) -> io::Result<()> {
        self.ops().attach(pid)
    }
    fn cpu_usage_usec(&self) -> io::Result<u64> {
        self.ops().cpu_usage_usec()
    }
    fn memory_peak_bytes(&self) -> io::Result<u64> {
        self.ops().memory_peak_bytes()
    }
    fn oom_kills(&self) -> io::Result<u64> {
        self.ops().oom_kills()
    }
    fn kill_all(&self) -> io::Result<()> {
        self.ops().kill_all()
    }
    fn end_now(&self) -> io::Result<()> {
        self.ops().end_now()
    }
    fn populated(&self) -> io::Result<bool> {
        self.ops().populated()
    }
    fn destroy(&mut self) -> io::Result<()> {
        self.ops_mut().destroy()
    }
    fn dirs(&self) -> Vec<PathBuf> {
        self.ops().dirs()
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        let _ = self.destroy();
    }
}

fn wait_empty(g: &dyn CgroupOps) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while g.populated()? {
        if Instant::now() > deadline {
            return Err(io::Error::other("cgroup still populated after 5 s"));
        }
        g.kill_all()?;
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// A cgroup v2 group.
#[derive(Debug)]
pub struct V2Group {
    dir: PathBuf,
    removed: bool,
}

impl V2Group {
    fn apply(&self, l: &CgroupLimits) -> io::Result<()> {
        write_file(&self.dir.join("memory.max"), &l.memory_bytes.to_string())?;
        // No swap escape; absent when the kernel has no swap support (then there is none).
        match write_file(&self.dir.join("memory.swap.max"), "0") {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let _ = write_file(&self.dir.join("memory.oom.group"), "1");
        write_file(&self.dir.join("pids.max"), &l.pids_max.to_string())?;
        write_file(
            &self.dir.join("cpu.max"),
            &format!("{} {}", l.cpu_quota_us, l.cpu_period_us),
        )?;
        Ok(())
    }
}

impl CgroupOps for V2Group {
    fn attach(&self, pid: i32) -> io::Result<()> {
        write_file(&self.dir.join("cgroup.procs"), &pid.to_string())
    }
    fn cpu_usage_usec(&self) -> io::Result<u64> {
        keyed(&self.dir.join("cpu.stat"), "usage_usec")
    }
    fn memory_peak_bytes(&self) -> io::Result<u64> {
        read_u64(&self.dir.join("memory.peak"))
            .or_else(|_| read_u64(&self.dir.join("memory.current")))
    }
    fn oom_kills(&self) -> io::Result<u64> {
        keyed(&self.dir.join("memory.events"), "oom_kill")
    }
    fn kill_all(&self) -> io::Result<()> {
        write_file(&self.dir.join("cgroup.kill"), "1")
    }
    fn end_now(&self) -> io::Result<()> {
        self.kill_all()?;
        write_file(&self.dir.join("cpu.max"), "max")
    }
    fn populated(&self) -> io::Result<bool> {
        match keyed(&self.dir.join("cgroup.events"), "populated") {
            Ok(n) => Ok(n != 0),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
    fn destroy(&mut self) -> io::Result<()> {
        if self.removed {
            return Ok(());
        }
        if self.dir.exists() {
            if self.populated().unwrap_or(true) {
                let _ = self.kill_all();
            }
            wait_empty(self)?;
            rmdir_retry(&self.dir)?;
        }
        self.removed = true;
        Ok(())
    }
    fn dirs(&self) -> Vec<PathBuf> {
        vec![self.dir.clone()]
    }
}

/// A cgroup v1 group: one directory per controller.
#[derive(Debug)]
pub struct V1Group {
    dirs: Vec<(String, PathBuf)>,
    removed: bool,
}

impl V1Group {
    fn dir(&self, ctrl: &str) -> io::Result<&Path> {
        self.dirs
            .iter()
            .find(|(c, _)| c == ctrl)
            .map(|(_, d)| d.as_path())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("v1 controller {ctrl}")))
    }

    fn apply(&self, l: &CgroupLimits) -> io::Result<()> {
        let mem = self.dir("memory")?;
        write_file(
            &mem.join("memory.limit_in_bytes"),
            &l.memory_bytes.to_string(),
        )?;
        // memsw exists only with swap accounting; without it, the host must have no swap
        // (the probe checks and says so).
        let memsw = mem.join("memory.memsw.limit_in_bytes");
        if memsw.exists() {
            write_file(&memsw, &l.memory_bytes.to_string())?;
        }
        let _ = write_file(&mem.join("memory.swappiness"), "0");
        write_file(&self.dir("pids")?.join("pids.max"), &l.pids_max.to_string())?;
        let cpu = self.dir("cpu")?;
        write_file(&cpu.join("cpu.cfs_period_us"), &l.cpu_period_us.to_string())?;
        write_file(&cpu.join("cpu.cfs_quota_us"), &l.cpu_quota_us.to_string())?;
        Ok(())
    }

    fn procs(&self) -> io::Result<Vec<i32>> {
        let mut all = Vec::new();
        for (_, d) in &self.dirs {
            match fs::read_to_string(d.join("cgroup.procs")) {
                Ok(s) => all.extend(s.lines().filter_map(|l| l.trim().parse::<i32>().ok())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        all.sort_unstable();
        all.dedup();
        Ok(all)
    }
}

impl CgroupOps for V1Group {
    fn attach(&self, pid: i32) -> io::Result<()> {
        let pid = pid.to_string();
        for (_, d) in &self.dirs {
            write_file(&d.join("cgroup.procs"), &pid)?;
        }
        Ok(())
    }
    fn cpu_usage_usec(&self) -> io::Result<u64> {
        Ok(read_u64(&self.dir("cpuacct")?.join("cpuacct.usage"))? / 1000)
    }
    fn memory_peak_bytes(&self) -> io::Result<u64> {
        read_u64(&self.dir("memory")?.join("memory.max_usage_in_bytes"))
    }
    fn oom_kills(&self) -> io::Result<u64> {
        let mem = self.dir("memory")?;
        let kills = keyed(&mem.join("memory.oom_control"), "oom_kill")?;
        Ok(kills)
    }
    fn kill_all(&self) -> io::Result<()> {
        // Freeze so nothing forks between listing and killing, kill every task, thaw so the
        // SIGKILLs are delivered.
        let freezer = self.dir("freezer")?.join("freezer.state");
        write_file(&freezer, "FROZEN")?;
        let deadline = Instant::now() + Duration::from_millis(500);
        while fs::read_to_string(&freezer)?.trim() != "FROZEN" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        for pid in self.procs()? {
            // SAFETY: kill(2) only sends a signal; the pid was listed in our own group.
            #[allow(unsafe_code, reason = "kill(2) has no std wrapper")]
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        write_file(&freezer, "THAWED")
    }
    fn end_now(&self) -> io::Result<()> {
        // No freeze: tasks throttled at their quota may not reach the freezer in time. A task
        // forked after the listing dies with the PID namespace (init is killed next).
        for pid in self.procs()? {
            // SAFETY: kill(2) only sends a signal; the pid was listed in our own group.
            #[allow(unsafe_code, reason = "kill(2) has no std wrapper")]
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        write_file(&self.dir("cpu")?.join("cpu.cfs_quota_us"), "-1")
    }
    fn populated(&self) -> io::Result<bool> {
        Ok(!self.procs()?.is_empty())
    }
    fn destroy(&mut self) -> io::Result<()> {
        if self.removed {
            return Ok(());
        }
        if self.dirs.iter().any(|(_, d)| d.exists()) {
            if self.populated().unwrap_or(true) {
                let _ = self.kill_all();
            }
            wait_empty(self)?;
            // Remove every controller directory even if one fails; report the first error.
            let mut first = None;
            for (_, d) in &self.dirs {
                if let Err(e) = rmdir_retry(d) {
                    first.get_or_insert(e);
                }
            }
            if let Some(e) = first {
                return Err(e);
            }
        }
        self.removed = true;
        Ok(())
    }
    fn dirs(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|(_, d)| d.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    /// The descendants that move with corral into its leaf are exactly its own: a child and
    /// a grandchild are, corral itself, init and its own parent are not.
    #[test]
    fn only_corrals_own_descendants_are_moved_with_it() {
        let me = std::process::id();
        // `sh` starts a grandchild and prints its pid; both sleep until killed below.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        let seen = (
            super::descends_from(child.id(), me),
            super::descends_from(grandchild, me),
            super::descends_from(me, me),
            super::descends_from(1, me),
            super::descends_from(super::parent_pid(me).unwrap(), me),
        );
        // SAFETY: kill(2) only sends a signal; the grandchild's pid was printed by our own child.
        #[allow(unsafe_code, reason = "kill(2) of our own grandchild")]
        unsafe {
            libc::kill(i32::try_from(grandchild).unwrap(), libc::SIGKILL);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(seen, (true, true, false, false, false));
    }

    #[test]
    fn a_write_error_keeps_its_errno_through_the_message() {
        // /dev/full answers every write with ENOSPC: the wrapped error must still say so,
        // or a branch on the errno (EBUSY: move into a leaf) can never be taken.
        let e = super::write_file(std::path::Path::new("/dev/full"), "+cpu").unwrap_err();
        assert_eq!(crate::sys::errno(&e), Some(libc::ENOSPC));
        assert!(e.to_string().contains("/dev/full"), "{e}");
        // Control: a plain io::Error::new wrapper loses it.
        let plain = std::io::Error::new(e.kind(), e.to_string());
        assert_eq!(crate::sys::errno(&plain), None);
    }

    #[test]
    fn stale_owner_only_for_corral_names() {
        use super::stale_owner;
        assert_eq!(stale_owner("corral-123-4"), Some(123));
        assert_eq!(stale_owner("corral-probe-77-100"), Some(77));
        assert_eq!(stale_owner("corral-supervisor-9"), Some(9));
        for other in [
            "corral-t1",
            "corral-",
            "user.slice",
            "corral-x-1",
            "corralx-1-2",
            "corral-cgtest-a-1",
        ] {
            assert_eq!(stale_owner(other), None, "{other}");
        }
    }

    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("corral-cgtest-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_shared_or_undelegated_group_needs_a_scope_of_corrals_own() {
        let d = tmpdir("scope");
        let me = std::process::id();
        // The root cgroup (no cgroup.type) is exempt from "no internal processes".
        fs::write(d.join("cgroup.controllers"), "cpu memory pids").unwrap();
        fs::write(d.join("cgroup.procs"), format!("1\n{me}\n")).unwrap();
        assert!(!super::needs_own_scope(&d));
        fs::write(d.join("cgroup.type"), "domain").unwrap();
        // A login session's scope: the user's shell beside corral.
        assert!(super::needs_own_scope(&d));
        // corral alone, controllers delegated: it can make its own leaf.
        fs::write(d.join("cgroup.procs"), format!("{me}\n")).unwrap();
        assert!(!super::needs_own_scope(&d));
        // corral and a process it started (its reaper): still corral's own.
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        fs::write(d.join("cgroup.procs"), format!("{me}\n{}\n", child.id())).unwrap();
        let own = super::needs_own_scope(&d);
        let _ = child.kill();
        let _ = child.wait();
        assert!(!own);
        // Alone, but the controllers are not delegated.
        fs::write(d.join("cgroup.controllers"), "memory pids").unwrap();
        assert!(super::needs_own_scope(&d));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn corrals_own_leaf_is_not_where_its_groups_go() {
        let d = tmpdir("leaf");
        let me = std::process::id();
        fs::create_dir_all(d.join("sys/fs/cgroup/system.slice/x.service")).unwrap();
        fs::write(
            d.join("sys/fs/cgroup/cgroup.controllers"),
            "cpuset cpu io memory pids",
        )
        .unwrap();
        let h = Hierarchy::detect(
            &d,
            &format!("0::/system.slice/x.service/corral-supervisor-{me}\n"),
            V2_MOUNTINFO,
        )
        .unwrap();
        assert_eq!(
            h,
            Hierarchy::V2 {
                parent: d.join("sys/fs/cgroup/system.slice/x.service")
            }
        );
        // Another process's leaf is just a cgroup.
        let other = Hierarchy::detect(
            &d,
            "0::/system.slice/x.service/corral-supervisor-1\n",
            V2_MOUNTINFO,
        )
        .unwrap();
        assert_eq!(
            other,
            Hierarchy::V2 {
                parent: d.join("sys/fs/cgroup/system.slice/x.service/corral-supervisor-1")
            }
        );
        let _ = fs::remove_dir_all(&d);
    }

    const V2_MOUNTINFO: &str = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

    #[test]
    fn detects_v2_and_creates_beneath_own_group() {
        let root = tmpdir("v2");
        let mnt = root.join("sys/fs/cgroup");
        let own = mnt.join("user.slice/me");
        fs::create_dir_all(&own).unwrap();
        fs::write(
            mnt.join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        fs::write(own.join("cgroup.subtree_control"), "").unwrap();
        fs::write(own.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        let h = Hierarchy::detect(&root, "0::/user.slice/me\n", V2_MOUNTINFO).unwrap();
        assert_eq!(
            h,
            Hierarchy::V2 {
                parent: own.clone()
            }
        );
        assert_eq!(h.version(), CgroupVersion::V2);
        // A fake cgroupfs does not create interface files on mkdir; pre-create them through
        // a stand-in: create the group, then check the writes landed.
        let limits = CgroupLimits {
            memory_bytes: 1 << 20,
            pids_max: 7,
            cpu_quota_us: 50_000,
            cpu_period_us: 100_000,
        };
        let dir = own.join("corral-t1");
        // Writes need existing files (write_file does not create): emulate the kernel.
        let pre = |d: &Path| {
            fs::create_dir_all(d).unwrap();
            for f in [
                "memory.max",
                "memory.swap.max",
                "memory.oom.group",
                "pids.max",
                "cpu.max",
                "cgroup.procs",
                "cgroup.kill",
            ] {
                fs::write(d.join(f), "").unwrap();
            }
            fs::write(d.join("cgroup.events"), "populated 0\nfrozen 0\n").unwrap();
            fs::write(d.join("cpu.stat"), "usage_usec 1234\nuser_usec 1000\n").unwrap();
            fs::write(d.join("memory.peak"), "4096\n").unwrap();
            fs::write(
                d.join("memory.events"),
                "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n",
            )
            .unwrap();
        };
        pre(&dir);
        // create() insists on mkdir; remove the dir but keep the emulation by applying
        // limits to the pre-created tree directly.
        let g = V2Group {
            dir: dir.clone(),
            removed: false,
        };
        g.apply(&limits).unwrap();
        ensure_subtree_control(&own).unwrap();
        assert_eq!(
            fs::read_to_string(own.join("cgroup.subtree_control")).unwrap(),
            "+cpu +memory +pids"
        );
        assert_eq!(
            fs::read_to_string(dir.join("memory.max")).unwrap(),
            "1048576"
        );
        assert_eq!(
            fs::read_to_string(dir.join("memory.swap.max")).unwrap(),
            "0"
        );
        assert_eq!(fs::read_to_string(dir.join("pids.max")).unwrap(), "7");
        assert_eq!(
            fs::read_to_string(dir.join("cpu.max")).unwrap(),
            "50000 100000"
        );
        g.attach(42).unwrap();
        assert_eq!(fs::read_to_string(dir.join("cgroup.procs")).unwrap(), "42");
        assert_eq!(g.cpu_usage_usec().unwrap(), 1234);
        assert_eq!(g.memory_peak_bytes().unwrap(), 4096);
        assert_eq!(g.oom_kills().unwrap(), 2);
        assert!(!g.populated().unwrap());
        g.kill_all().unwrap();
        assert_eq!(fs::read_to_string(dir.join("cgroup.kill")).unwrap(), "1");
        fs::write(dir.join("cgroup.kill"), "").unwrap();
        fs::write(dir.join("cpu.max"), "").unwrap();
        g.end_now().unwrap();
        assert_eq!(fs::read_to_string(dir.join("cgroup.kill")).unwrap(), "1");
        assert_eq!(fs::read_to_string(dir.join("cpu.max")).unwrap(), "max");
        assert_eq!(g.dirs(), vec![dir.clone()]);
        // create() on a fresh name: mkdir works, but the fake tree has no interface files,
        // so applying limits fails; the guard must still remove the directory.
        let err = h.create("t2", &limits).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound, "{err}");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn controllers_not_delegated_to_corrals_group_are_named_with_the_fix() {
        let root = tmpdir("v2undeleg");
        let own = root.join("system.slice/corral.service");
        fs::create_dir_all(&own).unwrap();
        fs::write(own.join("cgroup.controllers"), "pids\n").unwrap();
        fs::write(own.join("cgroup.subtree_control"), "").unwrap();
        let err = super::enable_controllers(&own).unwrap_err().to_string();
        assert!(err.contains("cpu, memory not delegated"), "{err}");
        assert!(err.contains("corral.service"), "{err}");
        assert!(err.contains("Delegate=yes"), "{err}");
        // Control: with them delegated the write goes through.
        fs::write(own.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        super::enable_controllers(&own).unwrap();
        assert_eq!(
            fs::read_to_string(own.join("cgroup.subtree_control")).unwrap(),
            "+cpu +memory +pids"
        );
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn v2_without_controllers_is_refused_and_says_why() {
        let root = tmpdir("v2none");
        let mnt = root.join("sys/fs/cgroup");
        fs::create_dir_all(&mnt).unwrap();
        fs::write(mnt.join("cgroup.controllers"), "cpuset io\n").unwrap();
        let err = Hierarchy::detect(&root, "0::/\n", V2_MOUNTINFO).unwrap_err();
        assert!(err.contains("lacks controllers"), "{err}");
        assert!(err.contains("memory"), "{err}");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn detects_v1_hybrid_per_controller() {
        let mi = "\
35 25 0:30 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
36 25 0:31 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct
37 25 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
38 25 0:33 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer
39 25 0:34 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
40 25 0:35 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
";
        let cg = "8:pids:/\n6:freezer:/\n4:memory:/a/b\n2:cpuacct:/\n1:cpu:/\n0::/\n";
        let root = tmpdir("v1");
        fs::create_dir_all(root.join("sys/fs/cgroup/unified")).unwrap();
        fs::write(root.join("sys/fs/cgroup/unified/cgroup.controllers"), "").unwrap();
        let h = Hierarchy::detect(&root, cg, mi).unwrap();
        let Hierarchy::V1 { parents } = &h else {
            panic!("{h:?}")
        };
        let mem = parents.iter().find(|(c, _)| c == "memory").unwrap();
        assert_eq!(mem.1, root.join("sys/fs/cgroup/memory/a/b"));
        let pids = parents.iter().find(|(c, _)| c == "pids").unwrap();
        assert_eq!(pids.1, root.join("sys/fs/cgroup/pids"));
        assert!(h.describe().starts_with("cgroup v1"));
        fs::remove_dir_all(&root).unwrap();
    }
}
