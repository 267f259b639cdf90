//! Property tests for RepoPath, PathPattern and the glob matcher.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use corral_contract::{PathPattern, RepoPath, fnmatchcase};
use proptest::prelude::*;

fn component() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_.é -]{1,8}".prop_filter("not . or ..", |c| c != "." && c != "..")
}

fn valid_path() -> impl Strategy<Value = String> {
    prop::collection::vec(component(), 1..6).prop_map(|c| c.join("/"))
}

proptest! {
    /// An accepted path never contains `..`/`.`/empty components, a backslash, a leading `/`
    /// or a control character, and is stored exactly as given.
    #[test]
    fn accepted_paths_are_safe_and_unchanged(s in any::<String>()) {
        if let Ok(p) = RepoPath::new(&s) {
            prop_assert_eq!(p.as_str(), s.as_str());
            prop_assert!(!s.starts_with('/'));
            prop_assert!(!s.contains('\\'));
            prop_assert!(!s.chars().any(char::is_control));
            prop_assert!(p.components().all(|c| !c.is_empty() && c != "." && c != ".."));
        }
    }

    #[test]
    fn generated_valid_paths_are_accepted(s in valid_path()) {
        prop_assert!(RepoPath::new(&s).is_ok());
    }

    /// Inserting any forbidden construct anywhere makes a valid path invalid.
    #[test]
    fn injected_bad_parts_are_rejected(s in valid_path(), bad in prop::sample::select(vec!["/../", "/./", "//", "\\", "\u{0}", "\n", "\u{1b}", "\u{7f}", "\u{9b}"]), at in any::<prop::sample::Index>()) {
        let chars: Vec<char> = s.chars().collect();
        let i = at.index(chars.len() + 1);
        let mut t: String = chars[..i].iter().collect();
        t.push_str(bad);
        t.extend(&chars[i..]);
        prop_assert!(RepoPath::new(&t).is_err(), "{:?} accepted", t);
    }

    /// A literal pattern matches itself and everything below it, and nothing that only shares
    /// a string prefix.
    #[test]
    fn literal_directory_rule(dir in valid_path(), rest in valid_path(), suffix in "[a-z]{1,3}") {
        let below = RepoPath::new(&format!("{dir}/{rest}")).unwrap();
        let sibling = RepoPath::new(&format!("{dir}{suffix}")).unwrap();
        let p = PathPattern::new(&format!("{dir}/")).unwrap();
        prop_assert!(p.matches(&below));
        prop_assert!(!p.matches(&sibling));
        let q = PathPattern::new(&dir).unwrap();
        if q.is_literal() {
            let itself = RepoPath::new(&dir).unwrap();
            prop_assert!(q.matches(&itself));
            prop_assert!(q.matches(&below));
        }
    }

    /// Any string without metacharacters matches exactly itself; `*` matches everything.
    #[test]
    fn matcher_basics(s in "[^*?\\[]{0,12}", t in any::<String>()) {
        prop_assert!(fnmatchcase(&s, &s));
        prop_assert_eq!(fnmatchcase(&t, &s), t == s);
        prop_assert!(fnmatchcase(&t, "*"));
        prop_assert_eq!(fnmatchcase(&t, "?"), t.chars().count() == 1);
    }

    /// `*x*` is substring search, `x*` prefix, `*x` suffix (x without metacharacters).
    #[test]
    fn star_semantics(x in "[a-z/]{0,4}", t in "[a-z/]{0,10}") {
        prop_assert_eq!(fnmatchcase(&t, &format!("*{x}*")), t.contains(&x));
        prop_assert_eq!(fnmatchcase(&t, &format!("{x}*")), t.starts_with(&x));
        prop_assert_eq!(fnmatchcase(&t, &format!("*{x}")), t.ends_with(&x));
    }

    /// The matcher never panics and never takes super-linear backtracking on long inputs.
    #[test]
    fn matcher_total(p in any::<String>(), t in any::<String>()) {
        let _ = fnmatchcase(&t, &p);
    }
}
