//! The matcher is total and consistent: a pattern without metacharacters matches only
//! itself, and `*` + pattern + `*` matches whenever the pattern does.
#![no_main]

use corral_contract::fnmatchcase;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let (pattern, name) = s.split_once('\u{0}').unwrap_or((s, s));
    let m = fnmatchcase(name, pattern);
    if !pattern.contains(['*', '?', '[']) {
        assert_eq!(m, name == pattern);
    }
    if m {
        assert!(fnmatchcase(name, &format!("*{pattern}")));
        assert!(fnmatchcase(name, &format!("{pattern}*")));
    }
});
