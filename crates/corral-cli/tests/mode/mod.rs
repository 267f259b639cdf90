//! The mode these tests run in (ADR-0080): as root (the test command) every `corral` they
//! start is in root mode; as an ordinary user (`cargo xtask vm --tests corral-cli --as-user`)
//! in rootless mode. A test whose premise needs root says so where it can be seen.
#![allow(dead_code, reason = "each test binary uses part of it")]

/// Whether this test process is root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `true` (and a line on the real stderr, which the test harness does not capture, so the
/// run's log shows it) when an ordinary user runs this test and its premise needs root.
pub fn root_mode_only(test: &str, why: &str) -> bool {
    if is_root() {
        return false;
    }
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "NOT APPLICABLE in rootless mode: {test}: {why}"
    );
    true
}
