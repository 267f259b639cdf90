//! Issue 14: what `corral run` adds to a real agent's own run time, for codex 0.169.0 (the
//! pinned install of `scripts/setup.sh`), side by side on the same one-call task:
//!
//! - **codex alone**: the launcher run plainly by this process, in a clone of the repository,
//!   with a fresh HOME on `/dev/shm` (the sandbox's is a tmpfs too) holding the shipped
//!   preset's `~/.codex/config.toml`, its model a scripted plain-HTTP Responses API on
//!   loopback; proxy variables name a closed loopback port, so its phone-home fails at once,
//!   as corral's proxy refuses it.
//! - **corral**: `corral run --json` with the shipped `examples/presets/codex.json` (only its
//!   install root moved), the model reached through the credential broker, which adds the key
//!   and speaks TLS to the same scripted model on loopback.
//!
//! Warm: the base checkout cached and the executable's digest cached by earlier runs (the
//! first runs are discarded); the two are interleaved so that drift hits both. Prints medians,
//! corral's overhead (corral - codex alone) against the goal (under 30 ms warm), and corral's
//! own part outside the worker (`corral run`'s wall time less the manifest's
//! `execution.wall_ms`). `CORRAL_BENCH_RUNS` (default 20) changes the work. Needs root or a
//! host where rootless mode runs (ADR-0080), like every `corral run`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    reason = "benchmark code"
)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../tests/common/mod.rs"]
mod common;
use common::{
    clone_repo, fixture, installed, response_stream, run_command, work_unit, write_documents,
};

const OBJECTIVE: &str = "say done";

/// One answer: a final message, so codex makes one call and ends.
fn answer(n: usize, _: &str) -> String {
    response_stream(
        n,
        &json!({ "type": "message", "role": "assistant", "id": format!("msg_{n}"),
                 "content": [ { "type": "output_text", "text": "done" } ] }),
    )
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let runs: usize = std::env::var("CORRAL_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let root = installed("codex");
    let launcher = root.join("node_modules/.bin/codex");
    let f = fixture("bench-codex");
    let shipped: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/presets/codex.json"),
        )
        .unwrap()
        .replace("/opt/codex", root.to_str().unwrap()),
    )
    .unwrap();
    let config = shipped["home_files"][0]["content"].as_str().unwrap();

    // codex alone.
    let (plain_port, plain_seen) = common::tls::plain_upstream(answer);
    let clone = clone_repo(&f);
    // HOME on a tmpfs, as the sandbox's is (codex writes its session files there; a file
    // created on this host's ext4 costs ~0.9 ms).
    let alone = |i: usize| {
        let home =
            Path::new("/dev/shm").join(format!("corral-bench-home-{}-{i}", std::process::id()));
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::write(
            home.join(".codex/config.toml"),
            config.replace(
                "{model_base_url}",
                &format!("http://127.0.0.1:{plain_port}/v1"),
            ),
        )
        .unwrap();
        let t = Instant::now();
        let mut c = Command::new(&launcher)
            .args(
                shipped["argv"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap()),
            )
            .current_dir(&clone)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &home)
            .env("OPENAI_API_KEY", "sk-bench")
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin
            .take()
            .unwrap()
            .write_all(OBJECTIVE.as_bytes())
            .unwrap();
        let out = c.wait_with_output().unwrap();
        let took = t.elapsed();
        assert!(
            out.status.success(),
            "codex alone: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::remove_dir_all(&home);
        took
    };

    // corral.
    let (tls_port, ca_pem, tls_seen) = common::tls::upstream(answer);
    let secrets = f.dir.join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("model.key"), "sk-bench\n").unwrap();
    std::fs::write(secrets.join("ca.pem"), &ca_pem).unwrap();
    let connections = json!({
        "schema_version": "corral.connections/v1",
        "connections": { "openai": {
            "destinations": [],
            "upstream": {
                "base_url": format!("https://127.0.0.1:{tls_port}/v1"),
                "methods": ["POST"], "path_prefixes": ["/responses"],
                "credential": { "file": secrets.join("model.key").to_str().unwrap() },
                "ca_file": secrets.join("ca.pem").to_str().unwrap(),
                "budgets": { "calls": 4, "request_bytes": 16777216,
                             "response_bytes": 16777216, "call_seconds": 60,
                             "total_seconds": 600 }
            }
        } }
    });
    let mut wu = work_unit(&f, 300, 300, 2 << 30);
    wu["permissions"]["network"] = json!("allowlist");
    wu["permissions"]["network_allowlist"] = json!([]);
    wu["budget"]["disk_bytes"] = json!(256u64 << 20);
    wu["budget"]["max_processes"] = json!(256);
    wu["objective"] = json!(OBJECTIVE);
    let (wu_path, pr_path, cn_path) = write_documents(&f, &wu, &shipped, &connections);
    let artifacts = f.dir.join("artifacts");
    let corral = || {
        let t = Instant::now();
        let out = run_command(&f, &wu_path, &pr_path, &f.repo, &artifacts)
            .arg("--connections")
            .arg(&cn_path)
            .arg("--json")
            .output()
            .unwrap();
        let took = t.elapsed();
        let m: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "corral: no manifest ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(
            (
                m["execution"]["exit_code"].as_i64(),
                m["model_calls"].as_array().map(Vec::len)
            ),
            (Some(0), Some(1)),
            "corral: {m}"
        );
        let worker = Duration::from_millis(m["execution"]["wall_ms"].as_u64().unwrap());
        (took, took.saturating_sub(worker))
    };

    for i in 0..3 {
        alone(i);
        corral();
    }
    let (mut a, mut c, mut own) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        a.push(alone(i));
        let (total, outside) = corral();
        c.push(total);
        own.push(outside);
    }
    assert_eq!(plain_seen.lock().unwrap().len(), runs + 3);
    assert_eq!(tls_seen.lock().unwrap().len(), runs + 3);
    let (a, c, own) = (median(a), median(c), median(own));
    println!("mode: {}", corral_mode());
    println!("codex alone:        {:8.1} ms (median of {runs})", ms(a));
    println!("corral run, codex:  {:8.1} ms", ms(c));
    println!(
        "overhead:           {:8.1} ms (ratio {:.2}; goal under 30 ms warm)",
        ms(c.saturating_sub(a)),
        c.as_secs_f64() / a.as_secs_f64()
    );
    println!(
        "corral outside the worker: {:8.1} ms (corral run's wall less the manifest's execution.wall_ms)",
        ms(own)
    );
}

/// The mode `corral probe` says it would use (root or rootless).
fn corral_mode() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("probe")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("mode:"))
        .unwrap_or("mode: ?")
        .trim_start_matches("mode:")
        .trim()
        .to_owned()
}
