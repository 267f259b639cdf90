//! Shared fixtures for the integration tests (run for real, as root).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    dead_code,
    reason = "test code"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use corral_admission::{AdmittedRun, admit};
use corral_contract::{AgentPreset, WorkUnit};
use corral_linux::LinuxSandboxExecutor;
use corral_sandbox::{
    CancelToken, EgressGateway, ExecuteOptions, SandboxError, SandboxOutcome, execute_admitted,
    execute_admitted_with,
};

pub mod egress;

/// One probed executor per test binary.
pub fn executor() -> &'static LinuxSandboxExecutor {
    static EXE: OnceLock<LinuxSandboxExecutor> = OnceLock::new();
    EXE.get_or_init(|| {
        let exe = LinuxSandboxExecutor::new();
        let missing = exe.probe_report().capabilities.missing();
        assert!(
            missing.is_empty(),
            "this host lacks {missing:?}: {:#?}",
            exe.probe_report().capabilities
        );
        exe
    })
}

pub struct Budget {
    pub wall: u64,
    pub cpu: u64,
    pub mem: u64,
    pub disk: u64,
    pub procs: u64,
    pub out: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            wall: 20,
            cpu: 20,
            mem: 256 << 20,
            disk: 64 << 20,
            procs: 64,
            out: 1 << 20,
        }
    }
}

pub struct Case {
    pub executable: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub env_allowlist: Vec<String>,
    pub read_only_paths: Vec<String>,
    pub writable: Vec<String>,
    pub forbidden: Vec<String>,
    pub network: &'static str,
    /// Admitted destinations in allowlist mode (default: `127.0.0.1:9`).
    pub allowlist: Vec<String>,
    pub budget: Budget,
    pub stdin_objective: Option<String>,
}

impl Case {
    /// `/bin/sh -c script`, objective passed on stdin.
    pub fn sh(script: &str) -> Self {
        Self {
            executable: "/usr/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: BTreeMap::new(),
            env_allowlist: vec![],
            read_only_paths: vec![],
            writable: vec!["src/".into()],
            forbidden: vec![".github/".into()],
            network: "none",
            allowlist: vec![],
            budget: Budget::default(),
            stdin_objective: None,
        }
    }

    /// The attack helper binary built by this crate, bound read-only.
    pub fn attack(args: &[&str]) -> Self {
        let bin = env!("CARGO_BIN_EXE_corral-attack").to_owned();
        let mut c = Self::sh("");
        c.executable = bin.clone();
        c.args = args.iter().map(|s| (*s).to_owned()).collect();
        c
    }

    /// Runs this case's script through the attack helper (`corral-attack sh SCRIPT` execs
    /// `/bin/sh`), so the helper is the executable and the sandbox shows it at its own path,
    /// wherever the build lives (no `read_only_paths`, which admission keeps out of `/tmp`,
    /// `/root` and `/home`).
    pub fn use_attack_as_shell(&mut self) {
        let script = self.args.get(1).cloned().unwrap_or_default();
        self.executable = attack_bin().to_owned();
        self.args = vec!["sh".into(), script];
    }

    pub fn admitted(&self) -> AdmittedRun {
        let (net, preset_net) = match self.network {
            "allowlist" => ("allowlist", "allowlisted"),
            _ => ("none", "disabled"),
        };
        let allow: Vec<String> = if self.network == "allowlist" {
            if self.allowlist.is_empty() {
                vec!["127.0.0.1:9".into()]
            } else {
                self.allowlist.clone()
            }
        } else {
            vec![]
        };
        let b = &self.budget;
        let wu = serde_json::json!({
            "schema_version": "corral.work-unit/v1",
            "id": "wu-test",
            "objective": self.stdin_objective.clone().unwrap_or_else(|| "test objective".into()),
            "repository": { "base_sha": "0123456789abcdef0123456789abcdef01234567" },
            "security": { "sandbox_required": true },
            "permissions": { "process_execution": true, "secrets": [], "network": net,
                "network_allowlist": allow, "filesystem_write": self.writable },
            "budget": { "wall_seconds": b.wall, "cpu_seconds": b.cpu, "memory_bytes": b.mem,
                "disk_bytes": b.disk, "max_processes": b.procs, "max_output_bytes": b.out,
                "max_patch_bytes": 1048576 },
            "constraints": { "allowed_paths": self.writable, "forbidden_paths": self.forbidden }
        });
        let preset = serde_json::json!({
            "schema_version": "corral.agent-preset/v1",
            "id": "test-preset",
            "executable": self.executable,
            "argv": self.args,
            "prompt_transport": { "kind": "stdin" },
            "env_allowlist": self.env_allowlist,
            "network_policy": preset_net,
            "read_only_paths": self.read_only_paths,
            "authority": "candidate_only"
        });
        let wu: WorkUnit = serde_json::from_value(wu).unwrap();
        let preset: AgentPreset = serde_json::from_value(preset).unwrap();
        admit(&wu, &preset, None, &self.env).unwrap_or_else(|e| panic!("admission: {e:?}"))
    }

    pub fn run_in(&self, ws: &Path) -> Result<SandboxOutcome, SandboxError> {
        let run = self.admitted();
        let cancel = CancelToken::new().unwrap();
        execute_admitted(executor(), &run, ws, &cancel)
    }

    /// Runs with an egress gateway (allowlist mode).
    pub fn run_with(
        &self,
        ws: &Path,
        gateway: &dyn EgressGateway,
    ) -> Result<SandboxOutcome, SandboxError> {
        let run = self.admitted();
        let cancel = CancelToken::new().unwrap();
        let options = ExecuteOptions {
            egress: Some(gateway),
            model: None,
            executable: None,
        };
        execute_admitted_with(executor(), &run, ws, &cancel, &options)
    }

    /// Runs with the executable as the caller opened (and hashed) it.
    pub fn run_opened(&self, ws: &Path, executable: &std::fs::File) -> SandboxOutcome {
        let run = self.admitted();
        let cancel = CancelToken::new().unwrap();
        let options = ExecuteOptions {
            egress: None,
            model: None,
            executable: Some(executable),
        };
        execute_admitted_with(executor(), &run, ws, &cancel, &options)
            .unwrap_or_else(|e| panic!("sandbox error: {e}"))
    }

    pub fn run(&self, ws: &Workspace) -> SandboxOutcome {
        self.run_in(&ws.path)
            .unwrap_or_else(|e| panic!("sandbox error: {e}"))
    }
}

/// A base checkout on the host: `src/lib.rs`, `README`, `.git/config`, `.github/ci.yml`.
pub struct Workspace {
    pub path: PathBuf,
}

impl Workspace {
    pub fn new(tag: &str) -> Self {
        sweep_dead_workspaces();
        let path = std::env::temp_dir().join(format!("corral-ws-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(path.join("src")).unwrap();
        std::fs::create_dir_all(path.join(".git")).unwrap();
        std::fs::create_dir_all(path.join(".github")).unwrap();
        std::fs::write(path.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        std::fs::write(path.join("README"), "readme\n").unwrap();
        std::fs::write(path.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(path.join(".github/ci.yml"), "on: push\n").unwrap();
        own_for_worker(&path);
        Self { path }
    }
}

/// Removes the workspaces of test binaries that were killed before their `Drop` ran
/// (`corral-ws-<tag>-<pid>` whose pid no longer exists: a SIGKILLed egress test left one,
/// 2026-12-07). Only names these fixtures make; a live pid's are left.
fn sweep_dead_workspaces() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix("corral-ws-")
                .and_then(|rest| rest.rsplit('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
}

/// In rootless mode with subordinate ids the lower layer cannot be idmapped, so a base
/// checkout must belong to the worker (as the runner's checkouts do): `path` and everything
/// under it are given to it. Root mode: nothing.
pub fn own_for_worker(path: &Path) {
    use corral_sandbox::LocalSandboxExecutor as _;
    let Some((uid, gid)) = executor().workspace_owner() else {
        return;
    };
    fn walk(p: &Path, uid: u32, gid: u32) {
        std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
        if std::fs::symlink_metadata(p).unwrap().is_dir() {
            for e in std::fs::read_dir(p).unwrap() {
                walk(&e.unwrap().path(), uid, gid);
            }
        }
    }
    walk(path, uid, gid);
}

/// Whether this test binary runs in rootless mode (an ordinary user ran it, ADR-0080).
pub fn rootless() -> bool {
    corral_linux::rootless::active().is_some()
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Host-side leak check for one run: its cgroup (named in the outcome's notes) is gone
/// from every hierarchy, and nothing of corral is in this process's mount table.
pub fn assert_gone(o: &corral_sandbox::SandboxOutcome) {
    let note = o.notes.first().cloned().unwrap_or_default();
    let name = note
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .trim_end_matches(':')
        .to_owned();
    assert!(name.starts_with("corral-"), "{note}");
    let out = std::process::Command::new("find")
        .args(["/sys/fs/cgroup", "-maxdepth", "4", "-name", &name])
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "leftover cgroup: {}",
        text(&out.stdout)
    );
    let mi = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    // The backend never attaches anything to the host's mount table; look for anything
    // carrying this run's name or this process's sandbox prefix.
    let mine = format!("corral-{}-", std::process::id());
    let lines: Vec<&str> = mi
        .lines()
        .filter(|l| l.contains(&name) || l.contains(&mine))
        .collect();
    assert!(lines.is_empty(), "leftover mounts: {lines:?}");
}

/// Host processes whose command line contains `marker`.
pub fn host_procs_with(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        {
            out.push(pid);
        }
    }
    out
}

pub fn attack_bin() -> &'static str {
    env!("CARGO_BIN_EXE_corral-attack")
}
