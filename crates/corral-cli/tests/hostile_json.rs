//! `--json` output escapes hostile text: no bidi control, C1 control or other invisible code
//! point of `corral_contract::canonical::JSON_ESCAPED` reaches stdout raw, and the bytes stay
//! canonical JSON that `corral verify` accepts. `corral run` needs the real sandbox (root; CI
//! runs as root).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use corral_contract::canonical::{Digest, canonical_json, is_json_escaped};
use serde_json::{Value, json};

mod common;
use common::git;

/// One of each class: C1 (CSI, NEL), bidi override, isolates, marks, zero-width joiner, BOM,
/// line separator, a tag character (astral).
const HOSTILE: &str = "\u{9b}31m\u{85}\u{202e}gpj.exe\u{2066}\u{2069}\u{200e}\u{061c}\u{200d}\u{feff}\u{2028}\u{e0041}";

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("corral-hostile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Artifacts are read-only files: make them removable first.
        let _ = Command::new("chmod")
            .args(["-R", "u+w"])
            .arg(&self.0)
            .status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn corral(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// No raw code point of the escaped set (nor C0) in `bytes`, which are UTF-8.
fn assert_no_raw_hostile(what: &str, bytes: &[u8]) {
    let text = std::str::from_utf8(bytes).unwrap();
    let raw: Vec<String> = text
        .chars()
        .filter(|c| is_json_escaped(*c) || (c.is_control() && *c != '\n'))
        .map(|c| format!("U+{:04X}", u32::from(c)))
        .collect();
    assert!(raw.is_empty(), "{what}: raw {raw:?} in {text}");
}

/// stdout is one line of canonical JSON: parsing it and writing it again gives its bytes.
fn canonical_line(out: &Output) -> Value {
    let line = out.stdout.strip_suffix(b"\n").expect("one line");
    assert!(!line.contains(&b'\n'));
    let v: Value = serde_json::from_slice(line).unwrap();
    assert_eq!(canonical_json(&v), line, "not canonical");
    v
}

fn work_unit(base_sha: &str, id: &str, objective: &str) -> Value {
    json!({
        "schema_version": "corral.work-unit/v1", "id": id, "objective": objective,
        "repository": { "base_sha": base_sha },
        "security": { "sandbox_required": true },
        "permissions": { "process_execution": true, "secrets": [], "network": "none",
                         "network_allowlist": [], "filesystem_write": ["src/"] },
        "budget": { "wall_seconds": 30, "cpu_seconds": 10, "memory_bytes": 128u64 << 20,
                    "disk_bytes": 64u64 << 20, "max_processes": 64, "max_output_bytes": 65536,
                    "max_patch_bytes": 65536 },
        "constraints": { "allowed_paths": ["src/"], "forbidden_paths": ["**/*.pem"] }
    })
}

fn shell_preset(script: &str, transport: Value) -> Value {
    json!({
        "schema_version": "corral.agent-preset/v1", "id": "sh", "executable": "/bin/sh",
        "argv": ["-c", script], "prompt_transport": transport, "model_connection": null,
        "env_allowlist": ["LANG"], "network_policy": "disabled", "read_only_paths": [],
        "authority": "candidate_only"
    })
}

fn write(dir: &Path, name: &str, v: &Value) -> String {
    let p = dir.join(name);
    // Raw UTF-8 on disk: the hostile documents as an attacker would write them.
    std::fs::write(&p, serde_json::to_vec(v).unwrap()).unwrap();
    p.to_str().unwrap().to_owned()
}

/// A rejected WorkUnit whose id and a preset whose env_allowlist entry hold hostile text:
/// the id and the rejection detail (which echoes the name) reach `--json` output escaped, and
/// the stderr lines of text mode are escaped too.
#[test]
fn admit_json_escapes_hostile_values_in_rejections() {
    let t = TempDir::new("admit-rejected");
    let wu = write(
        &t.0,
        "wu.json",
        &work_unit(&"a".repeat(40), &format!("wu{HOSTILE}"), HOSTILE),
    );
    let mut preset = shell_preset("true", json!({ "kind": "stdin" }));
    preset["env_allowlist"] = json!(["LANG", format!("X{HOSTILE}")]);
    let preset = write(&t.0, "preset.json", &preset);
    let out = corral(
        &t.0,
        &["admit", "--work-unit", &wu, "--preset", &preset, "--json"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_no_raw_hostile("stdout", &out.stdout);
    assert_no_raw_hostile("stderr", &out.stderr);
    let v = canonical_line(&out);
    assert_eq!(v["admissible"], false);
    // The values themselves are intact once decoded.
    assert_eq!(v["work_unit"]["id"], format!("wu{HOSTILE}"));
    let codes: Vec<&str> = v["rejections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"id_invalid"), "{codes:?}");
    assert!(
        v["rejections"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["detail"].as_str().unwrap().contains(HOSTILE)),
        "no rejection echoes the name: {v}"
    );
    let text = std::str::from_utf8(&out.stdout).unwrap();
    assert!(
        text.contains(r"\u202e") && text.contains(r"\udb40\udc41"),
        "{text}"
    );
}

/// An admissible run whose objective is hostile text (argument transport puts it into
/// `exec.args`): the decision on stdout escapes it.
#[test]
fn admit_json_escapes_hostile_values_when_admissible() {
    let t = TempDir::new("admit-ok");
    let wu = write(
        &t.0,
        "wu.json",
        &work_unit(&"a".repeat(40), "wu-ok", &format!("fix {HOSTILE} é 日本")),
    );
    let preset = write(
        &t.0,
        "preset.json",
        &shell_preset("true", json!({ "kind": "argument", "flag": "--prompt" })),
    );
    let out = corral(
        &t.0,
        &["admit", "--work-unit", &wu, "--preset", &preset, "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_raw_hostile("stdout", &out.stdout);
    let v = canonical_line(&out);
    assert_eq!(v["admissible"], true);
    assert!(v["exec"].to_string().contains(HOSTILE), "{v}");
    // Plain non-ASCII text stays raw UTF-8.
    let text = std::str::from_utf8(&out.stdout).unwrap();
    assert!(text.contains("é 日本"), "{text}");
}

/// A worker that creates a file whose name holds a right-to-left override: `corral run
/// --json` prints the manifest with the name escaped, those bytes are the stored manifest,
/// and `corral verify` accepts it; the same manifest spelled with the code point raw is not
/// canonical and is refused.
#[test]
fn run_json_escapes_a_hostile_changed_path_and_verify_accepts_it() {
    let t = TempDir::new("run");
    let repo = t.0.join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(repo.join("src/app.py"), "print('hi')\n").unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    // U+202E is E2 80 AE in UTF-8; dash's printf takes octal escapes.
    let script =
        r#"cat >/dev/null; n="src/a$(printf '\342\200\256')txt.exe"; echo x > "$n"; echo "$n""#;
    let wu = write(&t.0, "wu.json", &work_unit(&base, "wu-run", HOSTILE));
    let preset = write(
        &t.0,
        "preset.json",
        &shell_preset(script, json!({ "kind": "stdin" })),
    );
    let artifacts = t.0.join("artifacts");
    let out = corral(
        &t.0,
        &[
            "run",
            "--work-unit",
            &wu,
            "--preset",
            &preset,
            "--repo",
            repo.to_str().unwrap(),
            "--artifacts",
            artifacts.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{:?}: {}",
        out.status,
        stderr(&out)
    );
    assert_no_raw_hostile("stdout", &out.stdout);
    assert_no_raw_hostile("stderr", &out.stderr);
    let m = canonical_line(&out);
    assert_eq!(m["execution"]["termination"], "exited", "{m}");
    // The hostile name is recorded (as a changed path, or in a rejection), escaped.
    assert!(m.to_string().contains("src/a\u{202e}txt.exe"), "{m}");
    let line = out.stdout.strip_suffix(b"\n").unwrap();
    assert!(
        std::str::from_utf8(line)
            .unwrap()
            .contains(r"src/a\u202etxt.exe"),
    );
    // stdout is the stored manifest, byte for byte, under its digest; verify accepts it.
    let stored = artifacts.join("sha256").join(Digest::of_bytes(line).hex());
    assert_eq!(std::fs::read(&stored).unwrap(), line);
    let v = corral(&t.0, &["verify", stored.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(0), "{}", stderr(&v));
    // The saved --json output, under another name, is accepted as well.
    let saved = t.0.join("manifest.json");
    std::fs::write(&saved, line).unwrap();
    let args = [
        "verify",
        saved.to_str().unwrap(),
        "--artifacts",
        artifacts.to_str().unwrap(),
    ];
    let v = corral(&t.0, &args);
    assert_eq!(v.status.code(), Some(0), "{}", stderr(&v));
    // `corral run --json > m.json && corral verify m.json`: stdout as the shell saved it,
    // trailing newline and all, round-trips; its lines speak the contract's words.
    std::fs::write(&saved, &out.stdout).unwrap();
    let v = corral(&t.0, &args);
    assert_eq!(v.status.code(), Some(0), "{}", stderr(&v));
    let said = String::from_utf8_lossy(&v.stdout);
    assert!(
        said.lines()
            .next()
            .is_some_and(|l| l.starts_with("manifest sha256:") && l.ends_with(": intact")),
        "{said}"
    );
    assert!(
        !said.contains("Intact") && !said.contains("Digest("),
        "{said}"
    );
    // Two newlines are another spelling.
    let mut twice = out.stdout.clone();
    twice.push(b'\n');
    std::fs::write(&saved, &twice).unwrap();
    let v = corral(&t.0, &args);
    assert_eq!(v.status.code(), Some(1), "{}", stderr(&v));
    // The same document with the code point raw is another spelling: not canonical.
    let raw = serde_json::to_vec(&m).unwrap();
    assert_ne!(raw, line);
    std::fs::write(&saved, &raw).unwrap();
    let v = corral(&t.0, &args);
    assert_eq!(v.status.code(), Some(1), "{}", stderr(&v));
    assert!(
        String::from_utf8_lossy(&v.stdout).contains("manifest sha256:")
            && String::from_utf8_lossy(&v.stdout).contains(": not canonical:"),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );
}

/// `corral export oci` prints JSON too: the hostile objective (in `process.args` with the
/// argument transport) is escaped, and the document still parses to the same text.
#[test]
fn export_oci_escapes_hostile_values() {
    let t = TempDir::new("export");
    let wu = write(
        &t.0,
        "wu.json",
        &work_unit(&"a".repeat(40), "wu-export", HOSTILE),
    );
    let preset = write(
        &t.0,
        "preset.json",
        &shell_preset("true", json!({ "kind": "argument", "flag": "--prompt" })),
    );
    let out = corral(
        &t.0,
        &["export", "oci", "--work-unit", &wu, "--preset", &preset],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_no_raw_hostile("stdout", &out.stdout);
    let cfg: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        cfg["process"]["args"].to_string().contains(HOSTILE),
        "{cfg}"
    );
}
