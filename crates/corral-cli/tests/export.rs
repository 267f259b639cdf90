//! `corral export k8s-job|oci` through the real binary: same admission and exit codes as
//! `corral run`, one stderr line per problem naming file and field; and the two claims the
//! export makes about corral's Linux backend: the capabilities the Job keeps are enough for
//! `corral probe` (and SYS_ADMIN is needed), and the OCI seccomp profile denies what corral's
//! own filter denies.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

mod mode;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use corral_export::k8s::CAPABILITIES_KEPT;
use corral_export::oci;
use corral_linux::seccomp::{self, Cond};
use serde_json::Value;

const IMAGE: &str = "registry.example/corral@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const WU: &str = "examples/work-units/fix-off-by-one.json";
const PRESET: &str = "examples/presets/offline-agent.json";

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

fn k8s(extra: &[&str]) -> Output {
    let mut args = vec![
        "export",
        "k8s-job",
        "--work-unit",
        WU,
        "--preset",
        PRESET,
        "--image",
        IMAGE,
    ];
    args.extend(extra);
    corral(&args)
}

#[test]
fn k8s_job_prints_one_job_and_writes_the_configmap() {
    let dir = tempfile::tempdir().unwrap();
    let cm = dir.path().join("cm.json");
    let cm_s = cm.to_str().unwrap();
    let out = k8s(&[
        "--work-unit",
        WU,
        "--runtime-class",
        "gvisor",
        "--parallel",
        "2",
        "--configmap-out",
        cm_s,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let job: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["apiVersion"], "batch/v1");
    assert_eq!(job["kind"], "Job");
    assert_eq!(job["spec"]["completions"], 2);
    assert_eq!(job["spec"]["parallelism"], 2);
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["runtimeClassName"], "gvisor");
    assert_eq!(pod["restartPolicy"], "Never");
    let cm: Value = serde_json::from_slice(&std::fs::read(&cm).unwrap()).unwrap();
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(
        pod["volumes"][0]["configMap"]["name"], cm["metadata"]["name"],
        "the Job mounts the ConfigMap it was exported with"
    );
    let keys: Vec<&str> = cm["data"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["preset.json", "work-unit-0.json", "work-unit-1.json"]
    );
    // The same bytes as the library (golden files) produce: stable output.
    assert_eq!(
        k8s(&[
            "--work-unit",
            WU,
            "--runtime-class",
            "gvisor",
            "--parallel",
            "2"
        ])
        .stdout,
        out.stdout
    );
}

#[test]
fn rejection_anywhere_in_the_batch_rejects_the_export_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("open.json");
    let mut wu: Value = serde_json::from_slice(&std::fs::read(root().join(WU)).unwrap()).unwrap();
    wu["permissions"]["network"] = "unrestricted".into();
    std::fs::write(&bad, wu.to_string()).unwrap();
    let out = k8s(&["--work-unit", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing is exported");
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "corral: rejected: {}: permissions.network:",
            bad.display()
        )) && err.contains("[network_unrestricted]"),
        "{err}"
    );
    // The same document through `corral admit`: the same exit code.
    let admit = corral(&[
        "admit",
        "--work-unit",
        bad.to_str().unwrap(),
        "--preset",
        PRESET,
    ]);
    assert_eq!(admit.status.code(), Some(2));
}

#[test]
fn bad_input_is_one_line_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("prompt.json");
    let mut wu: Value = serde_json::from_slice(&std::fs::read(root().join(WU)).unwrap()).unwrap();
    wu["prompt"] = "do it".into();
    std::fs::write(&bad, wu.to_string()).unwrap();
    let out = k8s(&["--work-unit", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("corral: {}: prompt: unknown field", bad.display())),
        "{err}"
    );
}

#[test]
fn unpinned_image_and_bad_options_exit_2() {
    for (args, option) in [
        (
            vec![
                "export",
                "k8s-job",
                "--work-unit",
                WU,
                "--preset",
                PRESET,
                "--image",
                "registry.example/corral:latest",
            ],
            "--image",
        ),
        (
            vec![
                "export",
                "k8s-job",
                "--work-unit",
                WU,
                "--preset",
                PRESET,
                "--image",
                IMAGE,
                "--parallel",
                "0",
            ],
            "--parallel",
        ),
        (
            vec![
                "export",
                "k8s-job",
                "--work-unit",
                WU,
                "--preset",
                PRESET,
                "--image",
                IMAGE,
                "--runtime-class",
                "Bad_Name",
            ],
            "--runtime-class",
        ),
        (
            vec![
                "export",
                "oci",
                "--work-unit",
                WU,
                "--work-unit",
                WU,
                "--preset",
                PRESET,
            ],
            "--work-unit",
        ),
    ] {
        let out = corral(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
        let err = stderr(&out);
        assert!(
            err.starts_with(&format!("corral: {option}:")) && err.lines().count() == 1,
            "{err}"
        );
    }
}

#[test]
fn oci_writes_the_bundle_config() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("b");
    let out = corral(&[
        "export",
        "oci",
        "--work-unit",
        WU,
        "--preset",
        PRESET,
        "--bundle",
        bundle.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let cfg: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    assert_eq!(cfg["process"]["user"]["uid"], 65534);
    assert_eq!(cfg["process"]["noNewPrivileges"], true);
    for set in [
        "bounding",
        "effective",
        "permitted",
        "inheritable",
        "ambient",
    ] {
        assert_eq!(
            cfg["process"]["capabilities"][set],
            Value::Array(vec![]),
            "{set}"
        );
    }
    assert_eq!(cfg["root"]["readonly"], true);
    assert!(
        cfg["annotations"]["dev.corral.landlock"]
            .as_str()
            .unwrap()
            .starts_with("NOT EXPRESSIBLE")
    );
    let stdout = corral(&["export", "oci", "--work-unit", WU, "--preset", PRESET]);
    assert_eq!(
        stdout.stdout,
        std::fs::read(bundle.join("config.json")).unwrap()
    );
}

/// Runs `corral probe` with only `caps` in the bounding set (root keeps no others on exec).
fn probe_with(caps: &[&str]) -> Output {
    let set: Vec<String> = caps
        .iter()
        .map(|c| format!("+{}", c.to_ascii_lowercase()))
        .collect();
    let bounding = if set.is_empty() {
        "--bounding-set=-all".to_owned()
    } else {
        format!("--bounding-set=-all,{}", set.join(","))
    };
    Command::new("setpriv")
        .arg(bounding)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_corral"))
        .arg("probe")
        .output()
        .expect("setpriv (util-linux) is required: scripts/setup.sh installs it")
}

#[test]
fn the_capabilities_the_job_keeps_are_what_corral_needs() {
    if !mode::is_root() {
        // Rootless mode (ADR-0080): the exported Job's list is root mode's; an ordinary
        // user's corral needs no capability of the host at all, so with an empty bounding
        // set the probe still attests all nine.
        let out = probe_with(&[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "rootless corral probe with an empty bounding set:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("mode: rootless"));
        return;
    }
    let kept: Vec<&str> = CAPABILITIES_KEPT.iter().map(|(c, _)| *c).collect();
    let out = probe_with(&kept);
    assert_eq!(
        out.status.code(),
        Some(0),
        "corral probe with only {kept:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
    // Negative control: the check can fail. Each of these is needed by the probe itself
    // (KILL is needed only to kill a worker's processes on cgroup v1, which the probe's runs
    // never require).
    for needed in [
        "SYS_ADMIN",
        "NET_ADMIN",
        "SETUID",
        "SETGID",
        "SETPCAP",
        "CHOWN",
        "DAC_OVERRIDE",
    ] {
        let fewer: Vec<&str> = kept.iter().copied().filter(|c| *c != needed).collect();
        assert_eq!(
            probe_with(&fewer).status.code(),
            Some(3),
            "corral probe without {needed} must miss a capability"
        );
    }
}

#[test]
fn oci_seccomp_profile_mirrors_corrals_filter() {
    let mut always = BTreeSet::new();
    let mut enosys = BTreeSet::new();
    for r in seccomp::RULES {
        match r.cond {
            Cond::Always if r.errno == 1 => {
                always.insert(r.name);
            }
            Cond::Always => {
                assert_eq!(r.errno, 38, "{}", r.name);
                enosys.insert(r.name);
            }
            Cond::ArgMaskAny { arg, mask } => {
                assert_eq!((r.name, arg), ("clone", 0));
                let ours: u64 = oci::CLONE_NS_FLAGS.iter().fold(0, |a, f| a | f);
                assert_eq!(u64::from(mask), ours);
            }
            Cond::ArgEqAny { arg, values } => {
                assert_eq!((r.name, arg), ("ioctl", 1));
                let theirs: Vec<u64> = values.iter().map(|v| u64::from(*v)).collect();
                assert_eq!(theirs, oci::DENY_IOCTLS);
            }
            Cond::ArgNotIn { arg, allowed } => {
                let theirs: Vec<u64> = allowed.iter().map(|v| u64::from(*v)).collect();
                let ours = match (r.name, arg) {
                    ("socket", 0) => oci::ALLOWED_FAMILIES,
                    ("socketpair", 0) => oci::SOCKETPAIR_FAMILIES,
                    ("socket", 2) => {
                        assert_eq!(r.errno, 93, "EPROTONOSUPPORT");
                        oci::ALLOWED_PROTOCOLS
                    }
                    other => panic!("an argument rule the OCI profile does not mirror: {other:?}"),
                };
                assert_eq!(theirs, ours, "{} arg {arg}", r.name);
            }
        }
    }
    assert_eq!(always, oci::DENY_EPERM.iter().copied().collect());
    assert_eq!(enosys, oci::DENY_ENOSYS.iter().copied().collect());
    // And the profile carries them.
    let profile = serde_json::to_value(oci::seccomp().unwrap()).unwrap();
    let names: BTreeSet<&str> = profile["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["names"].as_array().unwrap())
        .map(|n| n.as_str().unwrap())
        .collect();
    for n in always
        .iter()
        .chain(&enosys)
        .chain(&["clone", "ioctl", "socket", "socketpair"])
    {
        assert!(names.contains(n), "{n} missing from the OCI profile");
    }
}
