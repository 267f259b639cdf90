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
    #[default]
    Trusted,
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
    Absent,
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
    pub canonical_repo: &'a Path,
    /// The base commit (40 or 64 lowercase hex digits).
    pub base_sha: &'a str,
    pub upper: &'a UpperLayer,
    pub allowed: &'a [PathPattern],
    pub forbidden: &'a [PathPattern],
    /// A patch longer than this rejects the candidate with `patch_too_large`.
    pub max_patch_bytes: u64,
    pub limits: CaptureLimits,
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
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error("git: {0}")]
    Git(String),
    #[error("capture setup: {0}")]
    Setup(String),
    #[error("base commit {0} is not a commit in the canonical repository")]
    BaseNotFound(String),
    #[error("unsupported overlay layer: {0}")]
    UnsupportedOverlay(String),
    #[error(
        "the upper layer changed while it was captured (is a worker process still alive?): {0}"
    )]
    LayerChanged(String),
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
