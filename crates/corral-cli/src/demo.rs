//! `corral demo`: the whole path on a tiny repository, with the bundled demo agent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use corral_contract::documents::{
    AGENT_PRESET_SCHEMA, Budget, Constraints, NetworkPermission, Permissions, PresetNetworkPolicy,
    PromptTransport, Repository, Security, WORK_UNIT_SCHEMA,
};
use corral_contract::manifest::Outcome;
use corral_contract::{AgentPreset, WorkUnit};
use corral_linux::LinuxSandboxExecutor;
use corral_runner::{RunInputs, run_attempt};
use corral_sandbox::CancelToken;

use crate::display::escape;
use crate::exit;
use crate::run::{default_cache_dir, default_data_dir, report_error};

const RANGE_PY: &str = "def inclusive_range(start, end):\n    \"\"\"Return [start, ..., end].\"\"\"\n    return list(range(start, end))\n";

/// Runs git with a clean environment and fixed identity and dates (so the demo commit, and so
/// its cached base checkout, is the same on every run).
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "corral demo")
        .env("GIT_AUTHOR_EMAIL", "demo@corral.invalid")
        .env("GIT_COMMITTER_NAME", "corral demo")
        .env("GIT_COMMITTER_EMAIL", "demo@corral.invalid")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .output()
        .map_err(|e| format!("git {}: {e} (is git installed?)", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn make_repo(dir: &Path) -> Result<String, String> {
    let write = |rel: &str, text: &str| -> Result<(), String> {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
    };
    write(
        "README.md",
        "# corral demo\n\nA tiny project with an off-by-one.\n",
    )?;
    write("src/__init__.py", "")?;
    write("src/range.py", RANGE_PY)?;
    write(".github/workflows/ci.yml", "on: push\njobs: {}\n")?;
    git(dir, &["init", "-q", "-b", "main"])?;
    git(dir, &["add", "-A"])?;
    git(dir, &["commit", "-q", "-m", "demo: inclusive_range"])?;
    git(dir, &["rev-parse", "HEAD"])
}

fn work_unit(base_sha: String) -> WorkUnit {
    let scope = vec!["src/".to_owned(), "tests/".to_owned()];
    WorkUnit {
        schema_version: WORK_UNIT_SCHEMA.to_owned(),
        id: "demo-0001".to_owned(),
        objective: Some(
            "Make inclusive_range(start, end) include end, and add a test for it.".to_owned(),
        ),
        repository: Repository {
            base_sha: Some(base_sha),
        },
        security: Security {
            sandbox_required: Some(true),
        },
        permissions: Permissions {
            process_execution: Some(true),
            secrets: Some(Vec::new()),
            network: Some(NetworkPermission::None),
            network_allowlist: Some(Vec::new()),
            filesystem_write: Some(scope.clone()),
        },
        budget: Budget {
            wall_seconds: Some(60),
            cpu_seconds: Some(30),
            memory_bytes: Some(256 << 20),
            disk_bytes: Some(64 << 20),
            max_processes: Some(64),
            max_output_bytes: Some(1 << 20),
            max_patch_bytes: Some(1 << 20),
            cpu_millicores: None,
        },
        constraints: Constraints {
            allowed_paths: Some(scope),
            forbidden_paths: Some(vec![".github/".to_owned(), "**/*.pem".to_owned()]),
        },
    }
}

fn preset(exe: &Path, digest: &str) -> AgentPreset {
    AgentPreset {
        schema_version: AGENT_PRESET_SCHEMA.to_owned(),
        id: "corral-demo-agent".to_owned(),
        executable: exe.display().to_string(),
        argv: vec!["demo-agent".to_owned()],
        prompt_transport: PromptTransport::Stdin {},
        model_connection: None,
        env_allowlist: vec!["LANG".to_owned()],
        network_policy: PresetNetworkPolicy::Disabled,
        read_only_paths: Vec::new(),
        authority: "candidate_only".to_owned(),
        executable_sha256: Some(digest.to_owned()),
        cpu_millicores: None,
        env: Default::default(),
        home_files: Vec::new(),
    }
}

fn file_digest(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(corral_contract::Digest::of_bytes(&bytes).to_string())
}

/// Whether `name`, in the temporary directory, is the demo folder of the corral process `pid`
/// (`corral-demo-<pid>`): what its reaper removes once `pid` has exited.
pub fn is_folder_of(name: &str, pid: u32) -> bool {
    name.strip_prefix("corral-demo-") == Some(pid.to_string().as_str())
}

pub fn run() -> u8 {
    // Before the demo folder, or anything else, is made.
    if let Err(line) = crate::run::start_reaper(Some(&default_data_dir().join("artifacts"))) {
        eprintln!("corral: demo: {line}");
        return exit::FAILED;
    }
    let dir = std::env::temp_dir().join(format!("corral-demo-{}", std::process::id()));
    let code = run_in(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    code
}

fn run_in(dir: &PathBuf) -> u8 {
    if let Err(line) = crate::run::utf8_path("the temporary folder (TMPDIR)", dir) {
        eprintln!("corral: demo: {line}");
        return exit::REJECTED;
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("corral: demo: {}: {e}", dir.display());
        return exit::FAILED;
    }
    let base_sha = match make_repo(dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("corral: demo: {}", escape(&e));
            return exit::FAILED;
        }
    };
    let exe = match crate::run::own_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("corral: demo: {e}");
            return exit::FAILED;
        }
    };
    let digest = match file_digest(&exe) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("corral: demo: {e}");
            return exit::FAILED;
        }
    };
    let wu = work_unit(base_sha.clone());
    let pr = preset(&exe, &digest);
    let artifacts = default_data_dir().join("artifacts");
    let cache = default_cache_dir();
    for (what, path) in [
        ("the artifact store (XDG_DATA_HOME or HOME)", &artifacts),
        ("the base cache (XDG_CACHE_HOME or HOME)", &cache),
    ] {
        if let Err(line) = crate::run::utf8_path(what, path) {
            eprintln!("corral: demo: {line}");
            return exit::REJECTED;
        }
    }
    let env: BTreeMap<String, String> = [("LANG".to_owned(), "C.UTF-8".to_owned())].into();
    out!("corral demo");
    out!("  repository  {} (base {base_sha})", dir.display());
    out!(
        "  agent       {} demo-agent (pinned {digest})",
        exe.display()
    );
    out!("  scope       writable src/ tests/, forbidden .github/ **/*.pem, network none");
    let cancel = match CancelToken::new() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("corral: demo: {e}");
            return exit::FAILED;
        }
    };
    let executor = LinuxSandboxExecutor::with_config(crate::run::linux_config());
    let (cache_limits, checkout) =
        match (crate::run::cache_limits(), crate::run::checkout_isolation()) {
            (Ok(l), Ok(i)) => (l, i),
            (Err(line), _) | (_, Err(line)) => {
                eprintln!("corral: demo: {line}");
                return exit::REJECTED;
            }
        };
    let inputs = RunInputs {
        work_unit: &wu,
        preset: &pr,
        connections: None,
        env: &env,
        repo: dir,
        artifacts: &artifacts,
        cache: &cache,
        cache_limits,
        checkout: &checkout,
    };
    let report = match run_attempt(&inputs, &executor, &cancel) {
        Ok(r) => r,
        Err(e) => {
            return report_error(
                &e,
                Path::new("demo work unit"),
                Path::new("demo preset"),
                None,
            );
        }
    };
    let m = &report.manifest.manifest;
    for line in crate::summary::lines(m, Some(&wu.budget)) {
        out!("{line}");
    }
    let stdout = std::fs::read(artifacts.join("sha256").join(m.logs.stdout.digest.hex()))
        .unwrap_or_default();
    for line in String::from_utf8_lossy(&stdout).lines().take(12) {
        out!("  agent said  {}", escape(line));
    }
    out!("  manifest    {}", report.manifest.path.display());
    out!(
        "  verify with corral verify {}",
        report.manifest.path.display()
    );
    if let Some(patch) = &report.patch {
        out!("--- patch ({} bytes) ---", patch.len());
        for line in String::from_utf8_lossy(patch).lines() {
            out!("{}", escape(line));
        }
    }
    // As `corral run` says it: 3 when a capability is missing, 1 for any other outcome.
    if m.outcome == Outcome::CandidateCaptured {
        exit::OK
    } else {
        report.exit_code
    }
}
