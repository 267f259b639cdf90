//! Attempts per second with 1, 4 and 16 `corral run` at once on one warm base cache and one
//! store (issue 17, item 4), side by side with the same number of peer pipelines at once:
//! `git clone --shared` + checkout, `bwrap --unshare-all` running the same agent, `git add -A`
//! + `git diff --cached --binary`, `sha256sum`.
//!
//! Everything lives under `/dev/shm` (a tmpfs that is already there: nothing is mounted).
//! `CORRAL_BENCH_PARALLEL=1,4,16`, `CORRAL_BENCH_ATTEMPTS` (attempts per level, default 32)
//! and `CORRAL_BENCH_FILES` (default 1,000) change the work.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark code"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const AGENT: &str = "echo changed >> src/d0/f0.txt";

#[path = "../../corral-runner/benches/common/mod.rs"]
mod common;
use common::{make_repo, sh};

fn documents(root: &Path, sha: &str) -> (PathBuf, PathBuf) {
    let wu = serde_json::json!({
        "schema_version": "corral.work-unit/v1", "id": "bench", "objective": "edit one file",
        "repository": { "base_sha": sha }, "security": { "sandbox_required": true },
        "permissions": { "process_execution": true, "secrets": [], "network": "none",
                         "network_allowlist": [], "filesystem_write": ["src/"] },
        "budget": { "wall_seconds": 120, "cpu_seconds": 60, "memory_bytes": 256u64 << 20,
                    "disk_bytes": 256u64 << 20, "max_processes": 64, "max_output_bytes": 65536,
                    "max_patch_bytes": 1u64 << 20 },
        "constraints": { "allowed_paths": ["src/"], "forbidden_paths": [] }
    });
    let pr = serde_json::json!({
        "schema_version": "corral.agent-preset/v1", "id": "bench", "executable": "/bin/sh",
        "argv": ["-c", AGENT], "prompt_transport": { "kind": "stdin" },
        "model_connection": null, "env_allowlist": [], "network_policy": "disabled",
        "read_only_paths": [], "authority": "candidate_only"
    });
    let (w, p) = (root.join("wu.json"), root.join("preset.json"));
    std::fs::write(&w, wu.to_string()).unwrap();
    std::fs::write(&p, pr.to_string()).unwrap();
    (w, p)
}

fn corral_attempt(root: &Path, repo: &Path, docs: &(PathBuf, PathBuf)) {
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("run")
        .arg("--work-unit")
        .arg(&docs.0)
        .arg("--preset")
        .arg(&docs.1)
        .arg("--repo")
        .arg(repo)
        .arg("--artifacts")
        .arg(root.join("artifacts"))
        .arg("--json")
        .env_clear()
        .env("HOME", root.join("home"))
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn peer_attempt(root: &Path, repo: &Path, sha: &str, n: usize) {
    let ws = root.join(format!("peer-ws-{n}"));
    sh(&format!(
        "git clone -q --shared --no-checkout {repo} {ws} && git -C {ws} checkout -q {sha} && \
         bwrap --unshare-all --die-with-parent --new-session --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
           --proc /proc --dev /dev --tmpfs /tmp --bind {ws} /workspace --chdir /workspace /bin/sh -c '{AGENT}' && \
         git -C {ws} add -A && git -C {ws} diff --cached --binary > {ws}.patch && sha256sum {ws}.patch > /dev/null",
        repo = repo.display(),
        ws = ws.display(),
    ));
    std::fs::remove_dir_all(&ws).unwrap();
    std::fs::remove_file(format!("{}.patch", ws.display())).unwrap();
}

/// Runs `attempts` calls of `one` on `parallel` threads at once; returns attempts per second.
fn throughput(parallel: usize, attempts: usize, one: &(dyn Fn(usize) + Sync)) -> f64 {
    let next = AtomicUsize::new(0);
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..parallel {
            s.spawn(|| {
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= attempts {
                        break;
                    }
                    one(n);
                }
            });
        }
    });
    attempts as f64 / t.elapsed().max(Duration::from_micros(1)).as_secs_f64()
}

fn main() {
    let levels: Vec<usize> = std::env::var("CORRAL_BENCH_PARALLEL")
        .unwrap_or_else(|_| "1,4,16".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let attempts: usize = std::env::var("CORRAL_BENCH_ATTEMPTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32);
    let files: usize = std::env::var("CORRAL_BENCH_FILES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let root = PathBuf::from(format!(
        "/dev/shm/corral-bench-parallel-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&root).unwrap();
    let (repo, sha) = make_repo(&root.join("repo"), files);
    let docs = documents(&root, &sha);
    // Warm: the base cache is filled once, before anything is timed.
    corral_attempt(&root, &repo, &docs);
    println!("{files} files, {attempts} attempts per level, warm base cache, one store");
    for &p in &levels {
        let c = throughput(p, attempts, &|_| corral_attempt(&root, &repo, &docs));
        let g = throughput(p, attempts, &|n| peer_attempt(&root, &repo, &sha, n));
        println!(
            "{p:>3} at once: corral {c:.1} attempts/s, peers {g:.1} attempts/s, ratio corral/peers {:.2}",
            c / g
        );
    }
    let _ = Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(&root)
        .status();
    std::fs::remove_dir_all(&root).unwrap();
}
