//! Shared by the export tests: the example documents and the cases exported from them.
#![allow(dead_code, reason = "each test binary uses a different part")]

use std::path::{Path, PathBuf};

use corral_admission::parse_document;
use corral_contract::{AgentPreset, TrustedConnections, WorkUnit};
use corral_export::Admitted;
use corral_export::k8s::JobOptions;
use serde::de::DeserializeOwned;

/// The repository's `examples/` folder, wherever the checkout is.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

pub fn doc<T: DeserializeOwned + serde::Serialize>(rel: &str) -> T {
    let path = examples().join(rel);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_document(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn batch(work_units: &[&str], preset: &str, connections: Option<&str>) -> Admitted {
    let wus: Vec<WorkUnit> = work_units.iter().map(|w| doc(w)).collect();
    let preset: AgentPreset = doc(preset);
    let conn: Option<TrustedConnections> = connections.map(doc);
    Admitted::admit(wus, preset, conn).unwrap_or_else(|r| panic!("not admitted: {r:?}"))
}

pub const IMAGE: &str = "registry.example/corral@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The single offline WorkUnit on gVisor (README's example).
pub fn offline() -> (Admitted, JobOptions) {
    (
        batch(
            &["work-units/fix-off-by-one.json"],
            "presets/offline-agent.json",
            None,
        ),
        JobOptions {
            image: IMAGE.to_owned(),
            runtime_class: Some("gvisor".to_owned()),
            parallelism: 1,
            name: None,
            repo: "/repo".to_owned(),
        },
    )
}

/// A batch of two model_only WorkUnits with trusted connections on Kata, two at a time.
pub fn model_batch() -> (Admitted, JobOptions) {
    (
        batch(
            &[
                "work-units/use-local-model.json",
                "work-units/use-local-model.json",
            ],
            "presets/local-model-agent.json",
            Some("connections/local-llm.json"),
        ),
        JobOptions {
            image: IMAGE.to_owned(),
            runtime_class: Some("kata".to_owned()),
            parallelism: 2,
            name: Some("corral-batch".to_owned()),
            repo: "/srv/repo".to_owned(),
        },
    )
}

/// An allowlist WorkUnit (OCI: no proxy, so no network at all).
pub fn allowlist() -> Admitted {
    batch(
        &["work-units/fetch-crates.json"],
        "presets/allowlisted-agent.json",
        None,
    )
}
