//! Golden files: the exported documents byte for byte. Regenerate after an intended change
//! with `CORRAL_BLESS=1 cargo test -p corral-export --test golden` and review the diff.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

mod common;

use std::path::Path;

use corral_export::oci::{OciOptions, config};
use corral_export::{k8s, to_json_pretty};

fn check(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("CORRAL_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (create it with CORRAL_BLESS=1 cargo test -p corral-export --test golden)",
            path.display()
        )
    });
    if expected != actual {
        let mut diff = String::new();
        let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
        for i in 0..e.len().max(a.len()) {
            let (x, y) = (e.get(i), a.get(i));
            if x != y {
                diff.push_str(&format!(
                    "line {}:\n- {}\n+ {}\n",
                    i + 1,
                    x.unwrap_or(&"<none>"),
                    y.unwrap_or(&"<none>")
                ));
            }
        }
        panic!(
            "{name} drifted from the golden file (CORRAL_BLESS=1 to accept after review):\n{diff}"
        );
    }
}

#[test]
fn offline_job_and_configmap() {
    let (batch, opts) = common::offline();
    let export = k8s::job(&batch, &opts).unwrap();
    check(
        "job-offline.json",
        &to_json_pretty(&export.job, "job").unwrap(),
    );
    check(
        "configmap-offline.json",
        &to_json_pretty(&export.config_map, "cm").unwrap(),
    );
}

#[test]
fn model_batch_job_and_configmap() {
    let (batch, opts) = common::model_batch();
    let export = k8s::job(&batch, &opts).unwrap();
    check(
        "job-batch.json",
        &to_json_pretty(&export.job, "job").unwrap(),
    );
    check(
        "configmap-batch.json",
        &to_json_pretty(&export.config_map, "cm").unwrap(),
    );
}

#[test]
fn offline_oci_config() {
    let (batch, _) = common::offline();
    let spec = config(&batch, &OciOptions::default()).unwrap();
    check("oci-offline.json", &to_json_pretty(&spec, "oci").unwrap());
}

#[test]
fn allowlist_oci_config() {
    let spec = config(&common::allowlist(), &OciOptions::default()).unwrap();
    check("oci-allowlist.json", &to_json_pretty(&spec, "oci").unwrap());
}

#[test]
fn exported_json_escapes_bidi_and_invisible_code_points() {
    // A WorkUnit objective can carry a right-to-left override; the exported ConfigMap and
    // Job must not hand it raw to a terminal or an editor (ADR-0004).
    let v = serde_json::json!({"objective": "fix\u{202e}txt.exe\u{200b}\u{85}"});
    let s = corral_export::to_json_pretty(&v, "test").unwrap();
    for raw in ['\u{202e}', '\u{200b}', '\u{85}'] {
        assert!(!s.contains(raw), "{raw:?} written raw: {s}");
    }
    assert!(
        s.contains("\\u202e") && s.contains("\\u200b") && s.contains("\\u0085"),
        "{s}"
    );
    // Same value back.
    assert_eq!(serde_json::from_str::<serde_json::Value>(&s).unwrap(), v);
    // Control: serde_json's own pretty printer writes them raw.
    assert!(
        serde_json::to_string_pretty(&v)
            .unwrap()
            .contains('\u{202e}')
    );
}
