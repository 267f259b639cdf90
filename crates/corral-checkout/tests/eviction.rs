//! The cache's size budget (ADR-0070), in a test binary of its own with one test.
//!
//! An entry is "in use" while its lease lock (`flock` on `base/<sha>.lock`) is held. A
//! forked child holds a copy of every descriptor of its parent until it execs, the lease's
//! too (close-on-exec acts only at exec). In a binary whose other tests spawn git from
//! sibling threads, such a fork could hold a just-dropped lease for a few microseconds, and
//! `gc` then rightly reported the entry busy: the test judged a race of its own making (seen
//! in CI). Alone in its binary, nothing forks while it asserts.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

mod common;

use common::{Repo, cache};
use corral_checkout::{CacheLimits, Isolation};

#[test]
fn the_budget_evicts_least_recently_used_entries_never_one_in_use() {
    let repo = Repo::new();
    let a = repo.commit_files(&[("a", &vec![b'a'; 200_000])]);
    let b = repo.commit_files(&[("b", &vec![b'b'; 200_000])]);
    let c3 = repo.commit_files(&[("c", &vec![b'c'; 200_000])]);
    let (_t, c) = cache(CacheLimits {
        budget_bytes: 1 << 40,
        ..CacheLimits::default()
    });
    let held = c.checkout(repo.path(), &a, &Isolation::InProcess).unwrap();
    drop(c.checkout(repo.path(), &b, &Isolation::InProcess).unwrap());
    drop(c.checkout(repo.path(), &c3, &Isolation::InProcess).unwrap());
    let listed = c.list().unwrap();
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().find(|e| e.base_sha == a).unwrap().in_use);
    // A budget of one entry: b and c are not in use, a is.
    let report = c.gc(300_000, None).unwrap();
    assert_eq!(report.busy, vec![a.clone()]);
    assert!(held.dir.join("a").exists(), "an entry in use was evicted");
    let left: Vec<String> = c.list().unwrap().into_iter().map(|e| e.base_sha).collect();
    assert!(left.contains(&a));
    assert!(left.len() < 3, "{report:?}");
    drop(held);
    let report = c.gc(0, None).unwrap();
    assert!(report.busy.is_empty());
    assert!(c.list().unwrap().is_empty());
}
