//! A whole attempt, side by side with the pipeline a user would script from peers.
//!
//! corral: admission, cached base checkout, Linux sandbox (all nine capabilities), a trivial
//! agent editing one file, capture, artifacts and manifest.
//! Peers: `git clone --shared` + checkout into tmpfs, `bwrap --unshare-all`, `git add -A` +
//! `git diff --cached --binary`, `sha256sum`.
//!
//! (b) ratio corral/peers on 10,000 files (goal <= 0.5 once the base is cached);
//! (c) corral on 1,000 vs 100,000 files (goal within 1.5x).
//! Repositories live on a tmpfs this benchmark mounts (and unmounts) under /tmp; set
//! `CORRAL_BENCH_SIZES=1000,10000,100000` and `CORRAL_BENCH_RUNS` to change the work.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark code"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use corral_admission::parse_document;
use corral_contract::{AgentPreset, WorkUnit};
use corral_linux::LinuxSandboxExecutor;
use corral_runner::{RunInputs, run_attempt};
use corral_sandbox::CancelToken;

mod common;
use common::{make_repo, sh};

const AGENT: &str = "echo changed >> src/d0/f0.txt";

fn documents(sha: &str) -> (WorkUnit, AgentPreset) {
    let wu = serde_json::json!({
        "schema_version": "corral.work-unit/v1", "id": "bench", "objective": "edit one file",
        "repository": { "base_sha": sha }, "security": { "sandbox_required": true },
        "permissions": { "process_execution": true, "secrets": [], "network": "none", "network_allowlist": [], "filesystem_write": ["src/"] },
        "budget": { "wall_seconds": 60, "cpu_seconds": 60, "memory_bytes": 512u64 << 20, "disk_bytes": 256u64 << 20, "max_processes": 64, "max_output_bytes": 65536, "max_patch_bytes": 1u64 << 20 },
        "constraints": { "allowed_paths": ["src/"], "forbidden_paths": [] }
    });
    let pr = serde_json::json!({
        "schema_version": "corral.agent-preset/v1", "id": "bench", "executable": "/bin/sh", "argv": ["-c", AGENT],
        "prompt_transport": { "kind": "stdin" }, "env_allowlist": [], "network_policy": "disabled", "authority": "candidate_only"
    });
    (
        parse_document(wu.to_string().as_bytes()).unwrap(),
        parse_document(pr.to_string().as_bytes()).unwrap(),
    )
}

fn corral_attempt(root: &Path, repo: &Path, sha: &str, exec: &LinuxSandboxExecutor) -> Duration {
    let (wu, pr) = documents(sha);
    let env = BTreeMap::new();
    let cancel = CancelToken::new().unwrap();
    let inputs = RunInputs {
        work_unit: &wu,
        preset: &pr,
        connections: None,
        env: &env,
        repo,
        artifacts: &root.join("artifacts"),
        cache: &root.join("cache"),
        cache_limits: corral_runner::CacheLimits::default(),
        checkout: &corral_runner::Isolation::InProcess,
    };
    let t = Instant::now();
    let report = run_attempt(&inputs, exec, &cancel).unwrap();
    let d = t.elapsed();
    assert_eq!(
        report.exit_code, 0,
        "{:?}",
        report.manifest.manifest.rejections
    );
    d
}

fn peer_attempt(root: &Path, repo: &Path, sha: &str) -> Duration {
    let ws = root.join("peer-ws");
    let t = Instant::now();
    sh(&format!(
        "git clone -q --shared --no-checkout {repo} {ws} && git -C {ws} checkout -q {sha} && \
         bwrap --unshare-all --die-with-parent --new-session --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
           --proc /proc --dev /dev --tmpfs /tmp --bind {ws} /workspace --chdir /workspace /bin/sh -c '{AGENT}' && \
         git -C {ws} add -A && git -C {ws} diff --cached --binary > {root}/peer.patch && sha256sum {root}/peer.patch > /dev/null",
        repo = repo.display(),
        ws = ws.display(),
        root = root.display(),
    ));
    let d = t.elapsed();
    std::fs::remove_dir_all(&ws).unwrap();
    d
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let sizes: Vec<usize> = std::env::var("CORRAL_BENCH_SIZES")
        .unwrap_or_else(|_| "1000,10000,100000".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let runs: usize = std::env::var("CORRAL_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let root = std::env::temp_dir().join(format!("corral-bench-attempt-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    sh(&format!(
        "mount -t tmpfs -o size=4g corral-bench {}",
        root.display()
    ));
    let exec = LinuxSandboxExecutor::new();
    assert!(
        exec.probe_report().capabilities.missing().is_empty(),
        "the sandbox is not fully available on this host"
    );
    let mut corral_by_size = Vec::new();
    for &n in &sizes {
        let t = Instant::now();
        let (repo, sha) = make_repo(&root.join(format!("repo-{n}")), n);
        let setup = t.elapsed();
        let first = corral_attempt(&root, &repo, &sha, &exec);
        let c = median(
            (0..runs)
                .map(|_| corral_attempt(&root, &repo, &sha, &exec))
                .collect(),
        );
        let p = median(
            (0..runs)
                .map(|_| peer_attempt(&root, &repo, &sha))
                .collect(),
        );
        println!(
            "{n:>7} files: corral {:.1} ms (first, filling the base cache: {:.1} ms), peers {:.1} ms, ratio corral/peers {:.2}  [repo setup {:.1} s]",
            ms(c),
            ms(first),
            ms(p),
            c.as_secs_f64() / p.as_secs_f64(),
            setup.as_secs_f64()
        );
        corral_by_size.push((n, c));
        std::fs::remove_dir_all(&repo).unwrap();
    }
    if let (Some((n0, c0)), Some((n1, c1))) = (corral_by_size.first(), corral_by_size.last()) {
        println!(
            "corral attempt on {n1} vs {n0} files: ratio {:.2} (goal <= 1.5)",
            c1.as_secs_f64() / c0.as_secs_f64()
        );
    }
    let _ = Command::new("chmod")
        .args(["-R", "u+w"])
        .arg(&root)
        .status();
    sh(&format!("umount {}", root.display()));
    std::fs::remove_dir_all(&root).unwrap();
}
