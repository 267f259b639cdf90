//! Validation of one tree object's entries, before anything of it is written.
//!
//! A tree comes from the base commit, which is hostile data: git does not check incoming
//! objects by default, so `git hash-object --literally` / `mktree --missing` trees reach the
//! object database of anyone who fetched them. Each entry must be what `git fsck` and git's
//! own `verify_path` accept, and what corral can write as exactly one directory entry.

use std::collections::HashSet;

use corral_capture::objects::TreeEntry;
use corral_capture::objects::{MODE_EXEC, MODE_FILE, MODE_GITLINK, MODE_SYMLINK, MODE_TREE};
use corral_capture::scope::escape_path;
use corral_contract::ReasonCode;
use corral_contract::path::{RepoPath, is_git_lookalike};

/// Git's old group-writable file mode, still in old histories; written as 0644.
pub const MODE_FILE_GROUP_WRITABLE: u32 = 0o100_664;

/// Why a base tree (or its expansion) is refused. `path` is the repository path, escaped for
/// display (`\xNN`, `\u{NNNN}`), never used to touch the file system.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {detail}")]
pub struct Refusal {
    /// Why it is refused: [`ReasonCode::BaseTreeInvalid`] or [`ReasonCode::BaseCheckoutLimit`].
    pub code: ReasonCode,
    /// The repository path, escaped for display.
    pub path: String,
    /// What is wrong with it, in words.
    pub detail: String,
}

impl Refusal {
    pub(crate) fn tree(path: &[u8], detail: impl Into<String>) -> Self {
        Self {
            code: ReasonCode::BaseTreeInvalid,
            path: escape_path(path),
            detail: detail.into(),
        }
    }
}

/// The repository path of `name` inside the directory `dir` (empty for the root).
#[must_use]
pub fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(dir.len() + 1 + name.len());
    if !dir.is_empty() {
        p.extend_from_slice(dir);
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// Git's tree order: names compared bytewise, a tree's name as if it ended with `/`.
fn order_key(name: &[u8], is_tree: bool) -> impl Iterator<Item = u8> + '_ {
    name.iter().copied().chain(is_tree.then_some(b'/'))
}

/// Checks every entry of the tree at `dir` (a repository path, empty for the root):
/// - each name is exactly one path component: not empty, no `/`, no NUL, not `.` or `..`,
///   UTF-8 without control characters or backslashes, and the whole path within the
///   `RepoPath` rules;
/// - no `.git` under any spelling git's `verify_path` refuses (any case, trailing dots and
///   spaces, `git~1`, ignorable code points), through the one shared
///   [`corral_contract::path::fold_name`];
/// - no name twice (whatever the entries' types), entries in git's sort order;
/// - a mode git writes: 100644, 100755 (100664 from old histories), 120000, 040000, 160000.
pub fn check_entries(dir: &[u8], entries: &[(Vec<u8>, TreeEntry)]) -> Result<(), Refusal> {
    let mut names: HashSet<&[u8]> = HashSet::with_capacity(entries.len());
    let mut previous: Option<(&[u8], bool)> = None;
    for (name, entry) in entries {
        let path = join(dir, name);
        if name.is_empty() {
            return Err(Refusal::tree(&path, "an entry has an empty name"));
        }
        if name.contains(&b'/') {
            return Err(Refusal::tree(
                &path,
                "an entry name contains '/' (a name is exactly one path component)",
            ));
        }
        if name.contains(&0) {
            return Err(Refusal::tree(&path, "an entry name contains NUL"));
        }
        if name == b"." || name == b".." {
            return Err(Refusal::tree(&path, "an entry is named '.' or '..'"));
        }
        let Ok(name_str) = std::str::from_utf8(name) else {
            return Err(Refusal::tree(&path, "an entry name is not valid UTF-8"));
        };
        if let Err(e) = std::str::from_utf8(&path)
            .map_err(|_| None)
            .and_then(|p| RepoPath::new(p).map_err(Some))
        {
            let why = e.map_or_else(|| "not UTF-8".to_owned(), |e| e.to_string());
            return Err(Refusal::tree(
                &path,
                format!("breaks the repository path rules: {why}"),
            ));
        }
        if is_git_lookalike(name_str) {
            return Err(Refusal::tree(
                &path,
                "an entry is named .git or a spelling git or a case-insensitive file system \
                 takes for it",
            ));
        }
        if !matches!(
            entry.mode,
            MODE_FILE
                | MODE_EXEC
                | MODE_FILE_GROUP_WRITABLE
                | MODE_SYMLINK
                | MODE_TREE
                | MODE_GITLINK
        ) {
            return Err(Refusal::tree(
                &path,
                format!("an entry has a mode git never writes: {:o}", entry.mode),
            ));
        }
        if !names.insert(name.as_slice()) {
            return Err(Refusal::tree(
                &path,
                "the tree lists this name twice (for example a symlink and then a file)",
            ));
        }
        let key = (name.as_slice(), entry.is_tree());
        if let Some(prev) = previous
            && order_key(prev.0, prev.1).cmp(order_key(key.0, key.1)) != std::cmp::Ordering::Less
        {
            return Err(Refusal::tree(
                &path,
                "the tree's entries are not in git's sort order",
            ));
        }
        previous = Some(key);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_capture::objects::Oid;

    fn e(mode: u32) -> TreeEntry {
        TreeEntry {
            mode,
            oid: Oid::from_raw(&[7u8; 20]).unwrap(),
        }
    }

    fn check(list: &[(&[u8], u32)]) -> Result<(), Refusal> {
        let v: Vec<(Vec<u8>, TreeEntry)> = list.iter().map(|(n, m)| (n.to_vec(), e(*m))).collect();
        check_entries(b"sub", &v)
    }

    #[test]
    fn accepts_a_normal_tree_in_git_order() {
        // "a" as a tree sorts as "a/", after "a.b".
        check(&[
            (b".github", MODE_TREE),
            (b"a.b", MODE_EXEC),
            (b"a", MODE_TREE),
            (b"link", MODE_SYMLINK),
            (b"mod", MODE_GITLINK),
            (b"old", MODE_FILE_GROUP_WRITABLE),
        ])
        .unwrap();
    }

    #[test]
    fn a_name_twice_is_refused_whatever_the_types() {
        // A file "a" and a tree "a" are each in order ("a" < "a.b" < "a/") but name one
        // entry twice.
        let err = check(&[(b"a", MODE_FILE), (b"a.b", MODE_FILE), (b"a", MODE_TREE)]).unwrap_err();
        assert!(err.detail.contains("twice"), "{err}");
    }

    #[test]
    fn refuses_each_hostile_shape() {
        type Case<'a> = (&'a [(&'a [u8], u32)], &'a str);
        let cases: &[Case<'_>] = &[
            (&[(b"evil", MODE_SYMLINK), (b"evil", MODE_FILE)], "twice"),
            (&[(b"d", MODE_SYMLINK), (b"d/pwn", MODE_FILE)], "'/'"),
            (&[(b"", MODE_FILE)], "empty"),
            (&[(b".", MODE_TREE)], "'.'"),
            (&[(b"..", MODE_TREE)], "'.'"),
            (&[(b".git", MODE_TREE)], ".git"),
            (&[(b".GIT", MODE_TREE)], ".git"),
            (&[(b".git.", MODE_TREE)], ".git"),
            (&[(b".git ", MODE_TREE)], ".git"),
            (&[(b"git~1", MODE_TREE)], ".git"),
            (&[(".g\u{200c}it".as_bytes(), MODE_TREE)], ".git"),
            (&[(b"a\\b", MODE_FILE)], "path rules"),
            (&[(b"a\nb", MODE_FILE)], "path rules"),
            (&[(b"\xff", MODE_FILE)], "UTF-8"),
            (&[(b"x", 0o100_777)], "mode"),
            (&[(b"x", 0o060_000)], "mode"),
            (&[(b"b", MODE_FILE), (b"a", MODE_FILE)], "order"),
            (&[(b"a", MODE_TREE), (b"a.b", MODE_FILE)], "order"),
        ];
        for (list, want) in cases {
            let err = check(list).expect_err(&format!("{list:?} accepted"));
            assert_eq!(err.code, ReasonCode::BaseTreeInvalid);
            assert!(err.detail.contains(want), "{list:?}: {err}");
            assert!(err.path.starts_with("sub/"), "{err}");
        }
    }

    #[test]
    fn refused_paths_are_escaped_for_display() {
        let err = check(&[("a\u{202e}b\\".as_bytes(), MODE_FILE)]).unwrap_err();
        assert!(err.path.contains("\\u{202e}"), "{}", err.path);
        assert!(!err.path.contains('\u{202e}'));
    }
}
