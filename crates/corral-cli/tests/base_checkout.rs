//! `corral run` on hostile base commits (through the real, confined checkout helper), the
//! cache ceilings set by the operator, and `corral cache ls | gc`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

mod mode;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

struct Fixture {
    dir: PathBuf,
    repo: PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = Command::new("chmod")
            .args(["-R", "u+w"])
            .arg(&self.dir)
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn git(dir: &Path, args: &[&str], stdin: &[u8]) -> String {
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn fixture(tag: &str) -> Fixture {
    let dir = std::env::temp_dir().join(format!("corral-base-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let repo = dir.join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(repo.join("src/app.py"), "print('hi')\n").unwrap();
    git(&repo, &["init", "-q", "-b", "main"], b"");
    git(&repo, &["add", "-A"], b"");
    git(&repo, &["commit", "-q", "-m", "base"], b"");
    Fixture { dir, repo }
}

fn raw_tree(repo: &Path, entries: &[(&str, &[u8], &str)]) -> String {
    let mut bytes = Vec::new();
    for (mode, name, hex) in entries {
        bytes.extend_from_slice(mode.as_bytes());
        bytes.push(b' ');
        bytes.extend_from_slice(name);
        bytes.push(0);
        for i in (0..hex.len()).step_by(2) {
            bytes.push(u8::from_str_radix(&hex[i..i + 2], 16).unwrap());
        }
    }
    git(
        repo,
        &["hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
        &bytes,
    )
}

fn documents(f: &Fixture, base: &str) -> (PathBuf, PathBuf) {
    let wu = json!({
        "schema_version": "corral.work-unit/v1", "id": "wu-base", "objective": "noop",
        "repository": { "base_sha": base },
        "security": { "sandbox_required": true },
        "permissions": { "process_execution": true, "secrets": [], "network": "none",
                         "network_allowlist": [], "filesystem_write": ["src/"] },
        "budget": { "wall_seconds": 30, "cpu_seconds": 10, "memory_bytes": 268_435_456u64,
                    "disk_bytes": 64u64 << 20, "max_processes": 64, "max_output_bytes": 65536,
                    "max_patch_bytes": 65536 },
        "constraints": { "allowed_paths": ["src/"], "forbidden_paths": [] }
    });
    let preset = json!({
        "schema_version": "corral.agent-preset/v1", "id": "sh", "executable": "/bin/sh",
        "argv": ["-c", "echo x >> src/app.py"], "prompt_transport": { "kind": "stdin" },
        "model_connection": null, "env_allowlist": [], "network_policy": "disabled",
        "read_only_paths": [], "authority": "candidate_only"
    });
    let (w, p) = (f.dir.join("wu.json"), f.dir.join("preset.json"));
    std::fs::write(&w, wu.to_string()).unwrap();
    std::fs::write(&p, preset.to_string()).unwrap();
    (w, p)
}

fn corral(f: &Fixture, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .env_clear()
        .env("HOME", f.dir.join("home"))
        .env("PATH", "/usr/bin:/bin")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn run(f: &Fixture, base: &str, env: &[(&str, &str)]) -> Output {
    let (w, p) = documents(f, base);
    let artifacts = f.dir.join("artifacts");
    corral(
        f,
        &[
            "run",
            "--work-unit",
            w.to_str().unwrap(),
            "--preset",
            p.to_str().unwrap(),
            "--repo",
            f.repo.to_str().unwrap(),
            "--artifacts",
            artifacts.to_str().unwrap(),
        ],
        env,
    )
}

fn cache_dir(f: &Fixture) -> PathBuf {
    let root = f.dir.join("home/.cache/corral");
    // Rootless mode with subordinate ids: the checkouts are the worker's, in a cache of
    // their own (`corral_runner::cache_root_for`, ADR-0080).
    let owned = root.join("owned-1000-1000");
    if !mode::is_root() && owned.exists() {
        return owned;
    }
    root
}

#[test]
fn a_hostile_base_tree_is_refused_naming_the_file_the_field_and_the_path() {
    let f = fixture("hostile");
    let victim = f.dir.join("victim");
    std::fs::write(&victim, "host\n").unwrap();
    let link = git(
        &f.repo,
        &["hash-object", "-w", "--stdin"],
        victim.to_str().unwrap().as_bytes(),
    );
    let blob = git(&f.repo, &["hash-object", "-w", "--stdin"], b"pwned\n");
    let tree = raw_tree(
        &f.repo,
        &[("120000", b"evil", &link), ("100755", b"evil", &blob)],
    );
    let base = git(&f.repo, &["commit-tree", &tree, "-m", "hostile"], b"");
    let out = run(&f, &base, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("wu.json: repository.base_sha: the base commit's tree at \"evil\"")
            && stderr.contains("[base_tree_invalid]"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "host\n");
    let stored: Vec<_> = std::fs::read_dir(f.dir.join("artifacts/sha256"))
        .map(|rd| rd.collect())
        .unwrap_or_default();
    assert!(
        stored.is_empty(),
        "a refused base recorded something: {stored:?}"
    );
    let tmp: Vec<_> = std::fs::read_dir(cache_dir(&f).join("tmp"))
        .unwrap()
        .collect();
    assert!(tmp.is_empty(), "{tmp:?}");
    // No lock file either: nothing else in the process holds it when the refusal cleans up.
    let left: Vec<_> = std::fs::read_dir(cache_dir(&f).join("base"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&base))
        .collect();
    assert!(left.is_empty(), "left in the cache: {left:?}");
    // Control: the repository's own HEAD runs normally.
    let head = git(&f.repo, &["rev-parse", "HEAD"], b"");
    let ok = run(&f, &head, &[]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

#[test]
fn the_operator_ceiling_refuses_a_tree_bomb_and_bad_values_are_named() {
    let f = fixture("bomb");
    let mut level = git(&f.repo, &["hash-object", "-w", "--stdin"], &[b'x'; 4096]);
    let mut mode = "100644";
    for _ in 0..3 {
        let names: Vec<String> = (0..16).map(|i| format!("d{i:02}")).collect();
        let entries: Vec<(&str, &[u8], &str)> = names
            .iter()
            .map(|n| (mode, n.as_bytes(), level.as_str()))
            .collect();
        level = raw_tree(&f.repo, &entries);
        mode = "40000";
    }
    let base = git(&f.repo, &["commit-tree", &level, "-m", "bomb"], b"");
    let out = run(&f, &base, &[("CORRAL_BASE_MAX_ENTRIES", "500")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("[base_checkout_limit]") && stderr.contains("500 entries"),
        "{stderr}"
    );
    assert!(!cache_dir(&f).join("base").join(&base).exists());
    // Control: without the low ceiling the same 4,368 entries check out.
    let ok = run(&f, &base, &[]);
    assert_ne!(
        ok.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let bad = run(&f, &base, &[("CORRAL_BASE_MAX_BYTES", "lots")]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr.contains("CORRAL_BASE_MAX_BYTES"), "{stderr}");
}

#[test]
fn cache_ls_and_gc() {
    let f = fixture("cache");
    let head = git(&f.repo, &["rev-parse", "HEAD"], b"");
    let ok = run(&f, &head, &[]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let ls = corral(&f, &["cache", "ls", "--json"], &[]);
    assert_eq!(ls.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&ls.stdout).unwrap();
    let entries = doc["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{doc}");
    assert_eq!(entries[0]["base_sha"], head.as_str());
    assert_eq!(entries[0]["in_use"], false);
    assert!(entries[0]["bytes"].as_u64().unwrap() > 0);
    let text = corral(&f, &["cache", "ls"], &[]);
    assert!(String::from_utf8_lossy(&text.stdout).contains(&head));
    let gc = corral(&f, &["cache", "gc", "--all"], &[]);
    assert_eq!(gc.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&gc.stdout).contains("removed 1 checkout"),
        "{gc:?}"
    );
    assert!(!cache_dir(&f).join("base").join(&head).exists());
    // Made again on the next run.
    let again = run(&f, &head, &[]);
    assert_eq!(again.status.code(), Some(0));
}
