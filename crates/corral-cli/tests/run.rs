//! `corral run` and `corral verify` end to end, through the real Linux sandbox (root; CI runs
//! as root). Each test builds its own repository and store in a temporary folder.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

mod common;
mod mode;
use common::{Fixture, clone_repo, fixture, git, run_command, wait_until, work_unit};

fn shell_preset(script: &str) -> Value {
    json!({
        "schema_version": "corral.agent-preset/v1", "id": "sh", "executable": "/bin/sh",
        "argv": ["-c", script], "prompt_transport": { "kind": "stdin" }, "model_connection": null,
        "env_allowlist": ["LANG"], "network_policy": "disabled", "read_only_paths": [],
        "authority": "candidate_only"
    })
}

fn corral(f: &Fixture, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(args)
        .env_clear()
        .env("HOME", f.dir.join("home"))
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap()
}

/// Runs with these documents; returns (exit code, manifest or Null, stderr).
fn run(f: &Fixture, wu: &Value, preset: &Value, extra: &[&str]) -> (i32, Value, String) {
    let wu_path = f.dir.join("wu.json");
    let pr_path = f.dir.join("preset.json");
    std::fs::write(&wu_path, wu.to_string()).unwrap();
    std::fs::write(&pr_path, preset.to_string()).unwrap();
    let artifacts = f.dir.join("artifacts");
    let mut args = vec![
        "run",
        "--work-unit",
        wu_path.to_str().unwrap(),
        "--preset",
        pr_path.to_str().unwrap(),
        "--repo",
        f.repo.to_str().unwrap(),
        "--artifacts",
        artifacts.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = corral(f, &args);
    let manifest = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        manifest,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes the standard WorkUnit and a shell preset running `script`; returns their paths.
fn documents(f: &Fixture, script: &str) -> (PathBuf, PathBuf) {
    let wu_path = f.dir.join("wu.json");
    let pr_path = f.dir.join("preset.json");
    std::fs::write(&wu_path, work_unit(f, 30, 10, 128 << 20).to_string()).unwrap();
    std::fs::write(&pr_path, shell_preset(script).to_string()).unwrap();
    (wu_path, pr_path)
}

/// `corral run` with these documents, repository and store, in a clean environment.
fn repo_snapshot(f: &Fixture) -> String {
    let status = git(&f.repo, &["status", "--porcelain", "--ignored", "-uall"]);
    let refs = git(&f.repo, &["for-each-ref"]);
    let head = git(&f.repo, &["rev-parse", "HEAD"]);
    let objects = git(&f.repo, &["count-objects", "-v"]);
    format!("{status}|{refs}|{head}|{objects}")
}

/// A worker that exits 0 and changes nothing has no candidate: `candidate_rejected` with
/// `empty_candidate` and `candidate: null` (CONTRACT.md), exit 1 and one stderr line.
/// Control: the same worker writing one file is captured.
#[test]
fn exit_0_with_no_change_is_an_empty_candidate() {
    let f = fixture("empty");
    let wu = work_unit(&f, 30, 10, 128 << 20);
    let (code, m, err) = run(&f, &wu, &shell_preset("cat >/dev/null; echo nothing"), &[]);
    assert_eq!(code, 1, "{err} {m}");
    assert_eq!(m["outcome"], "candidate_rejected", "{m}");
    assert_eq!(m["candidate"], Value::Null, "{m}");
    assert_eq!(m["rejections"][0]["code"], "empty_candidate", "{m}");
    assert_eq!(m["rejections"].as_array().map(Vec::len), Some(1), "{m}");
    assert!(
        err.contains("corral: candidate_rejected: ") && err.contains("[empty_candidate]"),
        "{err}"
    );
    let (code, m, err) = run(
        &f,
        &wu,
        &shell_preset("cat >/dev/null; echo x > src/x.txt"),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(m["outcome"], "candidate_captured", "{m}");
}

/// Preset-owned configuration reaches the worker: fixed env values, and HOME files (inline,
/// and read from a file beside the preset), owned by the worker, private, in the sandbox's
/// own HOME. The worker checks each and writes a candidate only when all hold; the same
/// worker under a preset without them fails (the control).
#[test]
fn preset_env_and_home_files_reach_the_worker() {
    let f = fixture("presetcfg");
    std::fs::write(f.dir.join("codex.toml"), "model = \"local\"\n").unwrap();
    let script = r#"cat >/dev/null
set -e
test "$MSWEA_COST_TRACKING" = ignore_errors
test "$(cat "$HOME/.codex/config.toml")" = 'model = "local"'
test "$(cat "$HOME/.gemini/settings.json")" = '{"security":{}}'
test "$(stat -c '%u %a' "$HOME/.codex/config.toml")" = "$(id -u) 600"
test "$(stat -c '%u %a' "$HOME/.codex")" = "$(id -u) 700"
echo "$HOME" > src/home.txt"#;
    let mut pr = shell_preset(script);
    pr["env"] = json!({ "MSWEA_COST_TRACKING": "ignore_errors" });
    pr["home_files"] = json!([
        { "path": ".codex/config.toml", "source": "codex.toml" },
        { "path": ".gemini/settings.json", "content": "{\"security\":{}}" }
    ]);
    let wu = work_unit(&f, 30, 10, 128 << 20);
    let (code, m, err) = run(&f, &wu, &pr, &[]);
    assert_eq!(code, 0, "{err} {m}");
    assert_eq!(m["outcome"], "candidate_captured", "{m}");
    // Control: the same worker without the preset's configuration fails its checks.
    let (code, m, err) = run(&f, &wu, &shell_preset(script), &[]);
    assert_eq!(code, 1, "{err} {m}");
    assert_eq!(m["execution"]["termination"], "exited", "{m}");
    assert_ne!(m["execution"]["exit_code"], 0, "{m}");
    // A source that is not beside the preset is refused before anything runs, naming it.
    pr["home_files"][0]["source"] = json!("missing.toml");
    let (code, _, err) = run(&f, &wu, &pr, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("preset.home_files[0].source") && err.contains("missing.toml"),
        "{err}"
    );
}

/// The cap the manifest records is the lower of WorkUnit and preset, and never more than the
/// host has (a budget is a ceiling: asking for 64 CPUs on a smaller host gets the host's).
/// That the kernel holds the tree to it is RES-CPU-01's run 3.
#[test]
fn the_cpu_cap_applied_is_recorded() {
    let f = fixture("cpucap");
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    for (wu_cap, pr_cap, want) in [
        (Some(700), Some(400), 400),
        (Some(300), None, 300),
        (Some(64_000), None, cpus * 1000),
    ] {
        let mut wu = work_unit(&f, 30, 10, 128 << 20);
        wu["budget"]["cpu_millicores"] = json!(wu_cap);
        let mut pr = shell_preset("echo x > src/x.txt");
        if let Some(c) = pr_cap {
            pr["cpu_millicores"] = json!(c);
        }
        let (code, m, err) = run(&f, &wu, &pr, &[]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            m["execution"]["cpu_cap_millicores"], want,
            "{wu_cap:?} {pr_cap:?}: {m}"
        );
    }
}

#[test]
fn captured_candidate_exit_0_and_verify() {
    let f = fixture("ok");
    let before = repo_snapshot(&f);
    let (code, m, err) = run(
        &f,
        &work_unit(&f, 30, 10, 128 << 20),
        &shell_preset(
            "echo changed >> src/app.py; echo new > src/new.txt; cat >/dev/null; echo done",
        ),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(m["outcome"], "candidate_captured");
    assert_eq!(m["execution"]["termination"], "exited");
    // No cpu_millicores anywhere: every CPU this host lets corral use (not all but one).
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    assert_eq!(m["execution"]["cpu_cap_millicores"], cpus * 1000, "{m}");
    assert_eq!(
        m["authority"],
        json!({"verification": false, "merge": false})
    );
    let changed: Vec<&str> = m["candidate"]["changed_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["src/app.py", "src/new.txt"]);
    assert_eq!(m["logs"]["stdout"]["bytes"], 5);
    // The canonical repository is untouched.
    assert_eq!(repo_snapshot(&f), before);
    // The patch applies to a clean checkout of the base and reproduces the worker's files.
    let patch_digest = m["candidate"]["patch"]["digest"]
        .as_str()
        .unwrap()
        .strip_prefix("sha256:")
        .unwrap()
        .to_owned();
    let patch = f.dir.join("artifacts/sha256").join(&patch_digest);
    let clone = clone_repo(&f);
    git(&clone, &["apply", "--binary", patch.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(clone.join("src/app.py")).unwrap(),
        "print('hi')\nchanged\n"
    );
    assert_eq!(
        std::fs::read_to_string(clone.join("src/new.txt")).unwrap(),
        "new\n"
    );
    // corral verify: intact, then tampered, then missing.
    let manifest_path = f.dir.join("artifacts/sha256").join(
        Command::new("sha256sum")
            .arg("-")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map(|mut c| {
                use std::io::Write;
                c.stdin
                    .take()
                    .unwrap()
                    .write_all(serde_json::to_string(&m).unwrap().as_bytes())
                    .unwrap();
                String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()[..64].to_owned()
            })
            .unwrap(),
    );
    assert!(
        manifest_path.is_file(),
        "manifest not stored under its digest"
    );
    let v = corral(&f, &["verify", manifest_path.to_str().unwrap()]);
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stderr)
    );
    let log = f.dir.join("artifacts/sha256").join(
        m["logs"]["stdout"]["digest"]
            .as_str()
            .unwrap()
            .strip_prefix("sha256:")
            .unwrap(),
    );
    std::fs::set_permissions(&log, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    std::fs::write(&log, "tampered\n").unwrap();
    assert_eq!(
        corral(&f, &["verify", manifest_path.to_str().unwrap()])
            .status
            .code(),
        Some(1)
    );
    std::fs::remove_file(&log).unwrap();
    assert_eq!(
        corral(&f, &["verify", manifest_path.to_str().unwrap()])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn scope_violation_rejects_candidate_exit_1() {
    let f = fixture("rej");
    let (code, m, err) = run(
        &f,
        &work_unit(&f, 30, 10, 128 << 20),
        &shell_preset("echo k > src/key.pem; echo ok > src/ok.txt"),
        &[],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(m["outcome"], "candidate_rejected");
    assert_eq!(m["candidate"], Value::Null);
    let codes: Vec<&str> = m["rejections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"path_forbidden"), "{codes:?}");
}

#[test]
fn writes_outside_scope_fail_inside_the_sandbox() {
    let f = fixture("ro");
    let (code, m, _) = run(
        &f,
        &work_unit(&f, 30, 10, 128 << 20),
        &shell_preset("echo evil > .github/ci.yml"),
        &[],
    );
    assert_eq!(code, 1);
    assert_eq!(m["outcome"], "attempt_failed");
    assert_ne!(m["execution"]["exit_code"], 0);
    assert!(std::fs::read_to_string(f.repo.join(".github/ci.yml")).unwrap() == "on: push\n");
}

#[test]
fn failed_attempts_exit_1_with_their_termination() {
    let f = fixture("fail");
    // The last column: the one stderr line that says what ended the attempt.
    let cases: Vec<(Value, &str, &str, &str)> = vec![
        (
            work_unit(&f, 30, 10, 128 << 20),
            "exit 3",
            "exited",
            "attempt_failed: the worker exited 3 after ",
        ),
        (
            work_unit(&f, 1, 10, 128 << 20),
            "sleep 30",
            "wall_timeout",
            "attempt_failed: wall_timeout after ",
        ),
        (
            work_unit(&f, 30, 1, 128 << 20),
            "while :; do :; done",
            "cpu_limit",
            "attempt_failed: cpu_limit after ",
        ),
        (
            work_unit(&f, 30, 10, 32 << 20),
            "head -c 200000000 /dev/zero > /dev/shm/fill; tail /dev/zero",
            "memory_limit",
            "attempt_failed: memory_limit: peak ",
        ),
        (
            work_unit(&f, 30, 10, 128 << 20),
            "kill -9 $$",
            "signaled",
            "attempt_failed: the worker was killed by signal 9 after ",
        ),
    ];
    for (wu, script, termination, said) in cases {
        let (code, m, err) = run(&f, &wu, &shell_preset(script), &[]);
        assert_eq!(code, 1, "{script}: {err}");
        assert_eq!(m["outcome"], "attempt_failed", "{script}");
        assert_eq!(m["execution"]["termination"], termination, "{script}: {m}");
        assert_eq!(m["authority"]["merge"], false);
        let line = err
            .lines()
            .find(|l| l.starts_with("corral: attempt_failed: "))
            .unwrap_or_else(|| panic!("{script}: no attempt_failed line on stderr: {err}"));
        assert!(
            line.starts_with(&format!("corral: {said}")),
            "{script}: {line}"
        );
    }
    // The wall budget is named with what was used.
    let (_, _, err) = run(
        &f,
        &work_unit(&f, 1, 10, 128 << 20),
        &shell_preset("sleep 30"),
        &[],
    );
    assert!(err.contains(" s of 1 s"), "{err}");
}

#[test]
fn admission_rejections_and_bad_input_exit_2_without_manifest() {
    let f = fixture("bad");
    let mut wu = work_unit(&f, 30, 10, 128 << 20);
    wu["permissions"]["network"] = json!("unrestricted");
    let (code, m, err) = run(&f, &wu, &shell_preset("true"), &[]);
    assert_eq!((code, m), (2, Value::Null));
    assert!(
        err.contains("permissions.network") && err.contains("[network_unrestricted]"),
        "{err}"
    );
    // Not a git repository.
    let wu = work_unit(&f, 30, 10, 128 << 20);
    let wu_path = f.dir.join("wu2.json");
    std::fs::write(&wu_path, wu.to_string()).unwrap();
    let pr_path = f.dir.join("p2.json");
    std::fs::write(&pr_path, shell_preset("true").to_string()).unwrap();
    let out = corral(
        &f,
        &[
            "run",
            "--work-unit",
            wu_path.to_str().unwrap(),
            "--preset",
            pr_path.to_str().unwrap(),
            "--repo",
            f.dir.to_str().unwrap(),
            "--artifacts",
            f.dir.join("a2").to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !f.dir.join("a2/sha256").exists()
            || std::fs::read_dir(f.dir.join("a2/sha256")).unwrap().count() == 0
    );
    // A --repo that is not a Git repository: one line naming the flag, without the capture
    // crate's jargon.
    let not_git = f.dir.join("not-git");
    std::fs::create_dir_all(&not_git).unwrap();
    let out = run_command(&f, &wu_path, &pr_path, &not_git, &f.dir.join("a3"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.starts_with(&format!(
            "corral: --repo {}: not a Git repository",
            not_git.display()
        )),
        "{said}"
    );
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(!said.contains("capture setup"), "{said}");
    // A base SHA that is not in the repository.
    let mut wu = work_unit(&f, 30, 10, 128 << 20);
    wu["repository"]["base_sha"] = json!("1".repeat(40));
    let (code, _, err) = run(&f, &wu, &shell_preset("true"), &[]);
    assert_eq!(code, 2, "{err}");
    // The file and the field, as for every other bad WorkUnit value.
    let wu_file = f.dir.join("wu.json");
    assert!(
        err.starts_with(&format!(
            "corral: {}: repository.base_sha: {} is not a commit of the repository",
            wu_file.display(),
            "1".repeat(40)
        )),
        "{err}"
    );
    // --env that the preset does not allow, and a malformed --env.
    let (code, _, err) = run(
        &f,
        &work_unit(&f, 30, 10, 128 << 20),
        &shell_preset("true"),
        &["--env", "EDITOR=vi"],
    );
    assert_eq!(code, 2, "{err}");
    let (code, _, _) = run(
        &f,
        &work_unit(&f, 30, 10, 128 << 20),
        &shell_preset("true"),
        &["--env", "LANG"],
    );
    assert_eq!(code, 2);
}

#[test]
fn environment_is_exactly_the_admitted_one() {
    let f = fixture("env");
    let (code, m, err) = run(
        &f,
        &work_unit(&f, 30, 10, 128 << 20),
        &shell_preset("env | sort > src/env.txt"),
        &["--env", "LANG=C.UTF-8"],
    );
    assert_eq!(code, 0, "{err}");
    let patch_digest = m["candidate"]["patch"]["digest"]
        .as_str()
        .unwrap()
        .strip_prefix("sha256:")
        .unwrap()
        .to_owned();
    let patch = std::fs::read_to_string(f.dir.join("artifacts/sha256").join(patch_digest)).unwrap();
    let names: Vec<&str> = patch
        .lines()
        .filter_map(|l| l.strip_prefix('+'))
        .filter(|l| !l.starts_with("++"))
        .filter_map(|l| l.split('=').next())
        .collect();
    for n in &names {
        assert!(
            ["HOME", "LANG", "PATH", "PWD", "SHLVL", "TMPDIR", "_"].contains(n),
            "unexpected variable {n} in {names:?}"
        );
    }
    assert!(names.contains(&"LANG"));
}

#[test]
fn provider_version_drift_refused_before_start() {
    let f = fixture("drift");
    let mut preset = shell_preset("touch src/ran");
    preset["executable_sha256"] = json!(format!("sha256:{}", "0".repeat(64)));
    let (code, m, err) = run(&f, &work_unit(&f, 30, 10, 128 << 20), &preset, &[]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(m["execution"]["termination"], "not_started");
    assert_eq!(m["execution"]["cpu_cap_millicores"], Value::Null, "{m}");
    assert_eq!(m["rejections"][0]["code"], "executable_digest_mismatch");
    // The manifest records the digest of the bytes that were found (symlinks followed).
    let real = Command::new("sha256sum").arg("/bin/sh").output().unwrap();
    let hex = String::from_utf8_lossy(&real.stdout)[..64].to_owned();
    assert_eq!(m["executable"]["digest"], format!("sha256:{hex}"));
}

#[test]
fn a_linked_executable_runs_as_installed_and_a_link_corral_cannot_show_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let f = fixture("linked-exe");
    // As npm and pip install agents: a link in a bin folder to the file in its package.
    let script = "#!/bin/sh\necho \"$0\" > src/ran-as\n";
    std::fs::create_dir_all(f.dir.join("pkg/bin")).unwrap();
    std::fs::create_dir_all(f.dir.join("bin")).unwrap();
    let real = f.dir.join("pkg/bin/agent");
    std::fs::write(&real, script).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("../pkg/bin/agent", f.dir.join("bin/agent")).unwrap();
    let mut preset = shell_preset("");
    preset["executable"] = json!(f.dir.join("bin/agent"));
    preset["argv"] = json!([]);
    let (code, m, err) = run(&f, &work_unit(&f, 30, 10, 128 << 20), &preset, &[]);
    assert_eq!(code, 0, "{err} {m}");
    assert_eq!(m["executable"]["path"], json!(f.dir.join("bin/agent")));
    let sha = Command::new("sha256sum").arg(&real).output().unwrap();
    let hex = String::from_utf8_lossy(&sha.stdout)[..64].to_owned();
    assert_eq!(m["executable"]["digest"], format!("sha256:{hex}"));
    assert_eq!(m["candidate"]["changed_paths"][0]["path"], "src/ran-as");
    // A link to what the sandbox cannot show: refused before start, one line naming both.
    std::os::unix::fs::symlink("/proc/self/status", f.dir.join("bin/status")).unwrap();
    preset["executable"] = json!(f.dir.join("bin/status"));
    let (code, m, err) = run(&f, &work_unit(&f, 30, 10, 128 << 20), &preset, &[]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(m, Value::Null, "nothing recorded");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&f.dir.join("bin/status").display().to_string()) && err.contains("/proc/"),
        "{err}"
    );
}

/// Starts `corral run --json` in the background with `script` as the agent.
fn spawn_run(f: &Fixture, script: &str) -> std::process::Child {
    let wu_path = f.dir.join("wu.json");
    let pr_path = f.dir.join("preset.json");
    std::fs::write(&wu_path, work_unit(f, 60, 30, 128 << 20).to_string()).unwrap();
    std::fs::write(&pr_path, shell_preset(script).to_string()).unwrap();
    Command::new(env!("CARGO_BIN_EXE_corral"))
        .args([
            "run",
            "--work-unit",
            wu_path.to_str().unwrap(),
            "--preset",
            pr_path.to_str().unwrap(),
            "--repo",
            f.repo.to_str().unwrap(),
            "--artifacts",
            f.dir.join("artifacts").to_str().unwrap(),
            "--json",
        ])
        .env_clear()
        .env("HOME", f.dir.join("home"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether a process whose whole command line is `cmdline` exists. Whole, not a part: a
/// login session's shell beside the test (`sleep 100000` in the guests' `systemd-session`
/// layout) contains `sleep 1000`, and was taken for the sandbox's sleepers.
fn running(cmdline: &str) -> bool {
    let out = Command::new("pgrep")
        .args(["-x", "-f", cmdline])
        .output()
        .unwrap();
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

#[test]
fn cancellation_kills_everything_and_records_cancelled() {
    let f = fixture("cancel");
    let child = spawn_run(&f, "sleep 1000 & sleep 1000 & wait");
    let t = std::time::Instant::now();
    while !running("sleep 1000") {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "the sandbox never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["execution"]["termination"], "cancelled");
    assert!(!running("sleep 1000"), "sleepers survived");
}

fn cgroup_dirs(prefix: &str) -> Vec<String> {
    let out = Command::new("find")
        .args([
            "/sys/fs/cgroup",
            "-maxdepth",
            "6",
            "-type",
            "d",
            "-name",
            &format!("{prefix}*"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The groups of corral `pid` that still hold a process, with what they hold.
fn groups_held(pid: u32) -> Vec<(String, String)> {
    cgroup_dirs(&format!("corral-{pid}-"))
        .into_iter()
        .filter_map(|g| {
            let procs = std::fs::read_to_string(format!("{g}/cgroup.procs")).unwrap_or_default();
            (!procs.trim().is_empty()).then(|| (g, procs.trim().to_owned()))
        })
        .collect()
}

/// The pid of corral `pid`'s reaper (ADR-0092), its child running `__corral-reaper`.
fn reaper_of(pid: u32) -> u32 {
    let out = Command::new("pgrep")
        .args(["-P", &pid.to_string(), "-f", "__corral-reaper"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let pids: Vec<u32> = text
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 1, "corral {pid} has no single reaper: {text:?}");
    pids[0]
}

/// Whether `pid` has exited (gone, or a zombie its new parent has not reaped yet).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Waits until the sandbox's sleepers of `cmdline` run; returns corral's pid.
fn wait_running(child: &std::process::Child, cmdline: &str) -> u32 {
    let t = std::time::Instant::now();
    while !running(cmdline) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "the sandbox never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.id()
}

/// What corral `pid` could leave in the fixture's cache and store, or the temporary directory.
fn leftovers_of(f: &Fixture, pid: u32) -> Vec<String> {
    let cache = f.dir.join("home/.cache/corral");
    let mut left = Vec::new();
    for (dir, pick) in [
        (cache.join("tmp"), format!("-{pid}-")),
        (cache.join("base"), format!(".tmp-{pid}")),
        (cache.join("executables"), format!(".{pid}")),
        (cache.clone(), format!("-{pid}-")),
        (f.dir.join("artifacts/sha256"), format!("-{pid}-")),
        (std::env::temp_dir(), format!("corral-capture-{pid}-")),
    ] {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.contains(&pick) {
                left.push(e.path().display().to_string());
            }
        }
    }
    left.extend(cgroup_dirs(&format!("corral-{pid}-")));
    left
}

/// PROC-04 (b) and issue 17: `kill -9` of the supervisor takes every sandbox process with it
/// (init has PR_SET_PDEATHSIG), and its reaper removes its groups at once, without waiting for
/// another corral (ADR-0092). Control: with the reaper killed first, the groups stay (the
/// check sees them) until the next corral collects them.
#[test]
fn supervisor_killed_takes_the_sandbox_with_it_and_its_reaper_leaves_nothing() {
    let f = fixture("kill9");
    let mut child = spawn_run(&f, "sleep 1001 & sleep 1001 & wait");
    let pid = wait_running(&child, "sleep 1001");
    let reaper = reaper_of(pid);
    // An OOM kill is a SIGKILL too; the killer never picks the reaper where it may lower its
    // score (CAP_SYS_RESOURCE: the guests' root; this development VM's root lacks it), and
    // elsewhere it keeps corral's. Control: corral itself keeps the score it was given.
    let adj = |p: u32| std::fs::read_to_string(format!("/proc/{p}/oom_score_adj")).unwrap();
    let may_lower = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .is_some_and(|caps| caps & (1 << 24) != 0);
    let expected = if may_lower {
        "-1000".to_owned()
    } else {
        adj(pid)
    };
    assert_eq!(
        adj(reaper).trim(),
        expected.trim(),
        "CAP_SYS_RESOURCE: {may_lower}"
    );
    assert_eq!(adj(pid), adj(std::process::id()));
    // A service manager stopping corral's unit sends SIGTERM to each of its processes
    // (systemd does too once a unit's main process was killed): the reaper outlasts it, or
    // nobody would sweep. Delivered means no longer pending; the reaper must still be there.
    let signals = |p: u32, field: &str| -> u64 {
        std::fs::read_to_string(format!("/proc/{p}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .map_or(0, |v| u64::from_str_radix(v.trim(), 16).unwrap())
    };
    let term = 1u64 << (15 - 1);
    assert_ne!(
        signals(reaper, "SigCgt:") & term,
        0,
        "the reaper does not catch SIGTERM"
    );
    Command::new("kill")
        .args(["-TERM", &reaper.to_string()])
        .status()
        .unwrap();
    wait_until("SIGTERM never reached the reaper", || {
        exited(reaper) || (signals(reaper, "SigPnd:") | signals(reaper, "ShdPnd:")) & term == 0
    });
    assert!(!exited(reaper), "the reaper died of SIGTERM");
    // Positive control of the group check: the live supervisor's groups are found.
    assert!(
        !cgroup_dirs(&format!("corral-{pid}-")).is_empty(),
        "the running supervisor's groups were not found under /sys/fs/cgroup"
    );
    Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
    wait_until("sandbox processes outlived the supervisor", || {
        !running("sleep 1001")
    });
    wait_until("the reaper never finished", || exited(reaper));
    assert_eq!(leftovers_of(&f, pid), Vec::<String>::new());

    // Control: the same kill with the reaper gone first leaves the groups behind.
    let mut child = spawn_run(&f, "sleep 1002 & sleep 1002 & wait");
    let pid = wait_running(&child, "sleep 1002");
    let reaper = reaper_of(pid);
    // In a transient scope corral asked systemd for, the groups go with the scope.
    let before = cgroup_dirs(&format!("corral-{pid}-"));
    assert!(
        !before.is_empty(),
        "the running supervisor's groups were not found"
    );
    let systemd_scope = before.iter().all(|g| g.contains("/corral-scope-"));
    Command::new("kill")
        .args(["-KILL", &reaper.to_string()])
        .status()
        .unwrap();
    wait_until("the reaper did not die", || exited(reaper));
    Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    // Not reaped yet: a zombie's pid stays taken, so another test's corral, running at the
    // same time, does not collect its groups as stale before they are looked at.
    // A dying process loses its command line (pgrep no longer sees it) before the kernel takes
    // it out of its group (its mount namespace is torn down in between), so the wait is on the
    // groups themselves: the sandbox is gone when they hold nothing.
    wait_until("sandbox processes outlived the supervisor", || {
        !running("sleep 1002") && groups_held(pid).is_empty()
    });
    let left = cgroup_dirs(&format!("corral-{pid}-"));
    assert!(
        systemd_scope || !left.is_empty(),
        "without its reaper, no group was left (before the kill: {before:?})"
    );
    child.wait().unwrap();
    // The next corral collects them.
    let probe = corral(&f, &["probe"]);
    assert_eq!(probe.status.code(), Some(0));
    assert!(
        cgroup_dirs(&format!("corral-{pid}-")).is_empty(),
        "stale groups were not collected"
    );
}

/// A forbidden directory inside the writable scope that the base tree does not have is still
/// never writable: the sandbox creates it empty and read-only (an empty directory is no change).
#[test]
fn missing_forbidden_directory_is_not_writable() {
    let f = fixture("forbid");
    let script = "mkdir -p src/secret 2>/dev/null; (echo x > src/secret/f) 2>/dev/null && echo WROTE; echo ok > src/ok.txt";
    let mut wu = work_unit(&f, 30, 10, 128 << 20);
    wu["constraints"]["forbidden_paths"] = json!(["src/secret/"]);
    let (code, m, err) = run(&f, &wu, &shell_preset(script), &[]);
    assert_eq!(code, 0, "{err}");
    let changed: Vec<&str> = m["candidate"]["changed_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["src/ok.txt"]);
    assert_eq!(
        m["logs"]["stdout"]["bytes"], 0,
        "the write into the forbidden directory succeeded"
    );
    // Positive control: without the forbidden entry the same write lands and is captured.
    let (code, m, err) = run(
        &f,
        &work_unit(&f, 30, 10, 128 << 20),
        &shell_preset(script),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let changed: Vec<&str> = m["candidate"]["changed_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["src/ok.txt", "src/secret/f"]);
}

/// The worker's own `.git`: git works inside (clean status at the base, its own change shown),
/// and nothing in it points back at the canonical repository.
#[test]
fn worker_git_is_self_contained_and_clean() {
    let f = fixture("wgit");
    let script = "echo more >> src/app.py; git status --porcelain > src/status.txt 2>&1; \
                  git log --format=%H -1 > src/head.txt 2>&1; \
                  ls .git/objects/info/alternates > src/alt.txt 2>&1; cat .git/config >> src/alt.txt";
    let (code, m, err) = run(
        &f,
        &work_unit(&f, 30, 10, 128 << 20),
        &shell_preset(script),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let digest = m["candidate"]["patch"]["digest"]
        .as_str()
        .unwrap()
        .strip_prefix("sha256:")
        .unwrap()
        .to_owned();
    let patch = std::fs::read_to_string(f.dir.join("artifacts/sha256").join(digest)).unwrap();
    let added = |file: &str| -> Vec<String> {
        let start = patch
            .find(&format!("+++ b/src/{file}"))
            .unwrap_or_else(|| panic!("no {file} in {patch}"));
        patch[start..]
            .lines()
            .skip(2)
            .take_while(|l| !l.starts_with("diff --git"))
            .filter_map(|l| l.strip_prefix('+'))
            .map(str::to_owned)
            .collect()
    };
    // Only the worker's own edits: the checkout is clean against HEAD.
    assert_eq!(added("status.txt"), [" M src/app.py", "?? src/status.txt"]);
    assert_eq!(added("head.txt"), std::slice::from_ref(&f.base));
    let alt = added("alt.txt").join("\n");
    assert!(alt.contains("No such file"), "{alt}");
    assert!(
        !alt.contains(f.repo.to_str().unwrap()),
        "the worker's .git names the canonical repository: {alt}"
    );
}

/// `corral demo | head -1` when the reader has gone before the first line: a closed pipe is a
/// quiet end of output (EPIPE), not a panic (exit 101); the demo still finishes, exits 0 and
/// removes its temporary repository. The read end is closed before corral starts, so every
/// write meets EPIPE.
#[test]
fn demo_into_a_closed_pipe_is_quiet_and_leaves_nothing() {
    let f = fixture("demo-epipe");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let child = Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("demo")
        .env_clear()
        .env("HOME", f.dir.join("home"))
        .env("PATH", "/usr/bin:/bin")
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );
    let left = std::env::temp_dir().join(format!("corral-demo-{pid}"));
    assert!(!left.exists(), "{} left behind", left.display());
}

/// README's first command: `corral demo` runs the whole path and captures a candidate.
#[test]
fn demo_captures_a_candidate() {
    let f = fixture("demo");
    let out = corral(&f, &["demo"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The contract's words, never Rust's Debug text (`Exited`, `Some(0)`, `Added`).
    assert!(
        stdout.contains("outcome     candidate_captured (exited 0)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("+    return list(range(start, end + 1))"),
        "{stdout}"
    );
    assert!(
        stdout.contains("changed     added tests/test_range.py"),
        "{stdout}"
    );
    for debug in ["Exited", "Some(", "Added", "Modified"] {
        assert!(!stdout.contains(debug), "{debug} in {stdout}");
    }
}

/// On a terminal, `run` draws a live line (`\r\x1b[2K...`); a `TERM=dumb` terminal has no
/// cursor control and gets none. Control: the same run with `TERM=xterm` on the same pty.
#[test]
fn dumb_terminal_gets_no_cursor_control() {
    let f = fixture("dumb");
    let (wu_path, pr_path) = documents(&f, "cat >/dev/null; sleep 1; echo x > src/x.txt");
    let on_a_pty = |term: &str| -> Vec<u8> {
        let cmd = format!(
            "{} run --work-unit {} --preset {} --repo {} --artifacts {}",
            env!("CARGO_BIN_EXE_corral"),
            wu_path.display(),
            pr_path.display(),
            f.repo.display(),
            f.dir.join("artifacts").display()
        );
        // `script` gives corral a pseudo-terminal as stdin, stdout and stderr.
        let out = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env_clear()
            .env("HOME", f.dir.join("home"))
            .env("PATH", "/usr/bin:/bin")
            .env("TERM", term)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{term}: {out:?}");
        out.stdout
    };
    let has = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    let xterm = on_a_pty("xterm");
    assert!(has(&xterm, b"\x1b[2K"), "control: no live line on xterm");
    assert!(has(&xterm, b"peak"), "{}", String::from_utf8_lossy(&xterm));
    let dumb = on_a_pty("dumb");
    assert!(!has(&dumb, b"\x1b["), "{}", String::from_utf8_lossy(&dumb));
    assert!(!has(&dumb, b"\r\x1b"), "{}", String::from_utf8_lossy(&dumb));
}

/// A `--repo` or `--artifacts` path that is not UTF-8 is bad input naming the flag (exit 2,
/// one line, no manifest), never a lossy guess or an internal error. Control: the same run
/// with UTF-8 paths captures.
#[test]
fn non_utf8_paths_are_bad_input_naming_the_flag() {
    use std::os::unix::ffi::OsStrExt as _;
    let f = fixture("nonutf8");
    let (wu_path, pr_path) = documents(&f, "cat >/dev/null; echo x > src/x.txt");
    let odd = f.dir.join(std::ffi::OsStr::from_bytes(b"store-\xff\xfe"));
    // A link with a UTF-8 name to the repository under a name that is not.
    let odd_repo = f.dir.join(std::ffi::OsStr::from_bytes(b"repo-\xc3("));
    std::fs::rename(&f.repo, &odd_repo).unwrap();
    let link = f.dir.join("repo-link");
    std::os::unix::fs::symlink(&odd_repo, &link).unwrap();
    let run_with = |repo: &Path, artifacts: &Path| -> Output {
        run_command(&f, &wu_path, &pr_path, repo, artifacts)
            .output()
            .unwrap()
    };
    let good_store = f.dir.join("store");
    for (repo, artifacts, flag) in [
        (odd_repo.as_path(), good_store.as_path(), "--repo"),
        (link.as_path(), good_store.as_path(), "--repo"),
        (odd_repo.as_path(), odd.as_path(), "--repo"),
    ] {
        let out = run_with(repo, artifacts);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.starts_with(&format!("corral: {flag} ")), "{err}");
        assert!(err.contains("not valid UTF-8"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty());
    }
    // The repository back under a UTF-8 name: --artifacts alone is refused, and creates
    // nothing; then, control, the run captures.
    std::fs::rename(&odd_repo, &f.repo).unwrap();
    let out = run_with(&f.repo, &odd);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("corral: --artifacts "), "{err}");
    assert!(!odd.exists());
    let out = run_with(&f.repo, &good_store);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `corral show` and `corral logs` on a stored run: the summary in the contract's words, the
/// logs exactly (into a pipe), the patch; and nothing shown from an artifact or manifest that
/// no longer matches its digest (control: the intact store shows).
#[test]
fn show_and_logs_print_a_stored_run_and_refuse_tampered_ones() {
    let f = fixture("show");
    let (code, m, err) = run(
        &f,
        &work_unit(&f, 30, 10, 128 << 20),
        &shell_preset(
            "cat >/dev/null; echo changed >> src/app.py; printf 'out\\033[31m\\n'; echo oops >&2",
        ),
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let store = f.dir.join("artifacts");
    let hex = |d: &Value| {
        d.as_str()
            .unwrap()
            .strip_prefix("sha256:")
            .unwrap()
            .to_owned()
    };
    let manifest = store
        .join("sha256")
        .join(hex(&json!(corral_contract_digest(&m))));
    let cli = |args: &[&str]| corral(&f, args);
    let show = cli(&["show", manifest.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&show.stdout).into_owned();
    assert_eq!(
        show.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&show.stderr)
    );
    for want in [
        "outcome     candidate_captured (exited 0)",
        "changed     modified src/app.py",
        "+changed",
        "--- stderr (5 bytes) ---",
        "oops",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    // The worker's escape sequence is shown escaped, never raw.
    assert!(!text.contains('\u{1b}'), "{text}");
    let logs = cli(&["logs", manifest.to_str().unwrap()]);
    assert_eq!(logs.status.code(), Some(0));
    assert_eq!(
        logs.stdout, b"out\x1b[31m\n",
        "into a pipe: the stored bytes exactly"
    );
    let logs = cli(&["logs", "--stderr", manifest.to_str().unwrap()]);
    assert_eq!(logs.stdout, b"oops\n");
    let verify_json = |args: &[&str]| -> (Option<i32>, Value) {
        let out = cli(args);
        // Exactly the type `corral schema verify-report` is generated from.
        let _: corral_contract::VerifyReport = serde_json::from_slice(&out.stdout).unwrap();
        (
            out.status.code(),
            serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        )
    };
    let (code, v) = verify_json(&["verify", "--json", manifest.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["schema_version"], "corral.verify-report/v1");
    assert_eq!(v["intact"], true);
    let statuses: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["intact"; 4], "{v}");
    // Tampered stdout artifact: show says which artifact and exits 1, logs refuses.
    let stdout_file = store
        .join("sha256")
        .join(hex(&m["logs"]["stdout"]["digest"]));
    let _ = Command::new("chmod").arg("u+w").arg(&stdout_file).status();
    std::fs::write(&stdout_file, b"forged\n").unwrap();
    let show = cli(&["show", manifest.to_str().unwrap()]);
    assert_eq!(show.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&show.stdout).contains("forged"));
    let logs = cli(&["logs", manifest.to_str().unwrap()]);
    assert_eq!(logs.status.code(), Some(1));
    assert!(logs.stdout.is_empty());
    let (code, v) = verify_json(&["verify", "--json", manifest.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["intact"], false);
    let stdout_entry = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["role"] == "stdout")
        .unwrap();
    assert_eq!(stdout_entry["status"], "mismatch", "{v}");
    assert!(
        stdout_entry["detail"]
            .as_str()
            .unwrap()
            .starts_with("mismatch: expected sha256:"),
        "{v}"
    );
    // A manifest copy that is not canonical any more is not shown at all.
    let copy = f.dir.join("m.json");
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes.insert(1, b' ');
    std::fs::write(&copy, bytes).unwrap();
    let show = cli(&[
        "show",
        copy.to_str().unwrap(),
        "--artifacts",
        store.to_str().unwrap(),
    ]);
    assert_eq!(show.status.code(), Some(1));
    assert!(show.stdout.is_empty());
    assert!(String::from_utf8_lossy(&show.stderr).contains("not intact"));
}

/// The digest of a manifest as stored: sha256 of its canonical bytes.
fn corral_contract_digest(m: &Value) -> String {
    let bytes = corral_contract::canonical::canonical_json(m);
    corral_contract::Digest::of_bytes(&bytes).to_string()
}

/// `--verbose` says each step with its time on stderr (stdout stays the manifest path);
/// `--log-format json` gives one JSON object a line; `RUST_LOG` alone turns the logs on.
/// Control: without either, no step lines.
#[test]
fn verbose_logs_each_step_on_stderr() {
    let f = fixture("verbose");
    let (wu_path, pr_path) = documents(&f, "cat >/dev/null; echo x > src/x.txt");
    let run_with = |extra: &[&str], rust_log: Option<&str>| -> Output {
        let mut c = run_command(&f, &wu_path, &pr_path, &f.repo, &f.dir.join("artifacts"));
        c.args(extra);
        if let Some(v) = rust_log {
            c.env("RUST_LOG", v);
        }
        c.output().unwrap()
    };
    let steps = [
        "admission: admitted",
        "capability gate: all nine attested",
        "base checkout ready",
        "sandbox: the worker's tree is gone",
        "capture done",
        "manifest stored",
    ];
    let text = run_with(&["--verbose"], None);
    let err = String::from_utf8_lossy(&text.stderr).into_owned();
    assert_eq!(text.status.code(), Some(0), "{err}");
    for s in steps {
        assert!(err.contains(s), "{s}: {err}");
    }
    assert!(err.contains("ms="), "{err}");
    assert_eq!(String::from_utf8_lossy(&text.stdout).lines().count(), 1);
    let json = run_with(&["-v", "--log-format", "json"], None);
    let err = String::from_utf8_lossy(&json.stderr).into_owned();
    let events: Vec<Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        events
            .iter()
            .any(|e| e["fields"]["message"] == "manifest stored"),
        "{err}"
    );
    let env = run_with(&[], Some("corral_runner=info"));
    assert!(
        String::from_utf8_lossy(&env.stderr).contains("capture done"),
        "{}",
        String::from_utf8_lossy(&env.stderr)
    );
    // Control: no flag, no RUST_LOG, no step lines.
    let quiet = run_with(&[], None);
    let err = String::from_utf8_lossy(&quiet.stderr).into_owned();
    assert_eq!(quiet.status.code(), Some(0), "{err}");
    assert!(!err.contains("admission: admitted"), "{err}");
}

/// Issue 17: a store on a full file system fails the run with one line that names the store
/// and what to do, and leaves nothing half-written in it. The store is a 1 MiB tmpfs in a
/// mount namespace of the test's own (`unshare -m`), so the host's mounts never change; the
/// worker's change needs more. Control: the same run with a roomy store is captured.
#[test]
fn a_full_store_fails_naming_the_store_and_leaves_nothing_half_written() {
    if mode::root_mode_only(
        "a_full_store_fails_naming_the_store_and_leaves_nothing_half_written",
        "a full store is a small tmpfs mounted in a mount namespace, which needs root",
    ) {
        return;
    }
    let f = fixture("fullstore");
    let script = "head -c 3000000 /dev/zero | tr '\\0' 'x' | fold -w 99 > src/big.txt";
    let (wu, preset) = documents(&f, script);
    let mut wu_doc: Value = serde_json::from_slice(&std::fs::read(&wu).unwrap()).unwrap();
    wu_doc["budget"]["max_patch_bytes"] = json!(16 << 20);
    std::fs::write(&wu, wu_doc.to_string()).unwrap();
    let small = f.dir.join("small");
    std::fs::create_dir_all(&small).unwrap();
    let store = small.join("art");
    let run_in = |size: &str| {
        let inner = run_command(&f, &wu, &preset, &f.repo, &store);
        let mut argv: Vec<String> = vec![inner.get_program().to_string_lossy().into_owned()];
        argv.extend(inner.get_args().map(|a| a.to_string_lossy().into_owned()));
        let quoted: Vec<String> = argv
            .iter()
            .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
            .collect();
        let out = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mount -t tmpfs -o size={size} corral-test-store '{}' || {{ echo NOT-RUN; exit 9; }}; \
                 {}; rc=$?; cd '{}/sha256' || exit 9; \
                 for f in .* *; do [ -f \"$f\" ] && echo \"FILE $f $(sha256sum < \"$f\" | cut -c1-64)\"; done; \
                 exit $rc",
                small.display(),
                quoted.join(" "),
                store.display()
            ))
            .env_clear()
            .env("HOME", f.dir.join("home"))
            .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
            .output()
            .unwrap();
        // The store is gone with the namespace: what it held was listed in there, after
        // corral, each file with its hash. Nothing half-written may be visible.
        let listing = String::from_utf8_lossy(&out.stdout).into_owned();
        let files: Vec<(String, String)> = listing
            .lines()
            .filter_map(|l| l.strip_prefix("FILE "))
            .map(|l| {
                let (name, hash) = l.rsplit_once(' ').unwrap();
                (name.to_owned(), hash.to_owned())
            })
            .collect();
        for (name, hash) in &files {
            assert_eq!(name, hash, "a store file that is not its digest: {listing}");
        }
        (out, files.len())
    };
    let (out, _) = run_in("1m");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("NOT-RUN"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("corral: ")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(&format!("in the artifact store {}", store.display()))
            && lines[0].contains("file system is full")
            && lines[0].contains("--artifacts"),
        "{err}"
    );
    assert!(!lines[0].contains("internal error"), "{err}");
    // Control: room enough, the same change is captured.
    let (out, stored) = run_in("64m");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        stored >= 3,
        "the listing saw {stored} files in a captured run's store"
    );
}
