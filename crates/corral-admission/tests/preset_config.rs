//! Preset-owned configuration (issue 14, item 2): fixed env values and HOME files, each rule
//! refused with its code and field, and what is admitted reaching the ExecSpec.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use corral_admission::{
    AdmittedRun, LoadPresetError, Rejected, admit, load_preset, parse_document,
};
use corral_contract::{AgentPreset, ReasonCode, WorkUnit};
use serde_json::{Value, json};

fn work_unit(disk: u64) -> Value {
    json!({
        "schema_version": "corral.work-unit/v1", "id": "wu-0001",
        "objective": "Fix the off-by-one",
        "repository": { "base_sha": "0123456789abcdef0123456789abcdef01234567" },
        "security": { "sandbox_required": true },
        "permissions": { "process_execution": true, "secrets": [], "network": "none",
                         "network_allowlist": [], "filesystem_write": ["src/"] },
        "budget": { "wall_seconds": 600, "cpu_seconds": 600, "memory_bytes": 1u64 << 30,
                    "disk_bytes": disk, "max_processes": 256, "max_output_bytes": 1048576,
                    "max_patch_bytes": 1048576 },
        "constraints": { "allowed_paths": ["src/"], "forbidden_paths": [] }
    })
}

fn preset(env: Value, home_files: Value) -> Value {
    json!({
        "schema_version": "corral.agent-preset/v1", "id": "agent",
        "executable": "/usr/local/bin/agent", "argv": [],
        "prompt_transport": { "kind": "stdin" }, "model_connection": null,
        "env_allowlist": ["LANG"], "network_policy": "disabled", "read_only_paths": [],
        "authority": "candidate_only", "env": env, "home_files": home_files
    })
}

fn run(wu: &Value, pr: &Value, caller: &[(&str, &str)]) -> Result<AdmittedRun, Rejected> {
    let wu: WorkUnit = parse_document(wu.to_string().as_bytes()).unwrap();
    // Built directly, as an embedder may: a document over parse_document's 1 MiB bound
    // (large inline content) still meets admission's own bounds.
    let pr: AgentPreset = serde_json::from_value(pr.clone()).unwrap();
    let env: BTreeMap<String, String> = caller
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    admit(&wu, &pr, None, &env)
}

fn rejects(r: Result<AdmittedRun, Rejected>, code: ReasonCode, field: &str) {
    match r {
        Ok(_) => panic!("admitted; expected {code} at {field}"),
        Err(Rejected(list)) => assert!(
            list.iter()
                .any(|r| r.code == code && r.path.as_deref() == Some(field)),
            "expected {code} at {field}, got {list:?}"
        ),
    }
}

#[test]
fn fixed_env_and_home_files_reach_the_exec_spec() {
    let pr = preset(
        json!({ "MSWEA_COST_TRACKING": "ignore_errors", "GEMINI_CLI_TRUST_WORKSPACE": "true" }),
        json!([
            { "path": ".codex/config.toml", "content": "model = \"local\"\n" },
            { "path": ".gemini/settings.json", "content": "{}" }
        ]),
    );
    let run = run(&work_unit(1 << 20), &pr, &[("LANG", "C.UTF-8")]).unwrap();
    let exec = run.exec();
    assert_eq!(exec.env["MSWEA_COST_TRACKING"], "ignore_errors");
    assert_eq!(exec.env["GEMINI_CLI_TRUST_WORKSPACE"], "true");
    assert_eq!(exec.env["LANG"], "C.UTF-8");
    assert_eq!(exec.home_files[".codex/config.toml"], "model = \"local\"\n");
    assert_eq!(exec.home_files[".gemini/settings.json"], "{}");
    // Control: without them the ExecSpec carries neither.
    let bare = run_bare();
    assert!(!bare.exec().env.contains_key("MSWEA_COST_TRACKING"));
    assert!(bare.exec().home_files.is_empty());
}

fn run_bare() -> AdmittedRun {
    run(&work_unit(1 << 20), &preset(json!({}), json!([])), &[]).unwrap()
}

#[test]
fn a_caller_cannot_set_or_override_a_fixed_value() {
    let pr = preset(json!({ "MODE": "fixed" }), json!([]));
    // Not on the allowlist: the caller's --env MODE is refused, never merged.
    rejects(
        run(&work_unit(1 << 20), &pr, &[("MODE", "mine")]),
        ReasonCode::EnvNotAllowlisted,
        "env.MODE",
    );
    // And a preset may not both fix a name and allowlist it.
    let mut both = pr.clone();
    both["env_allowlist"] = json!(["LANG", "MODE"]);
    rejects(
        run(&work_unit(1 << 20), &both, &[]),
        ReasonCode::EnvNameInvalid,
        "preset.env.MODE",
    );
}

#[test]
fn fixed_env_follows_the_allowlist_rules_and_more() {
    let wu = work_unit(1 << 20);
    for (name, value, code) in [
        ("OPENAI_API_KEY", "x", ReasonCode::EnvCredentialName),
        ("GITHUB_TOKEN", "x", ReasonCode::EnvCredentialName),
        ("LD_PRELOAD", "/x.so", ReasonCode::EnvNameInvalid),
        ("HOME", "/root", ReasonCode::EnvNameInvalid),
        ("HTTPS_PROXY", "http://x", ReasonCode::EnvNameInvalid),
        ("A", "nul\0byte", ReasonCode::EnvValueInvalid),
        ("A", "{model_token}", ReasonCode::EnvValueInvalid),
        (
            "A",
            "http://{model_base_url}/v1",
            ReasonCode::EnvValueInvalid,
        ),
        (
            "A",
            "unix:///var/run/docker.sock",
            ReasonCode::EnvContainerSocket,
        ),
    ] {
        let pr = preset(json!({ name: value }), json!([]));
        rejects(run(&wu, &pr, &[]), code, &format!("preset.env.{name}"));
    }
    let long = "x".repeat((32 << 10) + 1);
    rejects(
        run(&wu, &preset(json!({ "A": long }), json!([])), &[]),
        ReasonCode::EnvValueInvalid,
        "preset.env.A",
    );
    // Control: braces that are not the reserved placeholder are plain text.
    let ok = preset(json!({ "A": "{\"k\": 1} {model}" }), json!([]));
    assert!(run(&wu, &ok, &[]).is_ok());
}

#[test]
fn home_files_are_refused_naming_the_entry() {
    let wu = work_unit(1 << 20);
    let one = |f: Value| preset(json!({}), json!([f]));
    for (f, field) in [
        (
            json!({ "path": "../x", "content": "" }),
            "preset.home_files[0].path",
        ),
        (
            json!({ "path": "/etc/x", "content": "" }),
            "preset.home_files[0].path",
        ),
        (
            json!({ "path": "a//b", "content": "" }),
            "preset.home_files[0].path",
        ),
        (
            json!({ "path": "a/./b", "content": "" }),
            "preset.home_files[0].path",
        ),
        (
            json!({ "path": "a\\b", "content": "" }),
            "preset.home_files[0].path",
        ),
        (
            json!({ "path": "a\nb", "content": "" }),
            "preset.home_files[0].path",
        ),
        (
            json!({ "path": "dir/", "content": "" }),
            "preset.home_files[0].path",
        ),
        (json!({ "path": "a" }), "preset.home_files[0]"),
        (
            json!({ "path": "a", "content": "", "source": "a" }),
            "preset.home_files[0]",
        ),
        (
            json!({ "path": "a", "source": "a.toml" }),
            "preset.home_files[0].source",
        ),
    ] {
        rejects(
            run(&wu, &one(f.clone()), &[]),
            ReasonCode::HomeFileInvalid,
            field,
        );
    }
    let big = "x".repeat((1 << 20) + 1);
    rejects(
        run(&wu, &one(json!({ "path": "a", "content": big })), &[]),
        ReasonCode::HomeFileInvalid,
        "preset.home_files[0].content",
    );
    let twice = preset(
        json!({}),
        json!([{ "path": "a", "content": "1" }, { "path": "a", "content": "2" }]),
    );
    rejects(
        run(&wu, &twice, &[]),
        ReasonCode::HomeFileInvalid,
        "preset.home_files[1].path",
    );
    let clash = preset(
        json!({}),
        json!([{ "path": "a", "content": "1" }, { "path": "a/b", "content": "2" }]),
    );
    rejects(
        run(&wu, &clash, &[]),
        ReasonCode::HomeFileInvalid,
        "preset.home_files[0].path",
    );
    let many: Vec<Value> = (0..65)
        .map(|i| json!({ "path": format!("f{i}"), "content": "" }))
        .collect();
    rejects(
        run(&wu, &preset(json!({}), json!(many)), &[]),
        ReasonCode::HomeFileInvalid,
        "preset.home_files",
    );
    let five: Vec<Value> = (0..5)
        .map(|i| json!({ "path": format!("f{i}"), "content": "x".repeat(1 << 20) }))
        .collect();
    rejects(
        run(&work_unit(1 << 30), &preset(json!({}), json!(five)), &[]),
        ReasonCode::HomeFileInvalid,
        "preset.home_files",
    );
}

#[test]
fn home_files_count_against_disk_bytes() {
    let pr = preset(
        json!({}),
        json!([{ "path": "a", "content": "x".repeat(1000) }]),
    );
    rejects(
        run(&work_unit(999), &pr, &[]),
        ReasonCode::HomeFileInvalid,
        "preset.home_files",
    );
    assert!(run(&work_unit(1000), &pr, &[]).is_ok());
}

struct Folder(PathBuf);
impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn folder(tag: &str) -> Folder {
    let p = std::env::temp_dir().join(format!("corral-preset-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    Folder(p)
}

fn load(dir: &Path, source: &str) -> Result<AgentPreset, LoadPresetError> {
    let pr = preset(
        json!({}),
        json!([{ "path": ".cfg/a.toml", "source": source }]),
    );
    load_preset(pr.to_string().as_bytes(), dir)
}

#[test]
fn the_loader_reads_sources_beside_the_preset_into_content() {
    let d = folder("load");
    std::fs::write(d.0.join("a.toml"), "k = 1\n").unwrap();
    let pr = load(&d.0, "a.toml").unwrap();
    assert_eq!(pr.home_files[0].content.as_deref(), Some("k = 1\n"));
    assert_eq!(pr.home_files[0].source, None);
    // The preset's digest covers the bytes: another text, another digest.
    let before = corral_contract::digest_of(&pr);
    std::fs::write(d.0.join("a.toml"), "k = 2\n").unwrap();
    assert_ne!(
        corral_contract::digest_of(&load(&d.0, "a.toml").unwrap()),
        before
    );
    let run = admit(
        &parse_document(work_unit(1 << 20).to_string().as_bytes()).unwrap(),
        &pr,
        None,
        &BTreeMap::new(),
    )
    .unwrap();
    assert_eq!(run.exec().home_files[".cfg/a.toml"], "k = 1\n");
}

#[test]
fn the_loader_refuses_what_is_not_a_plain_file_beside_the_preset() {
    let d = folder("refuse");
    std::fs::write(d.0.join("a.toml"), "k = 1\n").unwrap();
    std::os::unix::fs::symlink("a.toml", d.0.join("link.toml")).unwrap();
    std::fs::create_dir(d.0.join("sub")).unwrap();
    std::fs::write(d.0.join("sub/b.toml"), "").unwrap();
    std::fs::write(d.0.join("bin"), [0xff, 0xfe]).unwrap();
    std::fs::write(d.0.join("big"), vec![b'x'; (1 << 20) + 1]).unwrap();
    for (source, why) in [
        ("link.toml", "not a regular file"),
        ("sub", "not a regular file"),
        ("sub/b.toml", "file name"),
        ("../a.toml", "file name"),
        ("..", "file name"),
        ("missing", "No such file"),
        ("bin", "not UTF-8"),
        ("big", "larger than"),
    ] {
        match load(&d.0, source) {
            Err(LoadPresetError::Source { field, detail }) => {
                assert_eq!(field, "preset.home_files[0].source");
                assert!(detail.contains(why), "{source}: {detail}");
            }
            other => panic!("{source}: {other:?}"),
        }
    }
    // Control: the plain file beside it loads.
    assert!(load(&d.0, "a.toml").is_ok());
}

/// `{model_base_url}` and `{model_token}` (ADR-0095): accepted only for a model_only preset
/// whose trusted connection names an upstream; any other `{model_...}` never.
#[test]
fn model_placeholders_only_where_the_broker_serves_the_run() {
    let mut wu = work_unit(1 << 20);
    wu["permissions"]["network"] = json!("allowlist");
    wu["permissions"]["network_allowlist"] = json!(["127.0.0.2:11434"]);
    let wu: WorkUnit = parse_document(wu.to_string().as_bytes()).unwrap();
    let connections = |upstream: bool| -> corral_contract::TrustedConnections {
        let mut c = json!({ "destinations": ["127.0.0.2:11434"] });
        if upstream {
            c["upstream"] = json!({
                "base_url": "https://model.test/v1", "methods": ["POST"],
                "path_prefixes": ["/chat/completions"], "credential": { "env": "MODEL_KEY" },
                "budgets": { "calls": 10, "request_bytes": 1048576, "response_bytes": 1048576,
                             "call_seconds": 60, "total_seconds": 600 }
            });
        }
        serde_json::from_value(json!({
            "schema_version": "corral.connections/v1", "connections": { "llm": c }
        }))
        .unwrap()
    };
    let model_preset = |env: Value, home: Value| -> AgentPreset {
        let mut p = preset(env, home);
        p["network_policy"] = json!("model_only");
        p["model_connection"] = json!("llm");
        serde_json::from_value(p).unwrap()
    };
    let none = BTreeMap::new();
    let pr = model_preset(
        json!({ "OPENAI_BASE_URL": "{model_base_url}/v1", "OPENAI_API_KEY": "{model_token}" }),
        json!([{ "path": ".codex/config.toml", "content": "base_url = \"{model_base_url}\"\n" }]),
    );
    let admitted = admit(&wu, &pr, Some(&connections(true)), &none).unwrap();
    assert_eq!(admitted.exec().env["OPENAI_API_KEY"], "{model_token}");
    // The same preset against a connection without an upstream: nothing would fill them.
    let Err(Rejected(list)) = admit(&wu, &pr, Some(&connections(false)), &none) else {
        panic!("admitted without a broker");
    };
    for field in [
        "preset.env.OPENAI_BASE_URL",
        "preset.env.OPENAI_API_KEY",
        "preset.home_files[0].content",
    ] {
        assert!(
            list.iter().any(|r| r.path.as_deref() == Some(field)),
            "{field}: {list:?}"
        );
    }
    // An undefined placeholder, even with a broker; a credential name holding anything but
    // the bare token.
    let pr = model_preset(
        json!({ "A": "{model_secret}", "OPENAI_API_KEY": "sk-{model_token}" }),
        json!([]),
    );
    let Err(Rejected(list)) = admit(&wu, &pr, Some(&connections(true)), &none) else {
        panic!("admitted an undefined placeholder");
    };
    assert!(list.iter().any(
        |r| r.code == ReasonCode::EnvValueInvalid && r.path.as_deref() == Some("preset.env.A")
    ));
    assert!(list.iter().any(|r| r.code == ReasonCode::EnvCredentialName
        && r.path.as_deref() == Some("preset.env.OPENAI_API_KEY")));
}
