//! What `run.rs`, `egress_load.rs`, `hostile_json.rs`, `real_agents.rs` and the
//! `agent_overhead` bench share: a Git repository in a temporary folder, the standard
//! WorkUnit, the `corral run` command line, a bounded wait, the installed real agents.
#![allow(dead_code, reason = "each test binary uses part of it")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

pub mod tls;

pub struct Fixture {
    pub dir: PathBuf,
    pub repo: PathBuf,
    pub base: String,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // Artifacts are read-only files: make them removable first.
        let _ = Command::new("chmod")
            .args(["-R", "u+w"])
            .arg(&self.dir)
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
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
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

pub fn fixture(tag: &str) -> Fixture {
    let dir = std::env::temp_dir().join(format!("corral-run-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let repo = dir.join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::create_dir_all(repo.join(".github")).unwrap();
    std::fs::write(repo.join("src/app.py"), "print('hi')\n").unwrap();
    std::fs::write(repo.join(".github/ci.yml"), "on: push\n").unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    Fixture { dir, repo, base }
}

/// A fresh clone of the fixture's repository at `<dir>/clone` (where a patch must apply).
pub fn clone_repo(f: &Fixture) -> PathBuf {
    let clone = f.dir.join("clone");
    git(
        &f.dir,
        &[
            "clone",
            "-q",
            f.repo.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    clone
}

/// Writes a run's WorkUnit, preset and trusted connections into the fixture's folder;
/// returns their paths in that order.
pub fn write_documents(
    f: &Fixture,
    wu: &Value,
    preset: &Value,
    connections: &Value,
) -> (PathBuf, PathBuf, PathBuf) {
    let paths = (
        f.dir.join("wu.json"),
        f.dir.join("preset.json"),
        f.dir.join("connections.json"),
    );
    std::fs::write(&paths.0, wu.to_string()).unwrap();
    std::fs::write(&paths.1, preset.to_string()).unwrap();
    std::fs::write(&paths.2, connections.to_string()).unwrap();
    paths
}

pub fn work_unit(f: &Fixture, wall: u64, cpu: u64, memory: u64) -> Value {
    json!({
        "schema_version": "corral.work-unit/v1", "id": "wu-test", "objective": "do the thing",
        "repository": { "base_sha": f.base },
        "security": { "sandbox_required": true },
        "permissions": { "process_execution": true, "secrets": [], "network": "none",
                         "network_allowlist": [], "filesystem_write": ["src/"] },
        "budget": { "wall_seconds": wall, "cpu_seconds": cpu, "memory_bytes": memory,
                    "disk_bytes": 64u64 << 20, "max_processes": 64, "max_output_bytes": 65536,
                    "max_patch_bytes": 65536 },
        "constraints": { "allowed_paths": ["src/"], "forbidden_paths": ["**/*.pem"] }
    })
}

pub fn run_command(
    f: &Fixture,
    wu: &Path,
    preset: &Path,
    repo: &Path,
    artifacts: &Path,
) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_corral"));
    c.arg("run")
        .arg("--work-unit")
        .arg(wu)
        .arg("--preset")
        .arg(preset)
        .arg("--repo")
        .arg(repo)
        .arg("--artifacts")
        .arg(artifacts)
        .env_clear()
        .env("HOME", f.dir.join("home"))
        .env("PATH", "/usr/bin:/bin");
    c
}

/// Waits (a bound, not a pace: `pgrep` is slow in an emulated guest) until `what` holds.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !done() {
        assert!(t.elapsed() < std::time::Duration::from_secs(60), "{what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Where setup.sh installed an agent: `/opt/corral-agents/<name>-<digest of its pins>`
/// (`tests/agents/<name>.txt`, or `tests/agents/<name>/package.json` and its lock).
/// Missing means setup.sh was not run: a failure, never a skip.
pub fn installed(name: &str) -> PathBuf {
    let pins = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/agents");
    let files: Vec<PathBuf> = if pins.join(name).is_dir() {
        vec![
            pins.join(name).join("package.json"),
            pins.join(name).join("package-lock.json"),
        ]
    } else {
        vec![pins.join(format!("{name}.txt"))]
    };
    let mut bytes = Vec::new();
    for f in &files {
        bytes.extend(std::fs::read(f).unwrap());
    }
    let mut c = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(&bytes).unwrap();
    let digest = String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()[..16].to_owned();
    let dir = PathBuf::from(format!("/opt/corral-agents/{name}-{digest}"));
    assert!(
        dir.join(".complete").is_file(),
        "{} is not installed: run scripts/setup.sh (it installs the pinned {name})",
        dir.display()
    );
    dir
}

/// One Responses API stream (codex's protocol): the events, then `response.completed`.
pub fn response_stream(n: usize, item: &Value) -> String {
    let id = format!("resp_{n}");
    [
        json!({ "type": "response.created", "response": { "id": id } }),
        json!({ "type": "response.output_item.done", "item": item }),
        json!({ "type": "response.completed", "response": { "id": id, "usage": {
            "input_tokens": 10, "input_tokens_details": null, "output_tokens": 5,
            "output_tokens_details": null, "total_tokens": 15 } } }),
    ]
    .iter()
    .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
    .collect()
}
