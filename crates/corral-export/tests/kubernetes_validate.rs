//! The exported Job and ConfigMap against the official Kubernetes OpenAPI schema, checked by
//! an independent validator (`kubernetes-validate --strict`, PyPI, offline; installed by
//! `scripts/setup.sh`). A missing validator fails the test, it never skips. A negative
//! control proves the check can fail.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

mod common;

use std::path::Path;
use std::process::Command;

use corral_export::{k8s, to_json_pretty};

/// The Kubernetes version whose schema we validate against (k8s-openapi feature `v1_37`).
const K8S_VERSION: &str = "1.37.0";

fn validate(files: &[&Path]) -> (bool, String) {
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "--kubernetes-version", K8S_VERSION])
        .args(files)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "kubernetes-validate is required (pip install kubernetes-validate==1.37.0, done by scripts/setup.sh) and could not be started: {e}"
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn exported_jobs_and_configmaps_pass_strict_validation() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (name, (batch, opts)) in [
        ("offline", common::offline()),
        ("batch", common::model_batch()),
    ] {
        let e = k8s::job(&batch, &opts).unwrap();
        files.push(write(
            dir.path(),
            &format!("job-{name}.json"),
            &to_json_pretty(&e.job, "job").unwrap(),
        ));
        files.push(write(
            dir.path(),
            &format!("cm-{name}.json"),
            &to_json_pretty(&e.config_map, "cm").unwrap(),
        ));
    }
    let refs: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    let (ok, text) = validate(&refs);
    assert!(ok, "kubernetes-validate rejected the export:\n{text}");
    assert_eq!(
        text.matches("passed for resource").count(),
        4,
        "every file must be validated against the schema:\n{text}"
    );
    assert!(
        text.contains("job/") && text.contains("configmap/"),
        "{text}"
    );
}

#[test]
fn negative_controls_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let (batch, opts) = common::offline();
    let job = serde_json::to_value(k8s::job(&batch, &opts).unwrap().job).unwrap();

    // An unknown field inside the pod's container (strict mode must refuse it).
    let mut unknown = job.clone();
    unknown["spec"]["template"]["spec"]["containers"][0]["corralExtra"] = true.into();
    let p = write(dir.path(), "unknown.json", &unknown.to_string());
    let (ok, text) = validate(&[&p]);
    assert!(!ok, "an unknown field must fail validation:\n{text}");
    assert!(text.contains("corralExtra"), "{text}");

    // A wrong type.
    let mut typed = job;
    typed["spec"]["completions"] = "one".into();
    let p = write(dir.path(), "typed.json", &typed.to_string());
    let (ok, text) = validate(&[&p]);
    assert!(!ok, "a string completions must fail validation:\n{text}");
    assert!(text.contains("completions"), "{text}");
}
