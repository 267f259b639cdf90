//! Path validation, scope checks and symlink-target checks for changed paths.
//!
//! Every path is checked as the raw bytes the filesystem gave: nothing is decoded, normalized
//! or repaired before the check (CAP-10, CAP-11).

use corral_contract::codes::{ReasonCode, Rejection};
use corral_contract::path::{PathPattern, RepoPath, RepoPathBytesError, is_git_lookalike};

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
/// "dangerous files" of sandbox-runtime's mandatory deny list and their kin).
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
    pub allowed: &'a [PathPattern],
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

    /// A path inside the scope that names a file or folder tools execute or obey just by
    /// opening the folder (`.npmrc`, `.envrc`, `.vscode/`, ...) is rejected unless an
    /// `allowed_paths` entry names it literally: a glob or a parent folder is not enough
    /// (CAP-13: the scope policy has no escape hatch through config files).
    fn check_executes_later(&self, path: &RepoPath, out: &mut Vec<Rejection>) {
        let mut prefix = String::new();
        for c in path.components() {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(c);
            if EXECUTES_LATER.contains(&c) {
                let named = self.allowed.iter().any(|p| {
                    p.is_literal() && {
                        let s = p.as_str().trim_end_matches('/');
                        s == prefix || s == path.as_str()
                    }
                });
                if !named {
                    out.push(Rejection::new(
                        ReasonCode::PathProtected,
                        Some(path.as_str().to_owned()),
                        format!(
                            "{c:?} makes tools run code or change behaviour when they open the \
                             folder; allowed only when allowed_paths names {prefix:?} exactly"
                        ),
                    ));
                }
                return;
            }
        }
    }

    fn contains(&self, path: &RepoPath) -> bool {
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

    /// Checks a symlink at `link` (raw path bytes) pointing at `target`: the target must be
    /// relative, UTF-8, free of `.git` lookalikes, stay inside the repository when resolved
    /// lexically from the link's directory, and land inside the scope.
    pub fn check_symlink(&self, link: &[u8], target: &[u8], out: &mut Vec<Rejection>) {
        let reject = |detail: String, out: &mut Vec<Rejection>| {
            out.push(Rejection::new(
                ReasonCode::SymlinkEscape,
                Some(escape_path(link)),
                format!("{detail} (target {:?})", escape_path(target)),
            ));
        };
        if target.is_empty() {
            return reject("symlink has an empty target".into(), out);
        }
        if target.starts_with(b"/") {
            return reject("symlink target is absolute".into(), out);
        }
        let Ok(target_str) = std::str::from_utf8(target) else {
            return reject("symlink target is not UTF-8".into(), out);
        };
        if target_str.chars().any(char::is_control) || target_str.contains('\\') {
            return reject(
                "symlink target contains a control character or backslash".into(),
                out,
            );
        }
        let mut stack: Vec<&[u8]> = link.split(|&b| b == b'/').collect();
        stack.pop();
        for component in target_str.split('/') {
            match component {
                "" | "." => {}
                ".." => {
                    if stack.pop().is_none() {
                        return reject("symlink target leaves the repository".into(), out);
                    }
                }
                c if is_git_lookalike(c) => {
                    return reject("symlink target names .git or a lookalike".into(), out);
                }
                c => stack.push(c.as_bytes()),
            }
        }
        if stack.is_empty() {
            return reject("symlink target is the repository root".into(), out);
        }
        let resolved = stack.join(&b'/');
        match RepoPath::from_bytes(&resolved) {
            Ok(p) if self.contains(&p) => {}
            Ok(p) => reject(
                format!(
                    "symlink target resolves to {:?}, outside the scope",
                    p.as_str()
                ),
                out,
            ),
            Err(_) => reject("symlink target resolves to an invalid path".into(), out),
        }
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

    #[test]
    fn escapes() {
        assert_eq!(escape_path(b"src/a\nb"), "src/a\\x0ab");
        assert_eq!(escape_path(b"src/\xff"), "src/\\xff");
        assert_eq!(escape_path("e\u{202e}x".as_bytes()), "e\\u{202e}x");
        assert_eq!(escape_path("é".as_bytes()), "é");
    }

    #[test]
    fn symlink_rules() {
        let allowed = pats(&["src/"]);
        let scope = Scope {
            allowed: &allowed,
            forbidden: &[],
        };
        let check = |link: &str, target: &str| {
            let mut out = Vec::new();
            scope.check_symlink(link.as_bytes(), target.as_bytes(), &mut out);
            out.is_empty()
        };
        assert!(check("src/a", "b"));
        assert!(check("src/d/a", "../b"));
        assert!(!check("src/a", "/etc/shadow"));
        assert!(!check("src/a", "../../x"));
        assert!(!check("src/gh", "../.github"));
        assert!(!check("src/a", ".."));
        assert!(!check("src/a", "../.git/hooks"));
        assert!(!check("src/a", "x/.GIT"));
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
