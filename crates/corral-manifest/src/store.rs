//! The content-addressed artifact store and its reader.
//!
//! Layout: `<artifacts>/sha256/<64 hex>`, one file per artifact, named by the sha256 of its
//! bytes, mode 0444. Writes are atomic (temporary file in the same directory, `fsync`,
//! `rename`, directory `fsync`), so a reader sees a whole artifact or none.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use corral_contract::canonical::Digest;
use corral_contract::manifest::ArtifactRef;
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use sha2::Digest as _;

/// Why the store could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store's root lies inside a protected directory (the workspace, the canonical
    /// repository).
    #[error(
        "artifact directory {store} lies inside {protected}; it must be outside the workspace and the canonical repository"
    )]
    InsideProtected {
        /// The store's root, as given.
        store: PathBuf,
        /// The protected directory it lies in, as given.
        protected: PathBuf,
    },
    /// The store's root is not an absolute path, or holds a `..` component.
    #[error("artifact directory {0} is not an absolute path without '..'")]
    BadPath(PathBuf),
    /// An I/O error, with what the store was doing.
    #[error("{context}: {source}")]
    Io {
        /// What the store was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

fn io_err(context: &str) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        context: context.to_owned(),
        source,
    }
}

/// Resolves `path` as it would be once created: the longest existing ancestor canonicalized,
/// the rest appended (which must hold no `..`).
fn resolve_future(path: &Path) -> Result<PathBuf, StoreError> {
    if !path.is_absolute() {
        return Err(StoreError::BadPath(path.to_path_buf()));
    }
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(c) => {
                let mut out = c;
                for part in rest.iter().rev() {
                    out.push(part);
                }
                return Ok(out);
            }
            Err(_) => {
                let Some(name) = existing.file_name().map(ToOwned::to_owned) else {
                    return Err(StoreError::BadPath(path.to_path_buf()));
                };
                rest.push(name);
                if !existing.pop() {
                    return Err(StoreError::BadPath(path.to_path_buf()));
                }
            }
        }
    }
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A writable artifact store.
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    root: PathBuf,
    dir: PathBuf,
    /// `<root>/sha256`, opened once: every write goes beneath this fd, so a path component
    /// swapped for a symlink after `open` cannot redirect an artifact.
    dir_fd: std::sync::Arc<std::os::fd::OwnedFd>,
}

/// Whether `name`, in a store's `sha256/`, is an artifact the corral process `pid` was writing
/// (`.tmp-<hex>-<pid>-<n>`, never visible under a digest's name): what its reaper removes once
/// `pid` has exited, however it died.
#[must_use]
pub fn is_temporary_of(name: &str, pid: u32) -> bool {
    let mut parts = name.split('-');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(".tmp"), Some(hex), Some(p), Some(n), None)
            if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit())
                && p == pid.to_string() && !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
    )
}

impl ArtifactStore {
    /// Opens (creating if needed) the store at `root`, refusing a root inside any of
    /// `protected` (the workspace, the canonical repository). Nothing is created when it is
    /// refused.
    pub fn open(root: &Path, protected: &[&Path]) -> Result<Self, StoreError> {
        if root.components().any(|c| c == Component::ParentDir) {
            return Err(StoreError::BadPath(root.to_path_buf()));
        }
        let resolved = resolve_future(root)?;
        for p in protected {
            let p_res = resolve_future(p)?;
            if resolved.starts_with(&p_res) {
                return Err(StoreError::InsideProtected {
                    store: root.to_path_buf(),
                    protected: p.to_path_buf(),
                });
            }
        }
        let dir = resolved.join("sha256");
        fs::create_dir_all(&dir).map_err(io_err("creating the artifact directory"))?;
        let dir_fd = rustix::fs::open(
            &dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_err("opening the artifact directory")(e.into()))?;
        Ok(Self {
            root: resolved,
            dir,
            dir_fd: std::sync::Arc::new(dir_fd),
        })
    }

    /// The store's root directory, resolved (artifacts live in `<root>/sha256/`).
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the artifact with this digest lives.
    #[must_use]
    pub fn path_of(&self, digest: &Digest) -> PathBuf {
        self.dir.join(digest.hex())
    }

    /// A reader over the same store.
    #[must_use]
    pub fn reader(&self) -> LocalArtifactBundleReader {
        LocalArtifactBundleReader::new(&self.root)
    }

    /// Stores `bytes`; idempotent (an intact existing copy is kept as it is, a damaged one is
    /// replaced atomically).
    pub fn put(&self, bytes: &[u8]) -> Result<ArtifactRef, StoreError> {
        let digest = Digest::of_bytes(bytes);
        let len = bytes.len() as u64;
        if self.reader().check(&digest).is_ok() {
            return Ok(ArtifactRef { digest, bytes: len });
        }
        let tmp = format!(
            ".tmp-{}-{}-{}",
            digest.hex(),
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = self.dir_fd.as_ref();
        let result = (|| {
            let fd = rustix::fs::openat2(
                dir,
                tmp.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
                rustix::fs::ResolveFlags::BENEATH | rustix::fs::ResolveFlags::NO_SYMLINKS,
            )
            .map_err(|e| io_err("creating a temporary artifact file")(e.into()))?;
            let mut f = File::from(fd);
            f.write_all(bytes).map_err(io_err("writing an artifact"))?;
            f.set_permissions(fs::Permissions::from_mode(0o444))
                .map_err(io_err("making an artifact read-only"))?;
            f.sync_all().map_err(io_err("syncing an artifact"))?;
            rustix::fs::renameat(dir, tmp.as_str(), dir, digest.hex().as_str())
                .map_err(|e| io_err("renaming an artifact into place")(e.into()))?;
            rustix::fs::fsync(dir).map_err(|e| io_err("syncing the artifact directory")(e.into()))
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(dir, tmp.as_str(), rustix::fs::AtFlags::empty());
        }
        result
            .map(|()| ArtifactRef { digest, bytes: len })
            .map_err(|e| self.named(e))
    }

    /// A write error that names this store, and what to do when its file system is full.
    fn named(&self, e: StoreError) -> StoreError {
        match e {
            StoreError::Io { context, source } => {
                let full = [rustix::io::Errno::NOSPC, rustix::io::Errno::DQUOT]
                    .iter()
                    .any(|n| source.raw_os_error() == Some(n.raw_os_error()));
                StoreError::Io {
                    context: format!(
                        "{context} in the artifact store {}{}",
                        self.root.display(),
                        if full {
                            " (its file system is full: free space there, or pass another \
                             --artifacts)"
                        } else {
                            ""
                        }
                    ),
                    source,
                }
            }
            other => other,
        }
    }
}

/// Why an artifact could not be read back intact.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No artifact with this digest in the store.
    #[error("artifact {0} is missing")]
    Missing(Digest),
    /// The stored bytes hash to another digest.
    #[error("artifact {expected} does not match its digest (content hashes to {actual})")]
    Mismatch {
        /// The digest asked for.
        expected: Digest,
        /// The digest of the bytes found.
        actual: Digest,
    },
    /// The store's entry for this digest is not a regular file.
    #[error("artifact {0} is not a regular file")]
    NotRegular(Digest),
    /// The artifact is larger than the caller's bound.
    #[error("artifact {digest} is larger than {max} bytes")]
    TooLarge {
        /// The digest asked for.
        digest: Digest,
        /// The bound, in bytes.
        max: u64,
    },
    /// An I/O error while opening or reading the artifact.
    #[error("reading artifact {digest}: {source}")]
    Io {
        /// The digest asked for.
        digest: Digest,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Reads artifacts back by digest and checks every byte against the digest.
#[derive(Debug, Clone)]
pub struct LocalArtifactBundleReader {
    dir: PathBuf,
}

impl LocalArtifactBundleReader {
    /// A reader of the store whose root is `root` (artifacts under `<root>/sha256/`).
    #[must_use]
    pub fn new(root: &Path) -> Self {
        Self {
            dir: root.join("sha256"),
        }
    }

    fn open(&self, digest: &Digest) -> Result<File, ReadError> {
        let path = self.dir.join(digest.hex());
        let fd = match rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Err(ReadError::Missing(digest.clone())),
            Err(Errno::LOOP | Errno::NXIO) => return Err(ReadError::NotRegular(digest.clone())),
            Err(e) => {
                return Err(ReadError::Io {
                    digest: digest.clone(),
                    source: e.into(),
                });
            }
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| ReadError::Io {
            digest: digest.clone(),
            source: e.into(),
        })?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(ReadError::NotRegular(digest.clone()));
        }
        Ok(File::from(fd))
    }

    fn hash_stream(
        &self,
        digest: &Digest,
        max: u64,
        mut keep: Option<&mut Vec<u8>>,
    ) -> Result<u64, ReadError> {
        let mut f = self.open(digest)?;
        let mut hasher = sha2::Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut total: u64 = 0;
        loop {
            let n = match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(ReadError::Io {
                        digest: digest.clone(),
                        source,
                    });
                }
            };
            total += n as u64;
            if total > max {
                return Err(ReadError::TooLarge {
                    digest: digest.clone(),
                    max,
                });
            }
            hasher.update(&buf[..n]);
            if let Some(k) = keep.as_deref_mut() {
                k.extend_from_slice(&buf[..n]);
            }
        }
        let actual = Digest::from_raw(hasher.finalize().into());
        if actual != *digest {
            return Err(ReadError::Mismatch {
                expected: digest.clone(),
                actual,
            });
        }
        Ok(total)
    }

    /// Re-hashes the artifact without keeping it; returns its length.
    pub fn check(&self, digest: &Digest) -> Result<u64, ReadError> {
        self.hash_stream(digest, u64::MAX, None)
    }

    /// Reads the artifact; its bytes are returned only when they match the digest.
    pub fn read(&self, digest: &Digest) -> Result<Vec<u8>, ReadError> {
        self.read_bounded(digest, u64::MAX)
    }

    /// Like [`Self::read`], refusing artifacts longer than `max` bytes.
    pub fn read_bounded(&self, digest: &Digest, max: u64) -> Result<Vec<u8>, ReadError> {
        let mut out = Vec::new();
        self.hash_stream(digest, max, Some(&mut out))?;
        Ok(out)
    }
}
