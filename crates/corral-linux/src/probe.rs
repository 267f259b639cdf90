//! The host probe: every capability is tested for real on this host, and the evidence says
//! what was observed. Nothing is attested from a flag. [`Observations`] are plain data and
//! [`capabilities_from`] is a pure function, so tests inject a report with any one kernel
//! feature missing and check the run is refused before start.

use std::fs;
use std::io;
use std::num::NonZeroU64;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;

use corral_contract::manifest::Termination;
use corral_contract::{
    Capability, CapabilityEvidence, ExecSpec, Limits, NetworkMode, SandboxCapabilities,
};

use crate::cgroup::{CgroupLimits, CgroupOps as _, CgroupVersion, Hierarchy};
use crate::config::LinuxConfig;
use crate::prepare::RunInput;
use crate::{LinuxSandboxExecutor, seccomp, sys};
use crate::{layers, supervise};

/// One observed host feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// Whether the feature works on this host.
    pub ok: bool,
    /// What was observed, in words (it goes into the capabilities' evidence).
    pub detail: String,
}

impl Observation {
    /// A feature that works, with what was observed.
    #[must_use]
    pub fn ok(detail: impl Into<String>) -> Self {
        Self {
            ok: true,
            detail: detail.into(),
        }
    }
    /// A feature that is missing or broken, with what was observed.
    #[must_use]
    pub fn missing(detail: impl Into<String>) -> Self {
        Self {
            ok: false,
            detail: detail.into(),
        }
    }
}

/// What the probe saw, feature by feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observations {
    /// Effective uid 0 (this backend is rootful).
    pub root: Observation,
    /// A usable cgroup hierarchy and a test group created beneath ours.
    pub cgroup: Observation,
    /// A memory limit written to the test group reads back.
    pub cgroup_memory: Observation,
    /// No swap escape: swap limit set to 0, or no swap on the host.
    pub cgroup_swap: Observation,
    /// A task limit written to the test group reads back.
    pub cgroup_pids: Observation,
    /// CPU bandwidth cap and CPU usage accounting.
    pub cgroup_cpu: Observation,
    /// Killing a whole group (v2 `cgroup.kill`, v1 freezer).
    pub cgroup_kill: Observation,
    /// A size-capped tmpfs refuses writes past its size with ENOSPC.
    pub tmpfs_limit: Observation,
    /// Overlay with fd-given layers over an idmapped read-only lower layer.
    pub overlay_idmap: Observation,
    /// The worker's seccomp filter installed in a throwaway child and denying.
    pub seccomp: Observation,
    /// Landlock ABI (0 = unavailable); recorded, used when available.
    pub landlock_abi: u32,
    /// A full sandbox run of `true`: PID/mount/net/IPC/UTS/cgroup namespaces, loopback,
    /// pivot_root, fresh /proc, credential drop, Landlock and seccomp all applied.
    pub sandbox_run: Observation,
    /// Allowlist mode: a sandbox run whose egress listener was created by the supervisor in
    /// the sandbox's network namespace (lo only) and reached from inside it. Without it,
    /// allowlist policies are refused (mode none does not depend on it).
    pub egress_wiring: Observation,
}

impl Observations {
    /// Everything missing with the same reason (a starting point for tests).
    #[must_use]
    pub fn none(reason: &str) -> Self {
        let m = || Observation::missing(reason);
        Self {
            root: m(),
            cgroup: m(),
            cgroup_memory: m(),
            cgroup_swap: m(),
            cgroup_pids: m(),
            cgroup_cpu: m(),
            cgroup_kill: m(),
            tmpfs_limit: m(),
            overlay_idmap: m(),
            seccomp: m(),
            landlock_abi: 0,
            sandbox_run: m(),
            egress_wiring: m(),
        }
    }
}

/// What an observation that was never made says (the probe stopped before it).
const NOT_PROBED: &str = "not probed";

fn combine(parts: &[(&str, &Observation)], extra: &str) -> CapabilityEvidence {
    let enforced = parts.iter().all(|(_, o)| o.ok);
    if !enforced {
        // Only what is missing, and never a description of enforcement that did not run;
        // observations never made are left out when another part says why.
        let missing = parts.iter().filter(|(_, o)| !o.ok);
        let made: Vec<_> = missing
            .clone()
            .filter(|(_, o)| !o.detail.starts_with(NOT_PROBED))
            .collect();
        let shown = if made.is_empty() {
            missing.collect()
        } else {
            made
        };
        let text: Vec<String> = shown
            .iter()
            .map(|(name, o)| format!("{name}: MISSING {}", o.detail))
            .collect();
        return CapabilityEvidence {
            enforced,
            evidence: text.join("; "),
        };
    }
    let mut text: Vec<String> = parts
        .iter()
        .map(|(name, o)| format!("{name}: {}", o.detail))
        .collect();
    if !extra.is_empty() {
        text.push(extra.to_owned());
    }
    CapabilityEvidence {
        enforced,
        evidence: text.join("; "),
    }
}

/// The nine capabilities from the observations (pure).
#[must_use]
pub fn capabilities_from(o: &Observations) -> SandboxCapabilities {
    let run = ("sandbox run", &o.sandbox_run);
    let root = ("root", &o.root);
    let landlock = if o.landlock_abi > 0 {
        format!(
            "Landlock ABI {} applied as a second layer{}",
            o.landlock_abi,
            if o.landlock_abi >= 6 {
                " with abstract-unix-socket and signal scoping"
            } else {
                ""
            }
        )
    } else {
        "Landlock unavailable: mounts only".to_owned()
    };
    let allowlist = if o.egress_wiring.ok {
        format!(
            "mode allowlist: the same namespace, plus the caller's egress proxy served on a listener the supervisor creates inside it ({}); HTTP(S)_PROXY/ALL_PROXY point at it; a run without an egress gateway is refused",
            o.egress_wiring.detail
        )
    } else {
        format!(
            "mode allowlist: MISSING ({}): allowlist policies are refused (fail closed)",
            o.egress_wiring.detail
        )
    };
    SandboxCapabilities {
        network_enforcement: combine(
            &[root, run],
            &format!(
                "mode none: own network namespace with only its loopback up (no route, no DNS, host abstract sockets unreachable); {allowlist}"
            ),
        ),
        process_tree_isolation: combine(
            &[
                root,
                run,
                ("cgroup", &o.cgroup),
                ("group kill", &o.cgroup_kill),
            ],
            "own PID namespace; init has PR_SET_PDEATHSIG; the cgroup and init are killed after every run",
        ),
        cpu_limit: combine(
            &[root, ("cgroup", &o.cgroup), ("cpu", &o.cgroup_cpu), run],
            "RLIMIT_CPU as a second layer",
        ),
        memory_limit: combine(
            &[
                root,
                ("cgroup", &o.cgroup),
                ("memory", &o.cgroup_memory),
                ("swap", &o.cgroup_swap),
                run,
            ],
            "tmpfs, /dev/shm and memfd pages are charged to the run's memory cgroup",
        ),
        disk_limit: combine(
            &[
                root,
                ("tmpfs", &o.tmpfs_limit),
                ("overlay", &o.overlay_idmap),
                run,
            ],
            "one size-capped tmpfs per attempt holds the workspace upper layer, /tmp, HOME and /dev/shm",
        ),
        process_limit: combine(
            &[root, ("cgroup", &o.cgroup), ("pids", &o.cgroup_pids), run],
            "",
        ),
        filesystem_isolation: combine(&[root, run, ("seccomp", &o.seccomp)], &landlock),
        writable_path_enforcement: combine(
            &[root, ("overlay", &o.overlay_idmap), run],
            &format!(
                "read-only overlay top with writable binds of the policy's literal prefixes; .git read-only; {landlock}"
            ),
        ),
        credential_isolation: combine(
            &[root, ("seccomp", &o.seccomp), run],
            if crate::rootless::active().is_some_and(|r| r.subids.is_some()) {
                "explicit environment only; rootless: the worker is an id of its own from the user's subordinate ids, shared with no other host user, supplementary groups dropped; all capability sets empty, securebits locked; no_new_privs; non-dumpable init"
            } else if crate::rootless::active().is_some() {
                // ADR-0080: one id is mapped, so the worker is the user (with the user's
                // supplementary groups, which a denied setgroups cannot drop); the view
                // corral builds is what keeps the user's files out of reach.
                "explicit environment only; rootless: the worker is the invoking user's one mapped id (0 in corral's user namespace) with its supplementary groups, so only the sandbox's view keeps the user's files out of reach; all capability sets empty, securebits locked; no_new_privs; non-dumpable init"
            } else {
                "explicit environment only; a uid/gid of the supervisor's own (2000000000 + its pid), shared with no host user; all capability sets empty; no_new_privs; non-dumpable init"
            },
        ),
    }
}

/// The probe's result: observations, the capabilities derived from them, and what the
/// executor needs to run (the cgroup hierarchy, the Landlock ABI).
#[derive(Debug, Clone)]
pub struct ProbeReport {
    /// What the probe saw.
    pub observations: Observations,
    /// The SandboxCapabilities derived from the observations, with their evidence.
    pub capabilities: SandboxCapabilities,
    /// The usable cgroup hierarchy, when one was found.
    pub hierarchy: Option<Hierarchy>,
    /// The Landlock ABI (0 = unavailable).
    pub landlock_abi: u32,
}

impl ProbeReport {
    /// A report from observations (derives the capabilities with [`capabilities_from`]).
    #[must_use]
    pub fn from_observations(observations: Observations, hierarchy: Option<Hierarchy>) -> Self {
        let capabilities = capabilities_from(&observations);
        let landlock_abi = observations.landlock_abi;
        Self {
            observations,
            capabilities,
            hierarchy,
            landlock_abi,
        }
    }

    /// The same report with one capability withdrawn (tests).
    #[must_use]
    pub fn without(mut self, cap: Capability, reason: &str) -> Self {
        *self.capabilities.get_mut(cap) = CapabilityEvidence::missing(reason);
        self
    }
}

fn probe_cgroup(o: &mut Observations) -> Option<Hierarchy> {
    let h = match Hierarchy::detect_host() {
        Ok(h) => h,
        Err(e) => {
            o.cgroup = Observation::missing(format!("no usable cgroup hierarchy: {e}"));
            return None;
        }
    };
    let limits = CgroupLimits {
        memory_bytes: 64 << 20,
        pids_max: 16,
        cpu_quota_us: 50_000,
        cpu_period_us: 100_000,
    };
    let name = format!("probe-{}-{}", std::process::id(), next_probe_id());
    let mut g = match h.create(&name, &limits) {
        Ok(g) => g,
        Err(e) => {
            o.cgroup = Observation::missing(format!(
                "{}: creating corral-{name} with limits failed: {e}",
                h.describe()
            ));
            return None;
        }
    };
    o.cgroup = Observation::ok(format!(
        "{}: created corral-{name} and wrote memory, pids and cpu limits",
        h.describe()
    ));
    let dirs = g.dirs();
    let find = |file: &str| dirs.iter().map(|d| d.join(file)).find(|p| p.exists());
    let read = |file: &str| {
        find(file)
            .and_then(|p| fs::read_to_string(p).ok())
            .unwrap_or_default()
    };
    let swap_total = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("SwapTotal:"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_owned())
        })
        .unwrap_or_else(|| "?".into());
    match h.version() {
        CgroupVersion::V2 => {
            let mem = read("memory.max");
            o.cgroup_memory = if mem.trim() == limits.memory_bytes.to_string() {
                Observation::ok(format!("memory.max reads back {}", mem.trim()))
            } else {
                Observation::missing(format!("memory.max reads {mem:?}"))
            };
            let swap = read("memory.swap.max");
            o.cgroup_swap = if swap.trim() == "0" {
                Observation::ok("memory.swap.max = 0")
            } else if swap_total == "0" {
                Observation::ok(format!(
                    "no memory.swap.max; host SwapTotal {swap_total} kB (no swap)"
                ))
            } else {
                Observation::missing(format!(
                    "swap not limited (memory.swap.max {swap:?}, SwapTotal {swap_total} kB)"
                ))
            };
            o.cgroup_pids = check_eq(&read("pids.max"), "16", "pids.max");
            let cpu = read("cpu.max");
            o.cgroup_cpu = if cpu.trim() == "50000 100000" && find("cpu.stat").is_some() {
                Observation::ok("cpu.max reads back 50000 100000; cpu.stat usage_usec readable")
            } else {
                Observation::missing(format!("cpu.max reads {cpu:?}"))
            };
            o.cgroup_kill = if find("cgroup.kill").is_some() {
                Observation::ok("cgroup.kill present")
            } else {
                Observation::missing("no cgroup.kill (kernel < 5.14)")
            };
        }
        CgroupVersion::V1 => {
            let mem = read("memory.limit_in_bytes");
            o.cgroup_memory = check_eq(
                &mem,
                &limits.memory_bytes.to_string(),
                "memory.limit_in_bytes",
            );
            let memsw = find("memory.memsw.limit_in_bytes");
            o.cgroup_swap = if memsw.is_some() {
                Observation::ok("memory.memsw.limit_in_bytes set equal to the memory limit")
            } else if swap_total == "0" {
                Observation::ok(format!(
                    "no swap accounting (memsw absent) but host SwapTotal {swap_total} kB: no swap to escape to"
                ))
            } else {
                Observation::missing(format!(
                    "memsw absent and host has swap (SwapTotal {swap_total} kB)"
                ))
            };
            o.cgroup_pids = check_eq(&read("pids.max"), "16", "pids.max");
            let quota = read("cpu.cfs_quota_us");
            o.cgroup_cpu = if quota.trim() == "50000" && find("cpuacct.usage").is_some() {
                Observation::ok("cpu.cfs_quota_us reads back 50000; cpuacct.usage readable")
            } else {
                Observation::missing(format!("cpu.cfs_quota_us reads {quota:?}"))
            };
            o.cgroup_kill = if find("freezer.state").is_some() {
                Observation::ok("v1 freezer present (freeze, SIGKILL every task, thaw)")
            } else {
                Observation::missing("no v1 freezer")
            };
        }
    }
    if let Err(e) = g.destroy() {
        o.cgroup = Observation::missing(format!("removing the probe group failed: {e}"));
    }
    Some(h)
}

fn check_eq(value: &str, want: &str, file: &str) -> Observation {
    if value.trim() == want {
        Observation::ok(format!("{file} reads back {want}"))
    } else {
        Observation::missing(format!("{file} reads {value:?}, wanted {want}"))
    }
}

fn probe_tmpfs() -> Observation {
    let r = (|| -> io::Result<String> {
        let fs_fd = sys::fsopen("tmpfs")?;
        sys::fsconfig_string(fs_fd.as_fd(), "size", "65536")?;
        sys::fsconfig_string(fs_fd.as_fd(), "nr_inodes", "16")?;
        sys::fsconfig_create(fs_fd.as_fd())?;
        let m = sys::fsmount(
            fs_fd.as_fd(),
            sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
        )?;
        let path = layers::fd_path(&m).join("fill");
        let mut f = fs::File::create(&path)?;
        let chunk = [0u8; 4096];
        for i in 0..64 {
            if let Err(e) = io::Write::write_all(&mut f, &chunk) {
                if e.raw_os_error() == Some(libc::ENOSPC) {
                    return Ok(format!(
                        "detached tmpfs size=64KiB refused write {} with ENOSPC",
                        i + 1
                    ));
                }
                return Err(e);
            }
        }
        Err(io::Error::other("256 KiB written to a 64 KiB tmpfs"))
    })();
    match r {
        Ok(s) => Observation::ok(s),
        Err(e) => Observation::missing(format!("size-capped tmpfs: {e}")),
    }
}

fn probe_overlay(config: &LinuxConfig) -> Observation {
    let r = (|| -> io::Result<String> {
        let make = || -> io::Result<_> {
            let fs_fd = sys::fsopen("tmpfs")?;
            sys::fsconfig_string(fs_fd.as_fd(), "size", "1048576")?;
            sys::fsconfig_create(fs_fd.as_fd())?;
            sys::fsmount(
                fs_fd.as_fd(),
                sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV,
            )
        };
        // The lower on the file system the base checkouts live on (see `probe_dir`), as in a
        // run: a directory of corral's own, cloned and idmapped.
        let dir = config
            .probe_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join(format!(
                "corral-probe-lower-{}-{}",
                std::process::id(),
                next_probe_id()
            ));
        fs::create_dir_all(&dir)?;
        struct Remove<'a>(&'a std::path::Path);
        impl Drop for Remove<'_> {
            fn drop(&mut self) {
                let _ = fs::remove_dir_all(self.0);
            }
        }
        let _remove = Remove(&dir);
        fs::write(dir.join("base"), b"x")?;
        own_for_worker(config, &dir)?;
        own_for_worker(config, &dir.join("base"))?;
        let lower = sys::open_tree_clone(&dir.to_string_lossy(), false)?;
        // Idmapped to the worker as in a run (root mode); in rootless mode an idmapped mount
        // of a host file system is not the user's to make, so the worker owns the lower, as
        // it owns a run's base checkout.
        let worker = (config.worker_uid, config.worker_gid);
        let idmapped = crate::rootless::active().is_none();
        let mut attr = sys::MountAttr {
            attr_set: sys::MOUNT_ATTR_RDONLY,
            ..sys::MountAttr::default()
        };
        let userns;
        if idmapped {
            userns = layers::create_idmap_userns((0, 0), worker)?;
            attr.attr_set |= sys::MOUNT_ATTR_IDMAP;
            attr.userns_fd = userns.as_raw_fd() as u64;
        }
        sys::mount_setattr(lower.as_fd(), false, &attr).map_err(|e| {
            if sys::errno(&e) == Some(libc::EINVAL) {
                io::Error::other(crate::config::no_idmap_message(&dir))
            } else {
                e
            }
        })?;
        let uid = std::os::unix::fs::MetadataExt::uid(&fs::metadata(
            layers::fd_path(&lower).join("base"),
        )?);
        if uid != config.worker_uid {
            return Err(io::Error::other(format!("idmapped file shows uid {uid}")));
        }
        let disk = make()?;
        let base = layers::fd_path(&disk);
        fs::create_dir(base.join("u"))?;
        fs::create_dir(base.join("w"))?;
        let u = std::os::fd::OwnedFd::from(fs::File::open(base.join("u"))?);
        let w = std::os::fd::OwnedFd::from(fs::File::open(base.join("w"))?);
        let how = match layers::mount_overlay_by_fd(&lower, &u, &w)? {
            Some(m) => {
                fs::write(layers::fd_path(&m).join("new"), b"y")?;
                layers::OVERLAY_BY_FD
            }
            None => {
                // What init does on such a kernel, in a thread's own mount namespace: the
                // disk and the lower attached there, overlay mounted by path.
                fs::create_dir(base.join(".lower"))?;
                fs::create_dir(base.join("m"))?;
                std::thread::scope(|s| {
                    s.spawn(|| -> io::Result<()> {
                        sys::unshare(libc::CLONE_NEWNS)?;
                        sys::make_mounts_private()?;
                        sys::move_mount_to(disk.as_fd(), "/tmp")?;
                        sys::move_mount_to(lower.as_fd(), "/tmp/.lower")?;
                        sys::mount_fs(
                            "overlay",
                            "/tmp/m",
                            "overlay",
                            libc::MS_NOSUID | libc::MS_NODEV,
                            &layers::overlay_data("/tmp/.lower", "/tmp/u", "/tmp/w"),
                        )?;
                        fs::write("/tmp/m/new", b"y")
                    })
                    .join()
                    .map_err(|_| io::Error::other("the overlay probe thread panicked"))?
                })?;
                layers::OVERLAY_BY_PATH
            }
        };
        if !base.join("u/new").exists() {
            return Err(io::Error::other("write did not land in the upper layer"));
        }
        Ok(format!(
            "overlay ({how}, {}) over {} read-only lower in {}, upper on a detached tmpfs: write landed in the upper layer",
            layers::overlay_options(),
            if idmapped {
                format!("an idmapped (uid 0 -> {})", config.worker_uid)
            } else {
                format!(
                    "a (rootless: not idmapped, owned by the worker's uid {})",
                    config.worker_uid
                )
            },
            dir.parent()
                .map_or_else(String::new, |p| p.display().to_string()),
        ))
    })();
    match r {
        Ok(s) => Observation::ok(s),
        Err(e) => Observation::missing(format!("overlay/idmapped mount: {e}")),
    }
}

/// In rootless mode, gives a file the probe made to the worker: the lower cannot be
/// idmapped there, so the worker must own it, as it owns a run's base checkout (ADR-0080).
fn own_for_worker(config: &LinuxConfig, path: &std::path::Path) -> io::Result<()> {
    if crate::rootless::active().is_some() {
        sys::lchown(path, config.worker_uid, config.worker_gid)?;
    }
    Ok(())
}

fn probe_seccomp() -> Observation {
    let filter = match seccomp::worker_filter() {
        Ok(f) => f,
        Err(e) => return Observation::missing(e.to_string()),
    };
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut().cast(),
    };
    // SAFETY: fork-like clone; the child makes only raw system calls on data built before
    // the clone and exits with a bit mask of the checks that passed.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::SIGCHLD as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid < 0 {
        return Observation::missing(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: raw system calls in the child; `prog` points at `filter`, alive in this
        // copy of the address space.
        unsafe {
            let errno = || *libc::__errno_location();
            let mut bits = 0;
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0u32,
                    std::ptr::from_ref(&prog),
                ) != 0
            {
                libc::_exit(100);
            }
            if libc::syscall(libc::SYS_unshare, 0x1000_0000u64 | (1u64 << 40)) == -1
                && errno() == libc::EPERM
            {
                bits |= 1;
            }
            if libc::syscall(libc::SYS_clone3, 0usize, 0usize) == -1 && errno() == libc::ENOSYS {
                bits |= 2;
            }
            if libc::syscall(libc::SYS_socket, 40u64 | (1u64 << 32), 1, 0) == -1
                && errno() == libc::EPERM
            {
                bits |= 4;
            }
            if libc::syscall(libc::SYS_keyctl, 0, -4i64, 0) == -1 && errno() == libc::EPERM {
                bits |= 8;
            }
            libc::_exit(bits);
        }
    }
    let status = sys::waitpid(pid as libc::pid_t).unwrap_or(-1);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    if code == 15 {
        Observation::ok(format!(
            "filter of {} instructions (x86_64 + aarch64, other arches killed, x32 denied) installed in a throwaway child: unshare(CLONE_NEWUSER|1<<40) EPERM, clone3 ENOSYS, socket(AF_VSOCK|1<<32) EPERM, keyctl EPERM",
            filter.len()
        ))
    } else {
        Observation::missing(format!(
            "seccomp check child exited {code} (bits of passed checks; 100 = install failed)"
        ))
    }
}

fn find_true() -> Option<&'static str> {
    ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .find(|p| fs::metadata(p).is_ok())
}

fn probe_run(
    config: &LinuxConfig,
    partial: &Observations,
    hierarchy: Option<&Hierarchy>,
) -> Observation {
    match probe_sandbox(config, partial, hierarchy, None) {
        Ok((truth, ms)) => Observation::ok(format!(
            "ran {truth} as uid {} in new pid/mount/net/ipc/uts/cgroup namespaces (loopback up, pivot_root onto the attempt tmpfs, fresh /proc, {}, capabilities dropped, no_new_privs, {}seccomp): exit 0 in {ms} ms",
            config.worker_uid,
            if crate::rootless::active().is_some() {
                "overlay workspace owned by the worker (rootless: not idmapped)"
            } else {
                "idmapped overlay workspace"
            },
            if partial.landlock_abi > 0 {
                format!("Landlock ABI {}, ", partial.landlock_abi)
            } else {
                String::new()
            },
        )),
        Err(e) => Observation::missing(e),
    }
}

/// A sandbox run of `true` in allowlist mode with the probe's gateway, which checks the
/// listener it is handed (see [`crate::egress::verify_listener`]).
fn probe_egress(
    config: &LinuxConfig,
    partial: &Observations,
    hierarchy: Option<&Hierarchy>,
) -> Observation {
    if !partial.sandbox_run.ok {
        return Observation::missing("not attempted: the sandbox run failed");
    }
    let gateway = crate::egress::ProbeGateway::default();
    match probe_sandbox(config, partial, hierarchy, Some(&gateway)) {
        Ok((_, ms)) => match gateway.result.lock().ok().and_then(|mut r| r.take()) {
            Some(Ok(detail)) => Observation::ok(format!("{detail}; run in {ms} ms")),
            Some(Err(e)) => Observation::missing(format!("egress wiring check failed: {e}")),
            None => Observation::missing("the gateway was never called"),
        },
        Err(e) => Observation::missing(e),
    }
}

/// Runs `true` once; `egress` selects allowlist mode. Returns the program and milliseconds.
fn probe_sandbox(
    config: &LinuxConfig,
    partial: &Observations,
    hierarchy: Option<&Hierarchy>,
    egress: Option<&dyn corral_sandbox::EgressGateway>,
) -> Result<(&'static str, u128), String> {
    let Some(h) = hierarchy else {
        return Err("not attempted: no cgroup hierarchy".into());
    };
    let Some(truth) = find_true() else {
        return Err("no /usr/bin/true to run".into());
    };
    // Unique per probe: several executors may probe at once in one process.
    let dir = config
        .probe_dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!(
            "corral-probe-ws-{}-{}",
            std::process::id(),
            next_probe_id()
        ));
    if let Err(e) = fs::create_dir_all(&dir).and_then(|()| own_for_worker(config, &dir)) {
        return Err(format!("temporary workspace: {e}"));
    }
    let report = ProbeReport::from_observations(partial.clone(), Some(h.clone()));
    let exe = LinuxSandboxExecutor::with_probe(config.clone(), report);
    let spec = ExecSpec {
        executable: truth.into(),
        args: vec![],
        env: Default::default(),
        stdin: None,
        read_only_paths: vec![],
        executable_sha256: None,
        home_files: Default::default(),
    };
    let one = NonZeroU64::MIN;
    // Bounds on a hang, not paces: a probe run that ends is attested however slowly it ran
    // (16 corral runs probing at once in an emulated guest beside two others took over the
    // 10 s this once was, and the host was refused for it: TRUST-06 in rootless mode,
    // 2026-12-07).
    let limits = Limits {
        wall_seconds: NonZeroU64::new(120).unwrap_or(one),
        cpu_seconds: NonZeroU64::new(60).unwrap_or(one),
        memory_bytes: NonZeroU64::new(64 << 20).unwrap_or(one),
        disk_bytes: NonZeroU64::new(8 << 20).unwrap_or(one),
        max_processes: NonZeroU64::new(8).unwrap_or(one),
        max_output_bytes: NonZeroU64::new(4096).unwrap_or(one),
        max_patch_bytes: one,
        cpu_millicores: None,
    };
    let input = RunInput {
        exec: &spec,
        network_mode: if egress.is_some() {
            NetworkMode::Allowlist
        } else {
            NetworkMode::None
        },
        allowlist: &[],
        egress,
        model: None,
        writable: &[],
        forbidden: &[],
        limits,
        workspace: &dir,
        capabilities: SandboxCapabilities::none("probe"),
        executable: None,
    };
    let cancel = match corral_sandbox::CancelToken::new() {
        Ok(c) => c,
        Err(e) => return Err(format!("cancel token: {e}")),
    };
    let t = Instant::now();
    let r = supervise::run(&exe, &input, &cancel);
    let _ = fs::remove_dir(&dir);
    match r {
        Ok(o) if o.termination == Termination::Exited && o.exit_code == Some(0) => {
            Ok((truth, t.elapsed().as_millis()))
        }
        Ok(o) => Err(format!(
            "probe run of {truth} ended {:?} exit {:?} signal {:?}",
            o.termination, o.exit_code, o.signal
        )),
        Err(e) => Err(format!("probe run of {truth} failed: {e}")),
    }
}

/// Probes this host for real (takes a few milliseconds; run once per executor).
#[must_use]
pub fn probe(config: &LinuxConfig) -> ProbeReport {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let rootless = crate::rootless::active();
    if euid != 0 {
        let mut o = Observations::none(&format!("{NOT_PROBED} (needs root or rootless mode)"));
        // What the host lacks for rootless mode, so the user learns how to fix it (ADR-0080).
        let why = crate::rootless::refusal().map_or_else(
            || crate::rootless::summary(&crate::rootless::preflight()),
            str::to_owned,
        );
        o.root = Observation::missing(format!(
            "effective uid {euid}, not 0, and rootless mode cannot start: {why}; or run corral \
             as root, for example with sudo"
        ));
        return ProbeReport::from_observations(o, None);
    }
    if let Some(why) = crate::rootless::foreign_user_namespace() {
        let mut o = Observations::none(&format!("{NOT_PROBED} (needs the host's root)"));
        o.root = Observation::missing(why);
        return ProbeReport::from_observations(o, None);
    }
    let mut o = Observations::none(NOT_PROBED);
    o.root = match rootless {
        Some(r) => Observation::ok(format!(
            "rootless: uid {} gid {} mapped to 0 in corral's own user namespace{}; {}",
            r.host_uid,
            r.host_gid,
            r.subids.map_or_else(String::new, |s| format!(
                ", with subordinate uids {}..{} after it (the worker is uid {} there, {} on the host)",
                s.uids.0,
                s.uids.0 + s.uids.1,
                crate::rootless::SUBID_WORKER,
                s.worker_host_uid()
            )),
            crate::rootless::counters_evidence().unwrap_or("per-user counters not capped")
        )),
        None => Observation::ok("effective uid 0"),
    };
    let hierarchy = probe_cgroup(&mut o);
    o.tmpfs_limit = probe_tmpfs();
    o.overlay_idmap = probe_overlay(config);
    o.seccomp = probe_seccomp();
    o.landlock_abi = sys::landlock_abi();
    o.sandbox_run = probe_run(config, &o, hierarchy.as_ref());
    o.egress_wiring = probe_egress(config, &o, hierarchy.as_ref());
    ProbeReport::from_observations(o, hierarchy)
}

/// A number unique within this process, for the names of probe groups and workspaces.
/// Whether `name` is a temporary folder of a probe by the corral process `pid`
/// (`corral-probe-lower-<pid>-<n>`, `corral-probe-ws-<pid>-<n>`, in `probe_dir`): what its
/// reaper removes once `pid` has exited.
#[must_use]
pub fn is_temporary_of(name: &str, pid: u32) -> bool {
    ["corral-probe-lower-", "corral-probe-ws-"]
        .iter()
        .filter_map(|p| name.strip_prefix(p))
        .any(|rest| {
            rest.split_once('-').is_some_and(|(p, n)| {
                p == pid.to_string() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
            })
        })
}

fn next_probe_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
