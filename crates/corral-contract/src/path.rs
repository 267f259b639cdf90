//! Repository paths and path-scope patterns, validated and never normalized.
//!
//! Architecture Invariant: a value of these types was checked when it was built; nothing in
//! corral repairs a bad path (strips a slash, resolves `..`, decodes `%2e`). Bad input is
//! rejected with the reason, and the caller reports it.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::glob::{Glob, is_glob_meta};

/// Longest accepted repository path in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// Why a path or pattern was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The empty string.
    #[error("path is empty")]
    Empty,
    /// More than [`MAX_PATH_BYTES`] bytes.
    #[error("path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    /// Starts with `/`.
    #[error("path starts with '/' (paths are repository-relative)")]
    Absolute,
    /// Holds a backslash.
    #[error("path contains a backslash (only '/' separates components)")]
    Backslash,
    /// Holds a control character (Unicode `Cc`).
    #[error("path contains a control character")]
    ControlCharacter,
    /// `//`, or a trailing `/` where none is allowed.
    #[error("path has an empty component ('//' or a trailing '/')")]
    EmptyComponent,
    /// A `.` component.
    #[error("path has a '.' component")]
    DotComponent,
    /// A `..` component.
    #[error("path has a '..' component")]
    DotDotComponent,
}

/// Checks every rule shared by paths and patterns, except the component rules.
fn check_common(s: &str) -> Result<(), PathError> {
    if s.is_empty() {
        return Err(PathError::Empty);
    }
    if s.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong);
    }
    if s.starts_with('/') {
        return Err(PathError::Absolute);
    }
    if s.contains('\\') {
        return Err(PathError::Backslash);
    }
    if s.chars().any(char::is_control) {
        return Err(PathError::ControlCharacter);
    }
    Ok(())
}

fn check_components<'a>(components: impl Iterator<Item = &'a str>) -> Result<(), PathError> {
    for component in components {
        match component {
            "" => return Err(PathError::EmptyComponent),
            "." => return Err(PathError::DotComponent),
            ".." => return Err(PathError::DotDotComponent),
            _ => {}
        }
    }
    Ok(())
}

/// A valid repository-relative, Git-style path: UTF-8, `/`-separated, no leading `/`, no
/// backslash, no control character, and no empty, `.` or `..` component.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoPath(String);

impl RepoPath {
    /// Validates `s`; never rewrites it.
    pub fn new(s: &str) -> Result<Self, PathError> {
        check_common(s)?;
        check_components(s.split('/'))?;
        Ok(Self(s.to_owned()))
    }

    /// Validates raw bytes as they come from a directory listing: non-UTF-8 is an error.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, RepoPathBytesError> {
        let s = std::str::from_utf8(bytes).map_err(|_| RepoPathBytesError::NotUtf8)?;
        Self::new(s).map_err(RepoPathBytesError::Invalid)
    }

    /// The path as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Components, in order.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }
}

/// Rejection of a raw path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepoPathBytesError {
    /// The bytes are not UTF-8.
    #[error("path is not valid UTF-8")]
    NotUtf8,
    /// UTF-8, but not a valid path.
    #[error(transparent)]
    Invalid(PathError),
}

impl fmt::Display for RepoPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for RepoPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RepoPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::new(&s).map_err(serde::de::Error::custom)
    }
}

/// The one name-normalization every "is this name really X?" rule of corral uses: the `.git`
/// check, base-tree validation and the "runs code when a tool opens the folder" list.
///
/// It returns what a consumer on a case-insensitive or Windows/macOS file system may take the
/// component to be: default-ignorable code points (zero-width joiners, bidi marks, the ones
/// HFS+ drops) removed, Unicode lowercase, and trailing dots and spaces stripped (NTFS and
/// Win32 drop them). Comparing folded names is how git's own `verify_path`/fsck rules judge
/// `.git` (CVE-2014-9390, CVE-2019-1353, CVE-2021-21300).
#[must_use]
pub fn fold_name(component: &str) -> String {
    let visible: String = component
        .chars()
        .filter(|c| !is_default_ignorable(*c))
        .flat_map(char::to_lowercase)
        .collect();
    visible.trim_end_matches(['.', ' ']).to_owned()
}

/// Does `component` name `wanted` (a lowercase name such as `.git` or `.npmrc`) on some file
/// system that corral's output may reach? True for any spelling [`fold_name`] maps to it and
/// for an NTFS 8.3 short name of it (`git~1` for `.git`, `npmrc~1` for `.npmrc`: the first
/// six of its letters and digits, `~`, a digit).
#[must_use]
pub fn names_alias_of(component: &str, wanted: &str) -> bool {
    let folded = fold_name(component);
    folded == wanted || is_short_name_of(&folded, wanted)
}

/// `folded` is an NTFS 8.3 short name (`BASE~N[.EXT]`) of `wanted`: BASE is the first six
/// characters of the name without its leading dots, spaces and inner dots, EXT the first
/// three of its extension (Windows' own generation rule, lowercased).
fn is_short_name_of(folded: &str, wanted: &str) -> bool {
    let Some((base, rest)) = folded.split_once('~') else {
        return false;
    };
    let (num, ext) = rest.split_once('.').unwrap_or((rest, ""));
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let long = wanted.trim_start_matches('.');
    let (stem, long_ext) = match long.rsplit_once('.') {
        Some((stem, e)) if !stem.is_empty() => (stem, e),
        _ => (long, ""),
    };
    let stem: String = stem
        .chars()
        .filter(|c| *c != '.' && *c != ' ')
        .take(6)
        .collect();
    let long_ext: String = long_ext.chars().take(3).collect();
    base == stem && (ext.is_empty() || ext == long_ext)
}

/// Is this one component a name that Git, or a consumer on a case-insensitive or
/// Windows/macOS filesystem, may treat as `.git` (CVE-2014-9390, CVE-2019-1353,
/// CVE-2021-21300)? Covers any case, trailing dots and spaces, NTFS short names (`git~1`)
/// and default-ignorable code points (zero-width joiners and the like) inside the name.
#[must_use]
pub fn is_git_lookalike(component: &str) -> bool {
    let folded = fold_name(component);
    // A name that held an ignorable code point and still spells "git" once they are gone
    // is refused too: renderers and some file systems disagree on which points vanish.
    names_alias_of(component, ".git")
        || (folded.len() < component.len() && folded.contains("git") && has_ignorable(component))
}

fn has_ignorable(component: &str) -> bool {
    component.chars().any(is_default_ignorable)
}

/// Code points that HFS+ and many renderers ignore (a subset of Unicode's
/// Default_Ignorable_Code_Point that covers what Git itself checks for `.git`).
#[must_use]
pub fn is_default_ignorable(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFF8}' | '\u{E0000}'..='\u{E0FFF}')
}

/// One entry of a path scope (`allowed_paths`, `forbidden_paths`, `filesystem_write`): a
/// repository path or an `fnmatchcase` pattern, optionally with one trailing `/` marking a
/// directory. The trailing `/` is syntax, kept as written; it is not a repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    text: String,
    glob: Glob,
    literal: bool,
}

impl PathPattern {
    /// Validates a scope entry with the `RepoPath` rules (one trailing `/` allowed).
    pub fn new(s: &str) -> Result<Self, PathError> {
        check_common(s)?;
        let body = s.strip_suffix('/').unwrap_or(s);
        if body.is_empty() {
            return Err(PathError::Absolute);
        }
        check_components(body.split('/'))?;
        Ok(Self {
            text: s.to_owned(),
            glob: Glob::new(s),
            literal: !s.chars().any(is_glob_meta),
        })
    }

    /// The entry as written (a trailing `/` kept).
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Does the entry contain no glob metacharacter?
    #[must_use]
    pub fn is_literal(&self) -> bool {
        self.literal
    }

    /// `fnmatchcase(path, pattern)`, or for a literal entry, `path` lies below it.
    #[must_use]
    pub fn matches(&self, path: &RepoPath) -> bool {
        if self.glob.matches(path.as_str()) {
            return true;
        }
        if self.literal {
            let dir = self.text.strip_suffix('/').unwrap_or(&self.text);
            if let Some(rest) = path.as_str().strip_prefix(dir) {
                return rest.starts_with('/');
            }
        }
        false
    }

    /// The longest directory prefix with no glob metacharacter, as components: `src/*.rs` gives
    /// `["src"]`, `*.rs` gives `[]` (the repository root), a literal `src/lib.rs` gives
    /// `["src", "lib.rs"]` (the entry itself). The sandbox makes this prefix writable and
    /// capture enforces the exact pattern again.
    #[must_use]
    pub fn literal_prefix(&self) -> Vec<&str> {
        let body = self.text.strip_suffix('/').unwrap_or(&self.text);
        let mut out = Vec::new();
        for component in body.split('/') {
            if component.chars().any(is_glob_meta) {
                break;
            }
            out.push(component);
        }
        out
    }

    /// Does any component look like `.git` (see [`is_git_lookalike`])?
    #[must_use]
    pub fn names_git_dir(&self) -> bool {
        let body = self.text.strip_suffix('/').unwrap_or(&self.text);
        body.split('/').any(is_git_lookalike)
    }
}

impl fmt::Display for PathPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for PathPattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for PathPattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::new(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for PathPattern {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PathPattern".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "maxLength": MAX_PATH_BYTES,
            "pattern": crate::schema::path_pattern_pattern(),
            "description": "A scope entry: a repository path or fnmatchcase pattern (* and ? also match /, [seq] and [!seq] classes). No leading /, backslash or control character, no empty, . or .. component, one trailing / allowed, at most 4096 bytes (path_invalid). A literal entry also covers everything below it."
        })
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for RepoPath {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RepoPath".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "maxLength": MAX_PATH_BYTES,
            "pattern": crate::schema::repo_path_pattern(),
            "description": "A repository-relative Git-style path: no backslash, no leading /, no control character, no empty, . or .. component."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_path_rejects_without_normalizing() {
        for bad in [
            "", "/etc", "a//b", "a/", "./a", "a/./b", "a/..", "../a", "a\\b", "a\nb", "a\u{7f}",
            "a\u{85}b", ".",
        ] {
            assert!(RepoPath::new(bad).is_err(), "{bad:?} accepted");
        }
        for good in [
            "a",
            "src/lib.rs",
            ".github/x",
            "..a",
            "a..",
            "a b",
            "é",
            "-rf",
            "...",
        ] {
            assert_eq!(RepoPath::new(good).map(|p| p.0), Ok(good.to_owned()));
        }
        assert_eq!(
            RepoPath::from_bytes(b"a\xff"),
            Err(RepoPathBytesError::NotUtf8)
        );
    }

    #[test]
    fn pattern_scope_rules() {
        let p = |s| PathPattern::new(s).unwrap();
        let r = |s| RepoPath::new(s).unwrap();
        assert!(p("src/").matches(&r("src/a.rs")));
        assert!(p("src").matches(&r("src/a/b.rs")));
        assert!(p("src").matches(&r("src")));
        assert!(!p("src/").matches(&r("src")));
        assert!(!p("src").matches(&r("src-evil/p.py")));
        assert!(!p("src").matches(&r("srcX")));
        assert!(!p("src/").matches(&r("Src/x")));
        assert!(p("src/*.py").matches(&r("src/a/b.py")));
        assert!(!p("src/*.py").matches(&r("src/a/b.py/c")));
        assert!(p("**/*.pem").matches(&r("a/k.pem")));
        assert!(!p("**/*.pem").matches(&r("k.pem")));
        assert_eq!(p("src/*.rs").literal_prefix(), vec!["src"]);
        assert_eq!(p("*.rs").literal_prefix(), Vec::<&str>::new());
        assert_eq!(p("a/b/").literal_prefix(), vec!["a", "b"]);
        for bad in [
            "/", "", "a//", "a//b", "./a", "../a", "a/../b", "a\\b", "/a",
        ] {
            assert!(PathPattern::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn git_lookalikes() {
        for name in [
            ".git",
            ".GIT",
            ".Git",
            ".git.",
            ".git ",
            "git~1",
            "GIT~1",
            ".g\u{200c}it",
        ] {
            assert!(is_git_lookalike(name), "{name:?}");
        }
        for name in [
            ".github",
            "git",
            ".gitignore",
            "src",
            ".gitmodules",
            "legit~",
        ] {
            assert!(!is_git_lookalike(name), "{name:?}");
        }
    }

    #[test]
    fn folded_names_and_aliases() {
        assert_eq!(fold_name(".VSCODE"), ".vscode");
        assert_eq!(fold_name(".npmrc. . "), ".npmrc");
        assert_eq!(fold_name(".vs\u{200d}code"), ".vscode");
        assert_eq!(fold_name("Src"), "src");
        for (name, wanted) in [
            (".NPMRC", ".npmrc"),
            (".Envrc", ".envrc"),
            (".npmrc.", ".npmrc"),
            (".vscode ", ".vscode"),
            (".vs\u{200d}code", ".vscode"),
            (".Claude", ".claude"),
            (".MCP.json", ".mcp.json"),
            ("NPMRC~1", ".npmrc"),
            ("VSCODE~2", ".vscode"),
            ("PRE-CO~1.YAM", ".pre-commit-config.yaml"),
            ("git~1", ".git"),
        ] {
            assert!(names_alias_of(name, wanted), "{name:?} ~ {wanted:?}");
        }
        for (name, wanted) in [
            ("npmrc.txt", ".npmrc"),
            (".npmrcx", ".npmrc"),
            ("vscode", ".vscode"),
            ("X~1", ".npmrc"),
            ("npmrc~", ".npmrc"),
        ] {
            assert!(!names_alias_of(name, wanted), "{name:?} ~ {wanted:?}");
        }
    }
}
