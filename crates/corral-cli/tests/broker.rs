//! Issue 14, item 1 (ADR-0095): a real `corral run` whose preset's connection names an
//! upstream. The worker (a Python agent using only its preset's settings) reaches its model
//! through corral's credential broker; the upstream is a TLS server on the host's loopback
//! with a test CA. The real key (a canary) reaches the upstream and nothing the worker can
//! read; call N+1 past the budget is refused; the patch applies and `corral verify` passes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

mod common;
use common::{clone_repo, fixture, git, run_command, work_unit, write_documents};

const CANARY: &str = "sk-canary-7e3b9d0c41a2f5";
const FIXED: &str = "def add(a, b):\n    return a + b\n";

/// A TLS model upstream: answers every chat completion with the fixed file.
fn upstream() -> (u16, String, Arc<Mutex<Vec<String>>>) {
    common::tls::upstream(|_, _| {
        json!({ "choices": [ { "message": { "role": "assistant", "content": FIXED } } ] })
            .to_string()
    })
}

fn all_bytes_under(dir: &std::path::Path, out: &mut Vec<u8>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_bytes_under(&p, out);
        } else if let Ok(b) = std::fs::read(&p) {
            out.extend_from_slice(&b);
        }
    }
}

#[test]
fn an_agent_reaches_its_model_through_the_broker_and_never_holds_the_key() {
    let f = fixture("broker");
    std::fs::write(
        f.repo.join("src/calc.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    git(&f.repo, &["add", "-A"]);
    git(&f.repo, &["commit", "-q", "-m", "planted bug"]);
    let base = git(&f.repo, &["rev-parse", "HEAD"]);
    let (port, ca_pem, seen) = upstream();
    let secrets = f.dir.join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    let key_file = secrets.join("model.key");
    std::fs::write(&key_file, format!("{CANARY}\n")).unwrap();
    let ca_file = secrets.join("ca.pem");
    std::fs::write(&ca_file, &ca_pem).unwrap();
    if !common_is_root() {
        // corral runs as the invoking user in rootless mode: it reads the key as that user.
        let _ = Command::new("chmod")
            .args(["-R", "go-rwx"])
            .arg(&secrets)
            .status();
    }
    let connections = json!({
        "schema_version": "corral.connections/v1",
        "connections": { "llm": {
            "destinations": ["127.0.0.2:9"],
            "upstream": {
                "base_url": format!("https://127.0.0.1:{port}/v1"),
                "methods": ["POST"], "path_prefixes": ["/chat/completions"],
                "credential": { "file": key_file.to_str().unwrap() },
                "ca_file": ca_file.to_str().unwrap(),
                "budgets": { "calls": 2, "request_bytes": 1048576, "response_bytes": 1048576,
                             "call_seconds": 60, "total_seconds": 300 }
            }
        } }
    });
    let mut wu = work_unit(&f, 120, 60, 512 << 20);
    wu["repository"]["base_sha"] = json!(base);
    wu["permissions"]["network"] = json!("allowlist");
    wu["permissions"]["network_allowlist"] = json!(["127.0.0.2:9"]);
    wu["budget"]["max_output_bytes"] = json!(4 << 20);
    let preset = json!({
        "schema_version": "corral.agent-preset/v1", "id": "broker-agent",
        "executable": "/usr/bin/python3",
        "argv": ["-c", include_str!("broker_agent.py"), key_file.to_str().unwrap()],
        "prompt_transport": { "kind": "stdin" }, "model_connection": "llm",
        "env_allowlist": ["LANG"], "network_policy": "model_only", "read_only_paths": [],
        "authority": "candidate_only",
        "env": { "OPENAI_BASE_URL": "{model_base_url}", "OPENAI_API_KEY": "{model_token}" }
    });
    let (wu_path, pr_path, cn_path) = write_documents(&f, &wu, &preset, &connections);
    let artifacts = f.dir.join("artifacts");
    let out = run_command(&f, &wu_path, &pr_path, &f.repo, &artifacts)
        .arg("--connections")
        .arg(&cn_path)
        .arg("--json")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();

    // The model was reached with the real key, twice; the third call was refused by budget.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for head in &seen {
        assert!(
            head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(
            head.contains(&format!("Authorization: Bearer {CANARY}\r\n")),
            "{head}"
        );
        assert!(
            !head.contains("corral-"),
            "the placeholder reached the upstream: {head}"
        );
    }
    let calls = m["model_calls"]
        .as_array()
        .expect("no model_calls in the manifest");
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
        [
            (200, true, None),
            (200, true, None),
            (403, false, Some("calls"))
        ]
    );
    assert!(calls.iter().all(|c| c["path"] == "/chat/completions"));

    // The fixed file is the candidate; the patch applies to a fresh clone.
    assert_eq!(m["outcome"], "candidate_captured", "{m}");
    let digest = m["candidate"]["patch"]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_owned();
    let patch = artifacts.join("sha256").join(&digest);
    let clone = clone_repo(&f);
    git(&clone, &["apply", "--check", patch.to_str().unwrap()]);
    git(&clone, &["apply", patch.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(clone.join("src/calc.py")).unwrap(),
        FIXED
    );

    // What the worker could read: its dump (stderr, in the artifacts) holds its settings and
    // the placeholder, never the key; the host key file was not visible.
    let mut stored = Vec::new();
    all_bytes_under(&artifacts, &mut stored);
    let stored = String::from_utf8_lossy(&stored);
    assert!(
        stored.contains("\"OPENAI_API_KEY\": \"corral-"),
        "the dump is missing"
    );
    assert!(
        stored.contains("KEYFILE unreadable"),
        "the worker read the key file"
    );
    assert!(stored.contains("STATUSES [200, 200, 403]"));
    // The placeholder sent through the proxy to an allowlisted destination: refused and
    // recorded; control: the same request without it is let through (nothing listens there).
    assert!(
        stored.contains("ELSEWHERE 403 placeholder_elsewhere"),
        "no refusal seen"
    );
    assert!(
        stored.contains("CONTROL 502 connect_failed"),
        "control not forwarded"
    );
    let network = m["network"].as_array().unwrap();
    assert!(
        network
            .iter()
            .any(|r| r["reason"] == "placeholder_elsewhere" && r["destination"] == "127.0.0.2:9"),
        "{network:?}"
    );
    assert!(
        stored.contains("\"code\": \"calls\""),
        "the refusal the agent saw"
    );
    assert!(
        !stored.contains(CANARY),
        "the key reached something the worker could read"
    );
    assert!(!err.contains(CANARY) && !String::from_utf8_lossy(&out.stdout).contains(CANARY));

    // corral verify accepts the manifest as stored.
    let manifest_path = artifacts.join("sha256").join(
        Command::new("sha256sum")
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map(|mut c| {
                c.stdin
                    .take()
                    .unwrap()
                    .write_all(serde_json::to_string(&m).unwrap().as_bytes())
                    .unwrap();
                String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()[..64].to_owned()
            })
            .unwrap(),
    );
    let v = Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("verify")
        .arg(&manifest_path)
        .output()
        .unwrap();
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stderr)
    );
}

fn common_is_root() -> bool {
    rustix::process::geteuid().is_root()
}
