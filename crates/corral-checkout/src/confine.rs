//! The least-privilege confinement of the checkout and capture helpers (ADR-0070).
//!
//! The helpers parse hostile data (the base commit's trees; the worker's upper layer) and
//! write what they describe. Before either reads a single byte of it, it confines itself, so
//! that the next bug of the kind the validators exist for stays harmless:
//! - its own mount namespace whose root is a fresh tmpfs holding only the system folders git
//!   needs (read-only), `/dev/null`, the object database(s) (read-only, at their host paths so
//!   `objects/info/alternates` still resolve) and the one work directory (writable);
//! - `no_new_privs`, and every capability dropped from all sets (bounding included) but
//!   `CAP_DAC_READ_SEARCH`, which lets it read a private object database and nothing else;
//! - Landlock: read and execute beneath the read-only binds (and beneath directories passed
//!   as descriptors, such as the upper layer), everything beneath the work directory, nothing
//!   elsewhere; Landlock also denies every mount operation;
//! - a seccomp filter that denies what would reach past the mount namespace or the kernel's
//!   other boundaries (`open_by_handle_at`, which `CAP_DAC_READ_SEARCH` would otherwise
//!   allow, new namespaces, mounts, ptrace, BPF, keyrings, modules, io_uring).
//!
//! It keeps uid 0 (without capabilities): the checkout must be owned by the cache's owner, and
//! a uid of its own would need a chown of every file afterwards. The exception is rootless
//! mode with subordinate ids ([`Confinement::run_as`]): there the worker's id owns the
//! checkout, so the helper becomes that id before it writes a byte.

use std::collections::BTreeMap;
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
};
use rustix::mount::{
    MountFlags, MountPropagationFlags, UnmountFlags, mount, mount_bind_recursive, mount_change,
    mount_remount, unmount,
};

/// System folders bound read-only into the helper's root when they exist (symlinks such as a
/// merged-/usr `/bin -> usr/bin` are recreated as symlinks).
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32",
];

/// What the helper may see.
#[derive(Debug, Clone)]
pub struct Confinement {
    /// An empty directory the new root is mounted on (inside the work directory's parent).
    pub new_root: PathBuf,
    /// Read-only: object databases, and the git executable when it lies outside `/usr`.
    pub read_only: Vec<PathBuf>,
    /// The one writable directory.
    pub writable: PathBuf,
    /// Read-only: directories held open (the upper layer, which lives on a detached mount
    /// and has no path in any namespace).
    pub read_only_fds: Vec<Arc<OwnedFd>>,
    /// The uid and gid the helper becomes (supplementary groups dropped), so that what it
    /// writes is theirs: rootless mode with subordinate ids, where the base checkout must
    /// belong to the worker because it cannot be idmapped (ADR-0080). `None`: it keeps uid 0.
    pub run_as: Option<(u32, u32)>,
}

/// How far the confinement went on this host (recorded by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confined {
    /// `fully`, `partially` or `not enforced` (a kernel without Landlock).
    pub landlock: &'static str,
}

fn err(what: &str) -> impl Fn(rustix::io::Errno) -> String + '_ {
    move |e| format!("confining the helper: {what}: {e}")
}

fn bind(src: &Path, dst: &Path, writable: bool) -> Result<(), String> {
    bind_with(src, dst, writable, MountFlags::NODEV)
}

/// `extra` is `MS_NODEV` for everything but the `/dev/null` bind (a device node on a nodev
/// mount cannot be opened).
fn bind_with(src: &Path, dst: &Path, writable: bool, extra: MountFlags) -> Result<(), String> {
    mount_bind_recursive(src, dst).map_err(err(&format!("bind {}", src.display())))?;
    let mut flags = MountFlags::BIND | MountFlags::NOSUID | extra;
    if !writable {
        flags |= MountFlags::RDONLY;
    }
    // A bind remount changes only the flags (its data is ignored).
    mount_remount(dst, flags, c"").map_err(err(&format!("remount {}", dst.display())))
}

/// `new_root` + the absolute `path`.
fn under(new_root: &Path, path: &Path) -> PathBuf {
    new_root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Makes the mount point for `src` at `dst` (a directory or an empty file).
fn mount_point(src: &Path, dst: &Path) -> Result<(), String> {
    let io = |e: std::io::Error| format!("confining the helper: {}: {e}", dst.display());
    if src.is_dir() {
        fs::create_dir_all(dst).map_err(io)
    } else {
        if let Some(p) = dst.parent() {
            fs::create_dir_all(p).map_err(io)?;
        }
        fs::File::create(dst).map(drop).map_err(io)
    }
}

/// Confines the calling process (call it while single-threaded: mount namespaces, Landlock
/// and capabilities are per thread, inherited by what it starts afterwards).
pub fn confine(c: &Confinement) -> Result<Confined, String> {
    corral_process::unshare_namespace(corral_process::Namespace::Mount)
        .map_err(|e| format!("confining the helper: unshare(CLONE_NEWNS): {e}"))?;
    mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(err("making / private"))?;
    let root = &c.new_root;
    mount(
        "tmpfs",
        root,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        c"mode=0755,size=1m",
    )
    .map_err(err("mounting the helper's root"))?;
    for sys in SYSTEM {
        let src = Path::new(sys);
        let dst = under(root, src);
        match fs::symlink_metadata(src) {
            Ok(m) if m.file_type().is_symlink() => {
                let target =
                    fs::read_link(src).map_err(|e| format!("confining the helper: {sys}: {e}"))?;
                std::os::unix::fs::symlink(&target, &dst)
                    .map_err(|e| format!("confining the helper: {sys}: {e}"))?;
            }
            Ok(m) if m.is_dir() => {
                mount_point(src, &dst)?;
                bind(src, &dst, false)?;
            }
            _ => {}
        }
    }
    // The dynamic linker's cache, and the one device git's plumbing opens.
    for (file, writable, extra) in [
        ("/etc/ld.so.cache", false, MountFlags::NODEV),
        ("/dev/null", true, MountFlags::empty()),
    ] {
        let src = Path::new(file);
        if src.exists() {
            let dst = under(root, src);
            mount_point(src, &dst)?;
            bind_with(src, &dst, writable, extra)?;
        }
    }
    for p in &c.read_only {
        let dst = under(root, p);
        mount_point(p, &dst)?;
        bind(p, &dst, false)?;
    }
    let work = under(root, &c.writable);
    mount_point(&c.writable, &work)?;
    bind(&c.writable, &work, true)?;
    let old = root.join(".old-root");
    fs::create_dir(&old).map_err(|e| format!("confining the helper: {e}"))?;
    rustix::process::pivot_root(root, &old).map_err(err("pivot_root"))?;
    rustix::process::chdir("/").map_err(err("chdir /"))?;
    unmount("/.old-root", UnmountFlags::DETACH).map_err(err("detaching the host's root"))?;
    fs::remove_dir("/.old-root").map_err(|e| format!("confining the helper: {e}"))?;
    // The root itself read-only now that every mount point exists.
    // No options: the tmpfs keeps its size and mode.
    mount_remount(
        "/",
        MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV,
        c"",
    )
    .map_err(err("remounting the helper's root read-only"))?;

    let landlock = restrict_landlock(c)?;
    drop_capabilities(c.run_as)?;
    rustix::thread::set_no_new_privs(true)
        .map_err(|e| format!("confining the helper: no_new_privs: {e}"))?;
    restrict_syscalls()?;
    Ok(Confined { landlock })
}

fn restrict_landlock(c: &Confinement) -> Result<&'static str, String> {
    let abi = ABI::V1;
    let ll = |e: landlock::RulesetError| format!("confining the helper: Landlock: {e}");
    let mut ro: Vec<PathBuf> = SYSTEM
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    ro.extend(c.read_only.iter().cloned());
    if Path::new("/etc/ld.so.cache").exists() {
        ro.push("/etc/ld.so.cache".into());
    }
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(ll)?
        .create()
        .map_err(ll)?
        .add_rules(path_beneath_rules(&ro, AccessFs::from_read(abi)))
        .map_err(ll)?
        .add_rules(path_beneath_rules(
            ["/dev/null"],
            AccessFs::ReadFile | AccessFs::WriteFile,
        ))
        .map_err(ll)?
        .add_rules(path_beneath_rules([&c.writable], AccessFs::from_all(abi)))
        .map_err(ll)?
        .add_rules(
            c.read_only_fds
                .iter()
                .map(|fd| Ok(PathBeneath::new(fd.as_ref(), AccessFs::from_read(abi)))),
        )
        .map_err(ll)?
        .restrict_self()
        .map_err(ll)?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => "fully",
        RulesetStatus::PartiallyEnforced => "partially",
        RulesetStatus::NotEnforced => "not enforced",
    })
}

/// Every capability gone from every set but `CAP_DAC_READ_SEARCH` (read-only access to a
/// private object database); the bounding set too, so git started next cannot regain any.
fn drop_capabilities(run_as: Option<(u32, u32)>) -> Result<(), String> {
    use caps::{CapSet, Capability};
    let e = |e: caps::errors::CapsError| format!("confining the helper: capabilities: {e}");
    let keep = Capability::CAP_DAC_READ_SEARCH;
    for cap in caps::read(None, CapSet::Bounding).map_err(e)? {
        if cap != keep {
            caps::drop(None, CapSet::Bounding, cap).map_err(e)?;
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(e)?;
    caps::clear(None, CapSet::Inheritable).map_err(e)?;
    if let Some((uid, gid)) = run_as {
        // The ids change while the permitted set is kept (keepcaps), then everything but
        // CAP_DAC_READ_SEARCH goes below. Per thread: the helper is single-threaded here.
        let ids = |what: &str| {
            let what = what.to_owned();
            move |e: rustix::io::Errno| format!("confining the helper: {what}: {e}")
        };
        rustix::thread::set_thread_groups(&[]).map_err(ids("setgroups"))?;
        rustix::thread::set_keep_capabilities(true).map_err(ids("keepcaps"))?;
        let g = rustix::process::Gid::from_raw(gid);
        rustix::thread::set_thread_res_gid(g, g, g).map_err(ids("setresgid"))?;
        let u = rustix::process::Uid::from_raw(uid);
        rustix::thread::set_thread_res_uid(u, u, u).map_err(ids("setresuid"))?;
        rustix::thread::set_keep_capabilities(false).map_err(ids("keepcaps"))?;
    }
    let only: caps::CapsHashSet = [keep].into_iter().collect();
    caps::set(None, CapSet::Effective, &only).map_err(e)?;
    caps::set(None, CapSet::Permitted, &only).map_err(e)?;
    if run_as.is_some() {
        // As uid 0 the git it starts regains the bounding set's one capability on exec; as
        // another id only the ambient set carries it, so git can still read a private object
        // database.
        caps::set(None, CapSet::Inheritable, &only).map_err(e)?;
        caps::raise(None, CapSet::Ambient, keep).map_err(e)?;
    }
    Ok(())
}

/// Syscalls the helpers never need, each a way past the mount namespace, Landlock or the
/// dropped capabilities: file handles (with `CAP_DAC_READ_SEARCH`, `open_by_handle_at` opens
/// any file of a mounted file system, whatever the namespace shows: "shocker"), new
/// namespaces and mounts, tracing, BPF, keyrings, modules, io_uring, swap and clocks.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub const DENIED_SYSCALLS: &[(&str, libc::c_long)] = &[
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("quotactl", libc::SYS_quotactl),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("reboot", libc::SYS_reboot),
    ("acct", libc::SYS_acct),
];

/// The namespace flags `clone(2)` may not carry (its first argument on both architectures).
const CLONE_NAMESPACES: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// The x32 ABI's syscall bit: x32 calls arrive with the x86_64 audit architecture and
/// `nr | X32_BIT`; the helpers make none, so all of them are refused.
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;

/// The filters of [`DENIED_SYSCALLS`], installed together: EPERM for each and for `clone`
/// with a namespace flag; ENOSYS for `clone3` (its flags sit in memory a filter cannot read;
/// on ENOSYS the C library falls back to `clone`) and, on x86_64, for every x32 call. Any
/// other architecture than the build's is killed.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub fn syscall_filters() -> Result<Vec<seccompiler::BpfProgram>, String> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let be = |e: seccompiler::BackendError| format!("confining the helper: seccomp: {e}");
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(be)?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED_SYSCALLS
        .iter()
        .map(|&(_, nr)| (nr, Vec::new()))
        .collect();
    let mut clone = Vec::new();
    for &flag in CLONE_NAMESPACES {
        let cond = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )
        .map_err(be)?;
        clone.push(SeccompRule::new(vec![cond]).map_err(be)?);
    }
    rules.insert(libc::SYS_clone, clone);
    let denied: seccompiler::BpfProgram = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(be)?
    .try_into()
    .map_err(be)?;
    let clone3: seccompiler::BpfProgram = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(be)?
    .try_into()
    .map_err(be)?;
    #[allow(unused_mut, reason = "x86_64 adds the x32 filter")]
    let mut filters = vec![denied, clone3];
    #[cfg(target_arch = "x86_64")]
    filters.push(x32_filter());
    Ok(filters)
}

/// `nr >= X32_BIT` on the x86_64 audit architecture answers ENOSYS; everything else passes
/// to the other filters.
#[cfg(target_arch = "x86_64")]
fn x32_filter() -> seccompiler::BpfProgram {
    use seccompiler::sock_filter;
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let f = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        // seccomp_data: nr at offset 0, arch at offset 4.
        f(LD_W_ABS, 0, 0, 4),
        f(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
        f(LD_W_ABS, 0, 0, 0),
        f(JGE_K, 0, 1, X32_BIT),
        f(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        f(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// Installs [`syscall_filters`] (after `no_new_privs`).
fn restrict_syscalls() -> Result<(), String> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    for prog in syscall_filters()? {
        seccompiler::apply_filter(&prog)
            .map_err(|e| format!("confining the helper: seccomp: {e}"))?;
    }
    Ok(())
}
