//! Glob matching with exactly the semantics of Python's `fnmatch.fnmatchcase`.
//!
//! The seeds define path scope with "verifier-style fnmatchcase glob semantics", so this is a
//! port of CPython's `fnmatch.translate` (3.11), not a general glob library:
//! - `*` matches any sequence of characters, `/` and newlines included;
//! - `?` matches any one character, `/` included;
//! - `[seq]` and `[!seq]` are character classes with `a-z` ranges; a `]` right after `[` or `[!`
//!   is literal; an unclosed `[` is a literal `[`; a reversed range such as `z-a` is removed, so
//!   `[z-a]` never matches and `[!z-a]` matches any character;
//! - everything else, `{`, `}`, `\` and `**` included, is literal or plain `*`.
//!
//! `globset` differs on most of those points (ADR-0003), so it is not used.

/// A compiled `fnmatchcase` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    tokens: Vec<Token>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Star,
    AnyChar,
    Literal(char),
    Class(CharClass),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct CharClass {
    negated: bool,
    /// Inclusive ranges; a single character is `(c, c)`.
    ranges: Vec<(char, char)>,
}

impl CharClass {
    fn matches(&self, c: char) -> bool {
        let inside = self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi);
        inside != self.negated
    }
}

/// Is this character one that makes a pattern a glob rather than a literal path?
#[must_use]
pub fn is_glob_meta(c: char) -> bool {
    matches!(c, '*' | '?' | '[')
}

impl Glob {
    /// Compiles a pattern. Every string is a valid `fnmatch` pattern, so this cannot fail.
    #[must_use]
    pub fn new(pattern: &str) -> Self {
        Self {
            tokens: translate(&pattern.chars().collect::<Vec<_>>()),
        }
    }

    /// `fnmatch.fnmatchcase(name, pattern)`.
    #[must_use]
    pub fn matches(&self, name: &str) -> bool {
        let name: Vec<char> = name.chars().collect();
        match_tokens(&self.tokens, &name)
    }
}

/// Convenience for one-off matches: `fnmatch.fnmatchcase(name, pattern)`.
#[must_use]
pub fn fnmatchcase(name: &str, pattern: &str) -> bool {
    Glob::new(pattern).matches(name)
}

fn translate(pat: &[char]) -> Vec<Token> {
    let n = pat.len();
    let mut out: Vec<Token> = Vec::new();
    let mut i = 0;
    while i < n {
        let c = pat[i];
        i += 1;
        match c {
            '*' => {
                if out.last() != Some(&Token::Star) {
                    out.push(Token::Star);
                }
            }
            '?' => out.push(Token::AnyChar),
            '[' => {
                let mut j = i;
                if j < n && pat[j] == '!' {
                    j += 1;
                }
                if j < n && pat[j] == ']' {
                    j += 1;
                }
                while j < n && pat[j] != ']' {
                    j += 1;
                }
                if j >= n {
                    out.push(Token::Literal('['));
                } else {
                    out.push(class_token(pat, i, j));
                    i = j + 1;
                }
            }
            other => out.push(Token::Literal(other)),
        }
    }
    out
}

/// One class atom of the regular expression CPython builds: a character and whether it was
/// escaped (an escaped `-` is never a range operator).
#[derive(Clone, Copy)]
struct Atom {
    c: char,
    escaped: bool,
}

/// Builds the class for `pat[start..end]` (the text between `[` and `]`), following CPython's
/// chunking of ranges exactly.
fn class_token(pat: &[char], start: usize, end: usize) -> Token {
    let stuff = &pat[start..end];
    // CPython's "stuff" string, as atoms: every `\` and non-range `-` escaped.
    let mut atoms: Vec<Atom> = Vec::new();
    if !stuff.contains(&'-') {
        atoms.extend(stuff.iter().map(|&c| Atom {
            c,
            escaped: c == '\\',
        }));
    } else {
        let mut chunks: Vec<Vec<char>> = Vec::new();
        let mut i = start;
        let mut k = if pat[start] == '!' {
            start + 2
        } else {
            start + 1
        };
        loop {
            let found = if k < end {
                pat[k..end].iter().position(|&c| c == '-').map(|p| p + k)
            } else {
                None
            };
            let Some(hyphen) = found else { break };
            chunks.push(pat[i..hyphen].to_vec());
            i = hyphen + 1;
            k = hyphen + 3;
        }
        let last: Vec<char> = pat[i..end].to_vec();
        if !last.is_empty() {
            chunks.push(last);
        } else if let Some(prev) = chunks.last_mut() {
            prev.push('-');
        }
        // Remove empty ranges (lo > hi) the way CPython does.
        let mut k = chunks.len();
        while k > 1 {
            k -= 1;
            let (lo, hi) = (chunks[k - 1].last().copied(), chunks[k].first().copied());
            if let (Some(lo), Some(hi)) = (lo, hi)
                && lo > hi
            {
                let tail: Vec<char> = chunks[k][1..].to_vec();
                let prev = &mut chunks[k - 1];
                prev.pop();
                prev.extend(tail);
                chunks.remove(k);
            }
        }
        for (idx, chunk) in chunks.iter().enumerate() {
            if idx > 0 {
                atoms.push(Atom {
                    c: '-',
                    escaped: false,
                });
            }
            atoms.extend(chunk.iter().map(|&c| Atom {
                c,
                escaped: c == '\\' || c == '-',
            }));
        }
    }
    if atoms.is_empty() {
        // `(?!)`: never matches.
        return Token::Class(CharClass {
            negated: false,
            ranges: Vec::new(),
        });
    }
    if atoms.len() == 1 && atoms[0].c == '!' {
        return Token::AnyChar;
    }
    let negated = atoms[0].c == '!';
    let body = if negated { &atoms[1..] } else { &atoms[..] };
    // Interpret the body as a regular-expression class: `a-b` is a range unless the `-` was
    // escaped or stands at either end; everything else is literal.
    let mut ranges = Vec::new();
    let mut idx = 0;
    while idx < body.len() {
        let lo = body[idx];
        let is_range = idx + 2 < body.len() && body[idx + 1].c == '-' && !body[idx + 1].escaped;
        if is_range {
            let hi = body[idx + 2];
            ranges.push((lo.c, hi.c));
            idx += 3;
        } else {
            ranges.push((lo.c, lo.c));
            idx += 1;
        }
    }
    Token::Class(CharClass { negated, ranges })
}

fn token_matches(token: &Token, c: char) -> bool {
    match token {
        Token::AnyChar => true,
        Token::Literal(l) => *l == c,
        Token::Class(class) => class.matches(c),
        Token::Star => false,
    }
}

/// Wildcard matching with one backtrack point: correct because `*` is the only token that
/// matches a variable number of characters. Worst case O(len(pattern) * len(name)).
fn match_tokens(tokens: &[Token], name: &[char]) -> bool {
    let (mut t, mut s) = (0usize, 0usize);
    let mut backtrack: Option<(usize, usize)> = None;
    while s < name.len() {
        if t < tokens.len() {
            if tokens[t] == Token::Star {
                backtrack = Some((t, s));
                t += 1;
                continue;
            }
            if token_matches(&tokens[t], name[s]) {
                t += 1;
                s += 1;
                continue;
            }
        }
        match backtrack {
            Some((star_t, star_s)) => {
                t = star_t + 1;
                s = star_s + 1;
                backtrack = Some((star_t, star_s + 1));
            }
            None => return false,
        }
    }
    tokens[t..].iter().all(|tok| *tok == Token::Star)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basics_follow_fnmatchcase() {
        assert!(fnmatchcase("src/a/b.rs", "src/*"));
        assert!(fnmatchcase("src/a/b.rs", "*.rs"));
        assert!(!fnmatchcase("x.pem", "**/*.pem"));
        assert!(fnmatchcase("a/x.pem", "**/*.pem"));
        assert!(fnmatchcase("a/b", "a?b"));
        assert!(!fnmatchcase("SRC/a", "src/*"));
        assert!(fnmatchcase("{a,b}", "{a,b}"));
        assert!(!fnmatchcase("a", "{a,b}"));
        assert!(fnmatchcase("[", "["));
        assert!(fnmatchcase("b", "[!a]"));
        assert!(!fnmatchcase("a", "[!a]"));
        assert!(fnmatchcase("^", "[^a]"));
        assert!(!fnmatchcase("b", "[^a]"));
        assert!(!fnmatchcase("a", "[z-a]"));
        assert!(fnmatchcase("q", "[!z-a]"));
        assert!(fnmatchcase("]", "[]]"));
        assert!(fnmatchcase("-", "[a-]"));
        assert!(fnmatchcase("\\", "\\"));
        assert!(fnmatchcase("a\nb", "a*b"));
    }
}
