//! The exported OCI configs against the OCI runtime-spec JSON Schema (Debian's
//! golang-github-opencontainers-specs-dev, installed by `scripts/setup.sh`), validated by
//! python-jsonschema through `tests/validate_oci_config.py`. A missing schema fails the test;
//! a negative control proves the check can fail.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use corral_export::oci::{OciOptions, config};
use corral_export::to_json_pretty;

const SCHEMA_DIR: &str = "/usr/share/gocode/src/github.com/opencontainers/runtime-spec/schema";

fn validate(files: &[PathBuf]) -> (bool, String) {
    assert!(
        Path::new(SCHEMA_DIR).join("config-schema.json").is_file(),
        "the OCI runtime-spec schema is required at {SCHEMA_DIR}: apt-get install golang-github-opencontainers-specs-dev (done by scripts/setup.sh)"
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/validate_oci_config.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(SCHEMA_DIR)
        .args(files)
        .output()
        .expect("python3 is required");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn exported_configs_match_the_runtime_spec_schema() {
    let dir = tempfile::tempdir().unwrap();
    let (offline, _) = common::offline();
    let mut files = Vec::new();
    for (name, batch) in [("offline", offline), ("allowlist", common::allowlist())] {
        let p = dir.path().join(format!("{name}.json"));
        let spec = config(&batch, &OciOptions::default()).unwrap();
        std::fs::write(&p, to_json_pretty(&spec, "oci").unwrap()).unwrap();
        files.push(p);
    }
    let (ok, text) = validate(&files);
    assert!(ok, "{text}");
    assert_eq!(text.matches(": valid").count(), 2, "{text}");

    // Negative control.
    let mut bad: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    bad["process"]["user"]["uid"] = "nobody".into();
    bad["linux"]["seccomp"]["defaultAction"] = "SCMP_ACT_MAYBE".into();
    let p = dir.path().join("bad.json");
    std::fs::write(&p, bad.to_string()).unwrap();
    let (ok, text) = validate(&[p]);
    assert!(!ok, "a broken config must fail:\n{text}");
    assert!(
        text.contains("process/user/uid") && text.contains("defaultAction"),
        "{text}"
    );
}
