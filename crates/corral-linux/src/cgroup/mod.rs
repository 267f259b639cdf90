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

mod delegation;
mod v1;
mod v2;

use delegation::*;
pub(crate) use delegation::{SYSTEMD_SCOPE, missing_controllers, self_needs_own_scope};
pub use v1::V1Group;
pub use v2::V2Group;

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
