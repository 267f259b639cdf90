//! `corral admit` and `corral schema` through the real binary: exit codes, stderr lines that
//! name the file and field, JSON output, every bundled example.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

mod mode;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn corral(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .current_dir(root())
        .env_clear()
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn valid_examples_are_admissible() {
    for (wu, preset, conn) in [
        (
            "examples/work-units/fix-off-by-one.json",
            "examples/presets/offline-agent.json",
            None,
        ),
        (
            "examples/work-units/fetch-crates.json",
            "examples/presets/allowlisted-agent.json",
            None,
        ),
        (
            "examples/work-units/use-local-model.json",
            "examples/presets/local-model-agent.json",
            Some("examples/connections/local-llm.json"),
        ),
    ] {
        let mut args = vec!["admit", "--work-unit", wu, "--preset", preset];
        if let Some(c) = conn {
            args.extend(["--connections", c]);
        }
        let out = corral(&args);
        assert_eq!(out.status.code(), Some(0), "{wu}: {}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("admissible"));
        args.push("--json");
        let out = corral(&args);
        assert_eq!(out.status.code(), Some(0));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["admissible"], true);
        assert!(v["policy_digest"].as_str().unwrap().starts_with("sha256:"));
        assert_eq!(
            v["policy"]["writable_paths"],
            serde_json::from_str::<serde_json::Value>(
                &std::fs::read_to_string(root().join(wu)).unwrap()
            )
            .unwrap()["constraints"]["allowed_paths"]
        );
    }
}

#[test]
fn model_only_without_connections_is_rejected() {
    let out = corral(&[
        "admit",
        "--work-unit",
        "examples/work-units/use-local-model.json",
        "--preset",
        "examples/presets/local-model-agent.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("examples/presets/local-model-agent.json: model_connection:"),
        "{err}"
    );
    assert!(err.contains("[model_connection_missing]"), "{err}");
}

#[test]
fn every_invalid_example_exits_2_naming_file_and_field() {
    for (kind, wu, preset) in [
        (
            "work-unit",
            None,
            Some("examples/presets/offline-agent.json"),
        ),
        (
            "agent-preset",
            Some("examples/work-units/fix-off-by-one.json"),
            None,
        ),
    ] {
        let dir = root().join("examples/invalid").join(kind);
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root())
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            let (w, p) = (
                wu.map_or(rel.clone(), str::to_owned),
                preset.map_or(rel.clone(), str::to_owned),
            );
            let out = corral(&["admit", "--work-unit", &w, "--preset", &p]);
            assert_eq!(out.status.code(), Some(2), "{rel}: {}", stderr(&out));
            let err = stderr(&out);
            let first = err.lines().next().unwrap_or("");
            assert!(
                first.starts_with(&format!("corral: rejected: {rel}: "))
                    || first.starts_with(&format!("corral: {rel}: ")),
                "{rel}: {err}"
            );
            // The field is named right after the file; for the document itself, the
            // position (or "the document" when there is none), never `.` or `?`.
            let after = first.split_once(&format!("{rel}: ")).unwrap().1;
            let field = after.split(':').next().unwrap();
            assert!(
                !field.is_empty() && !field.contains(' ')
                    || field.starts_with("line ")
                    || field == "the document",
                "{rel}: no field in {first:?}"
            );
            assert!(field != "." && field != "?", "{rel}: {first:?}");
            seen += 1;
        }
        assert!(seen >= 5, "{kind}: only {seen} examples");
    }
}

#[test]
fn alias_fields_are_named() {
    let out = corral(&[
        "admit",
        "--work-unit",
        "examples/invalid/work-unit/alias-field-prompt.json",
        "--preset",
        "examples/presets/offline-agent.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("alias-field-prompt.json: prompt: unknown field `prompt`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn malformed_json_reports_line_and_column() {
    let dir = std::env::temp_dir().join(format!("corral-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\n  \"id\": \"x\",\n  oops\n}").unwrap();
    let out = corral(&[
        "admit",
        "--work-unit",
        bad.to_str().unwrap(),
        "--preset",
        "examples/presets/offline-agent.json",
        "--json",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("bad.json: line 3, column 3: key must be a string"),
        "{}",
        stderr(&out)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["admissible"], false);
}

#[test]
fn missing_file_and_all_problems_reported() {
    let out = corral(&[
        "admit",
        "--work-unit",
        "/nonexistent/wu.json",
        "--preset",
        "/nonexistent/p.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(err.contains("/nonexistent/wu.json: cannot read"));
    assert!(err.contains("/nonexistent/p.json: cannot read"));
}

#[test]
fn rejection_lines_one_per_problem() {
    let dir = std::env::temp_dir().join(format!("corral-cli-test2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut wu: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("examples/work-units/fix-off-by-one.json")).unwrap(),
    )
    .unwrap();
    wu["security"]["sandbox_required"] = false.into();
    wu["permissions"]["network"] = "unrestricted".into();
    wu["budget"]["disk_bytes"] = 0.into();
    let path = dir.join("wu.json");
    std::fs::write(&path, wu.to_string()).unwrap();
    let out = corral(&[
        "admit",
        "--work-unit",
        path.to_str().unwrap(),
        "--preset",
        "examples/presets/offline-agent.json",
        "--json",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 3, "{err}");
    for needle in [
        "security.sandbox_required:",
        "permissions.network:",
        "budget.disk_bytes:",
    ] {
        assert!(err.contains(needle), "{needle} missing: {err}");
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let codes: Vec<&str> = v["rejections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "sandbox_not_required",
            "budget_not_positive",
            "network_unrestricted"
        ]
    );
}

#[test]
fn schema_command_prints_committed_schemas() {
    for name in [
        "work-unit",
        "agent-preset",
        "connections",
        "result-manifest",
        "probe-report",
        "admission-report",
        "verify-report",
    ] {
        let out = corral(&["schema", name]);
        assert_eq!(out.status.code(), Some(0));
        let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let committed: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(root().join(format!("schemas/{name}.schema.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(printed, committed, "{name}");
    }
    let out = corral(&["schema", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let out = corral(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `CORRAL_WITHDRAW_CAPABILITY` can only take a capability away (the probe then reports it
/// missing and exits 3); an unknown name is bad input, never ignored. Positive control: the
/// same probe without it attests all nine (this host; CI is root).
#[test]
fn withdrawn_capability_is_reported_missing_and_unknown_names_are_refused() {
    let probe = |withdraw: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_corral"));
        c.args(["probe", "--json"])
            .env_remove("CORRAL_WITHDRAW_CAPABILITY");
        if let Some(w) = withdraw {
            c.env("CORRAL_WITHDRAW_CAPABILITY", w);
        }
        c.output().unwrap()
    };
    let all = probe(None);
    assert_eq!(all.status.code(), Some(0), "{}", stderr(&all));
    let o = probe(Some("memory_limit,network_enforcement"));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    // Both reports are exactly the type `corral schema probe-report` is generated from.
    for out in [&all, &o] {
        let typed: corral_contract::ProbeReportDocument =
            serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(typed.all_enforced, out.status.code() == Some(0));
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for (cap, enforced) in [
        ("memory_limit", false),
        ("network_enforcement", false),
        ("cpu_limit", true),
    ] {
        assert_eq!(
            v["capabilities"][cap]["enforced"],
            serde_json::json!(enforced),
            "{cap}: {v}"
        );
    }
    let bad = probe(Some("memory_limit,no_such_capability"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("no_such_capability"),
        "{}",
        stderr(&bad)
    );
    assert!(bad.stdout.is_empty());
}

/// Every command that prints data, its stdout a pipe nobody reads (closed before corral
/// starts): a quiet end of output with the command's contract code, never a panic (101).
#[test]
fn a_closed_stdout_pipe_is_a_quiet_exit_with_the_contract_code() {
    let wu = "examples/work-units/fix-off-by-one.json";
    let preset = "examples/presets/offline-agent.json";
    let cases: [(&[&str], &[i32]); 6] = [
        (&["admit", "--work-unit", wu, "--preset", preset], &[0]),
        (
            &["admit", "--work-unit", wu, "--preset", preset, "--json"],
            &[0],
        ),
        (&["schema", "work-unit"], &[0]),
        // Root attests the capabilities (0); anyone else is told what is missing (3).
        (&["probe"], &[0, 3]),
        (&["probe", "--json"], &[0, 3]),
        (&["cache", "ls"], &[0]),
    ];
    for (args, codes) in cases {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let home = std::env::temp_dir().join(format!("corral-epipe-{}", std::process::id()));
        let out = Command::new(env!("CARGO_BIN_EXE_corral"))
            .args(args)
            .current_dir(root())
            .env_clear()
            .env("HOME", &home)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&home);
        let err = stderr(&out);
        assert!(
            out.status.code().is_some_and(|c| codes.contains(&c)),
            "{args:?}: {:?}: {err}",
            out.status
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// `--env =x` has no name: the same bad-input line as `--env x` (exit 2).
#[test]
fn env_without_a_name_is_bad_input() {
    for bad in ["=x", "x"] {
        let out = corral(&[
            "run",
            "--work-unit",
            "examples/work-units/fix-off-by-one.json",
            "--preset",
            "examples/presets/offline-agent.json",
            "--repo",
            ".",
            "--env",
            bad,
        ]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("expected NAME=VALUE"),
            "{bad}: {}",
            stderr(&out)
        );
    }
}

/// Help says what users need: the exit codes in every command's help, the schema names, and
/// that `export oci` takes one WorkUnit.
#[test]
fn help_lists_exit_codes_schema_names_and_oci_arity() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["verify", "--help"],
        &["probe", "--help"],
        &["export", "oci", "--help"],
        &["cache", "gc", "--help"],
    ] {
        let out = corral(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Exit codes: 0 success") && text.contains("3 a sandbox capability"),
            "{args:?}: {text}"
        );
    }
    let text = String::from_utf8_lossy(&corral(&["schema", "--help"]).stdout).into_owned();
    for name in [
        "work-unit",
        "agent-preset",
        "connections",
        "result-manifest",
        "probe-report",
        "admission-report",
        "verify-report",
    ] {
        assert!(text.contains(name), "{text}");
    }
    let text = String::from_utf8_lossy(&corral(&["export", "oci", "--help"]).stdout).into_owned();
    assert!(text.contains("`oci` takes exactly one"), "{text}");
}

#[test]
fn a_work_unit_written_as_an_array_is_bad_input() {
    let dir = std::env::temp_dir().join(format!("corral-cli-array-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text =
        std::fs::read_to_string(root().join("examples/work-units/fix-off-by-one.json")).unwrap();
    // Control: the bundled example, as written, is admissible.
    let good = dir.join("good.json");
    std::fs::write(&good, &text).unwrap();
    // The same values by position, as serde's sequence form of a struct would bind them.
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let order = [
        "schema_version",
        "id",
        "objective",
        "repository",
        "security",
        "permissions",
        "budget",
        "constraints",
    ];
    let seq: Vec<serde_json::Value> = order.iter().map(|k| v[*k].clone()).collect();
    let bad = dir.join("wu.json");
    std::fs::write(&bad, serde_json::to_string(&seq).unwrap()).unwrap();
    let preset = "examples/presets/offline-agent.json";
    let ok = corral(&[
        "admit",
        "--work-unit",
        good.to_str().unwrap(),
        "--preset",
        preset,
    ]);
    let out = corral(&[
        "admit",
        "--work-unit",
        bad.to_str().unwrap(),
        "--preset",
        preset,
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "wu.json: the document: expected a JSON object with named fields, found an array"
        ),
        "{}",
        stderr(&out)
    );
}

#[test]
fn verify_spells_a_position_as_the_other_commands_do() {
    let dir = std::env::temp_dir().join(format!("corral-cli-verify-pos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("m.json");
    std::fs::write(&bad, "{\n  oops\n}").unwrap();
    let out = corral(&[
        "verify",
        bad.to_str().unwrap(),
        "--artifacts",
        dir.to_str().unwrap(),
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("line 2, column 3: key must be a string"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains(" at line "), "{}", stderr(&out));
}

/// `corral` as an ordinary user (uid 65534 through setpriv; the binary copied where that
/// user may run it): `probe` says the one cause once, in one line with what to do, and
/// describes no enforcement that never ran; `demo` exits 3 like `probe`. Control: as root
/// the probe lists the nine capabilities, each with its enforcement.
#[test]
fn an_ordinary_user_is_told_once_what_is_missing() {
    use std::os::unix::fs::PermissionsExt as _;
    if !mode::is_root() {
        // Run by an ordinary user (the guests' rootless runs, ADR-0080): it cannot become
        // another user, and a host that delegates it a cgroup lacks nothing: the probe names
        // rootless mode and attests all nine.
        let out = Command::new(env!("CARGO_BIN_EXE_corral"))
            .arg("probe")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
        assert!(
            text.lines()
                .any(|l| l.starts_with("mode: rootless (corral runs as uid ")),
            "{text}"
        );
        assert_eq!(
            text.lines().filter(|l| l.starts_with("enforced")).count(),
            9,
            "{text}"
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("corral-cli-nonroot-{}", std::process::id()));
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.join("corral");
    std::fs::copy(env!("CARGO_BIN_EXE_corral"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let chown = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&home)
        .status()
        .unwrap();
    assert!(chown.success());
    let as_nobody = |args: &[&str]| -> Output {
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                "--",
            ])
            .arg(&bin)
            .args(args)
            .current_dir(&dir)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("setpriv (util-linux) is required: scripts/setup.sh installs it")
    };
    let probe = as_nobody(&["probe"]);
    let demo = as_nobody(&["demo"]);
    // The control keeps the test's own environment: corral's cache folder (XDG_CACHE_HOME)
    // must be on a file system with idmapped mounts (a guest's root is not).
    let root = Command::new(&bin).arg("probe").output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&probe.stdout).into_owned();
    assert_eq!(probe.status.code(), Some(3), "{text}{}", stderr(&probe));
    let missing: Vec<&str> = text.lines().filter(|l| l.contains("MISSING")).collect();
    assert_eq!(missing.len(), 1, "{text}");
    assert!(missing[0].contains("all nine capabilities"), "{text}");
    assert!(missing[0].contains("effective uid 65534"), "{text}");
    assert!(missing[0].contains("run corral as root"), "{text}");
    // What the host lacks for rootless mode (ADR-0080): no host of ours delegates a cgroup
    // to uid 65534. This one mounts cgroup v1 controllers; in a pure v2 guest corral's cgroup
    // belongs to root, and uid 65534 has no systemd user manager to ask for one. (The mode
    // itself runs in the guests' tests/guest/user-manager.sh.)
    assert!(
        missing[0].contains("rootless mode cannot start: this host lacks:"),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with(
            "mode: none: corral runs as uid 65534, and rootless mode cannot start: this host \
             lacks:"
        )),
        "{text}"
    );
    let v1 = std::fs::read_to_string("/proc/self/cgroup")
        .unwrap()
        .lines()
        .any(|l| !l.starts_with("0::") && !l.contains(":name="));
    let lacks = if v1 {
        "this host mounts cgroup v1 controllers"
    } else {
        "belongs to uid 0, not to uid 65534 (not delegated)"
    };
    assert!(missing[0].contains(lacks), "{lacks}: {text}");
    // Nothing describes enforcement that never ran.
    for claim in ["own PID namespace", "Landlock ABI", "charged to the run"] {
        assert!(!text.contains(claim), "{claim}: {text}");
    }
    assert_eq!(
        demo.status.code(),
        Some(3),
        "{}{}",
        String::from_utf8_lossy(&demo.stdout),
        stderr(&demo)
    );
    // Control: as root, nine lines, each with what enforces it.
    let text = String::from_utf8_lossy(&root.stdout).into_owned();
    assert_eq!(root.status.code(), Some(0), "{text}");
    assert!(
        text.lines()
            .any(|l| l == "mode: root (corral runs as uid 0)"),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("enforced")).count(),
        9,
        "{text}"
    );
    assert!(text.contains("own PID namespace"), "{text}");
}

/// `admit --json` has the same keys whatever the decision: admitted, rejected, or a file that
/// does not parse.
#[test]
fn admit_json_has_the_same_keys_whatever_the_decision() {
    let keys = |out: &Output| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["schema_version"], "corral.admission-report/v1", "{v}");
        // Exactly the type `corral schema admission-report` is generated from.
        let _: corral_contract::AdmissionReport = serde_json::from_value(v.clone()).unwrap();
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let preset = "examples/presets/offline-agent.json";
    let ok = corral(&[
        "admit",
        "--json",
        "--work-unit",
        "examples/work-units/fix-off-by-one.json",
        "--preset",
        preset,
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    let rejected = corral(&[
        "admit",
        "--json",
        "--work-unit",
        "examples/invalid/work-unit/zero-budget.json",
        "--preset",
        preset,
    ]);
    let missing = corral(&[
        "admit",
        "--json",
        "--work-unit",
        "/nonexistent/wu.json",
        "--preset",
        preset,
    ]);
    assert_eq!(rejected.status.code(), Some(2));
    let r: serde_json::Value = serde_json::from_slice(&rejected.stdout).unwrap();
    assert!(!r["rejections"].as_array().unwrap().is_empty(), "{r}");
    assert_eq!(missing.status.code(), Some(2));
    let want = keys(&ok);
    assert!(want.contains(&"policy".to_owned()), "{want:?}");
    assert_eq!(keys(&rejected), want);
    assert_eq!(keys(&missing), want);
}

/// corral as uid 0 of a user namespace it did not make (`unshare -r`, as in a rootless
/// container): root mode needs the host's root, so the probe refuses in one line naming the
/// namespace and the fix, and claims no mode (ADR-0080). Before, it called itself root mode
/// and every capability failed on "home owner: Invalid argument". Control: the same probe
/// outside the namespace names a mode and no such line.
#[test]
fn uid_0_of_a_foreign_user_namespace_is_refused_naming_it() {
    let out = Command::new("unshare")
        .args(["-r", "--"])
        .arg(env!("CARGO_BIN_EXE_corral"))
        .arg("probe")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("unshare (util-linux) is required: scripts/setup.sh installs it");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(3), "{text}{}", stderr(&out));
    let missing: Vec<&str> = text.lines().filter(|l| l.contains("MISSING")).collect();
    assert_eq!(missing.len(), 1, "{text}");
    assert!(
        missing[0].contains("corral runs as uid 0 of a user namespace it did not make")
            && missing[0].contains("run corral outside that namespace"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("mode: none: corral runs as uid 0 of a user namespace")),
        "{text}"
    );
    assert!(!text.contains("home owner"), "{text}");
    let outside = Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("probe")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&outside.stdout).into_owned();
    assert!(
        text.lines()
            .any(|l| l.starts_with("mode: root (") || l.starts_with("mode: rootless (")),
        "{text}"
    );
    assert!(!text.contains("a user namespace it did not make"), "{text}");
}
