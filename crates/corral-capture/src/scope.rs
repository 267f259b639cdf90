//! Path validation and scope checks for changed paths (symlink targets are resolved in
//! `links`, after the walk).
//!
//! Every path is checked as the raw bytes the filesystem gave: nothing is decoded, normalized
//! or repaired before the check (CAP-10, CAP-11). The one exception is a *judgement* about
//! what a name may mean elsewhere (`.git`, the [`EXECUTES_LATER`] names): those use the one
//! shared folding of `corral_contract::path` ([`fold_name`], [`names_alias_of`]), so a name
//! that some consumer's file system takes for `.npmrc` is judged as `.npmrc`.

use corral_contract::codes::{ReasonCode, Rejection};
use corral_contract::path::{
    PathPattern, RepoPath, RepoPathBytesError, fold_name, is_git_lookalike, names_alias_of,
};

/// Renders raw path bytes for a human or a JSON field without letting control characters,
/// bidi overrides or invalid UTF-8 through: `\xNN` for bytes that are not valid UTF-8 or are
/// control characters, `\u{NNNN}` for invisible or direction-changing code points, `\\` for a
/// backslash.
#[must_use]
pub fn escape_path(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else if c.is_control() {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            } else if is_invisible(c) {
                out.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}' | '\u{E0000}'..='\u{E0FFF}')
}

/// Path components (files or folders) that execute code or change tools' behaviour when a
/// shell, editor, package manager, git or an agent merely opens the folder (CAP-13; the
/// "dangerous files" of sandbox-runtime's mandatory deny list and their kin). Lowercase: a
/// component matches an entry when [`names_alias_of`] says so (any case, trailing dots and
/// spaces, default-ignorable code points, NTFS 8.3 short names).
pub const EXECUTES_LATER: &[&str] = &[
    ".bash_login",
    ".bash_profile",
    ".bashrc",
    ".claude",
    ".cursor",
    ".devcontainer",
    ".envrc",
    ".gitattributes",
    ".gitconfig",
    ".gitmodules",
    ".husky",
    ".idea",
    ".mcp.json",
    ".npmrc",
    ".pre-commit-config.yaml",
    ".profile",
    ".pypirc",
    ".ripgreprc",
    ".vscode",
    ".yarnrc",
    ".yarnrc.yml",
    ".zprofile",
    ".zshenv",
    ".zshrc",
];

/// The scope a capture enforces.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    /// Patterns a changed path must match (the SandboxPolicy's writable paths).
    pub allowed: &'a [PathPattern],
    /// Patterns no changed path may match (the SandboxPolicy's forbidden paths).
    pub forbidden: &'a [PathPattern],
}

impl Scope<'_> {
    /// Rejections for a valid path that lies outside the scope.
    fn check(&self, path: &RepoPath, out: &mut Vec<Rejection>) {
        if let Some(p) = self.forbidden.iter().find(|p| p.matches(path)) {
            out.push(Rejection::new(
                ReasonCode::PathForbidden,
                Some(path.as_str().to_owned()),
                format!("changed path matches forbidden pattern {:?}", p.as_str()),
            ));
        }
        if !self.allowed.iter().any(|p| p.matches(path)) {
            out.push(Rejection::new(
                ReasonCode::PathOutOfScope,
                Some(path.as_str().to_owned()),
                "changed path is not inside any allowed_paths entry",
            ));
        } else {
            self.check_executes_later(path, out);
        }
    }

    /// A path inside the scope with a component that names (or is an alias of) a file or
    /// folder tools execute or obey just by opening the folder (`.npmrc`, `.NPMRC`, `npmrc~1`,
    /// `.vscode/`, ...) is rejected unless an `allowed_paths` entry names it literally: a glob
    /// or a parent folder is not enough (CAP-13: the scope policy has no escape hatch through
    /// config files). "Names" compares folded components ([`fold_name`]): the literal entry's
    /// components, folded, equal the folded components of the path up to and including that
    /// component, or of the whole path. Every such component of the path must be named.
    fn check_executes_later(&self, path: &RepoPath, out: &mut Vec<Rejection>) {
        let components: Vec<&str> = path.components().collect();
        let folded: Vec<String> = components.iter().map(|c| fold_name(c)).collect();
        let named = |upto: &[String]| {
            self.allowed.iter().any(|p| {
                p.is_literal() && {
                    let entry = p.as_str().strip_suffix('/').unwrap_or(p.as_str());
                    entry.split('/').map(fold_name).eq(upto.iter().cloned())
                }
            })
        };
        for (i, c) in components.iter().enumerate() {
            // Every entry starts with '.', and a short name holds '~': a folded name with
            // neither is an alias of none (a shortcut, not a second rule).
            if !folded[i].starts_with('.') && !folded[i].contains('~') {
                continue;
            }
            let Some(entry) = EXECUTES_LATER.iter().find(|e| names_alias_of(c, e)) else {
                continue;
            };
            if named(&folded[..=i]) || named(&folded) {
                continue;
            }
            let prefix = components[..=i].join("/");
            out.push(Rejection::new(
                ReasonCode::PathProtected,
                Some(escape_path(path.as_str().as_bytes())),
                format!(
                    "component \"{}\" names {entry:?}, which makes tools run code or change \
                     behaviour when they open the folder; allowed only when allowed_paths names \
                     \"{}\" exactly",
                    escape_path(c.as_bytes()),
                    escape_path(prefix.as_bytes()),
                ),
            ));
            return;
        }
    }

    pub(crate) fn contains(&self, path: &RepoPath) -> bool {
        self.allowed.iter().any(|p| p.matches(path))
            && !self.forbidden.iter().any(|p| p.matches(path))
    }

    /// Validates one changed path (RepoPath rules, `.git` lookalikes, scope). Returns the
    /// path when it is a valid RepoPath (even if out of scope), and pushes every violation.
    pub fn check_changed(&self, bytes: &[u8], out: &mut Vec<Rejection>) -> Option<RepoPath> {
        let path = match RepoPath::from_bytes(bytes) {
            Ok(p) => p,
            Err(RepoPathBytesError::NotUtf8) => {
                out.push(Rejection::new(
                    ReasonCode::PathNotUtf8,
                    Some(escape_path(bytes)),
                    "changed path is not valid UTF-8 (shown with \\x escapes)",
                ));
                return None;
            }
            Err(RepoPathBytesError::Invalid(e)) => {
                out.push(Rejection::new(
                    ReasonCode::PathInvalid,
                    Some(escape_path(bytes)),
                    format!("changed path breaks the repository path rules: {e} (shown escaped)"),
                ));
                return None;
            }
        };
        if let Some(component) = path.components().find(|c| is_git_lookalike(c)) {
            out.push(git_rejection(path.as_str().as_bytes(), component));
        }
        self.check(&path, out);
        Some(path)
    }
}

/// The rejection for a path with a `.git` (or lookalike) component.
#[must_use]
pub fn git_rejection(path: &[u8], component: &str) -> Rejection {
    if component == ".git" {
        Rejection::new(
            ReasonCode::GitMetadataChanged,
            Some(escape_path(path)),
            "the change touches a .git directory or file",
        )
    } else {
        Rejection::new(
            ReasonCode::PathProtected,
            Some(escape_path(path)),
            format!(
                "component {:?} may be treated as .git by git or another filesystem",
                escape_path(component.as_bytes())
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pats(v: &[&str]) -> Vec<PathPattern> {
        v.iter().map(|s| PathPattern::new(s).unwrap()).collect()
    }

    #[test]
    fn files_that_execute_later_need_an_exact_entry() {
        let codes = |allowed: &[&str], path: &str| {
            let allowed = pats(allowed);
            let scope = Scope {
                allowed: &allowed,
                forbidden: &[],
            };
            let mut out = Vec::new();
            scope.check_changed(path.as_bytes(), &mut out);
            out.iter().map(|r| r.code).collect::<Vec<_>>()
        };
        assert_eq!(
            codes(&["src/"], "src/.npmrc"),
            vec![ReasonCode::PathProtected]
        );
        assert_eq!(
            codes(&["src/*"], "src/.npmrc"),
            vec![ReasonCode::PathProtected]
        );
        assert_eq!(
            codes(&["src/"], "src/.vscode/tasks.json"),
            vec![ReasonCode::PathProtected]
        );
        assert!(codes(&["src/", "src/.npmrc"], "src/.npmrc").is_empty());
        assert!(codes(&["src/", "src/.vscode/"], "src/.vscode/tasks.json").is_empty());
        assert!(codes(&["src/"], "src/npmrc.txt").is_empty());
        assert!(codes(&["src/"], "src/app.py").is_empty());
        assert_eq!(codes(&["src/"], ".npmrc"), vec![ReasonCode::PathOutOfScope]);
    }

    /// Every spelling some file system or tool takes for a protected name is protected, and an
    /// allowed entry names it only when their folded components are equal.
    #[test]
    fn executes_later_aliases_are_protected() {
        let codes = |allowed: &[&str], path: &str| {
            let allowed = pats(allowed);
            let scope = Scope {
                allowed: &allowed,
                forbidden: &[],
            };
            let mut out = Vec::new();
            scope.check_changed(path.as_bytes(), &mut out);
            out.iter().map(|r| r.code).collect::<Vec<_>>()
        };
        let aliases = [
            // (changed path, the allowed entry that names it under the same normalization)
            ("src/.VSCODE/tasks.json", "src/.vscode/"),
            ("src/.NPMRC", "src/.npmrc"),
            ("src/.Envrc", "src/.envrc"),
            ("src/.npmrc.", "src/.npmrc"),
            ("src/.npmrc. .", "src/.NPMRC"),
            ("src/.vscode /tasks.json", "src/.vscode"),
            ("src/.vs\u{200d}code/tasks.json", "src/.vscode/"),
            ("src/\u{200b}.envrc", "src/.envrc"),
            ("src/.Claude/commands/x.md", "src/.claude/"),
            ("src/.MCP.json", "src/.mcp.json"),
            ("src/NPMRC~1", "src/npmrc~1"),
            ("src/VSCODE~1/tasks.json", "src/vscode~1/"),
            ("src/MCP~1.JSO", "src/MCP~1.JSO"),
            ("src/.GitAttributes", "src/.gitattributes"),
            ("src/.Husky/pre-commit", "src/.husky/"),
            ("src/x/.BASHRC", "src/x/.bashrc"),
        ];
        for (path, entry) in aliases {
            assert_eq!(
                codes(&["src/"], path),
                vec![ReasonCode::PathProtected],
                "{path:?}"
            );
            assert_eq!(
                codes(&["src/*"], path),
                vec![ReasonCode::PathProtected],
                "{path:?}"
            );
            assert!(
                codes(&["src/", entry], path).is_empty(),
                "{path:?} / {entry:?}"
            );
        }
        // A short name is not "the same path" as the long one it may stand for.
        assert_eq!(
            codes(&["src/", "src/.npmrc"], "src/NPMRC~1"),
            vec![ReasonCode::PathProtected]
        );
        // A glob entry never names one.
        assert_eq!(
            codes(&["src/", "src/.np*"], "src/.NPMRC"),
            vec![ReasonCode::PathProtected]
        );
        // Every protected component of a path must be named.
        assert_eq!(
            codes(&["src/", "src/.vscode/"], "src/.vscode/.NPMRC"),
            vec![ReasonCode::PathProtected]
        );
        assert!(
            codes(
                &["src/", "src/.vscode/", "src/.vscode/.npmrc"],
                "src/.vscode/.NPMRC"
            )
            .is_empty()
        );
        // Names that merely contain a protected one stay ordinary.
        for ok in [
            "src/npmrc.txt",
            "src/.npmrcx",
            "src/vscode/tasks.json",
            "src/my.envrc",
            "src/.envrc.example",
            "src/claude.md",
            "src/mcp.json",
            "src/X~1",
        ] {
            assert!(codes(&["src/"], ok).is_empty(), "{ok:?}");
        }
        // The rejection shows hidden code points escaped, in its path and its detail.
        let allowed = pats(&["src/"]);
        let scope = Scope {
            allowed: &allowed,
            forbidden: &[],
        };
        let mut out = Vec::new();
        scope.check_changed("src/.vs\u{200d}code/tasks.json".as_bytes(), &mut out);
        assert_eq!(
            out[0].path.as_deref(),
            Some("src/.vs\\u{200d}code/tasks.json")
        );
        assert!(
            out[0].detail.contains(".vs\\u{200d}code"),
            "{}",
            out[0].detail
        );
        assert!(!out[0].detail.contains('\u{200d}'), "{}", out[0].detail);
    }

    #[test]
    fn escapes() {
        assert_eq!(escape_path(b"src/a\nb"), "src/a\\x0ab");
        assert_eq!(escape_path(b"src/\xff"), "src/\\xff");
        assert_eq!(escape_path("e\u{202e}x".as_bytes()), "e\\u{202e}x");
        assert_eq!(escape_path("é".as_bytes()), "é");
    }

    #[test]
    fn changed_paths() {
        let allowed = pats(&["src/"]);
        let forbidden = pats(&["**/*.pem"]);
        let scope = Scope {
            allowed: &allowed,
            forbidden: &forbidden,
        };
        let codes = |p: &[u8]| {
            let mut out = Vec::new();
            scope.check_changed(p, &mut out);
            out.iter().map(|r| r.code).collect::<Vec<_>>()
        };
        assert!(codes(b"src/a.rs").is_empty());
        assert_eq!(codes(b"src-evil/p.py"), vec![ReasonCode::PathOutOfScope]);
        assert_eq!(codes(b"src/k/a.pem"), vec![ReasonCode::PathForbidden]);
        assert_eq!(codes(b"src/\xff"), vec![ReasonCode::PathNotUtf8]);
        assert_eq!(codes(b"src/a\nb"), vec![ReasonCode::PathInvalid]);
        assert_eq!(codes(b"src/.GIT/config"), vec![ReasonCode::PathProtected]);
        assert_eq!(
            codes(b"src/n/.git/config"),
            vec![ReasonCode::GitMetadataChanged]
        );
    }
}
