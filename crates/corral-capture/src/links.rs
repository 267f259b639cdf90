//! Physical resolution of the candidate's symlinks, the way the file system of the host that
//! applies the patch will resolve them.
//!
//! A symlink target cannot be judged lexically, one link at a time: the kernel follows links in
//! intermediate components and applies `..` *after* following a link (to the link's physical
//! target, not to the text before it). `src/sub/d -> .` plus `src/sub/e -> d/../../x` is
//! `src/x` lexically but `x` on a real file system; twelve `l -> .` links and twelve `..` reach
//! `/etc/passwd`. So every symlink of the change set (new, modified or retyped) is resolved
//! here, after the walk, inside the **candidate tree**: the tree the walk built from the change
//! set (new and modified entries, whiteouts = deletions, opaque directories = replacements)
//! on top of the base tree, which is exactly the tree `git apply` of the patch produces. Trees
//! the walk wrote are looked up in memory; unchanged subtrees are base trees, read through the
//! walk's `git cat-file` session only along the paths a resolution visits (O(change)).
//!
//! A link is refused ([`Verdict::Escape`], `symlink_escape`) when:
//! - its target (or the target of any link the chain follows) is empty, absolute, not UTF-8,
//!   holds a control character or a backslash, or is longer than `PATH_MAX`;
//! - a `..` leaves the repository root;
//! - a component names `.git` or a lookalike;
//! - the chain follows a link that does not lie inside the scope, or whose own resolution does
//!   not land inside the scope (every hop is judged, not only the end);
//! - the chain goes into a submodule (gitlink): its content is not in the candidate tree;
//! - the chain follows more than [`MAX_LINKS`] links (the link itself counts: Linux's ELOOP);
//! - the final target is the repository root or lies outside the scope.
//!
//! A component that does not exist in the candidate tree (or is a file) ends what the tree can
//! say: from there on the path is resolved lexically (the kernel would fail with ENOENT or
//! ENOTDIR, so this is conservative) and the end must still land inside the scope. A dangling
//! final target inside the scope is accepted.
//!
//! Covered: every changed link, fully resolved through links the worker made and unchanged
//! links of the base tree. Not covered: an *unchanged* base link whose meaning changes because
//! the worker replaced something on its path (a base directory replaced by a link, a base link
//! retargeted): finding those would mean walking the whole base tree. What bounds the damage is
//! that every link the worker wrote must itself resolve into the scope, so such a base link can
//! only be shifted by the `..` components its own (trusted) target holds after the replaced
//! component.
//!
//! Work is bounded: at most [`MAX_LINKS`] links per chain and [`MAX_STEPS`] name lookups for
//! the whole capture (past it the candidate is rejected with `capture_limit`); every tree is
//! read at most once.

use corral_contract::path::{RepoPath, is_git_lookalike};

use crate::CaptureError;
use crate::objects::{Oid, TreeEntry};
use crate::scope::{Scope, escape_path};

/// Most links one resolution follows, the link itself included (Linux `MAXSYMLINKS`).
pub const MAX_LINKS: u32 = 40;

/// Most name lookups of all resolutions of one capture.
pub const MAX_STEPS: u64 = 1 << 20;

/// Longest symlink target accepted (Linux `PATH_MAX`, including the terminating NUL).
const MAX_TARGET_BYTES: usize = 4095;

/// The candidate tree, as a resolution reads it.
pub(crate) trait Trees {
    /// The entry `name` of the tree `tree`, or `None`.
    fn entry(&mut self, tree: &Oid, name: &[u8]) -> Result<Option<TreeEntry>, CaptureError>;
    /// The target of the symlink whose blob is `blob`.
    fn link_target(&mut self, blob: &Oid) -> Result<Vec<u8>, CaptureError>;
}

/// The judgement of one link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Inside,
    /// Refused: `symlink_escape` with this detail.
    Escape(String),
    /// The capture's resolution budget is spent: `capture_limit`.
    Limit(String),
}

/// What a directory of the current position is in the candidate tree.
#[derive(Clone, Copy)]
enum Dir {
    Tree(Oid),
    Gitlink,
    /// Absent, or not a directory: resolved lexically from here.
    Unknown,
}

/// The current position: always a chain of physical directories (a link is replaced by its
/// resolution before anything is looked up below it).
struct Pos {
    names: Vec<Vec<u8>>,
    /// `dirs[i]` is the directory `names[..i]`; `dirs[0]` is the root.
    dirs: Vec<Dir>,
}

impl Pos {
    fn join(&self, name: &[u8]) -> Vec<u8> {
        let mut v = self.names.join(&b'/');
        if !v.is_empty() {
            v.push(b'/');
        }
        v.extend_from_slice(name);
        v
    }

    fn path(&self) -> Vec<u8> {
        self.names.join(&b'/')
    }
}

enum Item {
    Name(Vec<u8>),
    /// The components of the link at this path are consumed: its resolution is `Pos`.
    LinkEnd(Vec<u8>),
}

/// Why a target's text alone refuses it.
pub(crate) fn target_problem(target: &[u8]) -> Option<&'static str> {
    if target.is_empty() {
        return Some("is empty");
    }
    if target.len() > MAX_TARGET_BYTES {
        return Some("is longer than PATH_MAX");
    }
    if target.starts_with(b"/") {
        return Some("is absolute");
    }
    let Ok(s) = std::str::from_utf8(target) else {
        return Some("is not UTF-8");
    };
    if s.chars().any(char::is_control) || s.contains('\\') {
        return Some("contains a control character or backslash");
    }
    None
}

/// Resolves links inside one candidate tree.
pub(crate) struct Resolver<'s, T> {
    scope: Scope<'s>,
    trees: T,
    root: Oid,
    steps: u64,
    max_steps: u64,
}

impl<'s, T: Trees> Resolver<'s, T> {
    pub(crate) fn new(scope: Scope<'s>, trees: T, root: Oid) -> Self {
        Self {
            scope,
            trees,
            root,
            steps: 0,
            max_steps: MAX_STEPS,
        }
    }

    #[cfg(test)]
    fn with_max_steps(mut self, max_steps: u64) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// Why `path` (raw bytes) is not inside the scope, for a detail; `None` when it is.
    fn outside(&self, path: &[u8]) -> Option<String> {
        if path.is_empty() {
            return Some("the repository root".into());
        }
        match RepoPath::from_bytes(path) {
            Ok(p) if self.scope.contains(&p) => None,
            Ok(p) => Some(format!("{:?}, outside the scope", p.as_str())),
            Err(_) => Some(format!("{:?}, an invalid path", escape_path(path))),
        }
    }

    fn lookup(&mut self, dir: Dir, name: &[u8]) -> Result<Result<Dir, Lookup>, CaptureError> {
        Ok(match dir {
            Dir::Unknown => Ok(Dir::Unknown),
            Dir::Gitlink => Err(Lookup::Gitlink),
            Dir::Tree(t) => match self.trees.entry(&t, name)? {
                Some(e) if e.is_tree() => Ok(Dir::Tree(e.oid)),
                Some(e) if e.is_gitlink() => Ok(Dir::Gitlink),
                Some(e) if e.is_symlink() => Err(Lookup::Link(e.oid)),
                _ => Ok(Dir::Unknown),
            },
        })
    }

    /// Resolves the link at `link` (raw repository path) whose target is `target`.
    pub(crate) fn resolve(&mut self, link: &[u8], target: &[u8]) -> Result<Verdict, CaptureError> {
        if let Some(why) = target_problem(target) {
            return Ok(Verdict::Escape(format!("symlink target {why}")));
        }
        let mut pos = Pos {
            names: Vec::new(),
            dirs: vec![Dir::Tree(self.root)],
        };
        let mut parent: Vec<&[u8]> = link.split(|&b| b == b'/').collect();
        parent.pop();
        for name in parent {
            let dir = *pos.dirs.last().unwrap_or(&Dir::Unknown);
            let next = match self.lookup(dir, name)? {
                Ok(d) => d,
                // The link's own directories are directories in the candidate; anything else
                // (a link walk did not produce) is judged lexically.
                Err(_) => Dir::Unknown,
            };
            pos.names.push(name.to_vec());
            pos.dirs.push(next);
        }
        let mut pending: Vec<Item> = Vec::new();
        push_target(&mut pending, target);
        let mut links = 1u32;
        while let Some(item) = pending.pop() {
            let name = match item {
                Item::LinkEnd(at) => {
                    if let Some(why) = self.outside(&pos.path()) {
                        return Ok(Verdict::Escape(format!(
                            "the chain follows the symlink {:?}, which resolves to {why}",
                            escape_path(&at)
                        )));
                    }
                    continue;
                }
                Item::Name(name) => name,
            };
            match name.as_slice() {
                b"" | b"." => continue,
                b".." => {
                    if pos.names.pop().is_none() {
                        return Ok(Verdict::Escape(
                            "symlink target leaves the repository".into(),
                        ));
                    }
                    pos.dirs.pop();
                    continue;
                }
                _ => {}
            }
            self.steps += 1;
            if self.steps > self.max_steps {
                return Ok(Verdict::Limit(format!(
                    "resolving the change set's symlinks took more than {} lookups; the \
                     candidate is rejected",
                    self.max_steps
                )));
            }
            // Targets were checked to be UTF-8.
            if std::str::from_utf8(&name).is_ok_and(is_git_lookalike) {
                return Ok(Verdict::Escape(
                    "symlink target names .git or a lookalike".into(),
                ));
            }
            let dir = *pos.dirs.last().unwrap_or(&Dir::Unknown);
            match self.lookup(dir, &name)? {
                Ok(next) => {
                    pos.names.push(name);
                    pos.dirs.push(next);
                }
                Err(Lookup::Gitlink) => {
                    return Ok(Verdict::Escape(format!(
                        "symlink target goes into the submodule {:?}, whose content corral \
                         cannot see",
                        escape_path(&pos.path())
                    )));
                }
                Err(Lookup::Link(blob)) => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Ok(Verdict::Escape(format!(
                            "the chain follows more than {MAX_LINKS} symlinks (a loop or ELOOP)"
                        )));
                    }
                    let at = pos.join(&name);
                    if let Some(why) = self.outside(&at) {
                        return Ok(Verdict::Escape(format!(
                            "the chain follows the symlink {:?}, which is {why}",
                            escape_path(&at)
                        )));
                    }
                    let next = self.trees.link_target(&blob)?;
                    if let Some(why) = target_problem(&next) {
                        return Ok(Verdict::Escape(format!(
                            "the chain follows the symlink {:?}, whose target {why}",
                            escape_path(&at)
                        )));
                    }
                    pending.push(Item::LinkEnd(at));
                    push_target(&mut pending, &next);
                }
            }
        }
        Ok(match self.outside(&pos.path()) {
            None => Verdict::Inside,
            Some(why) => Verdict::Escape(format!("symlink target resolves to {why}")),
        })
    }
}

enum Lookup {
    Link(Oid),
    Gitlink,
}

/// Pushes a target's components so that the first is popped first.
fn push_target(pending: &mut Vec<Item>, target: &[u8]) {
    for c in target.rsplit(|&b| b == b'/') {
        pending.push(Item::Name(c.to_vec()));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use corral_contract::path::PathPattern;

    use super::*;
    use crate::objects::{
        MODE_FILE, MODE_GITLINK, MODE_SYMLINK, MODE_TREE, ObjectFormat, encode_tree, object_id,
    };

    /// An in-memory candidate tree built from `(path, node)` rows.
    #[derive(Default)]
    struct Mem {
        trees: HashMap<Oid, BTreeMap<Vec<u8>, TreeEntry>>,
        blobs: HashMap<Oid, Vec<u8>>,
    }

    enum N<'a> {
        File,
        Link(&'a str),
        Gitlink,
    }

    impl Mem {
        fn build(rows: &[(&str, N<'_>)]) -> (Self, Oid) {
            let mut mem = Self::default();
            let root = mem.dir("", rows);
            (mem, root)
        }

        fn dir(&mut self, prefix: &str, rows: &[(&str, N<'_>)]) -> Oid {
            let f = ObjectFormat::Sha1;
            let mut entries = BTreeMap::new();
            let mut subdirs: BTreeMap<String, ()> = BTreeMap::new();
            for (path, node) in rows {
                let Some(rest) = path.strip_prefix(prefix) else {
                    continue;
                };
                if let Some((d, _)) = rest.split_once('/') {
                    subdirs.insert(d.to_owned(), ());
                    continue;
                }
                let (mode, data) = match node {
                    N::File => (MODE_FILE, format!("file {path}").into_bytes()),
                    N::Link(t) => (MODE_SYMLINK, t.as_bytes().to_vec()),
                    N::Gitlink => (MODE_GITLINK, b"gitlink".to_vec()),
                };
                let oid = object_id(f, "blob", &data).unwrap();
                self.blobs.insert(oid, data);
                entries.insert(rest.as_bytes().to_vec(), TreeEntry { mode, oid });
            }
            for d in subdirs.keys() {
                let oid = self.dir(&format!("{prefix}{d}/"), rows);
                entries.insert(
                    d.as_bytes().to_vec(),
                    TreeEntry {
                        mode: MODE_TREE,
                        oid,
                    },
                );
            }
            let oid = object_id(
                f,
                "tree",
                &encode_tree(entries.iter().map(|(n, e)| (n.as_slice(), *e))),
            )
            .unwrap();
            self.trees.insert(oid, entries);
            oid
        }
    }

    impl Trees for &mut Mem {
        fn entry(&mut self, tree: &Oid, name: &[u8]) -> Result<Option<TreeEntry>, CaptureError> {
            Ok(self.trees[tree].get(name).copied())
        }
        fn link_target(&mut self, blob: &Oid) -> Result<Vec<u8>, CaptureError> {
            Ok(self.blobs[blob].clone())
        }
    }

    fn verdict(rows: &[(&str, N<'_>)], allowed: &[&str], link: &str) -> Verdict {
        let allowed: Vec<PathPattern> = allowed
            .iter()
            .map(|s| PathPattern::new(s).unwrap())
            .collect();
        let scope = Scope {
            allowed: &allowed,
            forbidden: &[],
        };
        let (mut mem, root) = Mem::build(rows);
        let target = rows
            .iter()
            .find_map(|(p, n)| match n {
                N::Link(t) if *p == link => Some(t.to_string()),
                _ => None,
            })
            .unwrap();
        Resolver::new(scope, &mut mem, root)
            .resolve(link.as_bytes(), target.as_bytes())
            .unwrap()
    }

    fn inside(rows: &[(&str, N<'_>)], link: &str) -> bool {
        verdict(rows, &["src/"], link) == Verdict::Inside
    }

    #[test]
    fn lexical_targets_inside_the_scope() {
        let rows = [
            ("src/app.py", N::File),
            ("src/a", N::Link("app.py")),
            ("src/d/a", N::Link("../app.py")),
            ("src/x", N::Link("../src/y")),
            ("src/dir", N::Link("d/")),
            ("src/dangling", N::Link("gen/out.txt")),
            ("src/out", N::Link("../README.md")),
            ("src/root", N::Link("..")),
            ("src/up", N::Link("../../x")),
            ("src/gh", N::Link("../.github")),
            ("src/git", N::Link("../.git/hooks")),
            ("src/GIT", N::Link("x/.GIT")),
            ("src/abs", N::Link("/etc/shadow")),
            ("README.md", N::File),
        ];
        for ok in ["src/a", "src/d/a", "src/x", "src/dir", "src/dangling"] {
            assert!(inside(&rows, ok), "{ok}");
        }
        for bad in [
            "src/out", "src/root", "src/up", "src/gh", "src/git", "src/GIT", "src/abs",
        ] {
            assert!(!inside(&rows, bad), "{bad}");
        }
    }

    #[test]
    fn dot_dot_applies_after_following_a_link() {
        let rows = [
            ("src/sub/d", N::Link(".")),
            ("src/sub/e", N::Link("d/../../docs/guide.md")),
            ("docs/guide.md", N::File),
        ];
        assert!(inside(&rows, "src/sub/d"));
        let v = verdict(&rows, &["src/"], "src/sub/e");
        assert!(
            matches!(&v, Verdict::Escape(d) if d.contains("\"docs/guide.md\"")),
            "{v:?}"
        );
        // Twelve `l -> .` and twelve `..`: lexically `src/sub/etc/passwd`, physically far
        // above the repository.
        let mut rows: Vec<(String, String)> = (1..=12)
            .map(|i| (format!("src/sub/l{i}"), ".".to_owned()))
            .collect();
        let through: Vec<String> = (1..=12).map(|i| format!("l{i}")).collect();
        rows.push((
            "src/sub/e".into(),
            format!("{}/{}etc/passwd", through.join("/"), "../".repeat(12)),
        ));
        let rows: Vec<(&str, N<'_>)> = rows
            .iter()
            .map(|(p, t)| (p.as_str(), N::Link(t.as_str())))
            .collect();
        assert!(inside(&rows, "src/sub/l1"));
        assert_eq!(
            verdict(&rows, &["src/"], "src/sub/e"),
            Verdict::Escape("symlink target leaves the repository".into())
        );
        // A link to the scope's own directory is not inside `src/` (as before).
        assert!(!inside(&[("src/l", N::Link("."))], "src/l"));
        assert_eq!(
            verdict(&[("src/l", N::Link("."))], &["src"], "src/l"),
            Verdict::Inside
        );
    }

    #[test]
    fn every_hop_is_judged() {
        let rows = [
            ("src/lnk", N::Link("../docs")),
            ("src/e", N::Link("lnk/guide.md")),
            ("src/back", N::Link("lnk/../src/app.py")),
            ("docs/l", N::Link("../src")),
            ("src/via", N::Link("../docs/l/app.py")),
            ("src/abs", N::Link("/etc")),
            ("src/via_abs", N::Link("abs/passwd")),
            ("src/vendor", N::Gitlink),
            ("src/sub", N::Link("vendor/x")),
            ("src/ok", N::Link("vendor")),
            ("src/app.py", N::File),
            ("docs/guide.md", N::File),
        ];
        for bad in ["src/e", "src/back", "src/via", "src/via_abs", "src/sub"] {
            assert!(!inside(&rows, bad), "{bad}");
        }
        assert!(inside(&rows, "src/ok"));
        // A forbidden hop is outside the scope too.
        let allowed: Vec<PathPattern> = vec![PathPattern::new("src/").unwrap()];
        let forbidden: Vec<PathPattern> = vec![PathPattern::new("src/secret/").unwrap()];
        let rows = [
            ("src/secret/k", N::Link("../pub")),
            ("src/e", N::Link("secret/k/x")),
        ];
        let (mut mem, root) = Mem::build(&rows);
        let scope = Scope {
            allowed: &allowed,
            forbidden: &forbidden,
        };
        let v = Resolver::new(scope, &mut mem, root)
            .resolve(b"src/e", b"secret/k/x")
            .unwrap();
        assert!(matches!(v, Verdict::Escape(_)), "{v:?}");
    }

    #[test]
    fn chains_are_bounded_like_linux() {
        let chain = |n: usize| -> Vec<(String, String)> {
            let mut v: Vec<(String, String)> = (1..=n)
                .map(|i| (format!("src/c{i}"), format!("c{}", i + 1)))
                .collect();
            v.push((format!("src/c{}", n + 1), String::new()));
            v
        };
        for (n, ok) in [(39, true), (40, true), (41, false)] {
            let c = chain(n);
            let rows: Vec<(&str, N<'_>)> = c
                .iter()
                .map(|(p, t)| (p.as_str(), if t.is_empty() { N::File } else { N::Link(t) }))
                .collect();
            assert_eq!(inside(&rows, "src/c1"), ok, "{n} links");
        }
        let rows = [("src/a", N::Link("b")), ("src/b", N::Link("a"))];
        let v = verdict(&rows, &["src/"], "src/a");
        assert!(
            matches!(&v, Verdict::Escape(d) if d.contains("ELOOP")),
            "{v:?}"
        );
        // The step budget stops a capture-wide flood.
        let (mut mem, root) = Mem::build(&rows);
        let allowed = vec![PathPattern::new("src/").unwrap()];
        let scope = Scope {
            allowed: &allowed,
            forbidden: &[],
        };
        let mut r = Resolver::new(scope, &mut mem, root).with_max_steps(10);
        assert!(matches!(
            r.resolve(b"src/a", b"b").unwrap(),
            Verdict::Limit(_)
        ));
    }
}
