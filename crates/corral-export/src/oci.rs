//! `corral export oci`: an OCI runtime bundle `config.json` expressing the admitted policy
//! as far as the runtime spec can, with the rest carried as `dev.corral.*` annotations.
//!
//! This is weaker than `corral run` (ADR-0050): no Landlock, no egress proxy (allowlist mode
//! becomes no network at all), no capture or scope check by corral, no wall-clock limit, one
//! size cap per tmpfs instead of one for everything writable, and the workspace is a plain
//! bind mount of a host directory whose writes are not bounded by `disk_bytes`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use corral_admission::AdmittedRun;
use corral_contract::{NetworkMode, canonical_json};
use oci_spec::runtime::{
    Arch, LinuxBuilder, LinuxCapabilities, LinuxCapabilitiesBuilder, LinuxCpuBuilder,
    LinuxDeviceCgroupBuilder, LinuxDeviceType, LinuxMemoryBuilder, LinuxNamespaceBuilder,
    LinuxNamespaceType, LinuxPidsBuilder, LinuxResourcesBuilder, LinuxSeccomp, LinuxSeccompAction,
    LinuxSeccompArgBuilder, LinuxSeccompBuilder, LinuxSeccompOperator, LinuxSyscall,
    LinuxSyscallBuilder, Mount, MountBuilder, PosixRlimitBuilder, PosixRlimitType, ProcessBuilder,
    RootBuilder, Spec, SpecBuilder, UserBuilder,
};

use crate::{Admitted, ExportError, bad};

/// The worker's uid/gid, HOME, TMPDIR and PATH, as in `corral run` (ADR-0010).
pub const WORKER_ID: u32 = 65534;
/// The worker's `HOME` (`TMPDIR` is `/tmp`).
pub const HOME: &str = "/home/corral";
/// The worker's `PATH`.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
/// Where the workspace is mounted, and the worker's working directory.
pub const WORKSPACE: &str = "/workspace";
/// Prefix of the bundle's annotations: the admitted documents, the SandboxPolicy and limits,
/// and what OCI cannot express or corral enforces more strictly (ADR-0050).
pub const ANNOTATION_PREFIX: &str = "dev.corral.";

/// Syscalls denied with EPERM outright: the same list as corral's seccomp filter
/// (`corral_linux::seccomp::RULES`; `corral-cli`'s tests compare the two).
pub const DENY_EPERM: &[&str] = &[
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "open_tree_attr",
    "chroot",
    "unshare",
    "setns",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "fanotify_init",
    "lookup_dcookie",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "vhangup",
    "iopl",
    "ioperm",
    "uselib",
    "_sysctl",
];
/// Denied with ENOSYS (its flags are in memory, so libc falls back to `clone`).
pub const DENY_ENOSYS: &[&str] = &["clone3"];
/// `clone` flags that create namespaces (denied when any is set).
pub const CLONE_NS_FLAGS: &[u64] = &[
    0x0002_0000,
    0x0200_0000,
    0x0400_0000,
    0x0800_0000,
    0x1000_0000,
    0x2000_0000,
    0x4000_0000,
];
/// `ioctl` requests denied (terminal injection), compared on the low 32 bits.
pub const DENY_IOCTLS: &[u64] = &[0x5412, 0x541C, 0x541D, 0x5423];
/// Families `socket` may create: AF_INET, AF_INET6 (corral refuses AF_UNIX: a read-only
/// mount does not stop `connect` on a socket file; ADR-0011).
pub const ALLOWED_FAMILIES: &[u64] = &[2, 10];
/// Families `socketpair` may create: AF_UNIX.
pub const SOCKETPAIR_FAMILIES: &[u64] = &[1];
/// Protocols `socket` may ask for: 0, ICMP, TCP, UDP, ICMPv6 (any other number can make the
/// kernel load a protocol module; ADR-0011). Others get EPROTONOSUPPORT.
pub const ALLOWED_PROTOCOLS: &[u64] = &[0, 1, 6, 17, 58];
const EPROTONOSUPPORT: u32 = 93;

const EPERM: u32 = 1;
const ENOSYS: u32 = 38;

/// Options of `corral export oci`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciOptions {
    /// Host directory bound at `/workspace` (relative paths are relative to the bundle, as
    /// the runtime spec says): a checkout of the WorkUnit's base commit.
    pub workspace: String,
    /// `root.path` (relative to the bundle): the image's root file system.
    pub rootfs: String,
}

impl Default for OciOptions {
    fn default() -> Self {
        Self {
            workspace: "workspace".to_owned(),
            rootfs: "rootfs".to_owned(),
        }
    }
}

fn oci_err(e: oci_spec::OciSpecError) -> ExportError {
    ExportError::Serialize {
        what: "OCI config",
        message: e.to_string(),
    }
}

fn check_path(option: &'static str, p: &str) -> Result<(), ExportError> {
    if p.is_empty()
        || p.chars().any(char::is_control)
        || p.split('/').any(|c| c == "..")
        || p.contains(',')
    {
        return Err(bad(
            option,
            "must be a path without `..`, commas or control characters",
        ));
    }
    Ok(())
}

fn mount(dest: &str, typ: &str, source: &str, options: &[&str]) -> Result<Mount, ExportError> {
    MountBuilder::default()
        .destination(PathBuf::from(dest))
        .typ(typ)
        .source(PathBuf::from(source))
        .options(options.iter().map(|o| (*o).to_owned()).collect::<Vec<_>>())
        .build()
        .map_err(oci_err)
}

fn syscall(
    names: &[&str],
    errno: u32,
    args: Vec<(usize, u64, Option<u64>, LinuxSeccompOperator)>,
) -> Result<LinuxSyscall, ExportError> {
    let mut b = LinuxSyscallBuilder::default()
        .names(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
        .action(LinuxSeccompAction::ScmpActErrno)
        .errno_ret(errno);
    if !args.is_empty() {
        let args = args
            .into_iter()
            .map(|(index, value, two, op)| {
                let a = LinuxSeccompArgBuilder::default()
                    .index(index)
                    .value(value)
                    .op(op);
                match two {
                    Some(t) => a.value_two(t),
                    None => a,
                }
                .build()
                .map_err(oci_err)
            })
            .collect::<Result<Vec<_>, _>>()?;
        b = b.args(args);
    }
    b.build().map_err(oci_err)
}

/// corral's seccomp filter as an OCI profile: default allow, the same denials.
///
/// # Errors
/// Only if a builder refuses a value (a bug).
pub fn seccomp() -> Result<LinuxSeccomp, ExportError> {
    use LinuxSeccompOperator::{ScmpCmpEq, ScmpCmpGe, ScmpCmpMaskedEq};
    let mut rules = vec![
        syscall(DENY_EPERM, EPERM, vec![])?,
        syscall(DENY_ENOSYS, ENOSYS, vec![])?,
    ];
    // One rule per flag: OCI ANDs the conditions of one rule, and "any bit of a mask" is not
    // one comparison.
    for flag in CLONE_NS_FLAGS {
        rules.push(syscall(
            &["clone"],
            EPERM,
            vec![(0, *flag, Some(*flag), ScmpCmpMaskedEq)],
        )?);
    }
    // The kernel reads the request as 32 bits: compare only those (as corral does).
    for req in DENY_IOCTLS {
        rules.push(syscall(
            &["ioctl"],
            EPERM,
            vec![(1, 0xffff_ffff, Some(*req), ScmpCmpMaskedEq)],
        )?);
    }
    // Values outside each list: each value below the list's top by equality, everything
    // above it (which also catches values with high bits set) by one comparison.
    for (name, arg, allowed, errno) in [
        ("socket", 0, ALLOWED_FAMILIES, EPERM),
        ("socketpair", 0, SOCKETPAIR_FAMILIES, EPERM),
        ("socket", 2, ALLOWED_PROTOCOLS, EPROTONOSUPPORT),
    ] {
        let top = allowed.iter().copied().max().unwrap_or(0);
        for value in (0..=top).filter(|f| !allowed.contains(f)) {
            rules.push(syscall(
                &[name],
                errno,
                vec![(arg, value, None, ScmpCmpEq)],
            )?);
        }
        rules.push(syscall(
            &[name],
            errno,
            vec![(arg, top + 1, None, ScmpCmpGe)],
        )?);
    }
    LinuxSeccompBuilder::default()
        .default_action(LinuxSeccompAction::ScmpActAllow)
        .architectures(vec![Arch::ScmpArchX86_64, Arch::ScmpArchAarch64])
        .syscalls(rules)
        .build()
        .map_err(oci_err)
}

/// The bundle's `config.json` for the single WorkUnit of `batch`.
///
/// # Errors
/// [`ExportError::BadOption`] when the batch does not hold exactly one WorkUnit or an option
/// is unusable.
pub fn config(batch: &Admitted, opts: &OciOptions) -> Result<Spec, ExportError> {
    let [unit] = batch.units() else {
        return Err(bad(
            "--work-unit",
            "an OCI bundle runs exactly one WorkUnit",
        ));
    };
    check_path("--workspace", &opts.workspace)?;
    check_path("--rootfs", &opts.rootfs)?;
    let run = unit.run();
    let limits = run.limits();
    let exec = run.exec();
    let policy = run.policy();
    let disk = limits.disk_bytes.get();

    let mut env: BTreeMap<String, String> = exec.env.clone();
    env.insert("PATH".into(), PATH.into());
    env.insert("HOME".into(), HOME.into());
    env.insert("TMPDIR".into(), "/tmp".into());
    let mut args = vec![exec.executable.clone()];
    args.extend(exec.args.iter().cloned());

    let cpu = limits.cpu_seconds.get();
    let process = ProcessBuilder::default()
        .terminal(false)
        .user(
            UserBuilder::default()
                .uid(WORKER_ID)
                .gid(WORKER_ID)
                .additional_gids(Vec::<u32>::new())
                .build()
                .map_err(oci_err)?,
        )
        .args(args)
        .env(
            env.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
        )
        .cwd(PathBuf::from(WORKSPACE))
        .capabilities(no_capabilities()?)
        .no_new_privileges(true)
        .rlimits(vec![
            PosixRlimitBuilder::default()
                .typ(PosixRlimitType::RlimitCpu)
                .soft(cpu)
                .hard(cpu)
                .build()
                .map_err(oci_err)?,
            PosixRlimitBuilder::default()
                .typ(PosixRlimitType::RlimitCore)
                .soft(0_u64)
                .hard(0_u64)
                .build()
                .map_err(oci_err)?,
        ])
        .build()
        .map_err(oci_err)?;

    let size = format!("size={disk}");
    let home_owner = [format!("uid={WORKER_ID}"), format!("gid={WORKER_ID}")];
    let mut mounts = vec![
        mount("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"])?,
        mount(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        )?,
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
            ],
        )?,
        mount(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", &size],
        )?,
        mount(
            "/tmp",
            "tmpfs",
            "tmpfs",
            &["nosuid", "nodev", "mode=1777", &size],
        )?,
        mount(
            HOME,
            "tmpfs",
            "tmpfs",
            &[
                "nosuid",
                "nodev",
                "mode=700",
                &home_owner[0],
                &home_owner[1],
                &size,
            ],
        )?,
    ];

    // The workspace read-only, then each writable literal prefix read-write on top of it,
    // then `.git` and literal forbidden entries inside a writable prefix read-only again.
    let ws = opts.workspace.trim_end_matches('/');
    let mut prefixes: Vec<String> = policy
        .writable_paths()
        .iter()
        .map(|p| p.literal_prefix().join("/"))
        .collect();
    prefixes.sort();
    prefixes.dedup();
    let covered = |p: &str, by: &[String]| {
        by.iter()
            .any(|q| q.is_empty() || p == q || p.starts_with(&format!("{q}/")))
    };
    // Nested prefixes are covered by their parent's bind.
    let tops: Vec<String> = prefixes
        .iter()
        .filter(|p| {
            !prefixes
                .iter()
                .any(|q| q != *p && (q.is_empty() || p.starts_with(&format!("{q}/"))))
        })
        .cloned()
        .collect();
    let whole = tops.iter().any(String::is_empty);
    let ro = ["rbind", "ro", "nosuid", "nodev"];
    let rw = ["rbind", "rw", "nosuid", "nodev"];
    mounts.push(mount(WORKSPACE, "bind", ws, if whole { &rw } else { &ro })?);
    if !whole {
        for p in &tops {
            mounts.push(mount(
                &format!("{WORKSPACE}/{p}"),
                "bind",
                &format!("{ws}/{p}"),
                &rw,
            )?);
        }
    } else {
        mounts.push(mount(
            &format!("{WORKSPACE}/.git"),
            "bind",
            &format!("{ws}/.git"),
            &ro,
        )?);
    }
    for f in policy.forbidden_paths().iter().filter(|f| f.is_literal()) {
        let p = f.as_str().trim_end_matches('/');
        if covered(p, &tops) {
            mounts.push(mount(
                &format!("{WORKSPACE}/{p}"),
                "bind",
                &format!("{ws}/{p}"),
                &ro,
            )?);
        }
    }
    for p in &exec.read_only_paths {
        mounts.push(mount(p, "bind", p, &ro)?);
    }

    let namespaces = [
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Network,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
        LinuxNamespaceType::Cgroup,
    ]
    .into_iter()
    .map(|t| LinuxNamespaceBuilder::default().typ(t).build())
    .collect::<Result<Vec<_>, _>>()
    .map_err(oci_err)?;

    let mut devices = vec![
        LinuxDeviceCgroupBuilder::default()
            .allow(false)
            .access("rwm")
            .build()
            .map_err(oci_err)?,
    ];
    // null, zero, full, random, urandom, tty, ptmx: what corral binds into /dev.
    for (major, minor) in [(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 2)] {
        devices.push(
            LinuxDeviceCgroupBuilder::default()
                .allow(true)
                .typ(LinuxDeviceType::C)
                .major(major)
                .minor(minor)
                .access("rwm")
                .build()
                .map_err(oci_err)?,
        );
    }
    let memory = i64::try_from(limits.memory_bytes.get()).unwrap_or(i64::MAX);
    let mut resources = LinuxResourcesBuilder::default();
    if let Some(m) = limits.cpu_millicores {
        // Exactly as corral writes it to the run's cgroup (100 ms periods).
        let (quota, period) = corral_contract::exec::cfs_bandwidth(m.get(), 100_000);
        resources = resources.cpu(
            LinuxCpuBuilder::default()
                .quota(i64::try_from(quota).unwrap_or(i64::MAX))
                .period(period)
                .build()
                .map_err(oci_err)?,
        );
    }
    let resources = resources
        .devices(devices)
        .memory(
            LinuxMemoryBuilder::default()
                .limit(memory)
                // memory + swap: equal to the limit, i.e. no swap.
                .swap(memory)
                .build()
                .map_err(oci_err)?,
        )
        .pids(
            LinuxPidsBuilder::default()
                .limit(i64::try_from(limits.max_processes.get()).unwrap_or(i64::MAX))
                .build()
                .map_err(oci_err)?,
        )
        .build()
        .map_err(oci_err)?;

    let linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .resources(resources)
        .seccomp(seccomp()?)
        .masked_paths(
            [
                "/proc/acpi",
                "/proc/asound",
                "/proc/kcore",
                "/proc/keys",
                "/proc/latency_stats",
                "/proc/timer_list",
                "/proc/timer_stats",
                "/proc/sched_debug",
                "/proc/scsi",
                "/sys/firmware",
            ]
            .map(String::from)
            .to_vec(),
        )
        .readonly_paths(
            ["/proc/bus", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
                .map(String::from)
                .to_vec(),
        )
        .build()
        .map_err(oci_err)?;

    let spec = SpecBuilder::default()
        .version("1.0.2")
        .root(
            RootBuilder::default()
                .path(PathBuf::from(&opts.rootfs))
                .readonly(true)
                .build()
                .map_err(oci_err)?,
        )
        .process(process)
        .hostname("corral")
        .mounts(mounts)
        .annotations(annotations(batch, run, &tops))
        .linux(linux)
        .build()
        .map_err(oci_err)?;
    Ok(spec)
}

/// What the runtime spec cannot express, and the provenance, as `dev.corral.*` annotations.
fn annotations(batch: &Admitted, run: &AdmittedRun, tops: &[String]) -> HashMap<String, String> {
    let policy = run.policy();
    let l = run.limits();
    let mut writable: Vec<String> = tops
        .iter()
        .map(|p| {
            if p.is_empty() {
                WORKSPACE.to_owned()
            } else {
                format!("{WORKSPACE}/{p}")
            }
        })
        .collect();
    writable.extend(["/tmp".to_owned(), HOME.to_owned(), "/dev/shm".to_owned()]);
    let network = match policy.network_mode() {
        NetworkMode::None => "none: own network namespace with loopback only".to_owned(),
        NetworkMode::Allowlist => format!(
            "allowlist [{}] NOT EXPRESSIBLE: corral's egress proxy is absent, so this bundle has no network at all (stricter, the allowlisted destinations are unreachable)",
            policy
                .network_allowlist()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let globs: Vec<&str> = policy
        .forbidden_paths()
        .iter()
        .chain(policy.writable_paths())
        .filter(|p| !p.is_literal())
        .map(|p| p.as_str())
        .collect();
    let transport = if run.exec().stdin.is_some() {
        "stdin: the caller must write the WorkUnit's objective to the container's standard input, then close it"
    } else {
        "argument: already in process.args"
    };
    let a = |k: &str, v: String| (format!("{ANNOTATION_PREFIX}{k}"), v);
    let home_files = &run.exec().home_files;
    let home = if home_files.is_empty() {
        "none".to_owned()
    } else {
        format!(
            "NOT EXPRESSED: corral places the preset's files in HOME before start ({}); this bundle's HOME is an empty tmpfs: the caller must put them there",
            home_files.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    };
    HashMap::from([
        a("home-files", home),
        a(
            "work-unit",
            format!("{} {}", run.work_unit_id(), run.work_unit_digest()),
        ),
        a(
            "preset",
            format!(
                "{} {}",
                run.preset_id(),
                corral_contract::digest_of(batch.preset())
            ),
        ),
        a("base-sha", run.base_sha().to_owned()),
        a("policy-digest", policy.digest().to_string()),
        a(
            "policy",
            String::from_utf8_lossy(&canonical_json(policy)).into_owned(),
        ),
        a(
            "limits",
            String::from_utf8_lossy(&canonical_json(l)).into_owned(),
        ),
        a(
            "landlock",
            format!(
                "NOT EXPRESSIBLE: corral adds Landlock (read+execute beneath /, all rights beneath {}; abstract unix socket and signal scoping); this bundle relies on the read-only mounts alone",
                writable.join(", ")
            ),
        ),
        a("network", network),
        a(
            "wall-seconds",
            format!(
                "{} NOT EXPRESSIBLE: the caller must kill the container after this many seconds",
                l.wall_seconds
            ),
        ),
        a(
            "cpu-bandwidth",
            match l.cpu_millicores {
                Some(m) => format!("{m} millicores as linux.resources.cpu quota/period, as corral; cpu_seconds is RLIMIT_CPU here (per process, not per tree as corral's cgroup accounting)"),
                None => "no cap, as corral without cpu_millicores (all of the host's CPUs); cpu_seconds is RLIMIT_CPU here (per process, not per tree as corral's cgroup accounting)".to_owned(),
            },
        ),
        a(
            "disk",
            format!(
                "WEAKER: corral puts every writable place on one tmpfs of {} bytes; here /tmp, {HOME} and /dev/shm are {} bytes each (all charged to the memory limit), and writes to the bind-mounted workspace land on the host directory unbounded",
                l.disk_bytes, l.disk_bytes
            ),
        ),
        a(
            "capture",
            format!(
                "NOT PERFORMED: corral captures the change outside the worker's authority, checks every changed path against the scope (globs included: [{}]), bounds the patch ({} bytes) and logs ({} bytes each), and writes a ResultManifest; none of that happens here",
                globs.join(", "),
                l.max_patch_bytes,
                l.max_output_bytes
            ),
        ),
        a("objective-transport", transport.to_owned()),
        a(
            "weaker-than-corral-run",
            "yes: see the NOT EXPRESSIBLE / WEAKER annotations and ADR-0050".to_owned(),
        ),
    ])
}

/// Every capability set empty (oci-spec's default holds three capabilities).
fn no_capabilities() -> Result<LinuxCapabilities, ExportError> {
    let none = oci_spec::runtime::Capabilities::new;
    LinuxCapabilitiesBuilder::default()
        .bounding(none())
        .effective(none())
        .inheritable(none())
        .permitted(none())
        .ambient(none())
        .build()
        .map_err(oci_err)
}
