//! The run path's fail-closed ends, through the real Linux backend with an injected probe
//! result: each of the nine capabilities missing in turn refuses the run before the worker
//! starts (exit 3, manifest `not_started`), and a rejected admission records nothing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use corral_admission::parse_document;
use corral_contract::manifest::{Outcome, Termination};
use corral_contract::{AgentPreset, Capability, ReasonCode, WorkUnit};
use corral_linux::{LinuxConfig, LinuxSandboxExecutor, probe};
use corral_runner::{RunError, RunInputs, exit, run_attempt};
use corral_sandbox::CancelToken;

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = Command::new("chmod")
            .args(["-R", "u+w"])
            .arg(&self.0)
            .status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn setup(tag: &str) -> (Dir, PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("corral-runner-test-{tag}-{}", std::process::id()));
    let repo = dir.join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(repo.join("src/a.txt"), "a\n").unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let sha = git(&repo, &["rev-parse", "HEAD"]);
    (Dir(dir), repo, sha)
}

fn documents(sha: &str, marker: &Path) -> (WorkUnit, AgentPreset) {
    let wu = serde_json::json!({
        "schema_version": "corral.work-unit/v1", "id": "t", "objective": "x",
        "repository": { "base_sha": sha }, "security": { "sandbox_required": true },
        "permissions": { "process_execution": true, "secrets": [], "network": "none", "network_allowlist": [], "filesystem_write": ["src/"] },
        "budget": { "wall_seconds": 20, "cpu_seconds": 20, "memory_bytes": 128u64 << 20, "disk_bytes": 16u64 << 20, "max_processes": 32, "max_output_bytes": 4096, "max_patch_bytes": 4096 },
        "constraints": { "allowed_paths": ["src/"], "forbidden_paths": [] }
    });
    // The worker would leave a marker on the host through its stdout... it never runs, so
    // the test checks the manifest's termination and the empty logs instead; the marker path
    // is only named so a run that did start would be visible in the log.
    let pr = serde_json::json!({
        "schema_version": "corral.agent-preset/v1", "id": "t", "executable": "/bin/sh",
        "argv": ["-c", format!("echo started {}", marker.display())],
        "prompt_transport": { "kind": "stdin" }, "env_allowlist": [], "network_policy": "disabled", "authority": "candidate_only"
    });
    (
        parse_document(wu.to_string().as_bytes()).unwrap(),
        parse_document(pr.to_string().as_bytes()).unwrap(),
    )
}

#[test]
fn each_missing_capability_refuses_before_start_with_exit_3() {
    let (dir, repo, sha) = setup("caps");
    let marker = dir.0.join("marker");
    let (wu, pr) = documents(&sha, &marker);
    let env = BTreeMap::new();
    let cancel = CancelToken::new().unwrap();
    let config = LinuxConfig::default();
    let report = probe::probe(&config);
    assert!(
        report.capabilities.missing().is_empty(),
        "this host must attest all nine: {:?}",
        report.capabilities.missing()
    );
    let inputs = RunInputs {
        work_unit: &wu,
        preset: &pr,
        connections: None,
        env: &env,
        repo: &repo,
        artifacts: &dir.0.join("artifacts"),
        cache: &dir.0.join("cache"),
        cache_limits: corral_runner::CacheLimits::default(),
        checkout: &corral_runner::Isolation::InProcess,
    };
    // Positive control: with every capability the worker runs and its output is recorded.
    let full = LinuxSandboxExecutor::with_probe(config.clone(), report.clone());
    let ok = run_attempt(&inputs, &full, &cancel).unwrap();
    assert_eq!(
        ok.manifest.manifest.execution.termination,
        Termination::Exited
    );
    assert!(ok.manifest.manifest.logs.stdout.bytes > 0);
    // The gate comes before the base checkout: a host that cannot enforce the nine never
    // materializes the base commit's (hostile) tree. Control: the full run above did.
    let base_entries = |cache: &std::path::Path| -> usize {
        std::fs::read_dir(cache.join("base")).map_or(0, |rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy() == sha)
                .count()
        })
    };
    assert_eq!(
        base_entries(&dir.0.join("cache")),
        1,
        "control: no base checkout"
    );
    let untouched = dir.0.join("cache-missing");
    let inputs = RunInputs {
        cache: &untouched,
        ..inputs
    };
    for cap in Capability::ALL {
        let exec = LinuxSandboxExecutor::with_probe(
            config.clone(),
            report
                .clone()
                .without(cap, "simulated: kernel feature missing"),
        );
        let r = run_attempt(&inputs, &exec, &cancel).unwrap();
        let m = &r.manifest.manifest;
        assert_eq!(r.exit_code, exit::CAPABILITY_MISSING, "{cap}");
        assert_eq!(m.execution.termination, Termination::NotStarted, "{cap}");
        assert_eq!(m.outcome, Outcome::AttemptFailed, "{cap}");
        assert_eq!(m.logs.stdout.bytes, 0, "{cap}: the worker ran");
        assert!(
            m.rejections.iter().any(
                |x| x.code == ReasonCode::CapabilityMissing && x.detail.starts_with(cap.name())
            ),
            "{cap}: {:?}",
            m.rejections
        );
        assert!(!m.sandbox.capabilities.get(cap).enforced);
        assert_eq!(
            base_entries(&untouched),
            0,
            "{cap}: the base was materialized"
        );
    }
}

#[test]
fn rejected_admission_records_nothing() {
    let (dir, repo, sha) = setup("adm");
    let (mut wu, pr) = documents(&sha, &dir.0.join("m"));
    wu.security.sandbox_required = Some(false);
    let env = BTreeMap::new();
    let exec = LinuxSandboxExecutor::new();
    let artifacts = dir.0.join("artifacts");
    let inputs = RunInputs {
        work_unit: &wu,
        preset: &pr,
        connections: None,
        env: &env,
        repo: &repo,
        artifacts: &artifacts,
        cache: &dir.0.join("cache"),
        cache_limits: corral_runner::CacheLimits::default(),
        checkout: &corral_runner::Isolation::InProcess,
    };
    let err = run_attempt(&inputs, &exec, &CancelToken::new().unwrap()).unwrap_err();
    assert!(
        matches!(err, RunError::Rejected(ref r) if r[0].code == ReasonCode::SandboxNotRequired),
        "{err:?}"
    );
    assert_eq!(err.exit_code(), exit::REJECTED);
    assert!(
        !artifacts.exists(),
        "a rejected admission wrote to the artifact store"
    );
}

/// The base cache never trusts a checkout whose stamp does not match the commit's tree: it
/// rebuilds it; a matching stamp is reused.
#[test]
fn base_cache_rebuilds_on_a_bad_stamp() {
    let (dir, repo, sha) = setup("cache");
    let cache =
        corral_runner::BaseCache::open(&dir.0.join("cache"), corral_runner::CacheLimits::default())
            .unwrap();
    let iso = corral_runner::Isolation::InProcess;
    let first = cache.checkout(&repo, &sha, &iso).unwrap();
    assert!(first.created);
    assert_eq!(
        std::fs::read_to_string(first.dir.join("src/a.txt")).unwrap(),
        "a\n"
    );
    let again = cache.checkout(&repo, &sha, &iso).unwrap();
    assert!(!again.created, "a verified checkout is reused");
    drop(again);
    std::fs::write(first.dir.join(".git/.corral-complete"), "0000\n").unwrap();
    std::fs::write(first.dir.join("src/a.txt"), "tampered\n").unwrap();
    let dir_path = first.dir.clone();
    drop(first);
    let rebuilt = cache.checkout(&repo, &sha, &iso).unwrap();
    assert_eq!(rebuilt.dir, dir_path);
    assert!(rebuilt.created, "a checkout with a wrong stamp was trusted");
    assert_eq!(
        std::fs::read_to_string(rebuilt.dir.join("src/a.txt")).unwrap(),
        "a\n"
    );
}
