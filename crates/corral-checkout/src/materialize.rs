//! Materializes one base commit into an empty directory, within limits.
//!
//! The checkout is written from the canonical repository's object database through capture's
//! hardened git directory (no repository config, hooks, filters or attributes are consulted),
//! byte for byte as the tree holds it: blobs, modes, symlinks; submodules become empty
//! directories. It carries a `.git` of its own (HEAD at the base SHA, a pack holding exactly
//! the base commit's tree and blobs, marked shallow), so agents can run `git status` and
//! `git diff`, yet nothing in it points back at the canonical repository.
//!
//! Every tree is validated ([`crate::validate::check_entries`]) before any of its entries is
//! written, and every entry is written beneath its parent's directory fd ([`crate::dir`]).

use std::path::Path;
use std::time::Instant;

use corral_capture::git::CatFile;
use corral_capture::objects::{
    MODE_EXEC, MODE_FILE, ObjectFormat, Oid, PackWriter, TreeEntry, encode_tree, parse_tree,
};
use corral_contract::ReasonCode;

use crate::dir::Dir;
use crate::index::{IndexEntry, encode_index};
use crate::validate::{Refusal, check_entries, join};

/// The ceiling of one materialization (ADR-0070). Set by the operator of corral, never by a
/// WorkUnit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Directory entries created (files, symlinks, directories, submodule folders).
    pub max_entries: u64,
    /// Bytes of file and symlink content written.
    pub max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_entries: 250_000,
            max_bytes: 4 << 30,
        }
    }
}

/// What a materialization wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// The commit's tree, recomputed from what was written.
    pub tree: Oid,
    /// Directory entries created (files, symlinks, directories, submodule folders).
    pub entries: u64,
    /// Bytes of file and symlink content written.
    pub bytes: u64,
}

/// Why a materialization failed. Whatever was written stays inside the target directory,
/// which the caller removes.
#[derive(Debug, thiserror::Error)]
pub enum MaterializeError {
    /// The base commit's data is refused (a reason code and the path).
    #[error(transparent)]
    Refused(Refusal),
    /// The caller's input is wrong: no such commit, not a commit.
    #[error("{0}")]
    BadInput(String),
    /// corral failed: I/O, git or the object source, or the time limit passed.
    #[error("{0}")]
    Internal(String),
}

fn internal<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> MaterializeError {
    move |e| MaterializeError::Internal(format!("{what}: {e}"))
}

/// Where objects come from: capture's hardened `git cat-file --batch` in production, a map in
/// the fuzz target. Requests are answered in order, so a caller can keep a window of them in
/// flight instead of paying one round trip to git per object.
pub trait ObjectSource {
    /// Queues a request.
    fn request(&mut self, oid: &Oid) -> Result<(), String>;
    /// Sends what is queued.
    fn flush(&mut self) -> Result<(), String>;
    /// The answer to the oldest outstanding request (which is for `oid`): `(type, content)`,
    /// `Ok(None)` when the object does not exist.
    fn answer(&mut self, oid: &Oid) -> Result<Option<(String, Vec<u8>)>, String>;

    /// One object, one round trip.
    fn read_object(&mut self, oid: &Oid) -> Result<Option<(String, Vec<u8>)>, String> {
        self.request(oid)?;
        self.flush()?;
        self.answer(oid)
    }
}

impl ObjectSource for CatFile {
    fn request(&mut self, oid: &Oid) -> Result<(), String> {
        self.send(oid).map_err(|e| e.to_string())
    }
    fn flush(&mut self) -> Result<(), String> {
        CatFile::flush(self).map_err(|e| e.to_string())
    }
    fn answer(&mut self, oid: &Oid) -> Result<Option<(String, Vec<u8>)>, String> {
        self.recv(oid).map_err(|e| e.to_string())
    }
}

/// Requests in flight at once: their text (at most 65 bytes each) must fit in a pipe buffer
/// (64 KiB), so queueing them never waits on git.
const WINDOW: usize = 256;

/// The name of the stamp written last into the checkout's `.git`: the tree id it holds.
pub const STAMP: &str = ".corral-complete";

/// Writes the checkout of `base` into the empty directory `target` (path and fd of the same
/// directory: the pack writer works by path inside corral's own `.git`, everything the tree
/// shapes goes through the fd).
pub fn materialize_commit(
    cat: &mut dyn ObjectSource,
    format: ObjectFormat,
    base: &Oid,
    target: &Path,
    limits: Limits,
    deadline: Instant,
) -> Result<Stats, MaterializeError> {
    let commit = match cat
        .read_object(base)
        .map_err(internal("reading the base commit"))?
    {
        Some((kind, data)) if kind == "commit" => data,
        Some((kind, _)) => {
            return Err(MaterializeError::BadInput(format!(
                "{} is a {kind}, not a commit",
                base.hex()
            )));
        }
        None => {
            return Err(MaterializeError::BadInput(format!(
                "{} is not a commit of the repository",
                base.hex()
            )));
        }
    };
    let tree = commit_tree(&commit).ok_or_else(|| {
        MaterializeError::Refused(Refusal {
            code: ReasonCode::BaseTreeInvalid,
            path: String::new(),
            detail: format!("commit {} has no valid tree line", base.hex()),
        })
    })?;
    let root = Dir::open(target).map_err(internal("opening the checkout directory"))?;
    // corral's own .git exists before any tree entry is written, so no entry can take its
    // name (validation refuses the name too; O_EXCL would fail).
    let git = root
        .create_dir(".git")
        .map_err(internal("creating the checkout's .git"))?;
    let objects = git
        .create_dir("objects")
        .map_err(internal("creating the checkout's .git"))?;
    objects
        .create_dir("pack")
        .map_err(internal("creating the checkout's .git"))?;
    for d in ["refs", "info"] {
        git.create_dir(d)
            .map_err(internal("creating the checkout's .git"))?;
    }
    let refs = git
        .open_dir("refs")
        .map_err(internal("creating the checkout's .git"))?;
    for d in ["heads", "tags"] {
        refs.create_dir(d)
            .map_err(internal("creating the checkout's .git"))?;
    }
    // Stored, not compressed: the pack's bytes are bounded by the checkout's own, and
    // deflating every blob was a third of a cold checkout's time (benches/checkout.rs).
    let mut writer = PackWriter::with_compression(
        &target.join(".git/objects"),
        format,
        flate2::Compression::none(),
    )
    .map_err(internal("creating the checkout pack"))?;
    writer
        .write("commit", &commit)
        .map_err(internal("writing the checkout pack"))?;
    let mut m = Materializer {
        cat,
        format,
        writer: &mut writer,
        limits,
        deadline,
        entries: 0,
        bytes: 0,
        index: Vec::new(),
    };
    let rebuilt = m.tree(&tree, None, &root, &mut Vec::new())?;
    if rebuilt != tree {
        // Only a tree git itself would not write re-hashes differently (entry order and
        // names were checked): refuse it rather than check out something else.
        return Err(MaterializeError::Refused(Refusal {
            code: ReasonCode::BaseTreeInvalid,
            path: String::new(),
            detail: format!(
                "the checkout of {} does not hash to its tree (non-canonical tree objects)",
                base.hex()
            ),
        }));
    }
    let (entries, bytes, index) = (m.entries, m.bytes, std::mem::take(&mut m.index));
    writer
        .finish()
        .map_err(internal("finishing the checkout pack"))?;
    let hex = base.hex();
    let config = match format {
        ObjectFormat::Sha1 => "[core]\n\trepositoryformatversion = 0\n\tbare = false\n".to_owned(),
        ObjectFormat::Sha256 => "[core]\n\trepositoryformatversion = 1\n\tbare = false\n[extensions]\n\tobjectformat = sha256\n".to_owned(),
    };
    for (name, content) in [
        ("HEAD", format!("{hex}\n")),
        ("shallow", format!("{hex}\n")),
        ("config", config),
        ("description", "corral base checkout\n".to_owned()),
    ] {
        git.create_file(name, content.as_bytes(), 0o644)
            .map_err(internal("writing the checkout's .git"))?;
    }
    git.create_file("index", &encode_index(format, index), 0o644)
        .map_err(internal("writing the checkout's index"))?;
    // The stamp last: a checkout without it is torn and never used.
    git.replace_file(STAMP, format!("{}\n", tree.hex()).as_bytes(), 0o644)
        .map_err(internal("stamping the checkout"))?;
    Ok(Stats {
        tree,
        entries,
        bytes,
    })
}

/// The `tree <hex>` line of a commit object.
fn commit_tree(commit: &[u8]) -> Option<Oid> {
    let line = commit.split(|b| *b == b'\n').next()?;
    let hex = std::str::from_utf8(line.strip_prefix(b"tree ")?).ok()?;
    Oid::from_hex(hex)
}

struct Materializer<'a> {
    cat: &'a mut dyn ObjectSource,
    format: ObjectFormat,
    writer: &'a mut PackWriter,
    limits: Limits,
    deadline: Instant,
    entries: u64,
    bytes: u64,
    index: Vec<IndexEntry>,
}

impl Materializer<'_> {
    fn count(&mut self, path: &[u8], bytes: u64) -> Result<(), MaterializeError> {
        self.entries += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        if self.entries > self.limits.max_entries {
            return Err(limit(
                path,
                format!(
                    "the base checkout would hold more than {} entries",
                    self.limits.max_entries
                ),
            ));
        }
        if self.bytes > self.limits.max_bytes {
            return Err(limit(
                path,
                format!(
                    "the base checkout would hold more than {} bytes",
                    self.limits.max_bytes
                ),
            ));
        }
        if Instant::now() > self.deadline {
            return Err(MaterializeError::Internal(
                "materializing the base checkout took too long".into(),
            ));
        }
        Ok(())
    }

    /// Writes tree `oid` (its content already read when `data` is given) beneath `dir`
    /// (repository path `rel`); returns the tree id recomputed from what was written.
    /// Blobs are written first, read through a window of pipelined requests, then the
    /// subtrees (their objects read the same way before any recursion, so no request is
    /// ever outstanding across one).
    fn tree(
        &mut self,
        oid: &Oid,
        data: Option<Vec<u8>>,
        dir: &Dir,
        rel: &mut Vec<u8>,
    ) -> Result<Oid, MaterializeError> {
        let object = match data {
            Some(d) => Some(("tree".to_owned(), d)),
            None => self
                .cat
                .read_object(oid)
                .map_err(internal("reading a base tree"))?,
        };
        let entries = match object {
            Some((kind, data)) if kind == "tree" => {
                parse_tree(self.format, &data).ok_or_else(|| {
                    MaterializeError::Refused(Refusal::tree(rel, "a malformed tree object"))
                })?
            }
            Some((kind, _)) => {
                return Err(MaterializeError::Refused(Refusal::tree(
                    rel,
                    format!("is a {kind} where a tree was named"),
                )));
            }
            None => {
                return Err(MaterializeError::Refused(Refusal::tree(
                    rel,
                    format!("tree {} is missing", oid.hex()),
                )));
            }
        };
        check_entries(rel, &entries).map_err(MaterializeError::Refused)?;
        let mut rebuilt: Vec<(Vec<u8>, TreeEntry)> = Vec::with_capacity(entries.len());
        let blobs: Vec<usize> = (0..entries.len())
            .filter(|&i| !entries[i].1.is_tree() && !entries[i].1.is_gitlink())
            .collect();
        for chunk in blobs.chunks(WINDOW) {
            for &i in chunk {
                self.cat
                    .request(&entries[i].1.oid)
                    .map_err(internal("reading a base blob"))?;
            }
            self.cat.flush().map_err(internal("reading a base blob"))?;
            for &i in chunk {
                let (name, entry) = &entries[i];
                let path = join(rel, name);
                let object = self
                    .cat
                    .answer(&entry.oid)
                    .map_err(internal("reading a base blob"))?;
                let written = self.blob(dir, name, &path, *entry, object)?;
                rebuilt.push((name.clone(), written));
            }
        }
        for (name, entry) in entries.iter().filter(|(_, e)| e.is_gitlink()) {
            let path = join(rel, name);
            self.count(&path, 0)?;
            dir.create_dir(utf8(name, &path)?)
                .map_err(|e| write_error(&path, &e))?;
            self.index.push(IndexEntry {
                path: String::from_utf8_lossy(&path).into_owned(),
                mode: entry.mode,
                oid: entry.oid,
                meta: None,
            });
            rebuilt.push((name.clone(), *entry));
        }
        let subtrees: Vec<usize> = (0..entries.len())
            .filter(|&i| entries[i].1.is_tree())
            .collect();
        for chunk in subtrees.chunks(WINDOW) {
            for &i in chunk {
                self.cat
                    .request(&entries[i].1.oid)
                    .map_err(internal("reading a base tree"))?;
            }
            self.cat.flush().map_err(internal("reading a base tree"))?;
            let mut read = Vec::with_capacity(chunk.len());
            for &i in chunk {
                let (name, entry) = &entries[i];
                let object = self
                    .cat
                    .answer(&entry.oid)
                    .map_err(internal("reading a base tree"))?;
                match object {
                    Some((kind, data)) if kind == "tree" => read.push((i, data)),
                    Some((kind, _)) => {
                        return Err(MaterializeError::Refused(Refusal::tree(
                            &join(rel, name),
                            format!("is a {kind} where a tree was named"),
                        )));
                    }
                    None => {
                        return Err(MaterializeError::Refused(Refusal::tree(
                            &join(rel, name),
                            format!("tree {} is missing", entry.oid.hex()),
                        )));
                    }
                }
            }
            for (i, data) in read {
                let (name, entry) = &entries[i];
                let path = join(rel, name);
                self.count(&path, 0)?;
                let sub = dir
                    .create_dir(utf8(name, &path)?)
                    .map_err(|e| write_error(&path, &e))?;
                let len = rel.len();
                *rel = path;
                let mut written = *entry;
                written.oid = self.tree(&entry.oid, Some(data), &sub, rel)?;
                rel.truncate(len);
                rebuilt.push((name.clone(), written));
            }
        }
        let tree_bytes = encode_tree(rebuilt.iter().map(|(n, e)| (n.as_slice(), *e)));
        self.writer
            .write("tree", &tree_bytes)
            .map_err(internal("writing the checkout pack"))
    }

    /// Writes one file or symlink entry from its object; returns the entry as written.
    fn blob(
        &mut self,
        dir: &Dir,
        name: &[u8],
        path: &[u8],
        entry: TreeEntry,
        object: Option<(String, Vec<u8>)>,
    ) -> Result<TreeEntry, MaterializeError> {
        let name_str = utf8(name, path)?;
        let mut written = entry;
        let (kind, data) = object.ok_or_else(|| {
            MaterializeError::Refused(Refusal::tree(
                path,
                format!("object {} is missing", entry.oid.hex()),
            ))
        })?;
        if kind != "blob" {
            return Err(MaterializeError::Refused(Refusal::tree(
                path,
                format!("is a {kind}, not a blob"),
            )));
        }
        self.count(path, data.len() as u64)?;
        // The index holds what git itself would: 100664 (old histories) as 100644.
        let mut index_mode = entry.mode;
        let stat = if entry.is_symlink() {
            if data.is_empty() || data.contains(&0) {
                return Err(MaterializeError::Refused(Refusal::tree(
                    path,
                    "a symlink with an empty target or a NUL in it",
                )));
            }
            dir.create_symlink(name_str, &data)
                .map_err(|e| write_error(path, &e))?
        } else {
            let exec = entry.mode == MODE_EXEC;
            index_mode = if exec { MODE_EXEC } else { MODE_FILE };
            dir.create_file(name_str, &data, if exec { 0o755 } else { 0o644 })
                .map_err(|e| write_error(path, &e))?
        };
        written.oid = self
            .writer
            .write("blob", &data)
            .map_err(internal("writing the checkout pack"))?;
        self.index.push(IndexEntry {
            path: String::from_utf8_lossy(path).into_owned(),
            mode: index_mode,
            oid: written.oid,
            meta: Some(stat),
        });
        Ok(written)
    }
}

/// A validated name as `&str` (validation proved it UTF-8 and one component).
fn utf8<'a>(name: &'a [u8], path: &[u8]) -> Result<&'a str, MaterializeError> {
    std::str::from_utf8(name)
        .map_err(|_| MaterializeError::Refused(Refusal::tree(path, "not UTF-8")))
}

fn limit(path: &[u8], detail: String) -> MaterializeError {
    MaterializeError::Refused(Refusal {
        code: ReasonCode::BaseCheckoutLimit,
        path: corral_capture::scope::escape_path(path),
        detail,
    })
}

/// A write that failed: `EEXIST` means the tree named an entry twice or through another (the
/// validator should have refused it); anything else is corral's own failure.
fn write_error(path: &[u8], e: &std::io::Error) -> MaterializeError {
    if e.kind() == std::io::ErrorKind::AlreadyExists {
        MaterializeError::Refused(Refusal::tree(path, "names an entry that already exists"))
    } else if e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error()) {
        MaterializeError::Internal(format!(
            "writing the base checkout: no space left on the cache's file system ({e})"
        ))
    } else {
        MaterializeError::Internal(format!("writing the base checkout: {e}"))
    }
}
