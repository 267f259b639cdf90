//! Path validation: an accepted path never contains `..`, `.` or empty components, a
//! backslash, a leading `/` or a control character, and is exactly the input.
#![no_main]

use corral_contract::{PathPattern, RepoPath};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = RepoPath::from_bytes(data) {
        let s = p.as_str();
        assert_eq!(s.as_bytes(), data, "path was rewritten");
        assert!(!s.starts_with('/'));
        assert!(!s.contains('\\'));
        assert!(!s.chars().any(char::is_control));
        assert!(s.split('/').all(|c| !c.is_empty() && c != "." && c != ".."));
    }
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(p) = PathPattern::new(s) {
            assert_eq!(p.as_str(), s);
            let body = s.strip_suffix('/').unwrap_or(s);
            assert!(!s.starts_with('/') && !s.contains('\\') && !s.chars().any(char::is_control));
            assert!(body.split('/').all(|c| !c.is_empty() && c != "." && c != ".."));
        }
    }
});
