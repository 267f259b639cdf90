//! The committed schemas are exactly what the types generate (`cargo xtask schemas`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use corral_contract::schema::{SCHEMA_NAMES, schema_for_name};

#[test]
fn committed_schemas_match_the_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schemas");
    for name in SCHEMA_NAMES {
        let path = dir.join(format!("{name}.schema.json"));
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        let generated =
            serde_json::to_string_pretty(&schema_for_name(name).unwrap()).unwrap() + "\n";
        assert!(
            committed == generated,
            "{} drifted from the types: run `cargo xtask schemas`",
            path.display()
        );
    }
}

#[test]
fn schemas_are_strict_2020_12() {
    for name in SCHEMA_NAMES {
        let schema = schema_for_name(name).unwrap();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        let text = schema.to_string();
        assert!(
            !text.contains("\"format\":\"uint"),
            "{name} keeps an integer format"
        );
        assert!(
            !text.contains("\"format\":\"int"),
            "{name} keeps an integer format"
        );
        assert_eq!(
            schema["additionalProperties"], false,
            "{name} must reject unknown fields"
        );
    }
}
