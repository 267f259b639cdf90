//! `.gitignore` rules, read only from the base commit's tree.
//!
//! A port of git's `dir.c` pattern parsing and `wildmatch.c` matching (case-sensitive, as
//! `core.ignoreCase=false`). Only the `.gitignore` files of the base tree are ever consulted:
//! never the worker's versions, `.git/info/exclude` or any `core.excludesFile`, so a worker
//! cannot hide a change by writing ignore rules (CAP-04).

#[derive(Debug, Clone)]
struct Pattern {
    text: Vec<u8>,
    negative: bool,
    must_be_dir: bool,
    /// No `/` except a trailing one: matches the basename at any depth.
    basename_only: bool,
}

/// The patterns of one `.gitignore` file and the directory it lives in.
#[derive(Debug, Clone, Default)]
pub struct IgnoreList {
    /// Repository-relative directory of the file, without trailing `/` (`""` for the root).
    base: Vec<u8>,
    patterns: Vec<Pattern>,
}

fn trim_trailing_spaces(line: &mut Vec<u8>) {
    let mut last_space: Option<usize> = None;
    let mut i = 0;
    while i < line.len() {
        match line[i] {
            b' ' => {
                if last_space.is_none() {
                    last_space = Some(i);
                }
            }
            b'\\' => {
                i += 1;
                if i >= line.len() {
                    return;
                }
                last_space = None;
            }
            _ => last_space = None,
        }
        i += 1;
    }
    if let Some(at) = last_space {
        line.truncate(at);
    }
}

impl IgnoreList {
    /// Parses the content of `<base>/.gitignore`.
    #[must_use]
    pub fn parse(base: &[u8], content: &[u8]) -> Self {
        let content = content.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(content);
        let mut patterns = Vec::new();
        for raw in content.split(|&b| b == b'\n') {
            if raw.is_empty() || raw[0] == b'#' {
                continue;
            }
            let mut line = raw.strip_suffix(b"\r").unwrap_or(raw).to_vec();
            trim_trailing_spaces(&mut line);
            let mut text: &[u8] = &line;
            let mut negative = false;
            if let Some(rest) = text.strip_prefix(b"!") {
                negative = true;
                text = rest;
            }
            let mut must_be_dir = false;
            if let Some(rest) = text.strip_suffix(b"/") {
                must_be_dir = true;
                text = rest;
            }
            if text.is_empty() {
                continue;
            }
            let basename_only = !text.contains(&b'/');
            patterns.push(Pattern {
                text: text.to_vec(),
                negative,
                must_be_dir,
                basename_only,
            });
        }
        Self {
            base: base.to_vec(),
            patterns,
        }
    }

    /// The decision of the last matching pattern: `Some(true)` ignored, `Some(false)`
    /// re-included, `None` no pattern matches.
    fn last_match(&self, path: &[u8], is_dir: bool) -> Option<bool> {
        let rel = if self.base.is_empty() {
            path
        } else {
            let rest = path.strip_prefix(self.base.as_slice())?;
            rest.strip_prefix(b"/")?
        };
        let basename = match rel.iter().rposition(|&b| b == b'/') {
            Some(i) => &rel[i + 1..],
            None => rel,
        };
        for p in self.patterns.iter().rev() {
            if p.must_be_dir && !is_dir {
                continue;
            }
            let hit = if p.basename_only {
                wildmatch(&p.text, basename, false)
            } else {
                let pat = p.text.strip_prefix(b"/").unwrap_or(&p.text);
                wildmatch(pat, rel, true)
            };
            if hit {
                return Some(!p.negative);
            }
        }
        None
    }
}

/// Is `path` excluded by the lists (root first, deepest last)? Lists deeper in the tree take
/// precedence, and within a list the last matching line wins. Excluded parent directories are
/// the caller's business (a path below an excluded directory is always ignored).
#[must_use]
pub fn is_excluded(stack: &[IgnoreList], path: &[u8], is_dir: bool) -> bool {
    for list in stack.iter().rev() {
        if let Some(decision) = list.last_match(path, is_dir) {
            return decision;
        }
    }
    false
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wm {
    Match,
    NoMatch,
    AbortAll,
    AbortToStarStar,
}

/// git's `wildmatch()`; `pathname` is `WM_PATHNAME` (`*` and `?` do not match `/`).
#[must_use]
pub fn wildmatch(pattern: &[u8], text: &[u8], pathname: bool) -> bool {
    dowild(pattern, 0, text, 0, pathname) == Wm::Match
}

fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

fn is_glob_special(c: u8) -> bool {
    matches!(c, b'*' | b'?' | b'[' | b'\\')
}

fn class_matches(class: &[u8], c: u8) -> Option<bool> {
    Some(match class {
        b"alnum" => c.is_ascii_alphanumeric(),
        b"alpha" => c.is_ascii_alphabetic(),
        b"blank" => c == b' ' || c == b'\t',
        b"cntrl" => c.is_ascii_control(),
        b"digit" => c.is_ascii_digit(),
        b"graph" => c.is_ascii_graphic(),
        b"lower" => c.is_ascii_lowercase(),
        b"print" => c.is_ascii_graphic() || c == b' ',
        b"punct" => c.is_ascii_punctuation(),
        b"space" => matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c),
        b"upper" => c.is_ascii_uppercase(),
        b"xdigit" => c.is_ascii_hexdigit(),
        _ => return None,
    })
}

#[allow(
    clippy::too_many_lines,
    reason = "a faithful port of git's dowild() is easier to audit as one function"
)]
fn dowild(pat: &[u8], mut p: usize, text: &[u8], mut t: usize, pathname: bool) -> Wm {
    while at(pat, p) != 0 {
        let mut p_ch = at(pat, p);
        let mut t_ch = at(text, t);
        if t_ch == 0 && p_ch != b'*' {
            return Wm::AbortAll;
        }
        match p_ch {
            b'?' => {
                if pathname && t_ch == b'/' {
                    return Wm::NoMatch;
                }
            }
            b'*' => {
                let match_slash;
                p += 1;
                if at(pat, p) == b'*' {
                    let prev_is_start_or_slash = p < 2 || at(pat, p - 2) == b'/';
                    while at(pat, p) == b'*' {
                        p += 1;
                    }
                    let next = at(pat, p);
                    if prev_is_start_or_slash
                        && (next == 0 || next == b'/' || (next == b'\\' && at(pat, p + 1) == b'/'))
                    {
                        if next == b'/' && dowild(pat, p + 1, text, t, pathname) == Wm::Match {
                            return Wm::Match;
                        }
                        match_slash = true;
                    } else {
                        match_slash = false;
                    }
                } else {
                    match_slash = !pathname;
                }
                if at(pat, p) == 0 {
                    if !match_slash && text[t.min(text.len())..].contains(&b'/') {
                        return Wm::NoMatch;
                    }
                    return Wm::Match;
                } else if !match_slash && at(pat, p) == b'/' {
                    match text[t.min(text.len())..].iter().position(|&b| b == b'/') {
                        None => return Wm::NoMatch,
                        Some(off) => {
                            t += off;
                            // The slash is consumed by the loop step below.
                            p += 1;
                            t += 1;
                            continue;
                        }
                    }
                }
                loop {
                    if t_ch == 0 {
                        break;
                    }
                    if !is_glob_special(at(pat, p)) {
                        let lit = at(pat, p);
                        loop {
                            t_ch = at(text, t);
                            if t_ch == 0 || !(match_slash || t_ch != b'/') {
                                break;
                            }
                            if t_ch == lit {
                                break;
                            }
                            t += 1;
                        }
                        if t_ch != lit {
                            return Wm::NoMatch;
                        }
                    }
                    let matched = dowild(pat, p, text, t, pathname);
                    if matched != Wm::NoMatch {
                        if !match_slash || matched != Wm::AbortToStarStar {
                            return matched;
                        }
                    } else if !match_slash && t_ch == b'/' {
                        return Wm::AbortToStarStar;
                    }
                    t += 1;
                    t_ch = at(text, t);
                }
                return Wm::AbortAll;
            }
            b'[' => {
                p += 1;
                p_ch = at(pat, p);
                if p_ch == b'^' {
                    p_ch = b'!';
                }
                let negated = p_ch == b'!';
                if negated {
                    p += 1;
                    p_ch = at(pat, p);
                }
                let mut prev_ch: u8 = 0;
                let mut matched = false;
                loop {
                    if p_ch == 0 {
                        return Wm::AbortAll;
                    }
                    if p_ch == b'\\' {
                        p += 1;
                        p_ch = at(pat, p);
                        if p_ch == 0 {
                            return Wm::AbortAll;
                        }
                        if t_ch == p_ch {
                            matched = true;
                        }
                    } else if p_ch == b'-'
                        && prev_ch != 0
                        && at(pat, p + 1) != 0
                        && at(pat, p + 1) != b']'
                    {
                        p += 1;
                        p_ch = at(pat, p);
                        if p_ch == b'\\' {
                            p += 1;
                            p_ch = at(pat, p);
                            if p_ch == 0 {
                                return Wm::AbortAll;
                            }
                        }
                        if t_ch <= p_ch && t_ch >= prev_ch {
                            matched = true;
                        }
                        p_ch = 0;
                    } else if p_ch == b'[' && at(pat, p + 1) == b':' {
                        p += 2;
                        let s = p;
                        while at(pat, p) != 0 && at(pat, p) != b']' {
                            p += 1;
                        }
                        if at(pat, p) == 0 {
                            return Wm::AbortAll;
                        }
                        // p at ']'; the class name is pat[s..p-1] when pat[p-1] == ':'.
                        if p < s + 1 || at(pat, p - 1) != b':' {
                            // Not "[:name:]": treat "[" as a normal set member.
                            p = s - 2;
                            p_ch = b'[';
                            if t_ch == p_ch {
                                matched = true;
                            }
                            prev_ch = p_ch;
                            p += 1;
                            p_ch = at(pat, p);
                            if p_ch == b']' {
                                break;
                            }
                            continue;
                        }
                        match class_matches(&pat[s..p - 1], t_ch) {
                            Some(true) => matched = true,
                            Some(false) => {}
                            None => return Wm::AbortAll,
                        }
                        p_ch = 0;
                    } else if t_ch == p_ch {
                        matched = true;
                    }
                    prev_ch = p_ch;
                    p += 1;
                    p_ch = at(pat, p);
                    if p_ch == b']' {
                        break;
                    }
                }
                if matched == negated || (pathname && t_ch == b'/') {
                    return Wm::NoMatch;
                }
            }
            b'\\' => {
                p += 1;
                p_ch = at(pat, p);
                if t_ch != p_ch {
                    return Wm::NoMatch;
                }
            }
            _ => {
                if t_ch != p_ch {
                    return Wm::NoMatch;
                }
            }
        }
        p += 1;
        t += 1;
    }
    if at(text, t) != 0 {
        Wm::NoMatch
    } else {
        Wm::Match
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildmatch_basics() {
        let cases: &[(&str, &str, bool, bool)] = &[
            ("foo", "foo", true, true),
            ("foo", "bar", true, false),
            ("*", "foo/bar", true, false),
            ("*", "foo/bar", false, true),
            ("**/foo", "a/b/foo", true, true),
            ("**/foo", "foo", true, true),
            ("a/**/b", "a/b", true, true),
            ("a/**/b", "a/x/y/b", true, true),
            ("a/**", "a/x/y", true, true),
            ("a/*", "a/x/y", true, false),
            ("*.o", "x.o", true, true),
            ("[a-c]x", "bx", true, true),
            ("[!a-c]x", "bx", true, false),
            ("[^a-c]x", "dx", true, true),
            ("[[:digit:]]", "5", true, true),
            ("[[:digit:]]", "a", true, false),
            ("\\*", "*", true, true),
            ("\\*", "a", true, false),
            ("a?c", "a/c", true, false),
            ("a?c", "abc", true, true),
            ("foo*bar", "foo/bar", true, false),
            ("**", "a/b/c", true, true),
            ("a**b", "axxb", true, true),
            ("*/b", "a/b", true, true),
            ("*/b", "a/c/b", true, false),
            ("[ab", "[ab", true, false),
            (
                "-*-*-*-*-*-*-12-*-*-*-m-*-*-*",
                "-adobe-courier-bold-o-normal--12-120-75-75-m-70-iso8859-1",
                true,
                true,
            ),
        ];
        for &(p, t, pathname, want) in cases {
            assert_eq!(
                wildmatch(p.as_bytes(), t.as_bytes(), pathname),
                want,
                "{p} ~ {t} ({pathname})"
            );
        }
    }

    #[test]
    fn gitignore_rules() {
        let root = IgnoreList::parse(
            b"",
            b"# c\n*.log\n!keep.log\nbuild/\n/top\nsub/x\n\\#hash\ntrail\\ \n",
        );
        let st = [root];
        assert!(is_excluded(&st, b"a.log", false));
        assert!(is_excluded(&st, b"d/a.log", false));
        assert!(!is_excluded(&st, b"keep.log", false));
        assert!(is_excluded(&st, b"build", true));
        assert!(!is_excluded(&st, b"build", false));
        assert!(is_excluded(&st, b"top", false));
        assert!(!is_excluded(&st, b"d/top", false));
        assert!(is_excluded(&st, b"sub/x", false));
        assert!(!is_excluded(&st, b"d/sub/x", false));
        assert!(is_excluded(&st, b"#hash", false));
        assert!(is_excluded(&st, b"trail ", false));
        let sub = IgnoreList::parse(b"d", b"!a.log\n/only\n");
        let st2 = [st[0].clone(), sub];
        assert!(!is_excluded(&st2, b"d/a.log", false));
        assert!(is_excluded(&st2, b"e/a.log", false));
        assert!(is_excluded(&st2, b"d/only", false));
        assert!(!is_excluded(&st2, b"d/x/only", false));
    }
}
