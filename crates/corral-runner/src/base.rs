//! The base checkout cache: one read-only checkout per base SHA, owned by corral.
//!
//! A full checkout per attempt costs O(repository) (seconds of system time for 10,000 files on
//! this machine's disk). corral materializes each base commit once, into a cache directory only
//! root can write, and every attempt mounts it as the read-only lower layer of an overlay whose
//! size-capped upper layer is the attempt's only writable storage. An attempt then costs
//! O(change).
//!
//! The checkout is written by corral itself from the canonical repository's object database,
//! through capture's hardened git directory (no repository config, hooks, filters or
//! attributes are ever consulted), byte for byte as the tree holds it: blobs, modes, symlinks;
//! submodules become empty directories. It carries a `.git` of its own (HEAD at the base SHA,
//! a pack holding exactly the base commit's tree and blobs, marked shallow), so agents can run
//! `git status` and `git diff`, yet nothing in it points back at the canonical repository.
//!
//! Verification: a checkout becomes visible only by an atomic rename after it was fully
//! written and its tree re-hashed to the commit's tree id; the `.complete` stamp records that
//! tree id and is checked on every reuse.

use std::fs;
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_capture::git::{CatFile, GitSandbox, canonical_objects_dir, find_git};
use corral_capture::objects::{ObjectFormat, Oid, PackWriter, TreeEntry, encode_tree};
use corral_contract::RepoPath;

/// Why a base checkout could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    /// The caller's input is wrong (exit 2): not a repository, missing commit, unusable tree.
    #[error("{0}")]
    BadInput(String),
    /// corral failed (I/O, git).
    #[error("{0}")]
    Internal(String),
}

/// A verified base checkout.
#[derive(Debug, Clone)]
pub struct BaseCheckout {
    /// The worktree (with its own `.git`), to be used read-only.
    pub dir: PathBuf,
    pub tree: String,
    /// Whether it was made now (false: reused from the cache).
    pub created: bool,
    pub files: u64,
}

/// The cache of base checkouts.
#[derive(Debug, Clone)]
pub struct BaseCache {
    root: PathBuf,
}

const COMPLETE: &str = ".corral-complete";

fn internal(what: &str) -> impl Fn(io::Error) -> BaseError + '_ {
    move |e| BaseError::Internal(format!("{what}: {e}"))
}

impl BaseCache {
    /// Opens (creating) the cache under `root`, private to its owner.
    pub fn open(root: &Path) -> Result<Self, BaseError> {
        fs::create_dir_all(root.join("base")).map_err(internal("creating the base cache"))?;
        fs::set_permissions(root, fs::Permissions::from_mode(0o700))
            .map_err(internal("protecting the base cache"))?;
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    /// The verified checkout of `base_sha` from `repo`, made now or reused.
    pub fn checkout(&self, repo: &Path, base_sha: &str) -> Result<BaseCheckout, BaseError> {
        let format = ObjectFormat::from_hex_len(base_sha.len()).ok_or_else(|| {
            BaseError::BadInput(format!("base_sha {base_sha:?} is not 40 or 64 hex digits"))
        })?;
        let base = Oid::from_hex(base_sha).ok_or_else(|| {
            BaseError::BadInput(format!("base_sha {base_sha:?} is not lowercase hex"))
        })?;
        let objects = canonical_objects_dir(repo)
            .map_err(|e| BaseError::BadInput(format!("--repo {}: {e}", repo.display())))?;
        let git = find_git(None).map_err(|e| BaseError::Internal(e.to_string()))?;
        let deadline = Instant::now() + Duration::from_secs(1800);
        let tmp_parent = self.root.join("tmp");
        fs::create_dir_all(&tmp_parent)
            .map_err(internal("creating the cache's temporary directory"))?;
        let sandbox = GitSandbox::new(git, &objects, format, Some(&tmp_parent), deadline, 4 << 30)
            .map_err(|e| BaseError::Internal(e.to_string()))?;
        let mut cat = sandbox
            .cat_file(format)
            .map_err(|e| BaseError::Internal(e.to_string()))?;
        let commit = match cat
            .read(&base)
            .map_err(|e| BaseError::Internal(e.to_string()))?
        {
            Some((kind, data)) if kind == "commit" => data,
            Some((kind, _)) => {
                return Err(BaseError::BadInput(format!(
                    "base_sha {base_sha} is a {kind}, not a commit"
                )));
            }
            None => {
                return Err(BaseError::BadInput(format!(
                    "base_sha {base_sha} is not in the repository {}",
                    repo.display()
                )));
            }
        };
        let tree = commit_tree(&commit)
            .ok_or_else(|| BaseError::Internal(format!("commit {base_sha} has no tree line")))?;
        let dir = self.root.join("base").join(base_sha);
        if let Ok(stamp) = fs::read_to_string(dir.join(".git").join(COMPLETE)) {
            if stamp.trim() == tree.hex() {
                return Ok(BaseCheckout {
                    dir,
                    tree: tree.hex(),
                    created: false,
                    files: 0,
                });
            }
            // A stamp that does not match: never reuse, rebuild.
            fs::remove_dir_all(&dir).map_err(internal("removing a stale base checkout"))?;
        }
        let staging = tmp_parent.join(format!("base-{base_sha}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&staging);
        fs::create_dir_all(staging.join(".git/objects/pack"))
            .map_err(internal("creating the checkout"))?;
        let mut writer = PackWriter::new(&staging.join(".git/objects"), format)
            .map_err(internal("creating the checkout pack"))?;
        writer
            .write("commit", &commit)
            .map_err(internal("writing the checkout pack"))?;
        let mut files = 0u64;
        let mut index = Vec::new();
        let rebuilt = materialize(
            &mut cat,
            &mut writer,
            &tree,
            &staging,
            &mut String::new(),
            &mut files,
            &mut index,
        )?;
        if rebuilt != tree {
            return Err(BaseError::Internal(format!(
                "checkout of {base_sha} does not hash to its tree"
            )));
        }
        writer
            .finish()
            .map_err(internal("finishing the checkout pack"))?;
        cat.close()
            .map_err(|e| BaseError::Internal(e.to_string()))?;
        let git_dir = staging.join(".git");
        let config = match format {
            ObjectFormat::Sha1 => "[core]\n\trepositoryformatversion = 0\n\tbare = false\n".to_owned(),
            ObjectFormat::Sha256 => "[core]\n\trepositoryformatversion = 1\n\tbare = false\n[extensions]\n\tobjectformat = sha256\n".to_owned(),
        };
        for (name, content) in [
            ("HEAD", format!("{base_sha}\n")),
            ("shallow", format!("{base_sha}\n")),
            ("config", config),
            ("description", "corral base checkout\n".to_owned()),
        ] {
            fs::write(git_dir.join(name), content)
                .map_err(internal("writing the checkout's .git"))?;
        }
        for d in ["refs/heads", "refs/tags", "info"] {
            fs::create_dir_all(git_dir.join(d)).map_err(internal("writing the checkout's .git"))?;
        }
        fs::write(git_dir.join("index"), encode_index(format, index))
            .map_err(internal("writing the checkout's index"))?;
        fs::write(git_dir.join(COMPLETE), format!("{}\n", tree.hex()))
            .map_err(internal("stamping the checkout"))?;
        fs::rename(&staging, &dir).map_err(internal("publishing the checkout"))?;
        Ok(BaseCheckout {
            dir,
            tree: tree.hex(),
            created: true,
            files,
        })
    }
}

/// The `tree <hex>` line of a commit object.
fn commit_tree(commit: &[u8]) -> Option<Oid> {
    let line = commit.split(|b| *b == b'\n').next()?;
    let hex = std::str::from_utf8(line.strip_prefix(b"tree ")?).ok()?;
    Oid::from_hex(hex)
}

/// Writes tree `oid` into `dir` and its objects into the pack; returns the tree id recomputed
/// from what was written (so the caller can verify it).
fn materialize(
    cat: &mut CatFile,
    writer: &mut PackWriter,
    oid: &Oid,
    dir: &Path,
    rel: &mut String,
    files: &mut u64,
    index: &mut Vec<IndexEntry>,
) -> Result<Oid, BaseError> {
    let entries = cat
        .read_tree(oid)
        .map_err(|e| BaseError::Internal(e.to_string()))?;
    let mut rebuilt: Vec<(Vec<u8>, TreeEntry)> = Vec::with_capacity(entries.len());
    for (name, entry) in entries {
        let name_str = std::str::from_utf8(&name).map_err(|_| {
            BaseError::BadInput(format!("the base tree has a non-UTF-8 name under {rel:?}"))
        })?;
        let path_text = if rel.is_empty() {
            name_str.to_owned()
        } else {
            format!("{rel}/{name_str}")
        };
        if RepoPath::new(&path_text).is_err() || name_str == ".git" {
            return Err(BaseError::BadInput(format!(
                "the base tree holds a path corral refuses: {path_text:?}"
            )));
        }
        let target = dir.join(name_str);
        let mut written = entry;
        if entry.is_tree() {
            fs::create_dir(&target).map_err(internal("writing the checkout"))?;
            let len = rel.len();
            if !rel.is_empty() {
                rel.push('/');
            }
            rel.push_str(name_str);
            written.oid = materialize(cat, writer, &entry.oid, &target, rel, files, index)?;
            rel.truncate(len);
        } else if entry.is_gitlink() {
            fs::create_dir(&target).map_err(internal("writing the checkout"))?;
            index.push(IndexEntry {
                path: path_text.clone(),
                mode: entry.mode,
                oid: entry.oid,
                meta: None,
            });
        } else {
            let (kind, data) = cat
                .read(&entry.oid)
                .map_err(|e| BaseError::Internal(e.to_string()))?
                .ok_or_else(|| {
                    BaseError::BadInput(format!(
                        "object {} of {path_text:?} is missing",
                        entry.oid.hex()
                    ))
                })?;
            if kind != "blob" {
                return Err(BaseError::Internal(format!(
                    "{path_text:?} is a {kind}, not a blob"
                )));
            }
            if entry.is_symlink() {
                let link = std::ffi::OsStr::new(std::str::from_utf8(&data).map_err(|_| {
                    BaseError::BadInput(format!("symlink {path_text:?} has a non-UTF-8 target"))
                })?);
                symlink(link, &target).map_err(internal("writing the checkout"))?;
            } else if entry.is_file() {
                fs::write(&target, &data).map_err(internal("writing the checkout"))?;
                let mode = if entry.mode & 0o111 != 0 {
                    0o755
                } else {
                    0o644
                };
                fs::set_permissions(&target, fs::Permissions::from_mode(mode))
                    .map_err(internal("writing the checkout"))?;
                written.mode = if mode == 0o755 { 0o100_755 } else { 0o100_644 };
            } else {
                return Err(BaseError::BadInput(format!(
                    "{path_text:?} has an unknown mode {:o}",
                    entry.mode
                )));
            }
            written.oid = writer
                .write("blob", &data)
                .map_err(internal("writing the checkout pack"))?;
            *files += 1;
            let meta = fs::symlink_metadata(&target).map_err(internal("writing the checkout"))?;
            index.push(IndexEntry {
                path: path_text.clone(),
                mode: written.mode,
                oid: written.oid,
                meta: Some(meta),
            });
        }
        rebuilt.push((name, written));
    }
    let tree_bytes = encode_tree(rebuilt.iter().map(|(n, e)| (n.as_slice(), *e)));
    writer
        .write("tree", &tree_bytes)
        .map_err(internal("writing the checkout pack"))
}

/// One entry of the worker's `.git/index`.
struct IndexEntry {
    path: String,
    mode: u32,
    oid: Oid,
    /// Stat data of the written file (`None` for a submodule).
    meta: Option<fs::Metadata>,
}

/// Encodes a version 2 index (git's `Documentation/gitformat-index.txt`) of the checkout, so
/// `git status` inside the sandbox sees a clean worktree. Stat data is the checkout's own;
/// where the sandbox shows it differently git simply re-reads the file.
fn encode_index(format: ObjectFormat, mut entries: Vec<IndexEntry>) -> Vec<u8> {
    use std::os::unix::fs::MetadataExt;
    entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let mut out = Vec::new();
    out.extend_from_slice(b"DIRC");
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(
        &u32::try_from(entries.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    let low = |v: i64| (v as u64 & 0xffff_ffff) as u32;
    for e in &entries {
        let start = out.len();
        let stat: [u32; 10] = match &e.meta {
            Some(m) => [
                low(m.ctime()),
                low(m.ctime_nsec()),
                low(m.mtime()),
                low(m.mtime_nsec()),
                (m.dev() & 0xffff_ffff) as u32,
                (m.ino() & 0xffff_ffff) as u32,
                e.mode,
                m.uid(),
                m.gid(),
                (m.size() & 0xffff_ffff) as u32,
            ],
            None => [0, 0, 0, 0, 0, 0, e.mode, 0, 0, 0],
        };
        for v in stat {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(e.oid.as_bytes());
        let flags = u16::try_from(e.path.len().min(0xfff)).unwrap_or(0xfff);
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(e.path.as_bytes());
        // NUL-terminated and padded to a multiple of eight bytes.
        let len = out.len() - start;
        let pad = 8 - (len % 8);
        out.extend(std::iter::repeat_n(0u8, pad));
    }
    let checksum: Vec<u8> = match format {
        ObjectFormat::Sha1 => {
            use sha1::Digest as _;
            sha1::Sha1::digest(&out).to_vec()
        }
        ObjectFormat::Sha256 => {
            use sha2::Digest as _;
            sha2::Sha256::digest(&out).to_vec()
        }
    };
    out.extend_from_slice(&checksum);
    out
}
