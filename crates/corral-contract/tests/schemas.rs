//! The generated schemas are strict draft 2020-12 with stable, versioned `$id`s. (That the
//! committed `schemas/` files are exactly what the types generate is `cargo xtask schemas
//! --check`, run by `cargo xtask ci`: a packaged crate has no `schemas/` folder to read.)
#![cfg(feature = "schema")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use corral_contract::schema::{SCHEMA_NAMES, schema_for_name, schema_id, schema_version_of};

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
    assert_eq!(schema_for_name("nope"), None);
}

#[test]
fn each_schema_names_its_document_version() {
    for name in SCHEMA_NAMES {
        let schema = schema_for_name(name).unwrap();
        let version = schema_version_of(name).unwrap();
        assert_eq!(schema["properties"]["schema_version"]["const"], version);
        let id = schema_id(name).unwrap();
        assert_eq!(schema["$id"], id.as_str());
        assert_eq!(
            id,
            format!(
                "https://corral-sandbox.github.io/corral/schemas/{name}/{}.schema.json",
                version.rsplit('/').next().unwrap()
            )
        );
    }
}

/// Every property of the input documents says what it is for.
#[test]
fn every_input_property_is_described() {
    fn walk(at: &str, v: &serde_json::Value, missing: &mut Vec<String>) {
        if let Some(props) = v.get("properties").and_then(|p| p.as_object()) {
            for (key, prop) in props {
                if prop.get("description").is_none() {
                    missing.push(format!("{at}.{key}"));
                }
            }
        }
        if let Some(defs) = v.get("$defs").and_then(|d| d.as_object()) {
            for (key, def) in defs {
                walk(&format!("{at}/$defs/{key}"), def, missing);
            }
        }
    }
    let mut missing = Vec::new();
    for name in ["work-unit", "agent-preset", "connections"] {
        walk(name, &schema_for_name(name).unwrap(), &mut missing);
    }
    assert!(missing.is_empty(), "no description: {missing:?}");
}
