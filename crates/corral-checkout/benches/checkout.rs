//! The cold first attempt's base checkout (cache empty) against the peer pipeline, side by
//! side on the same file system: `git clone --shared --no-checkout` + `git checkout`.
//! corral's side includes the confined helper (this binary re-executes itself as it, as
//! `corral` does). Prints medians and the ratio; asserts nothing about time.
//!
//! `cargo bench -p corral-checkout --bench checkout` (root). `CORRAL_BENCH_FILES` (20000),
//! `CORRAL_BENCH_DIR` (/dev/shm: tmpfs), `CORRAL_BENCH_RUNS` (5).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "bench"
)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use corral_checkout::{BaseCache, CacheLimits, HELPER_ARG, Isolation};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "-c",
            "gc.auto=0",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some(HELPER_ARG) {
        std::process::exit(corral_checkout::helper_main());
    }
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --benches` runs benches as tests: nothing to check here.
    }
    let files: usize = std::env::var("CORRAL_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let runs: usize = std::env::var("CORRAL_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let base = std::env::var("CORRAL_BENCH_DIR").unwrap_or_else(|_| "/dev/shm".into());
    let root = Path::new(&base).join(format!("corral-bench-checkout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let repo = root.join("repo");
    for i in 0..files {
        let p = repo.join(format!("d{:03}/f{i}.txt", i % 200));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("line {i}\n").repeat(8)).unwrap();
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    git(&repo, &["gc", "-q"]);
    let sha = git(&repo, &["rev-parse", "HEAD"]);
    // CORRAL_BENCH_IN_PROCESS=1 measures without the helper (its cost is the difference).
    let exe = if std::env::var_os("CORRAL_BENCH_IN_PROCESS").is_some() {
        Isolation::InProcess
    } else {
        Isolation::Helper {
            exe: std::env::current_exe().unwrap(),
        }
    };
    let (mut ours, mut peer) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let cache_dir = root.join(format!("cache-{run}"));
        let t = Instant::now();
        let cache = BaseCache::open(&cache_dir, CacheLimits::default()).unwrap();
        let co = cache.checkout(&repo, &sha, &exe).unwrap();
        ours.push(t.elapsed());
        assert!(co.created);
        drop(co);
        let clone = root.join(format!("clone-{run}"));
        let t = Instant::now();
        git(
            &root,
            &[
                "clone",
                "-q",
                "--shared",
                "--no-checkout",
                repo.to_str().unwrap(),
                clone.to_str().unwrap(),
            ],
        );
        git(&clone, &["checkout", "-q", &sha]);
        peer.push(t.elapsed());
        let _ = std::fs::remove_dir_all(&cache_dir);
        let _ = std::fs::remove_dir_all(&clone);
    }
    let ms = |v: &[Duration]| {
        v.iter()
            .map(|d| format!("{:.0}", d.as_secs_f64() * 1000.0))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("samples (ms): corral {} | git {}", ms(&ours), ms(&peer));
    let (o, p) = (median(ours), median(peer));
    println!(
        "cold base checkout, {files} files on {base}: corral {:.3} s, git clone --shared + checkout {:.3} s, ratio {:.2} (median of {runs})",
        o.as_secs_f64(),
        p.as_secs_f64(),
        o.as_secs_f64() / p.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&root);
}
