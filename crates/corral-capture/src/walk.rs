//! The walk of the overlay upper layer, aligned with the base tree.
//!
//! Per directory of the upper layer: a character device 0:0 is a whiteout (the base entry of
//! that name is deleted), a directory whose `overlay.opaque` xattr is `y` replaces the base
//! directory (base entries not present in the upper directory are deleted), anything else is
//! an addition or a modification, decided by comparing git object ids (content) and modes
//! with the base tree — never timestamps. Base trees are read only for directories that exist
//! in the upper layer, so the cost follows the change, not the repository.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Instant;

use corral_contract::codes::{ReasonCode, Rejection};
use corral_contract::manifest::{ChangeKind, ChangedPath};
use corral_contract::path::is_git_lookalike;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::git::CatFile;
use crate::ignore::{IgnoreList, is_excluded};
use crate::links::{Resolver, Trees, Verdict};
use crate::objects::{
    MODE_EXEC, MODE_FILE, MODE_SYMLINK, MODE_TREE, ObjectFormat, Oid, PackWriter, TreeEntry,
    encode_tree, object_id,
};
use crate::scope::{Scope, escape_path, git_rejection};
use crate::{CaptureError, CaptureLimits, CaptureStats};

type Entries = BTreeMap<Vec<u8>, TreeEntry>;

/// What a walk produced.
pub(crate) struct Outcome {
    pub changed: Vec<ChangedPath>,
    pub ignored: Vec<String>,
    pub rejections: Vec<Rejection>,
    pub stats: CaptureStats,
    pub cat: CatFile,
    pub writer: PackWriter,
}

pub(crate) struct Walker<'s> {
    scope: Scope<'s>,
    limits: CaptureLimits,
    deadline: Instant,
    xattr_prefix: &'static str,
    xattrs: &'s dyn crate::XattrReader,
    cat: CatFile,
    writer: PackWriter,
    format: ObjectFormat,
    changed: Vec<ChangedPath>,
    ignored: Vec<String>,
    rejections: Vec<Rejection>,
    stats: CaptureStats,
    aborted: bool,
    ignore_stack: Vec<IgnoreList>,
    /// Every symlink of the change set (new, modified or retyped), as (path, target): judged
    /// by [`Walker::check_symlinks`] once the whole candidate tree is known.
    links: Vec<(Vec<u8>, Vec<u8>)>,
    /// The targets of those symlinks by blob id (their blobs are only in the unfinished pack).
    link_targets: HashMap<Oid, Vec<u8>>,
    /// Every tree the walk wrote (only in the unfinished pack too), by id.
    written: HashMap<Oid, Entries>,
}

/// Where a directory sits: its depth, whether an ancestor is ignored, whether it is opaque.
#[derive(Clone, Copy)]
struct DirCtx {
    depth: u32,
    dir_ignored: bool,
    opaque: bool,
}

struct DirResult {
    changed: bool,
    /// The directory's new tree; `None` when it holds nothing git tracks.
    tree: Option<Oid>,
}

fn join(path: &[u8], name: &[u8]) -> Vec<u8> {
    if path.is_empty() {
        name.to_vec()
    } else {
        let mut v = Vec::with_capacity(path.len() + 1 + name.len());
        v.extend_from_slice(path);
        v.push(b'/');
        v.extend_from_slice(name);
        v
    }
}

fn classify(base: Option<TreeEntry>, new: TreeEntry) -> Option<ChangeKind> {
    match base {
        None => Some(ChangeKind::Added),
        Some(b) if b == new => None,
        Some(b) if b.is_symlink() != new.is_symlink() => Some(ChangeKind::TypeChanged),
        Some(b) if b.oid == new.oid => Some(ChangeKind::ModeChanged),
        Some(_) => Some(ChangeKind::Modified),
    }
}

/// Opens one name inside `dir` without following any symlink and without leaving `dir`.
fn open_beneath(dir: BorrowedFd<'_>, name: &[u8], flags: OFlags) -> rustix::io::Result<OwnedFd> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
    match rustix::fs::openat2(
        dir,
        name,
        flags,
        Mode::empty(),
        ResolveFlags::BENEATH
            | ResolveFlags::NO_SYMLINKS
            | ResolveFlags::NO_MAGICLINKS
            | ResolveFlags::NO_XDEV,
    ) {
        Err(Errno::NOSYS) => rustix::fs::openat(dir, name, flags, Mode::empty()),
        other => other,
    }
}

const S_ISUID: u32 = 0o4000;
const S_ISGID: u32 = 0o2000;

impl<'s> Walker<'s> {
    pub(crate) fn new(
        scope: Scope<'s>,
        limits: CaptureLimits,
        deadline: Instant,
        (xattr_prefix, xattrs): (&'static str, &'s dyn crate::XattrReader),
        cat: CatFile,
        writer: PackWriter,
        format: ObjectFormat,
    ) -> Self {
        Self {
            scope,
            limits,
            deadline,
            xattr_prefix,
            xattrs,
            cat,
            writer,
            format,
            changed: Vec::new(),
            ignored: Vec::new(),
            rejections: Vec::new(),
            stats: CaptureStats::default(),
            aborted: false,
            ignore_stack: Vec::new(),
            links: Vec::new(),
            link_targets: HashMap::new(),
            written: HashMap::new(),
        }
    }

    pub(crate) fn finish(self) -> Outcome {
        Outcome {
            changed: self.changed,
            ignored: self.ignored,
            rejections: self.rejections,
            stats: self.stats,
            cat: self.cat,
            writer: self.writer,
        }
    }

    /// Walks the whole upper layer; returns the candidate root tree when it differs from the
    /// base tree.
    pub(crate) fn walk_root(
        &mut self,
        upper: BorrowedFd<'_>,
        base_tree: Oid,
    ) -> Result<Option<Oid>, CaptureError> {
        let opaque = self.xattr_is(upper, "opaque", b"y")?;
        self.check_unsupported_dir(upper, b"")?;
        let r = self.walk_dir(upper, b"", Some(base_tree), opaque, 0, false)?;
        Ok(match (r.changed, r.tree) {
            (false, _) => None,
            (true, Some(t)) => Some(t),
            (true, None) => Some(self.write_tree(Entries::new())?),
        })
    }

    fn reject(&mut self, code: ReasonCode, path: &[u8], detail: impl Into<String>) {
        self.rejections
            .push(Rejection::new(code, Some(escape_path(path)), detail));
    }

    fn emit_change(&mut self, path: &[u8], change: ChangeKind) {
        if let Some(p) = self.scope.check_changed(path, &mut self.rejections) {
            self.changed.push(ChangedPath {
                path: p.as_str().to_owned(),
                change,
            });
        }
    }

    fn emit_ignored(&mut self, path: &[u8]) {
        if let Some(p) = self.scope.check_changed(path, &mut self.rejections) {
            self.ignored.push(p.as_str().to_owned());
        }
    }

    /// Fails once the capture's deadline has passed (the walk itself, not only git).
    fn tick(&self) -> Result<(), CaptureError> {
        if Instant::now() >= self.deadline {
            return Err(CaptureError::Timeout);
        }
        Ok(())
    }

    /// Counts one entry; false (and a `capture_limit` rejection, once) past the bound.
    fn count_entry(&mut self, path: &[u8]) -> bool {
        if self.aborted {
            return false;
        }
        self.stats.entries += 1;
        if self.stats.entries > self.limits.max_entries {
            self.aborted = true;
            self.reject(
                ReasonCode::CaptureLimit,
                path,
                format!(
                    "more than {} entries to examine; capture stopped here and the candidate is rejected",
                    self.limits.max_entries
                ),
            );
            return false;
        }
        true
    }

    fn read_tree(&mut self, oid: &Oid) -> Result<Entries, CaptureError> {
        self.stats.trees_read += 1;
        Ok(self.cat.read_tree(oid)?.into_iter().collect())
    }

    /// Writes a tree of the candidate and keeps its entries for [`Walker::check_symlinks`].
    fn write_tree(&mut self, entries: Entries) -> Result<Oid, CaptureError> {
        let data = encode_tree(entries.iter().map(|(n, e)| (n.as_slice(), *e)));
        let oid = self
            .writer
            .write("tree", &data)
            .map_err(|e| CaptureError::io("writing a tree object", e))?;
        self.written.insert(oid, entries);
        Ok(oid)
    }

    /// Resolves every symlink of the change set physically inside the candidate tree rooted
    /// at `root` (see [`crate::links`]) and records a `symlink_escape` rejection for each one
    /// that leaves the scope or the repository. Runs after the walk, when the whole change set
    /// is known; bounded by [`crate::links::MAX_STEPS`] lookups (past it: `capture_limit`).
    pub(crate) fn check_symlinks(&mut self, root: Oid) -> Result<(), CaptureError> {
        let links = std::mem::take(&mut self.links);
        if links.is_empty() {
            return Ok(());
        }
        let deadline = self.deadline;
        let trees = CandidateTrees {
            written: &self.written,
            link_targets: &self.link_targets,
            base: HashMap::new(),
            cat: &mut self.cat,
            trees_read: &mut self.stats.trees_read,
        };
        let mut resolver = Resolver::new(self.scope, trees, root);
        let mut found = Vec::new();
        for (link, target) in &links {
            if Instant::now() >= deadline {
                return Err(CaptureError::Timeout);
            }
            match resolver.resolve(link, target)? {
                Verdict::Inside => {}
                Verdict::Escape(detail) => found.push(Rejection::new(
                    ReasonCode::SymlinkEscape,
                    Some(escape_path(link)),
                    format!("{detail} (target {:?})", escape_path(target)),
                )),
                Verdict::Limit(detail) => {
                    found.push(Rejection::new(
                        ReasonCode::CaptureLimit,
                        Some(escape_path(link)),
                        detail,
                    ));
                    break;
                }
            }
        }
        self.rejections.extend(found);
        Ok(())
    }

    fn xattr_is(&self, fd: BorrowedFd<'_>, name: &str, value: &[u8]) -> Result<bool, CaptureError> {
        let full = format!("{}{name}", self.xattr_prefix);
        match self.xattrs.get(fd, &full) {
            Ok(crate::XattrValue::Value(v)) => Ok(v == value),
            Ok(_) => Ok(false),
            Err(e) => Err(CaptureError::io("reading an overlay xattr", e)),
        }
    }

    fn xattr_present(&self, fd: BorrowedFd<'_>, name: &str) -> Result<bool, CaptureError> {
        let full = format!("{}{name}", self.xattr_prefix);
        match self.xattrs.get(fd, &full) {
            Ok(crate::XattrValue::Absent) => Ok(false),
            Ok(_) => Ok(true),
            Err(e) => Err(CaptureError::io("reading an overlay xattr", e)),
        }
    }

    fn check_unsupported_dir(&self, fd: BorrowedFd<'_>, path: &[u8]) -> Result<(), CaptureError> {
        if self.xattr_present(fd, "redirect")? {
            return Err(CaptureError::UnsupportedOverlay(format!(
                "{} carries a redirect xattr; mount the overlay with redirect_dir=off",
                escape_path(path)
            )));
        }
        Ok(())
    }

    fn walk_dir(
        &mut self,
        dir: BorrowedFd<'_>,
        path: &[u8],
        base: Option<Oid>,
        opaque: bool,
        depth: u32,
        dir_ignored: bool,
    ) -> Result<DirResult, CaptureError> {
        let base_entries = match base {
            Some(t) => self.read_tree(&t)?,
            None => Entries::new(),
        };
        let mut pushed = false;
        if let Some(e) = base_entries.get(b".gitignore".as_slice()).copied()
            && e.is_file()
            && let Some((kind, data)) = self.cat.read(&e.oid)?
            && kind == "blob"
        {
            self.ignore_stack.push(IgnoreList::parse(path, &data));
            pushed = true;
        }
        let result = self.walk_entries(dir, path, base, &base_entries, opaque, depth, dir_ignored);
        if pushed {
            self.ignore_stack.pop();
        }
        result
    }

    #[allow(clippy::too_many_arguments, reason = "internal recursion state")]
    fn walk_entries(
        &mut self,
        dir: BorrowedFd<'_>,
        path: &[u8],
        base: Option<Oid>,
        base_entries: &Entries,
        opaque: bool,
        depth: u32,
        dir_ignored: bool,
    ) -> Result<DirResult, CaptureError> {
        let mut new: Entries = if opaque {
            Entries::new()
        } else {
            base_entries.clone()
        };
        let mut handled: BTreeSet<Vec<u8>> = BTreeSet::new();

        let mut names: Vec<Vec<u8>> = Vec::new();
        let budget = self.limits.max_entries.saturating_sub(self.stats.entries) + 1;
        let listing = Dir::read_from(dir)
            .map_err(|e| CaptureError::io("listing an upper-layer directory", e.into()))?;
        for ent in listing {
            let ent =
                ent.map_err(|e| CaptureError::io("listing an upper-layer directory", e.into()))?;
            let name = ent.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            names.push(name.to_vec());
            if names.len() as u64 > budget {
                break;
            }
        }
        names.sort();

        for name in names {
            self.tick()?;
            let full = join(path, &name);
            if !self.count_entry(&full) {
                break;
            }
            let st = rustix::fs::statat(dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW).map_err(
                |e| CaptureError::LayerChanged(format!("lstat {}: {e}", escape_path(&full))),
            )?;
            let ftype = FileType::from_raw_mode(st.st_mode);
            let base_e = base_entries.get(&name).copied();

            // Anything named like `.git` is git metadata: written, replaced or deleted (a
            // whiteout), it rejects the candidate and is not descended into.
            if let Ok(s) = std::str::from_utf8(&name)
                && is_git_lookalike(s)
            {
                self.rejections.push(git_rejection(&full, s));
                continue;
            }
            if ftype == FileType::CharacterDevice && st.st_rdev == 0 {
                // Whiteout: the base entry of this name is deleted.
                if let Some(b) = base_e {
                    new.remove(&name);
                    handled.insert(name.clone());
                    self.emit_deleted(&full, b, depth + 1)?;
                }
                continue;
            }
            match ftype {
                FileType::Directory => {
                    let ctx = DirCtx {
                        depth,
                        dir_ignored,
                        opaque,
                    };
                    self.visit_dir(dir, &name, &full, &st, base_e, ctx, &mut new, &mut handled)?;
                }
                FileType::Symlink | FileType::RegularFile => {
                    // A base directory or submodule replaced by a file.
                    let mut base_leaf = base_e;
                    if let Some(b) = base_e {
                        if b.is_gitlink() {
                            self.reject(
                                ReasonCode::GitMetadataChanged,
                                &full,
                                "a submodule (gitlink) was replaced by a file",
                            );
                            handled.insert(name.clone());
                            continue;
                        }
                        if b.is_tree() {
                            new.remove(&name);
                            handled.insert(name.clone());
                            self.emit_deleted(&full, b, depth + 1)?;
                            base_leaf = None;
                        }
                    }
                    let ignored = base_leaf.is_none()
                        && (dir_ignored || is_excluded(&self.ignore_stack, &full, false));
                    let entry = if ftype == FileType::Symlink {
                        self.visit_symlink(dir, &name, &full, base_leaf)?
                    } else {
                        self.visit_file(dir, &name, &full, &st, base_leaf, ignored)?
                    };
                    let Some(entry) = entry else { continue };
                    if ignored {
                        self.emit_ignored(&full);
                        continue;
                    }
                    if let Some(kind) = classify(base_leaf, entry) {
                        handled.insert(name.clone());
                        self.emit_change(&full, kind);
                    }
                    new.insert(name, entry);
                }
                other => {
                    let what = match other {
                        FileType::Fifo => "a FIFO",
                        FileType::Socket => "a socket",
                        FileType::BlockDevice => "a block device",
                        FileType::CharacterDevice => "a character device",
                        _ => "an unknown file type",
                    };
                    self.reject(ReasonCode::SpecialFile, &full, format!("{what} in the change set; only files, symlinks and directories are captured"));
                    handled.insert(name.clone());
                }
            }
            if self.aborted {
                break;
            }
        }

        if opaque && !self.aborted {
            for (name, b) in base_entries {
                if !new.contains_key(name) && !handled.contains(name) {
                    let full = join(path, name);
                    self.emit_deleted(&full, *b, depth + 1)?;
                }
            }
        }
        let changed = new != *base_entries;
        let tree = if new.is_empty() {
            None
        } else if !changed {
            base
        } else {
            Some(self.write_tree(new)?)
        };
        Ok(DirResult { changed, tree })
    }

    #[allow(clippy::too_many_arguments, reason = "internal recursion state")]
    fn visit_dir(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        full: &[u8],
        st: &rustix::fs::Stat,
        base_e: Option<TreeEntry>,
        ctx: DirCtx,
        new: &mut Entries,
        handled: &mut BTreeSet<Vec<u8>>,
    ) -> Result<(), CaptureError> {
        let DirCtx {
            depth,
            dir_ignored,
            opaque: parent_opaque,
        } = ctx;
        if depth + 1 > self.limits.max_depth {
            self.reject(
                ReasonCode::CaptureLimit,
                full,
                format!(
                    "directories nested deeper than {}; not examined, the candidate is rejected",
                    self.limits.max_depth
                ),
            );
            handled.insert(name.to_vec());
            return Ok(());
        }
        let fd = open_beneath(dir, name, OFlags::RDONLY | OFlags::DIRECTORY)
            .map_err(|e| CaptureError::LayerChanged(format!("open {}: {e}", escape_path(full))))?;
        let st2 = rustix::fs::fstat(&fd).map_err(|e| CaptureError::io("fstat", e.into()))?;
        if st2.st_ino != st.st_ino || st2.st_dev != st.st_dev {
            return Err(CaptureError::LayerChanged(format!(
                "{} was replaced",
                escape_path(full)
            )));
        }
        self.check_unsupported_dir(fd.as_fd(), full)?;
        // Below an opaque directory the lower layer is invisible, so every directory there
        // replaces its base counterpart, whether or not it carries the xattr itself.
        let opaque = parent_opaque || self.xattr_is(fd.as_fd(), "opaque", b"y")?;
        let mut gitlink = false;
        let (child_base, child_opaque) = match base_e {
            Some(b) if b.is_tree() => (Some(b.oid), opaque),
            Some(b) if b.is_gitlink() => {
                gitlink = true;
                (None, false)
            }
            Some(b) => {
                // A base file or symlink replaced by a directory.
                new.remove(name);
                handled.insert(name.to_vec());
                self.emit_deleted(full, b, depth + 1)?;
                (None, false)
            }
            None => (None, false),
        };
        let child_ignored = dir_ignored || is_excluded(&self.ignore_stack, full, true);
        let r = self.walk_dir(
            fd.as_fd(),
            full,
            child_base,
            child_opaque,
            depth + 1,
            child_ignored,
        )?;
        if gitlink {
            if r.tree.is_some() {
                self.reject(
                    ReasonCode::GitMetadataChanged,
                    full,
                    "files were written into a submodule (gitlink) path",
                );
            }
            return Ok(());
        }
        if r.changed {
            handled.insert(name.to_vec());
            match r.tree {
                Some(oid) => {
                    new.insert(
                        name.to_vec(),
                        TreeEntry {
                            mode: MODE_TREE,
                            oid,
                        },
                    );
                }
                None => {
                    new.remove(name);
                }
            }
        }
        Ok(())
    }

    fn visit_symlink(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        full: &[u8],
        base: Option<TreeEntry>,
    ) -> Result<Option<TreeEntry>, CaptureError> {
        let target = rustix::fs::readlinkat(dir, name, Vec::with_capacity(256))
            .map_err(|e| {
                CaptureError::LayerChanged(format!("readlink {}: {e}", escape_path(full)))
            })?
            .into_bytes();
        let oid = object_id(self.format, "blob", &target)
            .ok_or_else(|| CaptureError::Setup("hash".into()))?;
        let entry = TreeEntry {
            mode: MODE_SYMLINK,
            oid,
        };
        if classify(base, entry).is_some() {
            self.writer
                .write("blob", &target)
                .map_err(|e| CaptureError::io("writing a blob", e))?;
            self.link_targets.insert(oid, target.clone());
            self.links.push((full.to_vec(), target));
        }
        Ok(Some(entry))
    }

    fn visit_file(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        full: &[u8],
        st: &rustix::fs::Stat,
        base: Option<TreeEntry>,
        ignored: bool,
    ) -> Result<Option<TreeEntry>, CaptureError> {
        if st.st_mode & (S_ISUID | S_ISGID) != 0 {
            self.reject(
                ReasonCode::SetuidFile,
                full,
                "a setuid or setgid file in the change set",
            );
        }
        let mode = if st.st_mode & 0o100 != 0 {
            MODE_EXEC
        } else {
            MODE_FILE
        };
        if ignored {
            // Ignored files are listed and scope-checked, never read.
            return Ok(Some(TreeEntry {
                mode,
                oid: object_id(self.format, "blob", b"")
                    .ok_or_else(|| CaptureError::Setup("hash".into()))?,
            }));
        }
        let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
        let allocated = u64::try_from(st.st_blocks)
            .unwrap_or(u64::MAX)
            .saturating_mul(512);
        let claimed = size.max(allocated);
        let unread_kind = if base.is_some() {
            ChangeKind::Modified
        } else {
            ChangeKind::Added
        };
        if claimed > self.limits.max_file_bytes {
            self.reject(
                ReasonCode::CaptureLimit,
                full,
                format!(
                    "file of {size} bytes ({allocated} allocated) is larger than the per-file cap of {} bytes; not read",
                    self.limits.max_file_bytes
                ),
            );
            self.emit_change(full, unread_kind);
            return Ok(None);
        }
        if self.stats.bytes_read.saturating_add(claimed) > self.limits.max_total_bytes {
            self.reject(
                ReasonCode::CaptureLimit,
                full,
                format!(
                    "the change set is larger than the total cap of {} bytes; not read",
                    self.limits.max_total_bytes
                ),
            );
            self.emit_change(full, unread_kind);
            return Ok(None);
        }
        let fd = open_beneath(dir, name, OFlags::RDONLY | OFlags::NONBLOCK)
            .map_err(|e| CaptureError::LayerChanged(format!("open {}: {e}", escape_path(full))))?;
        let st2 = rustix::fs::fstat(&fd).map_err(|e| CaptureError::io("fstat", e.into()))?;
        if st2.st_ino != st.st_ino
            || st2.st_dev != st.st_dev
            || st2.st_size != st.st_size
            || FileType::from_raw_mode(st2.st_mode) != FileType::RegularFile
        {
            return Err(CaptureError::LayerChanged(format!(
                "{} changed while it was read",
                escape_path(full)
            )));
        }
        if self.xattr_present(fd.as_fd(), "metacopy")? {
            return Err(CaptureError::UnsupportedOverlay(format!(
                "{} is a metacopy-only file; mount the overlay with metacopy=off",
                escape_path(full)
            )));
        }
        self.stats.bytes_read += size;
        let mut file = File::from(fd);
        let oid = self.writer.write_blob_from(&mut file, size).map_err(|e| {
            CaptureError::LayerChanged(format!("reading {}: {e}", escape_path(full)))
        })?;
        Ok(Some(TreeEntry { mode, oid }))
    }

    /// Records the deletion of a base entry (a whole subtree for a directory).
    fn emit_deleted(
        &mut self,
        full: &[u8],
        entry: TreeEntry,
        depth: u32,
    ) -> Result<(), CaptureError> {
        if entry.is_tree() {
            if depth > self.limits.max_depth {
                self.reject(
                    ReasonCode::CaptureLimit,
                    full,
                    "deleted tree nested deeper than the depth cap",
                );
                return Ok(());
            }
            let entries = self.read_tree(&entry.oid)?;
            for (name, e) in entries {
                self.tick()?;
                let child = join(full, &name);
                if !self.count_entry(&child) {
                    return Ok(());
                }
                self.emit_deleted(&child, e, depth + 1)?;
            }
            return Ok(());
        }
        if entry.is_gitlink() {
            self.reject(
                ReasonCode::GitMetadataChanged,
                full,
                "a submodule (gitlink) was deleted",
            );
        }
        self.emit_change(full, ChangeKind::Deleted);
        Ok(())
    }
}

/// The candidate tree as [`Resolver`] reads it: trees the walk wrote from memory, unchanged
/// subtrees (base trees) through the walk's cat-file session, each read once.
struct CandidateTrees<'a> {
    written: &'a HashMap<Oid, Entries>,
    link_targets: &'a HashMap<Oid, Vec<u8>>,
    base: HashMap<Oid, Entries>,
    cat: &'a mut CatFile,
    trees_read: &'a mut u64,
}

impl Trees for CandidateTrees<'_> {
    fn entry(&mut self, tree: &Oid, name: &[u8]) -> Result<Option<TreeEntry>, CaptureError> {
        if let Some(entries) = self.written.get(tree) {
            return Ok(entries.get(name).copied());
        }
        if let Some(entries) = self.base.get(tree) {
            return Ok(entries.get(name).copied());
        }
        *self.trees_read += 1;
        let entries: Entries = self.cat.read_tree(tree)?.into_iter().collect();
        let found = entries.get(name).copied();
        self.base.insert(*tree, entries);
        Ok(found)
    }

    fn link_target(&mut self, blob: &Oid) -> Result<Vec<u8>, CaptureError> {
        if let Some(t) = self.link_targets.get(blob) {
            return Ok(t.clone());
        }
        match self.cat.read(blob)? {
            Some((kind, data)) if kind == "blob" => Ok(data),
            _ => Err(CaptureError::Git(format!(
                "symlink blob {blob} is missing from the base"
            ))),
        }
    }
}
