//! The least-privilege confinement of the checkout helper (ADR-0070).
//!
//! The helper parses hostile data (the base commit's trees) and writes what they describe.
//! Before it reads a single object it confines itself, so that the next bug of the kind the
//! validator exists for stays harmless:
//! - its own mount namespace whose root is a fresh tmpfs holding only the system folders git
//!   needs (read-only), `/dev/null`, the object database(s) (read-only, at their host paths so
//!   `objects/info/alternates` still resolve) and the one work directory (writable);
//! - `no_new_privs`, and every capability dropped from all sets (bounding included) but
//!   `CAP_DAC_READ_SEARCH`, which lets it read a private object database and nothing else;
//! - Landlock: read and execute beneath the read-only binds, everything beneath the work
//!   directory, nothing elsewhere.
//!
//! It keeps uid 0 (without capabilities): the checkout must be owned by the cache's owner, and
//! a uid of its own would need a chown of every file afterwards.

use std::fs;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, path_beneath_rules,
};
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};

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
}

/// How far the confinement went on this host (recorded by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confined {
    /// `fully`, `partially` or `not enforced` (a kernel without Landlock).
    pub landlock: &'static str,
}

fn err(what: &str) -> impl Fn(nix::Error) -> String + '_ {
    move |e| format!("confining the checkout helper: {what}: {e}")
}

fn bind(src: &Path, dst: &Path, writable: bool) -> Result<(), String> {
    bind_with(src, dst, writable, MsFlags::MS_NODEV)
}

/// `extra` is `MS_NODEV` for everything but the `/dev/null` bind (a device node on a nodev
/// mount cannot be opened).
fn bind_with(src: &Path, dst: &Path, writable: bool, extra: MsFlags) -> Result<(), String> {
    mount(
        Some(src),
        dst,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(err(&format!("bind {}", src.display())))?;
    let mut flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_NOSUID | extra;
    if !writable {
        flags |= MsFlags::MS_RDONLY;
    }
    mount(None::<&str>, dst, None::<&str>, flags, None::<&str>)
        .map_err(err(&format!("remount {}", dst.display())))
}

/// `new_root` + the absolute `path`.
fn under(new_root: &Path, path: &Path) -> PathBuf {
    new_root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Makes the mount point for `src` at `dst` (a directory or an empty file).
fn mount_point(src: &Path, dst: &Path) -> Result<(), String> {
    let io = |e: std::io::Error| format!("confining the checkout helper: {}: {e}", dst.display());
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
    unshare(CloneFlags::CLONE_NEWNS).map_err(err("unshare(CLONE_NEWNS)"))?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(err("making / private"))?;
    let root = &c.new_root;
    mount(
        Some("tmpfs"),
        root,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=0755,size=1m"),
    )
    .map_err(err("mounting the helper's root"))?;
    for sys in SYSTEM {
        let src = Path::new(sys);
        let dst = under(root, src);
        match fs::symlink_metadata(src) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(src)
                    .map_err(|e| format!("confining the checkout helper: {sys}: {e}"))?;
                std::os::unix::fs::symlink(&target, &dst)
                    .map_err(|e| format!("confining the checkout helper: {sys}: {e}"))?;
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
        ("/etc/ld.so.cache", false, MsFlags::MS_NODEV),
        ("/dev/null", true, MsFlags::empty()),
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
    fs::create_dir(&old).map_err(|e| format!("confining the checkout helper: {e}"))?;
    nix::unistd::pivot_root(root, &old).map_err(err("pivot_root"))?;
    nix::unistd::chdir("/").map_err(err("chdir /"))?;
    umount2("/.old-root", MntFlags::MNT_DETACH).map_err(err("detaching the host's root"))?;
    fs::remove_dir("/.old-root").map_err(|e| format!("confining the checkout helper: {e}"))?;
    // The root itself read-only now that every mount point exists.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        None::<&str>,
    )
    .map_err(err("remounting the helper's root read-only"))?;

    let landlock = restrict_landlock(c)?;
    drop_capabilities()?;
    rustix::thread::set_no_new_privs(true)
        .map_err(|e| format!("confining the checkout helper: no_new_privs: {e}"))?;
    Ok(Confined { landlock })
}

fn restrict_landlock(c: &Confinement) -> Result<&'static str, String> {
    let abi = ABI::V1;
    let ll = |e: landlock::RulesetError| format!("confining the checkout helper: Landlock: {e}");
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
fn drop_capabilities() -> Result<(), String> {
    use caps::{CapSet, Capability};
    let e =
        |e: caps::errors::CapsError| format!("confining the checkout helper: capabilities: {e}");
    let keep = Capability::CAP_DAC_READ_SEARCH;
    for cap in caps::read(None, CapSet::Bounding).map_err(e)? {
        if cap != keep {
            caps::drop(None, CapSet::Bounding, cap).map_err(e)?;
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(e)?;
    caps::clear(None, CapSet::Inheritable).map_err(e)?;
    let only: caps::CapsHashSet = [keep].into_iter().collect();
    caps::set(None, CapSet::Effective, &only).map_err(e)?;
    caps::set(None, CapSet::Permitted, &only).map_err(e)?;
    Ok(())
}
