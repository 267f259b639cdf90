//! The capability gate and fail-closed behaviour with injected probe results.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
mod common;
mod mode;
use common::*;
use corral_contract::Capability;
use corral_linux::{LinuxConfig, LinuxSandboxExecutor, Observation, ProbeReport};
use corral_sandbox::{CancelToken, RawProcessExecutor, SandboxError, execute_admitted};

fn marker_case(tag: &str) -> (Case, std::path::PathBuf) {
    let marker = std::env::temp_dir().join(format!("corral-gate-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let mut c = Case::sh("");
    c.executable = "/usr/bin/touch".into();
    c.args = vec![marker.display().to_string()];
    (c, marker)
}

#[test]
fn raw_process_executor_can_never_run_a_worker() {
    let ws = Workspace::new("raw");
    let (c, marker) = marker_case("raw");
    let run = c.admitted();
    let err = execute_admitted(
        &RawProcessExecutor,
        &run,
        &ws.path,
        &CancelToken::new().unwrap(),
    )
    .unwrap_err();
    let SandboxError::CapabilitiesMissing(gate) = err else {
        panic!("{err}")
    };
    assert_eq!(gate.missing.len(), 9);
    let msg = gate.to_string();
    for cap in Capability::ALL {
        assert!(msg.contains(cap.name()), "{msg}");
    }
    assert!(!marker.exists(), "the raw executor ran the worker");
    // Positive control: the same command run directly does create the marker.
    std::process::Command::new("/usr/bin/touch")
        .arg(&marker)
        .status()
        .unwrap();
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();
}

#[test]
fn each_missing_capability_refuses_the_run_before_start() {
    let ws = Workspace::new("failclosed");
    let real = executor().probe_report().clone();
    for cap in Capability::ALL {
        let (c, marker) = marker_case(cap.name());
        let report = real
            .clone()
            .without(cap, "simulated: kernel feature missing");
        let exe = LinuxSandboxExecutor::with_probe(LinuxConfig::default(), report);
        let err = execute_admitted(&exe, &c.admitted(), &ws.path, &CancelToken::new().unwrap())
            .unwrap_err();
        let SandboxError::CapabilitiesMissing(gate) = err else {
            panic!("{cap}: {err}")
        };
        assert_eq!(gate.missing.len(), 1);
        assert_eq!(gate.missing[0].0, cap);
        assert!(gate.to_string().contains(cap.name()));
        assert!(!marker.exists(), "{cap}: the worker ran");
    }
    // Positive control: the unmodified report runs the same worker.
    let (c, marker) = marker_case("control");
    let mut c = c;
    c.args = vec!["/tmp/inside".into()];
    let o = execute_admitted(
        executor(),
        &c.admitted(),
        &ws.path,
        &CancelToken::new().unwrap(),
    )
    .unwrap();
    assert_eq!(o.exit_code, Some(0));
    assert!(!marker.exists());
}

type Mutator = Box<dyn Fn(&mut corral_linux::Observations)>;

#[test]
fn simulated_missing_kernel_features_withdraw_the_right_capabilities() {
    let base = executor().probe_report().observations.clone();
    let cases: Vec<(&str, Mutator, Capability)> = vec![
        (
            "seccomp",
            Box::new(|o| o.seccomp = Observation::missing("no seccomp")),
            Capability::CredentialIsolation,
        ),
        (
            "swap",
            Box::new(|o| o.cgroup_swap = Observation::missing("swap unlimited")),
            Capability::MemoryLimit,
        ),
        (
            "pids",
            Box::new(|o| o.cgroup_pids = Observation::missing("no pids controller")),
            Capability::ProcessLimit,
        ),
        (
            "cpu",
            Box::new(|o| o.cgroup_cpu = Observation::missing("no cpu controller")),
            Capability::CpuLimit,
        ),
        (
            "tmpfs",
            Box::new(|o| o.tmpfs_limit = Observation::missing("no size limit")),
            Capability::DiskLimit,
        ),
        (
            "overlay",
            Box::new(|o| o.overlay_idmap = Observation::missing("no idmap")),
            Capability::WritablePathEnforcement,
        ),
        (
            "kill",
            Box::new(|o| o.cgroup_kill = Observation::missing("no cgroup.kill")),
            Capability::ProcessTreeIsolation,
        ),
        (
            "namespaces",
            Box::new(|o| o.sandbox_run = Observation::missing("no namespaces")),
            Capability::NetworkEnforcement,
        ),
        (
            "root",
            Box::new(|o| o.root = Observation::missing("not root")),
            Capability::FilesystemIsolation,
        ),
    ];
    let ws = Workspace::new("simulated");
    for (name, f, cap) in cases {
        let mut o = base.clone();
        f(&mut o);
        let report = ProbeReport::from_observations(o, executor().probe_report().hierarchy.clone());
        assert!(
            !report.capabilities.get(cap).enforced,
            "{name} should withdraw {cap}"
        );
        assert!(
            report.capabilities.get(cap).evidence.contains("MISSING"),
            "{name}"
        );
        let exe = LinuxSandboxExecutor::with_probe(LinuxConfig::default(), report);
        let (c, marker) = marker_case(name);
        let err = execute_admitted(&exe, &c.admitted(), &ws.path, &CancelToken::new().unwrap())
            .unwrap_err();
        assert!(
            matches!(err, SandboxError::CapabilitiesMissing(_)),
            "{name}: {err}"
        );
        assert!(!marker.exists());
    }
}

#[test]
fn probe_evidence_names_what_was_observed() {
    let caps = &executor().probe_report().capabilities;
    for cap in Capability::ALL {
        let ev = &caps.get(cap).evidence;
        assert!(caps.get(cap).enforced, "{cap}: {ev}");
        assert!(
            ev.contains("sandbox run: ran") || cap == Capability::CpuLimit || ev.contains("ran "),
            "{cap}: {ev}"
        );
    }
    assert!(
        caps.filesystem_isolation.evidence.contains("Landlock ABI"),
        "{}",
        caps.filesystem_isolation.evidence
    );
    assert!(
        caps.memory_limit.evidence.contains("swap"),
        "{}",
        caps.memory_limit.evidence
    );
}
