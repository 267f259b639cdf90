//! The preset's executable as installed: opened once (symbolic links followed, as npm and pip
//! install agents), hashed through that descriptor, and handed to the backend, which runs
//! exactly that file at its real path (ADR-0012).
//!
//! An unchanged executable is not hashed again: its digest is kept under corral's cache,
//! keyed on the file's identity and change times `(device, inode, size, mtime, ctime)`.
//! ctime cannot be set from user space (any change of the inode sets it to the current
//! time), so a rewrite that restores size and mtime still misses; an entry is only written
//! for a file whose ctime lies at least [`RACY`] before hashing began (as git treats a
//! "racily clean" index entry), so a write in the same clock tick as the hash cannot hide.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corral_contract::Digest;
use sha2::{Digest as _, Sha256};

/// How long before hashing a file's last change must lie for its digest to be kept.
pub const RACY: Duration = Duration::from_secs(2);

/// The executable, opened and hashed.
#[derive(Debug)]
pub struct OpenedExecutable {
    /// Open on the file that was hashed; the backend binds this very file.
    pub file: File,
    /// Its real path (every link resolved), where the worker runs it.
    pub real_path: String,
    /// The sha256 of the file's bytes, recorded in the ResultManifest and checked against
    /// the preset's `executable_sha256` when it pins one.
    pub digest: Digest,
    /// The digest came from the cache.
    pub cached: bool,
}

/// The identity and change times a cached digest is keyed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Self {
        Self {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    fn name(&self) -> String {
        format!("{}-{}", self.dev, self.ino)
    }

    fn line(&self, digest: &Digest) -> String {
        format!(
            "{} {} {} {} {} {digest}\n",
            self.size, self.mtime.0, self.mtime.1, self.ctime.0, self.ctime.1
        )
    }
}

/// Opens `path` (links followed), checks that the sandbox can show what it resolves to, and
/// hashes it, through `cache` (a folder of corral's own) when given. The error names the
/// path and says why, in one line (bad input: nothing has started).
pub fn open_and_hash(path: &Path, cache: Option<&Path>) -> Result<OpenedExecutable, String> {
    open_and_hash_settled(path, cache, RACY)
}

fn open_and_hash_settled(
    path: &Path,
    cache: Option<&Path>,
    racy: Duration,
) -> Result<OpenedExecutable, String> {
    let shown = path.display();
    // Not opened unless it is a regular file: opening a FIFO would wait for a writer.
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            return Err(format!("preset executable {shown}: not a regular file"));
        }
        Ok(_) => {}
        Err(e) => return Err(format!("preset executable {shown}: {e}")),
    }
    let file = File::open(path).map_err(|e| format!("preset executable {shown}: {e}"))?;
    let before = file
        .metadata()
        .map_err(|e| format!("preset executable {shown}: {e}"))?;
    let real_path = corral_sandbox::executable_real_path(&file)
        .map_err(|why| format!("preset executable {shown}: {why}"))?;
    let stamp = Stamp::of(&before);
    if let Some(digest) = cache.and_then(|c| lookup(c, &stamp)) {
        return Ok(OpenedExecutable {
            file,
            real_path,
            digest,
            cached: true,
        });
    }
    let started = SystemTime::now();
    let digest = hash(&file).map_err(|e| format!("preset executable {shown}: {e}"))?;
    let after = file
        .metadata()
        .map_err(|e| format!("preset executable {shown}: {e}"))?;
    // Changed while it was read: the digest may name no version of the file.
    if Stamp::of(&after) != stamp {
        return Err(format!(
            "preset executable {shown} changed while corral hashed it; run again once the \
             install is finished"
        ));
    }
    if let Some(c) = cache
        && settled(&stamp, started, racy)
    {
        // A cache that cannot be written only costs the next run a hash.
        if let Err(e) = store(c, &stamp, &digest) {
            tracing::warn!(cache = %c.display(), error = %e, "executable digest not cached");
        }
    }
    Ok(OpenedExecutable {
        file,
        real_path,
        digest,
        cached: false,
    })
}

fn hash(mut file: &File) -> std::io::Result<Digest> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(Digest::from_raw(hasher.finalize().into()))
}

/// The file's last change lies at least `racy` before `started`.
fn settled(stamp: &Stamp, started: SystemTime, racy: Duration) -> bool {
    let Ok(ctime) = u64::try_from(stamp.ctime.0) else {
        return false;
    };
    let changed = UNIX_EPOCH
        + Duration::from_secs(ctime)
        + Duration::from_nanos(u64::try_from(stamp.ctime.1).unwrap_or(0));
    started.duration_since(changed).is_ok_and(|age| age >= racy)
}

/// The cached digest for `stamp`, if an entry of corral's own (a regular file, not a link,
/// owned by corral's user in a folder of corral's, writable by no one else) records exactly
/// these times.
fn lookup(cache: &Path, stamp: &Stamp) -> Option<Digest> {
    let me = own_uid()?;
    let dir = std::fs::symlink_metadata(cache).ok()?;
    if !dir.is_dir() || dir.uid() != me || dir.mode() & 0o022 != 0 {
        return None;
    }
    let path = cache.join(stamp.name());
    let linked = std::fs::symlink_metadata(&path).ok()?;
    let mut f = File::open(&path).ok()?;
    let m = f.metadata().ok()?;
    // The file opened is the one inspected (not a link swapped in meanwhile).
    if !linked.is_file() || (m.dev(), m.ino()) != (linked.dev(), linked.ino()) {
        return None;
    }
    if m.uid() != me || m.mode() & 0o022 != 0 || m.len() > 256 {
        return None;
    }
    let mut text = String::new();
    f.read_to_string(&mut text).ok()?;
    let fields: Vec<&str> = text.split_ascii_whitespace().collect();
    let [size, ms, mns, cs, cns, digest] = fields[..] else {
        return None;
    };
    let n = |v: &str| v.parse::<i64>().ok();
    let recorded = (
        size.parse::<u64>().ok()?,
        (n(ms)?, n(mns)?),
        (n(cs)?, n(cns)?),
    );
    (recorded == (stamp.size, stamp.mtime, stamp.ctime))
        .then(|| digest.parse().ok())
        .flatten()
}

/// Whether `name`, in the executable digest cache, is an entry the corral process `pid` was
/// writing (`.<entry>.<pid>`): what its reaper removes once `pid` has exited.
#[must_use]
pub fn is_temporary_of(name: &str, pid: u32) -> bool {
    name.strip_prefix('.')
        .and_then(|r| r.strip_suffix(pid.to_string().as_str()))
        .and_then(|r| r.strip_suffix('.'))
        .is_some_and(|r| !r.is_empty() && !r.contains('.'))
}

fn store(cache: &Path, stamp: &Stamp, digest: &Digest) -> std::io::Result<()> {
    std::fs::create_dir_all(cache)?;
    std::fs::set_permissions(cache, std::fs::Permissions::from_mode(0o700))?;
    let tmp: PathBuf = cache.join(format!(".{}.{}", stamp.name(), std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(stamp.line(digest).as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, cache.join(stamp.name())).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// corral's effective uid: the owner the kernel gives `/proc/self`.
fn own_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]
mod tests {
    use super::*;

    struct Dir(PathBuf);
    impl Dir {
        fn new(tag: &str) -> Self {
            let p = std::env::temp_dir().join(format!("corral-exe-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Self(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn sha(bytes: &[u8]) -> Digest {
        Digest::from_raw(Sha256::digest(bytes).into())
    }

    #[test]
    fn a_link_is_followed_to_the_real_file() {
        let d = Dir::new("link");
        std::fs::create_dir_all(d.0.join("pkg/bin")).unwrap();
        std::fs::create_dir_all(d.0.join("bin")).unwrap();
        std::fs::write(d.0.join("pkg/bin/agent.sh"), b"#!/bin/sh\necho hi\n").unwrap();
        std::os::unix::fs::symlink("../pkg/bin/agent.sh", d.0.join("bin/agent")).unwrap();
        let e = open_and_hash(&d.0.join("bin/agent"), None).unwrap();
        let real = std::fs::canonicalize(d.0.join("pkg/bin/agent.sh")).unwrap();
        assert_eq!(e.real_path, real.to_str().unwrap());
        assert_eq!(e.digest, sha(b"#!/bin/sh\necho hi\n"));
        assert!(!e.cached);
    }

    #[test]
    fn what_the_sandbox_cannot_show_is_refused_naming_the_path() {
        let d = Dir::new("refused");
        std::os::unix::fs::symlink("/proc/self/status", d.0.join("proc")).unwrap();
        std::os::unix::fs::symlink("/dev/null", d.0.join("dev")).unwrap();
        let err = open_and_hash(&d.0.join("proc"), None).unwrap_err();
        assert!(
            err.contains("resolves to /proc/") && err.contains("under /proc"),
            "{err}"
        );
        assert!(
            err.contains(&d.0.join("proc").display().to_string()),
            "{err}"
        );
        let err = open_and_hash(&d.0.join("dev"), None).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        let err = open_and_hash(&d.0.join("missing"), None).unwrap_err();
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn an_unchanged_file_is_not_hashed_again_and_any_rewrite_is() {
        let d = Dir::new("cache");
        let cache = d.0.join("cache");
        let exe = d.0.join("agent");
        std::fs::write(&exe, b"version 1").unwrap();
        let first = open_and_hash_settled(&exe, Some(&cache), Duration::ZERO).unwrap();
        assert!(!first.cached);
        let second = open_and_hash_settled(&exe, Some(&cache), Duration::ZERO).unwrap();
        assert!(
            second.cached,
            "the unchanged file's digest comes from the cache"
        );
        assert_eq!(second.digest, sha(b"version 1"));
        // The attack on the key: same size, mtime put back. ctime cannot be put back.
        let mtime = std::fs::metadata(&exe).unwrap().modified().unwrap();
        std::fs::write(&exe, b"version 2").unwrap();
        File::options()
            .write(true)
            .open(&exe)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let third = open_and_hash_settled(&exe, Some(&cache), Duration::ZERO).unwrap();
        assert!(
            !third.cached,
            "a rewrite with size and mtime restored must miss"
        );
        assert_eq!(third.digest, sha(b"version 2"));
    }

    #[test]
    fn a_file_changed_just_now_is_not_cached() {
        let d = Dir::new("racy");
        let cache = d.0.join("cache");
        let exe = d.0.join("agent");
        std::fs::write(&exe, b"fresh").unwrap();
        assert!(!open_and_hash(&exe, Some(&cache)).unwrap().cached);
        assert!(
            !open_and_hash(&exe, Some(&cache)).unwrap().cached,
            "changed within RACY of hashing: never cached"
        );
        // Control: the same file is cached when its change is old enough.
        open_and_hash_settled(&exe, Some(&cache), Duration::ZERO).unwrap();
        assert!(open_and_hash(&exe, Some(&cache)).unwrap().cached);
    }

    #[test]
    fn an_entry_others_could_write_is_not_trusted() {
        let d = Dir::new("poison");
        let cache = d.0.join("cache");
        let exe = d.0.join("agent");
        std::fs::write(&exe, b"real bytes").unwrap();
        open_and_hash_settled(&exe, Some(&cache), Duration::ZERO).unwrap();
        let stamp = Stamp::of(&std::fs::metadata(&exe).unwrap());
        let entry = cache.join(stamp.name());
        // A forged digest in the entry: used while the entry is corral's own (control)...
        std::fs::write(&entry, stamp.line(&sha(b"forged"))).unwrap();
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = open_and_hash(&exe, Some(&cache)).unwrap();
        assert!(
            e.cached && e.digest == sha(b"forged"),
            "control: the entry is read"
        );
        // ...and ignored once anyone else could have written it.
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o622)).unwrap();
        let e = open_and_hash(&exe, Some(&cache)).unwrap();
        assert!(!e.cached && e.digest == sha(b"real bytes"));
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = open_and_hash(&exe, Some(&cache)).unwrap();
        assert!(!e.cached && e.digest == sha(b"real bytes"));
        // A link in the entry's place is not followed.
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::remove_file(&entry).unwrap();
        let elsewhere = d.0.join("elsewhere");
        std::fs::write(&elsewhere, stamp.line(&sha(b"forged"))).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &entry).unwrap();
        let e = open_and_hash(&exe, Some(&cache)).unwrap();
        assert!(!e.cached && e.digest == sha(b"real bytes"));
    }
}
