//! Issue 14: real agents, unmodified, from the registries (installed and pinned by
//! `scripts/setup.sh`), each inside `corral run` against a scripted model upstream served over
//! TLS on the host's loopback with a test CA, reached only through corral's credential broker
//! (ADR-0095). Each fixes a planted bug; its patch passes `git apply --check` on a fresh clone
//! and `corral verify`; the real key (a canary) reaches the upstream and nothing the agent
//! could read; call N+1 past the budget is refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

mod common;
use common::{fixture, git, run_command, work_unit};

const CANARY: &str = "sk-canary-real-agent-93c1f07d";
const FIXED: &str = "def add(a, b):\n    return a + b\n";

/// Where setup.sh installed an agent: `/opt/corral-agents/<name>-<digest of its pin file>`.
/// Missing means setup.sh was not run: a failure, never a skip.
fn installed(name: &str) -> PathBuf {
    let pin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/agents")
        .join(format!("{name}.txt"));
    let out = Command::new("sha256sum").arg(&pin).output().unwrap();
    assert!(out.status.success(), "sha256sum {}", pin.display());
    let digest = String::from_utf8(out.stdout).unwrap()[..16].to_owned();
    let dir = PathBuf::from(format!("/opt/corral-agents/{name}-{digest}"));
    assert!(
        dir.join(".complete").is_file(),
        "{} is not installed: run scripts/setup.sh (it installs the pinned {name})",
        dir.display()
    );
    dir
}

fn manifest_path(artifacts: &Path, m: &Value) -> PathBuf {
    let mut c = Command::new("sha256sum")
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(m).unwrap().as_bytes())
        .unwrap();
    let digest = String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()[..64].to_owned();
    artifacts.join("sha256").join(digest)
}

fn all_bytes_under(dir: &Path, out: &mut Vec<u8>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_bytes_under(&p, out);
        } else if let Ok(b) = std::fs::read(&p) {
            out.extend_from_slice(&b);
        }
    }
}

/// A chat completion that asks for one bash tool call (mini-swe-agent 2's protocol).
fn tool_call(n: usize, command: &str) -> String {
    json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 0,
        "model": "gpt-test",
        "choices": [ { "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Running a command.",
            "tool_calls": [ { "id": format!("call_{n}"), "type": "function", "function": {
                "name": "bash", "arguments": json!({ "command": command }).to_string() } } ] } } ],
        "usage": { "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15 }
    })
    .to_string()
}

/// One `corral run` of mini-swe-agent against a fresh scripted upstream (fix the bug, look
/// at the file, finish) with a call budget of `calls`.
struct MiniRun {
    f: common::Fixture,
    artifacts: PathBuf,
    code: Option<i32>,
    corral_output: String,
    manifest: Value,
    seen: Vec<String>,
    stored: String,
}

fn run_mini(tag: &str, calls: u64, env: &[(&str, &str)]) -> MiniRun {
    let agent = installed("mini-swe-agent");
    let f = fixture(tag);
    std::fs::write(
        f.repo.join("src/calc.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    git(&f.repo, &["add", "-A"]);
    git(&f.repo, &["commit", "-q", "-m", "planted bug"]);
    let base = git(&f.repo, &["rev-parse", "HEAD"]);
    let (port, ca_pem, seen) = common::tls::upstream(|n, _| match n {
        1 => tool_call(n, "sed -i 's/a - b/a + b/' src/calc.py"),
        // What the agent can read that could hold a key: its environment, its parent's
        // (mini itself) environment and argv, the files in HOME and /tmp.
        2 => tool_call(
            n,
            "cat src/calc.py; env; tr '\\0' '\\n' < /proc/$PPID/environ; \
             tr '\\0' ' ' < /proc/$PPID/cmdline; echo; \
             find \"$HOME\" /tmp -type f -size -64k -exec cat {} + 2>&1 | head -c 6000",
        ),
        _ => tool_call(n, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    });
    let secrets = f.dir.join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("model.key"), format!("{CANARY}\n")).unwrap();
    std::fs::write(secrets.join("ca.pem"), &ca_pem).unwrap();
    let connections = json!({
        "schema_version": "corral.connections/v1",
        "connections": { "openai": {
            "destinations": ["127.0.0.2:9"],
            "upstream": {
                "base_url": format!("https://127.0.0.1:{port}/v1"),
                "methods": ["POST"], "path_prefixes": ["/chat/completions"],
                "credential": { "file": secrets.join("model.key").to_str().unwrap() },
                "ca_file": secrets.join("ca.pem").to_str().unwrap(),
                "budgets": { "calls": calls, "request_bytes": 16777216,
                             "response_bytes": 16777216, "call_seconds": 60,
                             "total_seconds": 600 }
            }
        } }
    });
    let mut wu = work_unit(&f, 300, 300, 2 << 30);
    wu["repository"]["base_sha"] = json!(base);
    wu["permissions"]["network"] = json!("allowlist");
    wu["permissions"]["network_allowlist"] = json!(["127.0.0.2:9"]);
    wu["budget"]["max_output_bytes"] = json!(4 << 20);
    wu["budget"]["disk_bytes"] = json!(256u64 << 20);
    wu["budget"]["max_processes"] = json!(256);
    wu["objective"] = json!("add() in src/calc.py subtracts; make it add");
    // The shipped preset, as shipped: only its install root is where setup.sh put it.
    let shipped =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/presets/mini-swe-agent.json");
    let text = std::fs::read_to_string(&shipped)
        .unwrap()
        .replace("/opt/mini-swe-agent", agent.to_str().unwrap());
    let mut preset: Value = serde_json::from_str(&text).unwrap();
    for (k, v) in env {
        preset["env"][*k] = json!(v);
    }
    let (wu_path, pr_path, cn_path) = (
        f.dir.join("wu.json"),
        f.dir.join("preset.json"),
        f.dir.join("connections.json"),
    );
    std::fs::write(&wu_path, wu.to_string()).unwrap();
    std::fs::write(&pr_path, preset.to_string()).unwrap();
    std::fs::write(&cn_path, connections.to_string()).unwrap();
    let artifacts = f.dir.join("artifacts");
    let out = run_command(&f, &wu_path, &pr_path, &f.repo, &artifacts)
        .arg("--connections")
        .arg(&cn_path)
        .arg("--json")
        .output()
        .unwrap();
    let corral_output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no manifest ({e}): {corral_output}"));
    let mut stored = Vec::new();
    all_bytes_under(&artifacts, &mut stored);
    let seen = seen.lock().unwrap().clone();
    MiniRun {
        f,
        artifacts,
        code: out.status.code(),
        corral_output,
        manifest,
        seen,
        stored: String::from_utf8_lossy(&stored).into_owned(),
    }
}

#[test]
fn mini_swe_agent_fixes_a_bug_through_the_broker() {
    let r = run_mini("mini-swe-agent", 3, &[]);
    let m = &r.manifest;
    // Three calls reached the upstream, each with the real key and never the placeholder.
    assert_eq!(r.seen.len(), 3, "{:?}\n{}", r.seen, r.stored);
    for head in &r.seen {
        assert!(
            head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains(&format!("Bearer {CANARY}\r\n")), "{head}");
        assert!(!head.contains("corral-"), "{head}");
    }
    let calls = m["model_calls"].as_array().expect("no model_calls");
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(
        calls
            .iter()
            .all(|c| c["status"] == 200 && c["forwarded"] == true)
    );

    // The fix is the candidate; it applies to a fresh clone; corral verify passes.
    assert_eq!(r.code, Some(0), "{}", r.stored);
    assert_eq!(m["outcome"], "candidate_captured");
    let digest = m["candidate"]["patch"]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_owned();
    let patch = r.artifacts.join("sha256").join(&digest);
    let clone = r.f.dir.join("clone");
    git(
        &r.f.dir,
        &[
            "clone",
            "-q",
            r.f.repo.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    git(&clone, &["apply", "--check", patch.to_str().unwrap()]);
    git(&clone, &["apply", patch.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(clone.join("src/calc.py")).unwrap(),
        FIXED
    );
    let v = Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("verify")
        .arg(manifest_path(&r.artifacts, m))
        .output()
        .unwrap();
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stderr)
    );

    // The agent ran with the placeholder (its output shows the model's commands ran) and the
    // key is nowhere it printed, nor in corral's output.
    assert!(
        r.stored.contains("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
        "{}",
        r.stored
    );
    assert!(
        r.stored.contains("OPENAI_API_KEY=corral-"),
        "the dump of the agent's environment is missing: {}",
        r.stored
    );
    assert!(
        !r.stored.contains(CANARY),
        "the key reached the agent's output"
    );
    assert!(!r.corral_output.contains(CANARY));
}

/// Call N+1 past the budget is refused with an error the agent shows (mini-swe-agent's own
/// retries off, as a preset under a call budget would set them), and the upstream never sees it.
#[test]
fn mini_swe_agent_past_its_call_budget_is_refused() {
    let r = run_mini(
        "mini-swe-agent-budget",
        1,
        &[("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")],
    );
    assert_eq!(r.seen.len(), 1, "{:?}", r.seen);
    let calls = r.manifest["model_calls"]
        .as_array()
        .expect("no model_calls");
    let summary: Vec<(u64, bool, Option<&str>)> = calls
        .iter()
        .map(|c| {
            (
                c["status"].as_u64().unwrap(),
                c["forwarded"].as_bool().unwrap(),
                c["stopped_by"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [(200, true, None), (403, false, Some("calls"))],
        "{}",
        r.stored
    );
    assert!(
        r.stored.contains("model call budget is spent"),
        "the agent did not show the refusal: {}",
        r.stored
    );
    assert_ne!(r.code, Some(0), "{}", r.corral_output);
    assert!(!r.stored.contains(CANARY));
}
