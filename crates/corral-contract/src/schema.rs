//! JSON Schemas (draft 2020-12) generated from the contract types.
//!
//! Two adjustments keep them exact and acceptable to strict validators such as `ajv --strict`:
//! integer `format`s (`uint64`, `uint16`...) that schemars emits are removed (the `minimum`
//! stays), and structs whose fields are `Option` only so that admission can report a missing
//! field with a reason code are marked all-required and non-null (`require_all`).

use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value};

use crate::documents::{AgentPreset, TrustedConnections, WorkUnit};
use crate::manifest::ResultManifest;
use crate::reports::{AdmissionReport, ProbeReportDocument, VerifyReport};

/// The documents `corral schema NAME` prints, by name.
pub const SCHEMA_NAMES: [&str; 7] = [
    "work-unit",
    "agent-preset",
    "connections",
    "result-manifest",
    "probe-report",
    "admission-report",
    "verify-report",
];

/// The schema for one document name, or `None` for an unknown name.
#[must_use]
pub fn schema_for_name(name: &str) -> Option<Value> {
    let schema = match name {
        "work-unit" => generate::<WorkUnit>(),
        "agent-preset" => generate::<AgentPreset>(),
        "connections" => generate::<TrustedConnections>(),
        "result-manifest" => generate::<ResultManifest>(),
        "probe-report" => generate::<ProbeReportDocument>(),
        "admission-report" => generate::<AdmissionReport>(),
        "verify-report" => generate::<VerifyReport>(),
        _ => return None,
    };
    let mut value = schema.to_value();
    strip_integer_formats(&mut value);
    if let Some(obj) = value.as_object_mut() {
        obj.insert(
            "$id".into(),
            Value::String(format!("https://corral.invalid/schemas/{name}.schema.json")),
        );
    }
    Some(value)
}

fn generate<T: JsonSchema>() -> Schema {
    SchemaGenerator::new(SchemaSettings::draft2020_12()).into_root_schema_for::<T>()
}

fn strip_integer_formats(value: &mut Value) {
    match value {
        Value::Object(obj) => {
            let is_int_format = obj.get("format").and_then(Value::as_str).is_some_and(|f| {
                matches!(
                    f,
                    "uint"
                        | "uint8"
                        | "uint16"
                        | "uint32"
                        | "uint64"
                        | "int"
                        | "int8"
                        | "int16"
                        | "int32"
                        | "int64"
                        | "uint128"
                        | "int128"
                )
            });
            if is_int_format {
                obj.remove("format");
            }
            for v in obj.values_mut() {
                strip_integer_formats(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_integer_formats),
        _ => {}
    }
}

/// schemars transform: every key required, `null` where the type allows it (a report prints
/// every key whatever the outcome).
pub(crate) fn require_keys(schema: &mut Schema) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let Some(Value::Object(props)) = obj.get("properties") else {
        return;
    };
    let names: Vec<Value> = props.keys().cloned().map(Value::String).collect();
    obj.insert("required".into(), Value::Array(names));
}

/// schemars transform: every property required ([`require_keys`]) and not nullable.
pub(crate) fn require_all(schema: &mut Schema) {
    require_keys(schema);
    let Some(Value::Object(props)) = schema
        .as_object_mut()
        .and_then(|obj| obj.get_mut("properties"))
    else {
        return;
    };
    for prop in props.values_mut() {
        if let Value::Object(p) = prop {
            strip_null(p);
        }
    }
}

fn strip_null(p: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = p.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            p.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(any)) = p.get_mut("anyOf") {
        any.retain(|s| s.get("type").and_then(Value::as_str) != Some("null"));
        if any.len() == 1 {
            let only = any.remove(0);
            p.remove("anyOf");
            if let Value::Object(inner) = only {
                for (k, v) in inner {
                    p.insert(k, v);
                }
            }
        }
    }
    if let Some(Value::Array(choices)) = p.get_mut("enum") {
        choices.retain(|c| !c.is_null());
    }
    if let Some(Value::Array(choices)) = p.get_mut("oneOf") {
        choices.retain(|s| s.get("type").and_then(Value::as_str) != Some("null"));
    }
}
