//! The schema corpus (`tests/schema-corpus/index.json` of the repository), admission's side:
//! every `schema_rejects` and `admission_only` case is rejected with its labelled code (and
//! only that code), every `admitted` case is admitted. `tests/validate_examples.py` checks the
//! schemas' side: they reject exactly the `schema_rejects` cases.
//!
//! Also checks that the lists the schemas are generated from (`corral_contract::rules`) are
//! the ones admission decides with.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use corral_admission::{admit, forbidden_env_name, parse_document};
use corral_contract::{AgentPreset, ReasonCode, TrustedConnections, WorkUnit, rules};
use serde_json::Value;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/schema-corpus")
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(corpus().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The document of each kind a case is admitted with: its own file, else `with`, else the
/// defaults (`null`: none).
fn document(case: &Value, defaults: &Value, kind: &str) -> Option<String> {
    let file = case["file"].as_str().unwrap();
    if file.split('/').next() == Some(kind) {
        return Some(file.to_owned());
    }
    let with = &case["with"][kind];
    let chosen = if case["with"].get(kind).is_some() {
        with
    } else {
        &defaults[kind]
    };
    chosen.as_str().map(str::to_owned)
}

#[test]
fn admission_decides_every_corpus_case_as_labelled() {
    let index: Value = serde_json::from_slice(&read("index.json")).unwrap();
    let defaults = &index["defaults"];
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut codes = BTreeSet::new();
    let mut failures = Vec::new();
    for case in index["cases"].as_array().unwrap() {
        let file = case["file"].as_str().unwrap();
        let expect = case["expect"].as_str().unwrap();
        *counts.entry(expect.to_owned()).or_default() += 1;
        let wu_file = document(case, defaults, "work-unit").unwrap();
        let preset_file = document(case, defaults, "agent-preset").unwrap();
        let work_unit: WorkUnit = parse_document(&read(&wu_file))
            .unwrap_or_else(|e| panic!("{file}: {wu_file} does not parse: {e}"));
        let preset: AgentPreset = parse_document(&read(&preset_file))
            .unwrap_or_else(|e| panic!("{file}: {preset_file} does not parse: {e}"));
        let connections: Option<TrustedConnections> =
            document(case, defaults, "connections").map(|c| {
                parse_document(&read(&c))
                    .unwrap_or_else(|e| panic!("{file}: {c} does not parse: {e}"))
            });
        let decision = admit(&work_unit, &preset, connections.as_ref(), &BTreeMap::new());
        match (expect, decision) {
            ("admitted", Ok(_)) => {}
            ("admitted", Err(rejected)) => {
                failures.push(format!(
                    "{file}: labelled admitted, rejected: {:?}",
                    rejected.0
                ));
            }
            ("schema_rejects" | "admission_only", Ok(_)) => {
                failures.push(format!("{file}: labelled {expect}, but admitted"));
            }
            ("schema_rejects" | "admission_only", Err(rejected)) => {
                let want = case["code"].as_str().unwrap();
                codes.insert(want.to_owned());
                let got: Vec<&str> = rejected.0.iter().map(|r| r.code.as_str()).collect();
                if got.is_empty() || got.iter().any(|c| *c != want) {
                    failures.push(format!("{file}: labelled {want}, rejected with {got:?}"));
                }
            }
            (other, _) => failures.push(format!("{file}: unknown label {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The corpus covers every reason admission gives for a document alone or with its
    // companions (the caller environment's codes are not about documents).
    for code in ReasonCode::ALL {
        let name = code.as_str();
        let document_code = matches!(
            code,
            ReasonCode::SchemaVersionUnsupported
                | ReasonCode::FieldMissing
                | ReasonCode::ObjectiveEmpty
                | ReasonCode::SandboxNotRequired
                | ReasonCode::ProcessExecutionNotPermitted
                | ReasonCode::SecretsNotPermitted
                | ReasonCode::NetworkUnrestricted
                | ReasonCode::BudgetNotPositive
                | ReasonCode::AllowedPathsEmpty
                | ReasonCode::FilesystemWriteMismatch
                | ReasonCode::PathInvalid
                | ReasonCode::PathProtected
                | ReasonCode::BaseShaInvalid
                | ReasonCode::IdInvalid
                | ReasonCode::DestinationInvalid
                | ReasonCode::DestinationDuplicate
                | ReasonCode::NetworkAllowlistUnexpected
                | ReasonCode::NetworkAllowlistEmpty
                | ReasonCode::NetworkPolicyMismatch
                | ReasonCode::ModelConnectionMissing
                | ReasonCode::ModelConnectionUnexpected
                | ReasonCode::DestinationNotInConnection
                | ReasonCode::ExecutableNotAbsolute
                | ReasonCode::ExecutableDigestInvalid
                | ReasonCode::ArgvInvalid
                | ReasonCode::PromptTransportFile
                | ReasonCode::PromptFlagInvalid
                | ReasonCode::AuthorityNotCandidateOnly
                | ReasonCode::EnvCredentialName
                | ReasonCode::EnvNameInvalid
                | ReasonCode::ReadOnlyPathInvalid
        );
        if document_code {
            assert!(codes.contains(name), "no corpus case rejected with {name}");
        }
    }
    assert!(counts["admitted"] >= 5, "{counts:?}");
    assert!(counts["schema_rejects"] >= 42, "{counts:?}");
    assert!(counts["admission_only"] >= 5, "{counts:?}");
}

/// What each list means, decided by admission itself: every listed name, and names built
/// from every prefix and suffix in both cases, get the code the schema's description names.
#[test]
fn admission_refuses_every_listed_name_with_the_schemas_code() {
    let code = |name: &str| forbidden_env_name(name).map(|(code, _)| code);
    for name in rules::RESERVED_ENV_NAMES
        .iter()
        .chain(rules::CODE_INJECTION_ENV_NAMES)
    {
        assert_eq!(code(name), Some(ReasonCode::EnvNameInvalid), "{name}");
        assert_eq!(
            code(&name.to_ascii_lowercase()),
            Some(ReasonCode::EnvNameInvalid),
            "{name}"
        );
    }
    let prefix = rules::CODE_INJECTION_ENV_PREFIX;
    for name in [
        format!("{prefix}X"),
        format!("{prefix}x").to_ascii_lowercase(),
    ] {
        assert_eq!(code(&name), Some(ReasonCode::EnvNameInvalid), "{name}");
    }
    let mut credentials: Vec<String> = rules::CREDENTIAL_ENV_NAMES
        .iter()
        .map(|n| (*n).to_owned())
        .collect();
    credentials.extend(
        rules::CREDENTIAL_ENV_PREFIXES
            .iter()
            .map(|p| format!("{p}X")),
    );
    credentials.extend(
        rules::CREDENTIAL_ENV_SUFFIXES
            .iter()
            .map(|s| format!("X{s}")),
    );
    for name in &credentials {
        assert_eq!(code(name), Some(ReasonCode::EnvCredentialName), "{name}");
        assert_eq!(
            code(&name.to_ascii_lowercase()),
            Some(ReasonCode::EnvCredentialName),
            "{name}"
        );
    }
    let long = "X".repeat(rules::MAX_ENV_NAME_BYTES);
    assert_eq!(code(&long), None);
    assert_eq!(code(&format!("{long}X")), Some(ReasonCode::EnvNameInvalid));
}
