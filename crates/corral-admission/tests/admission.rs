//! Table-driven admission tests: every seed rule and every row of the network table.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::collections::BTreeMap;

use corral_admission::{AdmittedRun, Rejected, admit, parse_document};
use corral_contract::{AgentPreset, NetworkMode, ReasonCode, TrustedConnections, WorkUnit};
use serde_json::{Value, json};

fn work_unit() -> Value {
    json!({
        "schema_version": "corral.work-unit/v1",
        "id": "wu-0001",
        "objective": "Fix the off-by-one in src/range.rs and add a test",
        "repository": { "base_sha": "0123456789abcdef0123456789abcdef01234567" },
        "security": { "sandbox_required": true },
        "permissions": {
            "process_execution": true, "secrets": [], "network": "none",
            "network_allowlist": [], "filesystem_write": ["src/", "tests/"]
        },
        "budget": {
            "wall_seconds": 600, "cpu_seconds": 600, "memory_bytes": 2147483648u64,
            "disk_bytes": 1073741824u64, "max_processes": 256, "max_output_bytes": 1048576,
            "max_patch_bytes": 1048576
        },
        "constraints": { "allowed_paths": ["src/", "tests/"], "forbidden_paths": [".github/", "**/*.pem"] }
    })
}

fn preset() -> Value {
    json!({
        "schema_version": "corral.agent-preset/v1",
        "id": "demo-agent",
        "executable": "/usr/local/bin/some-agent",
        "argv": ["--non-interactive"],
        "prompt_transport": { "kind": "stdin" },
        "model_connection": null,
        "env_allowlist": ["LANG", "TERM"],
        "network_policy": "disabled",
        "read_only_paths": ["/opt/some-agent"],
        "authority": "candidate_only"
    })
}

fn connections() -> Value {
    json!({ "schema_version": "corral.connections/v1",
            "connections": { "local-llm": { "destinations": ["127.0.0.2:11434", "models.example:443"] } } })
}

/// Sets `value` at a dotted path (creating nothing: the parent must exist). `None` removes.
fn set(doc: &mut Value, path: &str, value: Option<Value>) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().unwrap();
    let mut cur = doc;
    for p in parts {
        cur = cur.get_mut(p).unwrap_or_else(|| panic!("no {p} in {path}"));
    }
    let obj = cur.as_object_mut().unwrap();
    match value {
        Some(v) => {
            obj.insert(last.to_owned(), v);
        }
        None => {
            obj.remove(last);
        }
    }
}

fn parse<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) -> T {
    parse_document(serde_json::to_string(v).unwrap().as_bytes()).unwrap()
}

fn run(
    wu: &Value,
    pr: &Value,
    conn: Option<&Value>,
    env: &[(&str, &str)],
) -> Result<AdmittedRun, Rejected> {
    let wu: WorkUnit = parse(wu);
    let pr: AgentPreset = parse(pr);
    let conn: Option<TrustedConnections> = conn.map(parse);
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    admit(&wu, &pr, conn.as_ref(), &env)
}

fn codes(r: Result<AdmittedRun, Rejected>) -> Vec<(ReasonCode, String)> {
    match r {
        Ok(_) => Vec::new(),
        Err(Rejected(list)) => list
            .into_iter()
            .map(|r| (r.code, r.path.unwrap_or_default()))
            .collect(),
    }
}

fn assert_rejects(r: Result<AdmittedRun, Rejected>, code: ReasonCode, field: &str) {
    let got = codes(r);
    assert!(
        got.iter().any(|(c, f)| *c == code && f == field),
        "expected {code} at {field}, got {got:?}"
    );
}

#[test]
fn valid_documents_are_admitted() {
    let run = run(&work_unit(), &preset(), None, &[("LANG", "C.UTF-8")]).unwrap();
    assert_eq!(run.policy().network_mode(), NetworkMode::None);
    assert!(run.policy().network_allowlist().is_empty());
    let w: Vec<_> = run
        .policy()
        .writable_paths()
        .iter()
        .map(|p| p.as_str())
        .collect();
    assert_eq!(w, ["src/", "tests/"]);
    let f: Vec<_> = run
        .policy()
        .forbidden_paths()
        .iter()
        .map(|p| p.as_str())
        .collect();
    assert_eq!(f, [".github/", "**/*.pem"]);
    assert_eq!(run.exec().executable, "/usr/local/bin/some-agent");
    assert_eq!(run.exec().args, ["--non-interactive"]);
    assert_eq!(
        run.exec().stdin.as_deref(),
        Some(&b"Fix the off-by-one in src/range.rs and add a test"[..])
    );
    assert_eq!(
        run.exec().env.get("LANG").map(String::as_str),
        Some("C.UTF-8")
    );
    assert_eq!(run.exec().env.len(), 1);
    assert_eq!(run.limits().max_processes.get(), 256);
}

#[test]
fn argument_transport_appends_flag_and_objective() {
    let mut pr = preset();
    set(
        &mut pr,
        "prompt_transport",
        Some(json!({"kind": "argument", "flag": "--task"})),
    );
    let run = run(&work_unit(), &pr, None, &[]).unwrap();
    assert_eq!(
        run.exec().args,
        [
            "--non-interactive",
            "--task",
            "Fix the off-by-one in src/range.rs and add a test"
        ]
    );
    assert_eq!(run.exec().stdin, None);
}

/// Every WorkUnit rule: (mutation path, new value or removal, expected code, expected field).
#[test]
fn work_unit_rules() {
    let cases: Vec<(&str, Option<Value>, ReasonCode, &str)> = vec![
        (
            "schema_version",
            Some(json!("corral.work-unit/v2")),
            ReasonCode::SchemaVersionUnsupported,
            "work_unit.schema_version",
        ),
        (
            "id",
            Some(json!("../x")),
            ReasonCode::IdInvalid,
            "work_unit.id",
        ),
        (
            "objective",
            None,
            ReasonCode::FieldMissing,
            "work_unit.objective",
        ),
        (
            "objective",
            Some(Value::Null),
            ReasonCode::FieldMissing,
            "work_unit.objective",
        ),
        (
            "objective",
            Some(json!("  \n")),
            ReasonCode::ObjectiveEmpty,
            "work_unit.objective",
        ),
        (
            "security.sandbox_required",
            Some(json!(false)),
            ReasonCode::SandboxNotRequired,
            "work_unit.security.sandbox_required",
        ),
        (
            "security.sandbox_required",
            None,
            ReasonCode::FieldMissing,
            "work_unit.security.sandbox_required",
        ),
        (
            "permissions.process_execution",
            Some(json!(false)),
            ReasonCode::ProcessExecutionNotPermitted,
            "work_unit.permissions.process_execution",
        ),
        (
            "permissions.process_execution",
            None,
            ReasonCode::FieldMissing,
            "work_unit.permissions.process_execution",
        ),
        (
            "permissions.secrets",
            Some(json!(["GITHUB_TOKEN"])),
            ReasonCode::SecretsNotPermitted,
            "work_unit.permissions.secrets",
        ),
        (
            "permissions.secrets",
            None,
            ReasonCode::FieldMissing,
            "work_unit.permissions.secrets",
        ),
        (
            "permissions.network",
            Some(json!("unrestricted")),
            ReasonCode::NetworkUnrestricted,
            "work_unit.permissions.network",
        ),
        (
            "permissions.network",
            None,
            ReasonCode::FieldMissing,
            "work_unit.permissions.network",
        ),
        (
            "permissions.network_allowlist",
            None,
            ReasonCode::FieldMissing,
            "work_unit.permissions.network_allowlist",
        ),
        (
            "permissions.filesystem_write",
            Some(json!(["src/"])),
            ReasonCode::FilesystemWriteMismatch,
            "work_unit.permissions.filesystem_write",
        ),
        (
            "permissions.filesystem_write",
            Some(json!(["tests/", "src/"])),
            ReasonCode::FilesystemWriteMismatch,
            "work_unit.permissions.filesystem_write",
        ),
        (
            "permissions.filesystem_write",
            None,
            ReasonCode::FieldMissing,
            "work_unit.permissions.filesystem_write",
        ),
        (
            "constraints.allowed_paths",
            None,
            ReasonCode::FieldMissing,
            "work_unit.constraints.allowed_paths",
        ),
        (
            "constraints.forbidden_paths",
            None,
            ReasonCode::FieldMissing,
            "work_unit.constraints.forbidden_paths",
        ),
        (
            "constraints.forbidden_paths",
            Some(Value::Null),
            ReasonCode::FieldMissing,
            "work_unit.constraints.forbidden_paths",
        ),
        (
            "constraints.forbidden_paths",
            Some(json!(["a/../b"])),
            ReasonCode::PathInvalid,
            "work_unit.constraints.forbidden_paths[0]",
        ),
        (
            "repository.base_sha",
            Some(json!("0123456789ABCDEF0123456789abcdef01234567")),
            ReasonCode::BaseShaInvalid,
            "work_unit.repository.base_sha",
        ),
        (
            "repository.base_sha",
            Some(json!("0123456")),
            ReasonCode::BaseShaInvalid,
            "work_unit.repository.base_sha",
        ),
        (
            "repository.base_sha",
            None,
            ReasonCode::FieldMissing,
            "work_unit.repository.base_sha",
        ),
    ];
    for (path, value, code, field) in cases {
        let mut wu = work_unit();
        set(&mut wu, path, value.clone());
        assert_rejects(run(&wu, &preset(), None, &[]), code, field);
    }
    // A 64-hex SHA-256 object name is fine.
    let mut wu = work_unit();
    set(&mut wu, "repository.base_sha", Some(json!("a".repeat(64))));
    assert!(run(&wu, &preset(), None, &[]).is_ok());
}

#[test]
fn every_budget_ceiling_present_and_positive() {
    for name in [
        "wall_seconds",
        "cpu_seconds",
        "memory_bytes",
        "disk_bytes",
        "max_processes",
        "max_output_bytes",
        "max_patch_bytes",
    ] {
        let mut wu = work_unit();
        set(&mut wu, &format!("budget.{name}"), Some(json!(0)));
        assert_rejects(
            run(&wu, &preset(), None, &[]),
            ReasonCode::BudgetNotPositive,
            &format!("work_unit.budget.{name}"),
        );
        let mut wu = work_unit();
        set(&mut wu, &format!("budget.{name}"), None);
        assert_rejects(
            run(&wu, &preset(), None, &[]),
            ReasonCode::FieldMissing,
            &format!("work_unit.budget.{name}"),
        );
    }
}

/// The CPU cap is optional; when WorkUnit and preset both set one the lower applies, so
/// neither can raise what the other allows; 0 is refused on either.
#[test]
fn the_cpu_cap_is_the_lower_of_work_unit_and_preset() {
    let cap = |wu_cap: Option<u64>, pr_cap: Option<u64>| {
        let mut wu = work_unit();
        set(&mut wu, "budget.cpu_millicores", wu_cap.map(|v| json!(v)));
        let mut pr = preset();
        set(&mut pr, "cpu_millicores", pr_cap.map(|v| json!(v)));
        run(&wu, &pr, None, &[])
            .unwrap()
            .limits()
            .cpu_millicores
            .map(std::num::NonZeroU64::get)
    };
    assert_eq!(cap(None, None), None);
    assert_eq!(cap(Some(1500), None), Some(1500));
    assert_eq!(cap(None, Some(500)), Some(500));
    assert_eq!(cap(Some(1500), Some(500)), Some(500));
    assert_eq!(cap(Some(300), Some(500)), Some(300));
    let mut wu = work_unit();
    set(&mut wu, "budget.cpu_millicores", Some(json!(null)));
    assert_eq!(
        run(&wu, &preset(), None, &[])
            .unwrap()
            .limits()
            .cpu_millicores,
        None
    );
    set(&mut wu, "budget.cpu_millicores", Some(json!(0)));
    assert_rejects(
        run(&wu, &preset(), None, &[]),
        ReasonCode::BudgetNotPositive,
        "work_unit.budget.cpu_millicores",
    );
    let mut pr = preset();
    set(&mut pr, "cpu_millicores", Some(json!(0)));
    assert_rejects(
        run(&work_unit(), &pr, None, &[]),
        ReasonCode::BudgetNotPositive,
        "preset.cpu_millicores",
    );
}

#[test]
fn scope_paths_validated_never_normalized() {
    for bad in [
        "/etc", "src\\x", "a/../b", "./src", "src//x", "", "a\u{1}b", ".",
    ] {
        let mut wu = work_unit();
        set(&mut wu, "constraints.allowed_paths", Some(json!([bad])));
        set(&mut wu, "permissions.filesystem_write", Some(json!([bad])));
        assert_rejects(
            run(&wu, &preset(), None, &[]),
            ReasonCode::PathInvalid,
            "work_unit.constraints.allowed_paths[0]",
        );
    }
    for git in [".git", ".git/", "sub/.GIT/hooks", ".git/config"] {
        let mut wu = work_unit();
        set(&mut wu, "constraints.allowed_paths", Some(json!([git])));
        set(&mut wu, "permissions.filesystem_write", Some(json!([git])));
        assert_rejects(
            run(&wu, &preset(), None, &[]),
            ReasonCode::PathProtected,
            "work_unit.constraints.allowed_paths[0]",
        );
    }
    let mut wu = work_unit();
    set(&mut wu, "constraints.allowed_paths", Some(json!([])));
    set(&mut wu, "permissions.filesystem_write", Some(json!([])));
    assert_rejects(
        run(&wu, &preset(), None, &[]),
        ReasonCode::AllowedPathsEmpty,
        "work_unit.constraints.allowed_paths",
    );
}

#[test]
fn all_violations_reported_at_once() {
    let mut wu = work_unit();
    set(&mut wu, "objective", Some(json!("")));
    set(&mut wu, "security.sandbox_required", Some(json!(false)));
    set(&mut wu, "permissions.secrets", Some(json!(["X"])));
    set(&mut wu, "budget.cpu_seconds", Some(json!(0)));
    let mut pr = preset();
    set(&mut pr, "authority", Some(json!("merge")));
    set(&mut pr, "env_allowlist", Some(json!(["GITHUB_TOKEN"])));
    let got: Vec<ReasonCode> = codes(run(&wu, &pr, None, &[]))
        .into_iter()
        .map(|c| c.0)
        .collect();
    for code in [
        ReasonCode::ObjectiveEmpty,
        ReasonCode::SandboxNotRequired,
        ReasonCode::SecretsNotPermitted,
        ReasonCode::BudgetNotPositive,
        ReasonCode::AuthorityNotCandidateOnly,
        ReasonCode::EnvCredentialName,
    ] {
        assert!(got.contains(&code), "{code} missing from {got:?}");
    }
}

#[test]
fn preset_rules() {
    let cases: Vec<(&str, Value, ReasonCode, &str)> = vec![
        (
            "schema_version",
            json!("x"),
            ReasonCode::SchemaVersionUnsupported,
            "preset.schema_version",
        ),
        (
            "executable",
            json!("some-agent"),
            ReasonCode::ExecutableNotAbsolute,
            "preset.executable",
        ),
        (
            "executable",
            json!("/usr/../bin/sh"),
            ReasonCode::ExecutableNotAbsolute,
            "preset.executable",
        ),
        (
            "executable",
            json!("/usr//bin/sh"),
            ReasonCode::ExecutableNotAbsolute,
            "preset.executable",
        ),
        (
            "argv",
            json!(["a\u{0}b"]),
            ReasonCode::ArgvInvalid,
            "preset.argv[0]",
        ),
        (
            "prompt_transport",
            json!({"kind": "file"}),
            ReasonCode::PromptTransportFile,
            "preset.prompt_transport.kind",
        ),
        (
            "prompt_transport",
            json!({"kind": "argument", "flag": "task"}),
            ReasonCode::PromptFlagInvalid,
            "preset.prompt_transport.flag",
        ),
        (
            "prompt_transport",
            json!({"kind": "argument", "flag": "--a b"}),
            ReasonCode::PromptFlagInvalid,
            "preset.prompt_transport.flag",
        ),
        (
            "authority",
            json!("verification"),
            ReasonCode::AuthorityNotCandidateOnly,
            "preset.authority",
        ),
        (
            "env_allowlist",
            json!(["LANG", "AWS_SECRET_ACCESS_KEY"]),
            ReasonCode::EnvCredentialName,
            "preset.env_allowlist[1]",
        ),
        (
            "env_allowlist",
            json!(["ssh_auth_sock"]),
            ReasonCode::EnvCredentialName,
            "preset.env_allowlist[0]",
        ),
        (
            "env_allowlist",
            json!(["PATH"]),
            ReasonCode::EnvNameInvalid,
            "preset.env_allowlist[0]",
        ),
        (
            "env_allowlist",
            json!(["LD_PRELOAD"]),
            ReasonCode::EnvNameInvalid,
            "preset.env_allowlist[0]",
        ),
        (
            "read_only_paths",
            json!(["relative"]),
            ReasonCode::ReadOnlyPathInvalid,
            "preset.read_only_paths[0]",
        ),
        (
            "read_only_paths",
            json!(["/root/.cargo"]),
            ReasonCode::ReadOnlyPathInvalid,
            "preset.read_only_paths[0]",
        ),
        (
            "read_only_paths",
            json!(["/var/run/docker.sock"]),
            ReasonCode::ReadOnlyPathInvalid,
            "preset.read_only_paths[0]",
        ),
        (
            "read_only_paths",
            json!(["/"]),
            ReasonCode::ReadOnlyPathInvalid,
            "preset.read_only_paths[0]",
        ),
        (
            "executable_sha256",
            json!("abc"),
            ReasonCode::ExecutableDigestInvalid,
            "preset.executable_sha256",
        ),
        (
            "model_connection",
            json!("local-llm"),
            ReasonCode::ModelConnectionUnexpected,
            "preset.model_connection",
        ),
    ];
    for (path, value, code, field) in cases {
        let mut pr = preset();
        set(&mut pr, path, Some(value));
        assert_rejects(run(&work_unit(), &pr, None, &[]), code, field);
    }
    let mut pr = preset();
    set(
        &mut pr,
        "executable_sha256",
        Some(json!(format!("sha256:{}", "b".repeat(64)))),
    );
    let admitted = run(&work_unit(), &pr, None, &[]).unwrap();
    assert_eq!(
        admitted.exec().executable_sha256.as_ref().unwrap().hex(),
        "b".repeat(64)
    );
}

fn allowlist_wu(list: Value) -> Value {
    let mut wu = work_unit();
    set(&mut wu, "permissions.network", Some(json!("allowlist")));
    set(&mut wu, "permissions.network_allowlist", Some(list));
    wu
}

fn preset_with(policy: &str, connection: Option<&str>) -> Value {
    let mut pr = preset();
    set(&mut pr, "network_policy", Some(json!(policy)));
    set(
        &mut pr,
        "model_connection",
        Some(connection.map_or(Value::Null, |c| json!(c))),
    );
    pr
}

/// The seeds' network table, row by row.
#[test]
fn network_table() {
    // none + disabled: admissible, no destinations.
    let r = run(&work_unit(), &preset_with("disabled", None), None, &[]).unwrap();
    assert_eq!(r.policy().network_mode(), NetworkMode::None);

    // allowlist + allowlisted: admissible with exactly the WorkUnit allowlist (canonicalized).
    let r = run(
        &allowlist_wu(json!(["Registry.Example.:443", "127.0.0.2:8080"])),
        &preset_with("allowlisted", None),
        None,
        &[],
    )
    .unwrap();
    assert_eq!(r.policy().network_mode(), NetworkMode::Allowlist);
    let got: Vec<String> = r
        .policy()
        .network_allowlist()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(got, ["registry.example:443", "127.0.0.2:8080"]);

    // allowlist + model_only: admissible only as a subset of the trusted destinations.
    let conn = connections();
    let r = run(
        &allowlist_wu(json!(["127.0.0.2:11434"])),
        &preset_with("model_only", Some("local-llm")),
        Some(&conn),
        &[],
    )
    .unwrap();
    assert_eq!(r.policy().network_allowlist().len(), 1);
    assert_rejects(
        run(
            &allowlist_wu(json!(["127.0.0.2:11434", "evil.example:443"])),
            &preset_with("model_only", Some("local-llm")),
            Some(&conn),
            &[],
        ),
        ReasonCode::DestinationNotInConnection,
        "work_unit.permissions.network_allowlist[1]",
    );
    // Same host, other port: not a subset.
    assert_rejects(
        run(
            &allowlist_wu(json!(["127.0.0.2:11435"])),
            &preset_with("model_only", Some("local-llm")),
            Some(&conn),
            &[],
        ),
        ReasonCode::DestinationNotInConnection,
        "work_unit.permissions.network_allowlist[0]",
    );

    // allowlist + model_only with the connection missing: rejected (three ways).
    for (pr, conn) in [
        (preset_with("model_only", None), Some(&conn)),
        (preset_with("model_only", Some("local-llm")), None),
        (preset_with("model_only", Some("other")), Some(&conn)),
    ] {
        assert_rejects(
            run(&allowlist_wu(json!(["127.0.0.2:11434"])), &pr, conn, &[]),
            ReasonCode::ModelConnectionMissing,
            "preset.model_connection",
        );
    }

    // unrestricted + any preset: rejected.
    for policy in ["disabled", "allowlisted", "model_only"] {
        let mut wu = work_unit();
        set(&mut wu, "permissions.network", Some(json!("unrestricted")));
        assert_rejects(
            run(&wu, &preset_with(policy, None), None, &[]),
            ReasonCode::NetworkUnrestricted,
            "work_unit.permissions.network",
        );
    }

    // Every mismatch: rejected.
    for (wu, policy) in [
        (work_unit(), "allowlisted"),
        (work_unit(), "model_only"),
        (allowlist_wu(json!(["a.example:443"])), "disabled"),
    ] {
        let conn_name = (policy == "model_only").then_some("local-llm");
        assert_rejects(
            run(
                &wu,
                &preset_with(policy, conn_name),
                Some(&connections()),
                &[],
            ),
            ReasonCode::NetworkPolicyMismatch,
            "work_unit.permissions.network",
        );
    }

    // Contradictions inside the WorkUnit.
    let mut wu = work_unit();
    set(
        &mut wu,
        "permissions.network_allowlist",
        Some(json!(["a.example:443"])),
    );
    assert_rejects(
        run(&wu, &preset(), None, &[]),
        ReasonCode::NetworkAllowlistUnexpected,
        "work_unit.permissions.network_allowlist",
    );
    assert_rejects(
        run(
            &allowlist_wu(json!([])),
            &preset_with("allowlisted", None),
            None,
            &[],
        ),
        ReasonCode::NetworkAllowlistEmpty,
        "work_unit.permissions.network_allowlist",
    );
}

/// A model_only run whose connection names an upstream reaches its model through the
/// credential broker (ADR-0095): it needs no destination, and an empty allowlist lets nothing
/// else out. Control: the same connection without an upstream still needs one.
#[test]
fn brokered_model_only_needs_no_destination() {
    let mut conn = connections();
    conn["connections"]["local-llm"]["destinations"] = json!([]);
    let without = conn.clone();
    conn["connections"]["local-llm"]["upstream"] = json!({
        "base_url": "https://models.example/v1", "methods": ["POST"],
        "path_prefixes": ["/chat/completions"], "credential": "none",
        "budgets": { "calls": 10, "request_bytes": 1048576, "response_bytes": 1048576,
                     "call_seconds": 60, "total_seconds": 600 }
    });
    let admitted = run(
        &allowlist_wu(json!([])),
        &preset_with("model_only", Some("local-llm")),
        Some(&conn),
        &[],
    )
    .expect("a brokered model_only run with no destination is admissible");
    assert!(admitted.policy().network_allowlist().is_empty());
    assert_rejects(
        run(
            &allowlist_wu(json!([])),
            &preset_with("model_only", Some("local-llm")),
            Some(&without),
            &[],
        ),
        ReasonCode::NetworkAllowlistEmpty,
        "work_unit.permissions.network_allowlist",
    );
}

#[test]
fn destinations_parsed_strictly() {
    for bad in [
        "127.1:80",
        "0x7f.0.0.1:80",
        "2130706433:80",
        "a.example",
        "a.example:0",
        "a.example:65536",
        "[::ffff:10.0.0.1]:80",
        "a_b.example:80",
        "*.example:443",
    ] {
        assert_rejects(
            run(
                &allowlist_wu(json!([bad])),
                &preset_with("allowlisted", None),
                None,
                &[],
            ),
            ReasonCode::DestinationInvalid,
            "work_unit.permissions.network_allowlist[0]",
        );
    }
    assert_rejects(
        run(
            &allowlist_wu(json!(["a.example:443", "A.EXAMPLE.:443"])),
            &preset_with("allowlisted", None),
            None,
            &[],
        ),
        ReasonCode::DestinationDuplicate,
        "work_unit.permissions.network_allowlist[1]",
    );
    let mut conn = connections();
    conn["connections"]["local-llm"]["destinations"] = json!(["127.1:11434"]);
    assert_rejects(
        run(
            &allowlist_wu(json!(["127.0.0.2:11434"])),
            &preset_with("model_only", Some("local-llm")),
            Some(&conn),
            &[],
        ),
        ReasonCode::DestinationInvalid,
        "connections.connections.local-llm.destinations[0]",
    );
}

#[test]
fn worker_env_from_caller_mapping_only() {
    // Nothing of the process environment leaks in: only the mapping passed.
    // SAFETY-free check: the test process has PATH set, yet the admitted env is empty.
    assert!(std::env::var_os("PATH").is_some());
    let r = run(&work_unit(), &preset(), None, &[]).unwrap();
    assert!(r.exec().env.is_empty());
    assert_rejects(
        run(&work_unit(), &preset(), None, &[("EDITOR", "vi")]),
        ReasonCode::EnvNotAllowlisted,
        "env.EDITOR",
    );
    for smuggled in [
        "unix:///var/run/docker.sock",
        "tcp://10.0.0.1:2376",
        "/run/user/0/podman/podman.sock",
        "%2fvar%2frun%2fdocker.sock",
    ] {
        assert_rejects(
            run(&work_unit(), &preset(), None, &[("TERM", smuggled)]),
            ReasonCode::EnvContainerSocket,
            "env.TERM",
        );
    }
}

#[test]
fn unknown_fields_are_errors_naming_the_field() {
    for (path, alias) in [("prompt", "do it"), ("goal", "x"), ("title", "y")] {
        let mut wu = work_unit();
        set(&mut wu, path, Some(json!(alias)));
        let err =
            parse_document::<WorkUnit>(serde_json::to_string(&wu).unwrap().as_bytes()).unwrap_err();
        assert_eq!(err.field, path);
    }
    let mut pr = preset();
    set(&mut pr, "shell", Some(json!("/bin/sh")));
    let err =
        parse_document::<AgentPreset>(serde_json::to_string(&pr).unwrap().as_bytes()).unwrap_err();
    assert_eq!(err.field, "shell");
    let mut pr = preset();
    set(
        &mut pr,
        "prompt_transport",
        Some(json!({"kind": "stdin", "path": "/x"})),
    );
    let err =
        parse_document::<AgentPreset>(serde_json::to_string(&pr).unwrap().as_bytes()).unwrap_err();
    assert!(err.field.starts_with("prompt_transport"), "{err}");
}
