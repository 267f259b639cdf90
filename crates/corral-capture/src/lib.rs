//! Outside-authority candidate capture.
//!
//! After the worker's process tree is gone, corral reads the overlay **upper layer** of the
//! attempt (the only storage the worker could write) and compares it with the **base commit's
//! tree**, read from the canonical repository's object database. The result is the complete
//! changed path set, every violation as a [`Rejection`], and — only when nothing was violated —
//! one unified diff that `git apply --binary` turns a clean checkout of the base into the
//! worktree, byte for byte.
//!
//! Architecture Invariants:
//! - Cost is O(change): only the upper layer is walked, and only the base trees along changed
//!   directories are read. The unchanged base tree is never walked.
//! - Nothing the worker wrote is ever interpreted as configuration: no `.git` of the workspace,
//!   no `.gitignore` but the base tree's, no attributes. git runs only against corral's own
//!   temporary git directory with a clean environment (see [`git`]).
//! - Every file is opened relative to a directory fd with `O_NOFOLLOW` and
//!   `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`; symlinks are read with `readlinkat`,
//!   never followed; FIFOs, sockets and devices are never opened. A symlink's target is
//!   judged by resolving it in the candidate *tree* (git objects), never on the host.
//! - Sizes are checked from `st_size`/`st_blocks` before anything is read; entries, depth,
//!   bytes and time are bounded, and hitting a bound rejects (never truncates or skips);
//!   symlink resolution is bounded too (40 links per chain, a lookup budget per capture).
//! - This crate depends on `corral-contract` only, never on a sandbox backend.
//!
//! # Example
//!
//! Capture a candidate: a canonical repository with one base commit, an upper layer that
//! holds the one file the worker modified, and [`capture`] with a [`CaptureRequest`]. Here
//! the upper layer is a plain directory (no overlay mount), so there are no
//! `trusted.overlay.*` xattrs to read, which would need `CAP_SYS_ADMIN`; the request asks
//! for the `user.overlay.*` names instead. Needs `git`.
//!
//! ```
//! use std::path::Path;
//! use std::process::Command;
//!
//! use corral_capture::{CaptureRequest, OverlayXattrs, UpperLayer, capture};
//! use corral_contract::codes::ReasonCode;
//! use corral_contract::manifest::ChangeKind;
//! use corral_contract::path::PathPattern;
//!
//! /// git with no host configuration and a fixed identity; returns stdout.
//! fn git(dir: &Path, home: &Path, args: &[&str]) -> String {
//!     let out = Command::new("git")
//!         .env_clear()
//!         .env("PATH", "/usr/local/bin:/usr/bin:/bin")
//!         .env("HOME", home)
//!         .env("GIT_CONFIG_NOSYSTEM", "1")
//!         .env("GIT_CONFIG_GLOBAL", "/dev/null")
//!         .env("GIT_AUTHOR_NAME", "maintainer")
//!         .env("GIT_AUTHOR_EMAIL", "maintainer@example.invalid")
//!         .env("GIT_COMMITTER_NAME", "maintainer")
//!         .env("GIT_COMMITTER_EMAIL", "maintainer@example.invalid")
//!         .args(args)
//!         .current_dir(dir)
//!         .output()
//!         .expect("git runs");
//!     assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
//!     String::from_utf8(out.stdout).expect("UTF-8")
//! }
//!
//! let tmp = tempfile::tempdir()?;
//! let home = tmp.path();
//!
//! // The canonical repository: one base commit with src/range.rs.
//! let repo = tmp.path().join("repo");
//! std::fs::create_dir_all(repo.join("src"))?;
//! std::fs::write(repo.join("src/range.rs"), "pub fn last(n: u32) -> u32 {\n    n\n}\n")?;
//! git(&repo, home, &["init", "-q"]);
//! git(&repo, home, &["add", "-A"]);
//! git(&repo, home, &["commit", "-q", "-m", "base"]);
//! let base_sha = git(&repo, home, &["rev-parse", "HEAD"]).trim().to_owned();
//!
//! // The upper layer holds only what the worker wrote: the modified file.
//! let upper = tmp.path().join("upper");
//! std::fs::create_dir_all(upper.join("src"))?;
//! std::fs::write(upper.join("src/range.rs"), "pub fn last(n: u32) -> u32 {\n    n - 1\n}\n")?;
//!
//! let layer = UpperLayer::open(&upper)?;
//! let allowed = [PathPattern::new("src/")?];
//! let mut request = CaptureRequest::new(&repo, &base_sha, &layer, &allowed, &[], 1 << 20);
//! request.overlay_xattrs = OverlayXattrs::User;
//! let result = capture(&request)?;
//!
//! assert!(result.accepted());
//! assert_eq!(result.changed_paths.len(), 1);
//! assert_eq!(result.changed_paths[0].path, "src/range.rs");
//! assert_eq!(result.changed_paths[0].change, ChangeKind::Modified);
//! let patch = String::from_utf8(result.patch.expect("a patch when accepted"))?;
//! assert!(patch.contains("-    n\n+    n - 1\n"));
//! print!("{patch}");
//!
//! // A write outside the allowed paths rejects the candidate: no patch at all.
//! std::fs::write(upper.join("README.md"), "changed by the worker\n")?;
//! let result = capture(&request)?;
//! assert!(!result.accepted());
//! assert!(result.patch.is_none());
//! assert!(result.rejections.iter().any(|r| r.code == ReasonCode::PathOutOfScope));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod git;
pub mod ignore;
mod links;
pub mod objects;
pub mod scope;
mod walk;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use corral_contract::codes::{ReasonCode, Rejection};
use corral_contract::manifest::ChangedPath;
use corral_contract::path::PathPattern;
use rustix::fs::{FileType, Mode, OFlags};

pub use objects::ObjectFormat;

/// The overlay upper directory of one attempt, held as an open directory fd. Everything below
/// it is opened relative to this fd.
#[derive(Debug)]
pub struct UpperLayer {
    fd: OwnedFd,
}

impl UpperLayer {
    /// Opens `path` as a directory (`O_DIRECTORY | O_NOFOLLOW`: the last component must not be
    /// a symlink).
    pub fn open(path: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self { fd })
    }

    /// Takes ownership of an already open directory fd (for example one a sandbox backend
    /// kept from before the worker started).
    pub fn from_fd(fd: OwnedFd) -> io::Result<Self> {
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "upper layer fd is not a directory",
            ));
        }
        Ok(Self { fd })
    }
}

impl AsFd for UpperLayer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Which xattr namespace the overlay mount uses for its metadata (`trusted.overlay.*` for a
/// mount made with real root, `user.overlay.*` for a mount with the `userxattr` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverlayXattrs {
    /// `trusted.overlay.*`: an overlay mounted with real root (the default). Reading these
    /// needs `CAP_SYS_ADMIN` or an [`XattrReader`] that has it.
    #[default]
    Trusted,
    /// `user.overlay.*`: an overlay mounted with the `userxattr` option.
    User,
}

impl OverlayXattrs {
    /// `trusted.overlay.` or `user.overlay.`.
    #[must_use]
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Trusted => "trusted.overlay.",
            Self::User => "user.overlay.",
        }
    }
}

/// The overlay metadata names capture reads (after [`OverlayXattrs::prefix`]); nothing else
/// is ever asked for.
pub const OVERLAY_XATTR_NAMES: &[&str] = &["opaque", "redirect", "metacopy"];

/// Values longer than this are reported as [`XattrValue::TooLong`] (overlay's own values
/// that capture compares are one byte).
pub const MAX_XATTR_VALUE: usize = 64;

/// One overlay xattr of one upper-layer file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XattrValue {
    /// The file has no such xattr.
    Absent,
    /// Present, with this value (at most [`MAX_XATTR_VALUE`] bytes).
    Value(Vec<u8>),
    /// Present, longer than [`MAX_XATTR_VALUE`].
    TooLong,
}

/// How capture reads the overlay's metadata xattrs of upper-layer files it holds open.
///
/// `trusted.*` xattrs are readable only with `CAP_SYS_ADMIN` (without it the kernel answers
/// "no such attribute", which would silently hide opaque directories). The confined capture
/// helper holds no such capability, so it asks its parent through a narrow oracle instead
/// (`corral-checkout`); [`DirectXattrs`] reads them in this process.
pub trait XattrReader: std::fmt::Debug + Sync {
    /// The xattr `name` (the full name, for example `trusted.overlay.opaque`) of `fd`.
    fn get(&self, fd: BorrowedFd<'_>, name: &str) -> io::Result<XattrValue>;
}

/// Reads xattrs with `fgetxattr(2)` in this process.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectXattrs;

impl XattrReader for DirectXattrs {
    fn get(&self, fd: BorrowedFd<'_>, name: &str) -> io::Result<XattrValue> {
        let mut buf = [0u8; MAX_XATTR_VALUE];
        match rustix::fs::fgetxattr(fd, name, &mut buf[..]) {
            Ok(n) => Ok(XattrValue::Value(buf[..n].to_vec())),
            Err(rustix::io::Errno::NODATA | rustix::io::Errno::NOTSUP) => Ok(XattrValue::Absent),
            Err(rustix::io::Errno::RANGE) => Ok(XattrValue::TooLong),
            Err(e) => Err(e.into()),
        }
    }
}

/// Bounds of one capture. Hitting any of them rejects the candidate with `capture_limit`
/// (or fails with [`CaptureError::Timeout`] for the time bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureLimits {
    /// Largest file read, checked from `max(st_size, st_blocks * 512)` before reading.
    pub max_file_bytes: u64,
    /// Total bytes read from the upper layer.
    pub max_total_bytes: u64,
    /// Directory entries examined plus base entries enumerated for deletions.
    pub max_entries: u64,
    /// Directory nesting below the repository root.
    pub max_depth: u32,
    /// Wall time of the whole capture, git included.
    pub timeout: Duration,
    /// Address-space limit of every git process corral starts (`RLIMIT_AS`).
    pub git_memory_bytes: u64,
}

impl Default for CaptureLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: 64 << 20,
            max_total_bytes: 512 << 20,
            max_entries: 200_000,
            max_depth: 256,
            timeout: Duration::from_secs(300),
            git_memory_bytes: 4 << 30,
        }
    }
}

/// Everything capture needs. The canonical repository is trusted and used read-only (its
/// object database only); the upper layer is untrusted data.
#[derive(Debug, Clone)]
pub struct CaptureRequest<'a> {
    /// The canonical repository (trusted, read-only): only its object database is used.
    pub canonical_repo: &'a Path,
    /// The base commit (40 or 64 lowercase hex digits).
    pub base_sha: &'a str,
    /// The attempt's overlay upper layer (untrusted data).
    pub upper: &'a UpperLayer,
    /// The SandboxPolicy's writable paths: a change outside them is rejected.
    pub allowed: &'a [PathPattern],
    /// The SandboxPolicy's forbidden paths: a change to a path they match is rejected.
    pub forbidden: &'a [PathPattern],
    /// A patch longer than this rejects the candidate with `patch_too_large`.
    pub max_patch_bytes: u64,
    /// The bounds of this capture.
    pub limits: CaptureLimits,
    /// Which xattr namespace the overlay mount uses for its metadata.
    pub overlay_xattrs: OverlayXattrs,
    /// How overlay xattrs are read; `None` is [`DirectXattrs`].
    pub xattr_reader: Option<&'a dyn XattrReader>,
    /// The canonical repository's object directory when the caller already resolved it
    /// (the confined helper sees only that directory); `None` resolves it from
    /// `canonical_repo`.
    pub objects_dir: Option<&'a Path>,
    /// The git program (absolute path); `None` picks `/usr/bin/git`, `/usr/local/bin/git`
    /// or `/bin/git`.
    pub git_program: Option<&'a Path>,
    /// Where corral's temporary git directory goes; `None` uses the system temp dir.
    pub tmp_dir: Option<&'a Path>,
}

impl<'a> CaptureRequest<'a> {
    /// A request with default limits and options.
    #[must_use]
    pub fn new(
        canonical_repo: &'a Path,
        base_sha: &'a str,
        upper: &'a UpperLayer,
        allowed: &'a [PathPattern],
        forbidden: &'a [PathPattern],
        max_patch_bytes: u64,
    ) -> Self {
        Self {
            canonical_repo,
            base_sha,
            upper,
            allowed,
            forbidden,
            max_patch_bytes,
            limits: CaptureLimits::default(),
            overlay_xattrs: OverlayXattrs::default(),
            xattr_reader: None,
            objects_dir: None,
            git_program: None,
            tmp_dir: None,
        }
    }
}

/// Counters of one capture.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CaptureStats {
    /// Upper-layer entries examined plus base entries enumerated for deletions.
    pub entries: u64,
    /// Bytes read from upper-layer files.
    pub bytes_read: u64,
    /// Base tree objects read.
    pub trees_read: u64,
}

/// What capture found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureResult {
    /// Every changed path whose name is valid, sorted; ignored files are not in here.
    pub changed_paths: Vec<ChangedPath>,
    /// Untracked changed files the base tree's ignore rules cover: scope-checked, not in the
    /// patch, sorted.
    pub ignored_paths: Vec<String>,
    /// Every violation found. Non-empty means the candidate is rejected.
    pub rejections: Vec<Rejection>,
    /// The patch, only when `rejections` is empty (empty bytes when nothing changed).
    pub patch: Option<Vec<u8>>,
    /// What this capture examined and read.
    pub stats: CaptureStats,
}

impl CaptureResult {
    /// Is the candidate free of violations (and so has a patch)?
    #[must_use]
    pub fn accepted(&self) -> bool {
        self.rejections.is_empty() && self.patch.is_some()
    }
}

/// corral itself could not capture (I/O, git, a changing layer, time). The caller fails
/// closed: the attempt gets no candidate.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// An I/O error, with what corral was doing.
    #[error("{context}: {source}")]
    Io {
        /// What corral was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// corral's own git failed or answered something unexpected (a missing or malformed
    /// object, a failed process).
    #[error("git: {0}")]
    Git(String),
    /// The request cannot be served: an invalid base SHA, no usable git program, a canonical
    /// repository without a usable object directory, or no way to read the overlay's
    /// `trusted.*` xattrs.
    #[error("capture setup: {0}")]
    Setup(String),
    /// The base SHA names no commit in the canonical repository's object database.
    #[error("base commit {0} is not a commit in the canonical repository")]
    BaseNotFound(String),
    /// The upper layer uses an overlay feature capture refuses to interpret (a `redirect` or
    /// `metacopy` xattr); the message says which mount option turns it off.
    #[error("unsupported overlay layer: {0}")]
    UnsupportedOverlay(String),
    #[error(
        "the upper layer changed while it was captured (is a worker process still alive?): {0}"
    )]
    /// A file of the upper layer changed or vanished while it was read: something still
    /// writes to it.
    LayerChanged(String),
    /// The capture ran past [`CaptureLimits::timeout`].
    #[error("capture exceeded its time limit")]
    Timeout,
    /// The confined capture helper failed; its own message.
    #[error("{0}")]
    Helper(String),
}

impl CaptureError {
    /// An I/O error with what corral was doing.
    pub fn io(context: &str, source: io::Error) -> Self {
        Self::Io {
            context: context.to_owned(),
            source,
        }
    }
}

/// Captures the candidate of one attempt. See the crate documentation.
pub fn capture(req: &CaptureRequest<'_>) -> Result<CaptureResult, CaptureError> {
    let start = Instant::now();
    let deadline = start + req.limits.timeout;
    let format = ObjectFormat::from_hex_len(req.base_sha.len())
        .filter(|_| objects::Oid::from_hex(req.base_sha).is_some())
        .ok_or_else(|| {
            CaptureError::Setup(format!(
                "base SHA {:?} is not 40 or 64 lowercase hex digits",
                req.base_sha
            ))
        })?;
    let base = objects::Oid::from_hex(req.base_sha)
        .ok_or_else(|| CaptureError::Setup("base SHA".into()))?;
    if req.xattr_reader.is_none()
        && req.overlay_xattrs == OverlayXattrs::Trusted
        && !has_sys_admin()
    {
        // Without it the kernel reports every trusted.* xattr absent: opaque directories,
        // and so deletions, would silently vanish from the candidate.
        return Err(CaptureError::Setup(
            "reading trusted.overlay.* xattrs needs CAP_SYS_ADMIN, which this process lacks; \
             run capture through the capture helper's xattr oracle (corral-checkout)"
                .into(),
        ));
    }
    let program = git::find_git(req.git_program)?;
    let canonical_objects = match req.objects_dir {
        Some(dir) => dir.to_path_buf(),
        None => git::canonical_objects_dir(req.canonical_repo)?,
    };
    let sandbox = git::GitSandbox::new(
        program,
        &canonical_objects,
        format,
        req.tmp_dir,
        deadline,
        req.limits.git_memory_bytes,
    )?;
    let mut cat = sandbox.cat_file(format)?;
    let base_tree = match cat.read(&base)? {
        Some((kind, data)) if kind == "commit" => commit_tree(&data)
            .ok_or_else(|| CaptureError::Git(format!("commit {base} has no tree line")))?,
        _ => return Err(CaptureError::BaseNotFound(req.base_sha.to_owned())),
    };
    let writer = objects::PackWriter::new(&sandbox.objects_dir(), format)
        .map_err(|e| CaptureError::io("creating the candidate pack", e))?;
    let scope = scope::Scope {
        allowed: req.allowed,
        forbidden: req.forbidden,
    };
    let mut walker = walk::Walker::new(
        scope,
        req.limits,
        deadline,
        (
            req.overlay_xattrs.prefix(),
            req.xattr_reader.unwrap_or(&DirectXattrs),
        ),
        cat,
        writer,
        format,
    );
    let root = walker.walk_root(req.upper.as_fd(), base_tree)?;
    // Symlinks are judged once the whole change set is known: physically, inside the tree
    // `git apply` of the patch will produce (see `links`).
    walker.check_symlinks(root.unwrap_or(base_tree))?;
    let walk::Outcome {
        mut changed,
        mut ignored,
        mut rejections,
        stats,
        cat,
        mut writer,
    } = walker.finish();
    cat.close()?;
    writer
        .finish()
        .map_err(|e| CaptureError::io("writing the candidate pack", e))?;
    if Instant::now() >= deadline {
        return Err(CaptureError::Timeout);
    }

    let mut patch = None;
    if rejections.is_empty() {
        let cand_tree = root.unwrap_or(base_tree);
        if cand_tree == base_tree {
            patch = Some(Vec::new());
        } else {
            let (b, c) = (base_tree.hex(), cand_tree.hex());
            let out = sandbox.run(
                &[
                    "diff-tree",
                    "-p",
                    "--binary",
                    "--full-index",
                    "--no-renames",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--no-color",
                    "--src-prefix=a/",
                    "--dst-prefix=b/",
                    &b,
                    &c,
                ],
                req.max_patch_bytes,
            )?;
            match out {
                Some(p) => patch = Some(p),
                None => rejections.push(Rejection::new(
                    ReasonCode::PatchTooLarge,
                    None,
                    format!(
                        "the patch is longer than max_patch_bytes ({})",
                        req.max_patch_bytes
                    ),
                )),
            }
        }
    }
    changed.sort_by(|a, b| a.path.cmp(&b.path));
    ignored.sort();
    Ok(CaptureResult {
        changed_paths: changed,
        ignored_paths: ignored,
        rejections,
        patch,
        stats,
    })
}

/// Is `CAP_SYS_ADMIN` (bit 21) in this thread's effective set?
fn has_sys_admin() -> bool {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

fn commit_tree(commit: &[u8]) -> Option<objects::Oid> {
    let line = commit.split(|&b| b == b'\n').next()?;
    let hex = std::str::from_utf8(line.strip_prefix(b"tree ")?).ok()?;
    objects::Oid::from_hex(hex)
}
