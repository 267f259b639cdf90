//! The base checkout cache: one read-only checkout per base SHA, owned by corral, bounded.
//!
//! A full checkout per attempt costs O(repository); corral materializes each base commit
//! once and every attempt mounts it as the read-only lower layer of its overlay, so an
//! attempt costs O(change).
//!
//! Layout under the cache root (mode 0700):
//! - `base/<sha>/`: a published checkout; its `.git/.corral-complete` stamp (written last)
//!   holds the tree id and is checked on every reuse;
//! - `base/<sha>.lock`: the lease, `flock`ed shared by every attempt that uses (or fills) the
//!   entry for its whole life, exclusively only by an eviction (an entry in use is never
//!   evicted); its mtime is the entry's last use;
//! - `base/<sha>.fill`: `flock`ed exclusively by the one attempt that fills the entry; the
//!   others wait on it and reuse what it published;
//! - `base/<sha>.meta`: size and entry count, for the budget and `corral cache ls`;
//! - `tmp/<sha>-<pid>-<n>/`: one materialization in progress (`work/checkout`, and the
//!   helper's `root`); published by one rename, removed on failure, and removed by the next
//!   open when its process is gone (a SIGKILLed run).

use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use corral_capture::git::{canonical_objects_dir, find_git};
use rustix::fs::FlockOperation;
use serde::{Deserialize, Serialize};

use crate::helper::{Request, Response};
use crate::materialize::{Limits, STAMP};
use crate::validate::Refusal;

/// Why a base checkout could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    /// The canonical repository (`--repo`) is wrong (exit 2): not a Git repository.
    #[error("{0}")]
    BadInput(String),
    /// The WorkUnit's `repository.base_sha` names no commit of the repository (exit 2).
    #[error("{0}")]
    BadBase(String),
    /// The base commit's data is refused: a reason code and the path.
    #[error(transparent)]
    Refused(Refusal),
    /// corral failed (I/O, git, the helper).
    #[error("{0}")]
    Internal(String),
}

/// How the checkout is materialized.
#[derive(Debug, Clone)]
pub enum Isolation {
    /// In a confined helper process: `exe` run with [`crate::helper::HELPER_ARG`].
    Helper {
        /// The program to run as the helper (corral's own executable, which handles
        /// [`crate::helper::HELPER_ARG`]).
        exe: PathBuf,
    },
    /// In this process, unconfined: only for tests of this crate and the fuzz target.
    InProcess,
}

/// The cache's bounds (ADR-0070).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// The ceiling of one materialization.
    pub checkout: Limits,
    /// The whole cache's size budget; least recently used entries not in use are evicted
    /// past it.
    pub budget_bytes: u64,
    /// Time one materialization may take.
    pub timeout: Duration,
}

impl Default for CacheLimits {
    fn default() -> Self {
        Self {
            checkout: Limits::default(),
            budget_bytes: 8 << 30,
            timeout: Duration::from_secs(1800),
        }
    }
}

/// A verified base checkout, held in use (shared lock) until dropped.
#[derive(Debug)]
pub struct BaseCheckout {
    /// The worktree (with its own `.git`), to be used read-only.
    pub dir: PathBuf,
    /// The base commit's tree id (hex), as the checkout's stamp records it.
    pub tree: String,
    /// Whether it was made now (false: reused from the cache).
    pub created: bool,
    /// Directory entries in the checkout (files, symlinks, directories), as recorded when it
    /// was made.
    pub entries: u64,
    /// How far the helper's Landlock confinement was enforced (when `created`).
    pub landlock: Option<String>,
    _lease: fs::File,
}

/// One entry, as `corral cache ls` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CacheEntry {
    /// The base commit the entry holds a checkout of.
    pub base_sha: String,
    /// Size the entry counts for against the budget (as recorded when it was made; measured
    /// on disk when there is no record).
    pub bytes: u64,
    /// Directory entries in the checkout, as recorded when it was made (0 when unknown).
    pub entries: u64,
    /// Seconds since the epoch.
    pub last_used: u64,
    /// Whether an attempt holds it now (it cannot be evicted meanwhile).
    pub in_use: bool,
}

/// What `gc` removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// The base SHAs whose entries were evicted.
    pub removed: Vec<String>,
    /// Bytes the evicted entries counted for.
    pub freed_bytes: u64,
    /// Bytes the cache still counts after the collection.
    pub kept_bytes: u64,
    /// Entries over the budget that were in use and so kept.
    pub busy: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    tree: String,
    bytes: u64,
    entries: u64,
}

/// The cache of base checkouts.
#[derive(Debug, Clone)]
pub struct BaseCache {
    root: PathBuf,
    limits: CacheLimits,
    owner: Option<(u32, u32)>,
}

fn internal(what: &str) -> impl Fn(io::Error) -> BaseError + '_ {
    move |e| BaseError::Internal(format!("{what}: {e}"))
}

const EVICTED: &str = "the base checkout was evicted while it was being leased";

static SEQ: AtomicU64 = AtomicU64::new(0);

fn is_hex_sha(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn flock(file: &fs::File, op: FlockOperation) -> io::Result<()> {
    Ok(rustix::fs::flock(file.as_fd(), op)?)
}

/// Bytes a directory tree takes (file sizes; links and directories count their own size).
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            total = total.saturating_add(m.len());
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    total
}

impl BaseCache {
    /// Opens (creating) the cache under `root`, private to its owner, and removes what
    /// SIGKILLed runs left in `tmp/`.
    pub fn open(root: &Path, limits: CacheLimits) -> Result<Self, BaseError> {
        for d in ["base", "tmp"] {
            fs::create_dir_all(root.join(d)).map_err(internal("creating the base cache"))?;
        }
        fs::set_permissions(root, fs::Permissions::from_mode(0o700))
            .map_err(internal("protecting the base cache"))?;
        let cache = Self {
            root: root.to_path_buf(),
            limits,
            owner: None,
        };
        cache.collect_torn();
        Ok(cache)
    }

    /// Checkouts made from now on belong to `uid`/`gid`, written so by the helper (rootless
    /// mode with subordinate ids, where the worker must own its lower layer; ADR-0080).
    #[must_use]
    pub fn with_owner(mut self, owner: Option<(u32, u32)>) -> Self {
        self.owner = owner;
        self
    }

    /// The cache root.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Removes materializations whose process is gone (never one still running).
    fn collect_torn(&self) {
        let Ok(rd) = fs::read_dir(self.root.join("tmp")) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name.split('-').nth(1).and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|p| !process_alive(p)) {
                let _ = remove_staging(&e.path());
            }
        }
    }

    fn lock_path(&self, sha: &str) -> PathBuf {
        self.root.join("base").join(format!("{sha}.lock"))
    }

    fn open_lock(&self, sha: &str) -> Result<fs::File, BaseError> {
        self.open_file(&format!("{sha}.lock"))
    }

    fn open_file(&self, name: &str) -> Result<fs::File, BaseError> {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(self.root.join("base").join(name))
            .map_err(internal("opening the base cache lock"))
    }

    /// Opens and locks `base/<sha>.lock`. A lock file may be unlinked by whoever holds it
    /// exclusively (a refused fill, an eviction), so the lock is good only if the file held
    /// is still the one at the path; otherwise it is taken again. `Ok(None)`: a
    /// non-blocking request found it held.
    fn lock(&self, sha: &str, op: FlockOperation) -> Result<Option<fs::File>, BaseError> {
        for _ in 0..64 {
            let f = self.open_lock(sha)?;
            match flock(&f, op) {
                Ok(()) => {}
                Err(_) if op == FlockOperation::NonBlockingLockExclusive => return Ok(None),
                Err(e) => return Err(internal("locking the base cache")(e)),
            }
            if self.still_linked(sha, &f) {
                return Ok(Some(f));
            }
        }
        Err(BaseError::Internal(
            "the base cache lock keeps being replaced".into(),
        ))
    }

    fn still_linked(&self, sha: &str, f: &fs::File) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (f.metadata(), fs::symlink_metadata(self.lock_path(sha))) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }

    fn stamp_ok(dir: &Path, tree: Option<&str>) -> Option<String> {
        let stamp = fs::read_to_string(dir.join(".git").join(STAMP)).ok()?;
        let stamp = stamp.trim().to_owned();
        match tree {
            Some(t) if t != stamp => None,
            _ => Some(stamp),
        }
    }

    /// The verified checkout of `base_sha` from `repo`, made now or reused. It stays in use
    /// (never evicted) until the returned value is dropped.
    pub fn checkout(
        &self,
        repo: &Path,
        base_sha: &str,
        isolation: &Isolation,
    ) -> Result<BaseCheckout, BaseError> {
        // An entry evicted in the instant between filling and leasing it is simply made
        // again (a bounded number of times).
        let mut last = None;
        for _ in 0..3 {
            match self.checkout_once(repo, base_sha, isolation) {
                Err(BaseError::Internal(m)) if m == EVICTED => last = Some(m),
                r => return r,
            }
        }
        Err(BaseError::Internal(format!(
            "{}: the base cache is being pruned faster than it is filled",
            last.unwrap_or_default()
        )))
    }

    fn checkout_once(
        &self,
        repo: &Path,
        base_sha: &str,
        isolation: &Isolation,
    ) -> Result<BaseCheckout, BaseError> {
        if !is_hex_sha(base_sha) {
            return Err(BaseError::BadBase(format!(
                "{base_sha:?} is not 40 or 64 lowercase hex digits"
            )));
        }
        let objects = canonical_objects_dir(repo).map_err(|e| {
            // The message itself, without the capture crate's own prefix.
            let why = match e {
                corral_capture::CaptureError::Setup(m) => m,
                other => other.to_string(),
            };
            BaseError::BadInput(format!("--repo {}: {why}", repo.display()))
        })?;
        let dir = self.root.join("base").join(base_sha);
        // The lease: a shared lock held for the attempt's whole life, so no gc evicts the
        // entry meanwhile. It is never converted (flock conversions are not atomic).
        let lock = self
            .lock(base_sha, FlockOperation::LockShared)?
            .ok_or_else(|| BaseError::Internal("locking the base cache".into()))?;
        if let Some(reused) = self.reuse(&lock, &dir, base_sha) {
            return self.lease(lock, dir, reused.0, false, reused.1, None);
        }
        // Missing or torn: one filler at a time (`<sha>.fill`, exclusive), the others wait
        // there, holding their leases, and then reuse the one verified entry.
        let fill_lock = self.open_file(&format!("{base_sha}.fill"))?;
        flock(&fill_lock, FlockOperation::LockExclusive)
            .map_err(internal("locking the base cache"))?;
        if let Some(reused) = self.reuse(&lock, &dir, base_sha) {
            return self.lease(lock, dir, reused.0, false, reused.1, None);
        }
        if fs::symlink_metadata(&dir).is_ok() {
            // Torn or stale: never reused, rebuilt.
            fs::remove_dir_all(&dir).map_err(internal("removing a torn base checkout"))?;
        }
        let staging = self.root.join("tmp").join(format!(
            "{base_sha}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let result = self.fill(&objects, base_sha, &staging, isolation);
        let outcome = match result {
            Ok((tree, entries, content, landlock)) => {
                let checkout = staging.join("work/checkout");
                // Content as the helper counted it, plus corral's own .git (not walking the
                // whole checkout again).
                let bytes = content
                    .saturating_add(tree_bytes(&checkout.join(".git")))
                    .saturating_add(entries.saturating_mul(64));
                match fs::rename(&checkout, &dir) {
                    Ok(()) => {}
                    Err(e) => {
                        let _ = remove_staging(&staging);
                        return Err(BaseError::Internal(format!(
                            "publishing the base checkout: {e}"
                        )));
                    }
                }
                let base_dir = crate::dir::Dir::open(&self.root.join("base"))
                    .map_err(internal("opening the base cache"))?;
                let meta = serde_json::to_vec(&Meta {
                    tree: tree.clone(),
                    bytes,
                    entries,
                })
                .map_err(|e| BaseError::Internal(e.to_string()))?;
                base_dir
                    .replace_file(&format!("{base_sha}.meta"), &meta, 0o600)
                    .and_then(|()| base_dir.sync())
                    .map_err(internal("recording the base checkout"))?;
                Ok((tree, entries, landlock))
            }
            Err(e) => Err(e),
        };
        let _ = remove_staging(&staging);
        drop(fill_lock);
        let (tree, entries, landlock) = match outcome {
            Ok(o) => o,
            Err(e) => {
                // Nothing was published: the lock files go too when nobody else holds a
                // lease (exclusive, so no filler is waiting either), and a refused commit
                // leaves nothing in the cache.
                drop(lock);
                if let Ok(Some(_held)) =
                    self.lock(base_sha, FlockOperation::NonBlockingLockExclusive)
                    && fs::symlink_metadata(&dir).is_err()
                {
                    let base = self.root.join("base");
                    let _ = fs::remove_file(base.join(format!("{base_sha}.fill")));
                    let _ = fs::remove_file(self.lock_path(base_sha));
                }
                return Err(e);
            }
        };
        let checkout = self.lease(lock, dir, tree, true, entries, landlock)?;
        // Over budget: evict the least recently used entries no attempt holds.
        let _ = self.gc(self.limits.budget_bytes, Some(base_sha));
        Ok(checkout)
    }

    /// The entry's (tree, entry count) when its stamp is valid.
    fn reuse(&self, _held: &fs::File, dir: &Path, sha: &str) -> Option<(String, u64)> {
        let meta = self.read_meta(sha);
        let tree = Self::stamp_ok(dir, meta.as_ref().map(|m| m.tree.as_str()))?;
        Some((tree, meta.map_or(0, |m| m.entries)))
    }

    fn lease(
        &self,
        lock: fs::File,
        dir: PathBuf,
        tree: String,
        created: bool,
        entries: u64,
        landlock: Option<String>,
    ) -> Result<BaseCheckout, BaseError> {
        // The lease is shared: other attempts may use the entry, nobody may evict it.
        let sha = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !self.still_linked(&sha, &lock) || Self::stamp_ok(&dir, Some(&tree)).is_none() {
            return Err(BaseError::Internal(EVICTED.into()));
        }
        let _ = lock.set_modified(SystemTime::now());
        Ok(BaseCheckout {
            dir,
            tree,
            created,
            entries,
            landlock,
            _lease: lock,
        })
    }

    fn fill(
        &self,
        objects: &Path,
        base_sha: &str,
        staging: &Path,
        isolation: &Isolation,
    ) -> Result<(String, u64, u64, Option<String>), BaseError> {
        let git = find_git(None).map_err(|e| BaseError::Internal(e.to_string()))?;
        let git = git.canonicalize().unwrap_or(git);
        for d in ["", "work", "root"] {
            fs::create_dir(staging.join(d))
                .map_err(internal("creating the checkout's staging directory"))?;
        }
        if let Some((uid, gid)) = self.owner {
            // The helper writes as the owner: its one writable folder is the owner's.
            rustix::fs::chown(
                staging.join("work"),
                Some(rustix::process::Uid::from_raw(uid)),
                Some(rustix::process::Gid::from_raw(gid)),
            )
            .map_err(|e| BaseError::Internal(format!("giving the staging folder away: {e}")))?;
        }
        let req = Request {
            git,
            objects: objects.to_path_buf(),
            base_sha: base_sha.to_owned(),
            work: staging.join("work"),
            new_root: staging.join("root"),
            max_entries: self.limits.checkout.max_entries,
            max_bytes: self.limits.checkout.max_bytes,
            timeout_ms: u64::try_from(self.limits.timeout.as_millis()).unwrap_or(u64::MAX),
            owner: self.owner,
        };
        let response = match isolation {
            Isolation::Helper { exe } => crate::helper::spawn(exe, &req),
            Isolation::InProcess => crate::helper::serve(&req, false),
        };
        match response {
            Response::Done {
                tree,
                entries,
                bytes,
                landlock,
            } => {
                // The stamp must say what the helper reported; a checkout without it is torn.
                if Self::stamp_ok(&staging.join("work/checkout"), Some(&tree)).is_none() {
                    return Err(BaseError::Internal(
                        "the checkout helper's result has no matching stamp".into(),
                    ));
                }
                Ok((tree, entries, bytes, Some(landlock)))
            }
            Response::Refused { code, path, detail } => {
                Err(BaseError::Refused(Refusal { code, path, detail }))
            }
            // The helper's only bad input is the base commit it was asked for.
            Response::BadInput { message } => Err(BaseError::BadBase(format!(
                "{message} (objects {})",
                objects.display()
            ))),
            Response::Failed { message } => Err(BaseError::Internal(message)),
        }
    }

    fn read_meta(&self, sha: &str) -> Option<Meta> {
        let text = fs::read(self.root.join("base").join(format!("{sha}.meta"))).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Lock files of entries that do not exist (a refused fill whose cleanup found the lock
    /// briefly held), removed when nobody holds them.
    fn sweep_orphan_locks(&self) {
        let base = self.root.join("base");
        let Ok(rd) = fs::read_dir(&base) else { return };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(sha) = name.strip_suffix(".lock") else {
                continue;
            };
            if !is_hex_sha(sha) || fs::symlink_metadata(base.join(sha)).is_ok() {
                continue;
            }
            if let Ok(Some(_held)) = self.lock(sha, FlockOperation::NonBlockingLockExclusive)
                && fs::symlink_metadata(base.join(sha)).is_err()
            {
                let _ = fs::remove_file(base.join(format!("{sha}.fill")));
                let _ = fs::remove_file(self.lock_path(sha));
            }
        }
    }

    /// Every entry, least recently used first.
    pub fn list(&self) -> Result<Vec<CacheEntry>, BaseError> {
        let mut out = Vec::new();
        let rd = fs::read_dir(self.root.join("base")).map_err(internal("reading the cache"))?;
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !is_hex_sha(&name) || !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let meta = self.read_meta(&name);
            let bytes = meta
                .as_ref()
                .map_or_else(|| tree_bytes(&e.path()), |m| m.bytes);
            let Ok(lock) = fs::File::open(self.lock_path(&name)) else {
                out.push(CacheEntry {
                    base_sha: name,
                    bytes,
                    entries: meta.map_or(0, |m| m.entries),
                    last_used: 0,
                    in_use: false,
                });
                continue;
            };
            let last_used = lock
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            let in_use = flock(&lock, FlockOperation::NonBlockingLockExclusive).is_err();
            out.push(CacheEntry {
                base_sha: name,
                bytes,
                entries: meta.map_or(0, |m| m.entries),
                last_used,
                in_use,
            });
        }
        out.sort_by(|a, b| (a.last_used, &a.base_sha).cmp(&(b.last_used, &b.base_sha)));
        Ok(out)
    }

    /// Evicts least recently used entries not in use (and never `keep`) until the cache
    /// holds at most `budget_bytes`.
    pub fn gc(&self, budget_bytes: u64, keep: Option<&str>) -> Result<GcReport, BaseError> {
        self.sweep_orphan_locks();
        let entries = self.list()?;
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        let mut report = GcReport::default();
        for e in &entries {
            if total <= budget_bytes {
                break;
            }
            if Some(e.base_sha.as_str()) == keep {
                continue;
            }
            let Some(_lock) = self.lock(&e.base_sha, FlockOperation::NonBlockingLockExclusive)?
            else {
                report.busy.push(e.base_sha.clone());
                continue;
            };
            let dir = self.root.join("base").join(&e.base_sha);
            // The stamp first: a half-removed entry is torn, never reused.
            let _ = fs::remove_file(dir.join(".git").join(STAMP));
            fs::remove_dir_all(&dir).map_err(internal("evicting a base checkout"))?;
            let _ = fs::remove_file(self.root.join("base").join(format!("{}.meta", e.base_sha)));
            // Held exclusively: whoever opened it before waits and then sees it unlinked.
            let _ = fs::remove_file(self.root.join("base").join(format!("{}.fill", e.base_sha)));
            let _ = fs::remove_file(self.lock_path(&e.base_sha));
            total = total.saturating_sub(e.bytes);
            report.freed_bytes += e.bytes;
            report.removed.push(e.base_sha.clone());
        }
        report.kept_bytes = total;
        Ok(report)
    }
}

/// Removes a staging directory (it may hold the helper's root mount point, which is only
/// ever mounted inside the helper's own mount namespace).
/// Whether `name`, in the cache's `tmp/` or `base/`, is a temporary of the corral process
/// `pid`: a materialization in progress (`tmp/<sha>-<pid>-<n>`) or a file being replaced
/// (`base/.<name>.tmp-<pid>`). What its reaper removes once `pid` has exited, however it died.
#[must_use]
pub fn is_temporary_of(name: &str, pid: u32) -> bool {
    let pid = pid.to_string();
    let staging = {
        let mut parts = name.split('-');
        matches!(
            (parts.next(), parts.next(), parts.next(), parts.next()),
            (Some(sha), Some(p), Some(n), None)
                if is_hex_sha(sha) && p == pid && !n.is_empty()
                    && n.bytes().all(|b| b.is_ascii_digit())
        )
    };
    staging
        || name
            .strip_prefix('.')
            .and_then(|r| r.strip_suffix(pid.as_str()))
            .and_then(|r| r.strip_suffix(".tmp-"))
            .is_some_and(|r| !r.is_empty())
}

/// Removes a materialization in progress (or what is left of one).
pub fn remove_staging(staging: &Path) -> io::Result<()> {
    match fs::remove_dir_all(staging) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}
