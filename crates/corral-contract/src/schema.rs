//! JSON Schemas (draft 2020-12) generated from the contract types (feature `schema`).
//!
//! A schema checks a document's shape and every rule of admission that JSON Schema can state
//! on one document; `corral-admission` stays the authority (README, "Documents", lists what
//! only it can check).
//!
//! Adjustments that keep the schemas exact and acceptable to strict validators such as
//! `ajv --strict`: integer `format`s (`uint64`, `uint16`...) that schemars emits are removed
//! (the `minimum` stays), and structs whose fields are `Option` only so that admission can
//! report a missing field with a reason code are marked all-required and non-null
//! (`require_all`).
//!
//! Regular expressions are written for both dialects validators use: ECMA-262 (the JSON
//! Schema dialect: ajv) and Python's `re` (python-jsonschema). So they use explicit classes
//! only (`\d`, `\s`, `\w` and `.` mean different things in the two), spell code points of the
//! Basic Multilingual Plane as `\uXXXX` and the ones beyond it as themselves (the schema file
//! writes those as JSON escapes), and end every anchored pattern with `$(?!\n)`: Python's `$`
//! also matches before a final newline. Character classes that mirror a Rust predicate
//! (`char::is_control`, `char::is_whitespace`, [`crate::path::is_default_ignorable`]) are
//! computed from it, so they cannot drift.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings, json_schema};
use serde_json::{Map, Value, json};

use crate::documents::{
    AGENT_PRESET_SCHEMA, AgentPreset, CONNECTIONS_SCHEMA, RESULT_MANIFEST_SCHEMA,
    TrustedConnections, WORK_UNIT_SCHEMA, WorkUnit,
};
use crate::manifest::ResultManifest;
use crate::reports::{
    ADMISSION_REPORT_SCHEMA, AdmissionReport, PROBE_REPORT_SCHEMA, ProbeReportDocument,
    VERIFY_REPORT_SCHEMA, VerifyReport,
};
use crate::rules;

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

/// Where the schemas are published: `{SCHEMA_BASE_URL}/{name}/{version}.schema.json`, the
/// version being the one of the document's `schema_version` (`v1` of
/// `corral.work-unit/v1`). Each `$id` names exactly one version of one document.
pub const SCHEMA_BASE_URL: &str = "https://corral-sandbox.github.io/corral/schemas";

/// The `schema_version` a document of this name carries, or `None` for an unknown name.
#[must_use]
pub fn schema_version_of(name: &str) -> Option<&'static str> {
    Some(match name {
        "work-unit" => WORK_UNIT_SCHEMA,
        "agent-preset" => AGENT_PRESET_SCHEMA,
        "connections" => CONNECTIONS_SCHEMA,
        "result-manifest" => RESULT_MANIFEST_SCHEMA,
        "probe-report" => PROBE_REPORT_SCHEMA,
        "admission-report" => ADMISSION_REPORT_SCHEMA,
        "verify-report" => VERIFY_REPORT_SCHEMA,
        _ => return None,
    })
}

/// The stable `$id` of a schema: `https://corral-sandbox.github.io/corral/schemas/work-unit/v1.schema.json`.
#[must_use]
pub fn schema_id(name: &str) -> Option<String> {
    let version = schema_version_of(name)?.rsplit('/').next()?;
    Some(format!("{SCHEMA_BASE_URL}/{name}/{version}.schema.json"))
}

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
        obj.insert("$id".into(), Value::String(schema_id(name)?));
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

/// schemars transform of the WorkUnit's budget: every ceiling required and not nullable
/// ([`require_all`]) but the optional `cpu_millicores`, which may be absent or `null`, as
/// admission reads it.
pub(crate) fn budget_rule(schema: &mut Schema) {
    require_all(schema);
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(req)) = obj.get_mut("required") {
        req.retain(|k| k != "cpu_millicores");
    }
    if let Some(Value::Object(p)) = obj
        .get_mut("properties")
        .and_then(|p| p.get_mut("cpu_millicores"))
    {
        p.insert("type".into(), json!(["integer", "null"]));
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

/// Appends conditional rules to a schema's `allOf`.
fn add_all_of(schema: &mut Schema, rules: Vec<Value>) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let all = obj
        .entry("allOf")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = all {
        list.extend(rules);
    }
}

/// schemars transform on `Permissions`: the rows of the network table that need nothing but
/// the WorkUnit.
pub(crate) fn network_rules(schema: &mut Schema) {
    add_all_of(
        schema,
        vec![
            json!({
                "description": "network none reaches no destination: network_allowlist is empty (network_allowlist_unexpected).",
                "if": { "properties": { "network": { "const": "none" } }, "required": ["network"] },
                "then": { "properties": { "network_allowlist": { "type": "array", "maxItems": 0 } } }
            }),
            json!({
                "description": "network allowlist names at least one destination (network_allowlist_empty).",
                "if": { "properties": { "network": { "const": "allowlist" } }, "required": ["network"] },
                "then": { "properties": { "network_allowlist": { "type": "array", "minItems": 1 } } }
            }),
        ],
    );
}

/// schemars transform on `AgentPreset`: `model_connection` belongs to `model_only` presets,
/// and only to them.
pub(crate) fn model_connection_rule(schema: &mut Schema) {
    add_all_of(
        schema,
        vec![json!({
            "description": "A model_only preset names its trusted connection (model_connection_missing); any other preset names none (model_connection_unexpected).",
            "if": {
                "properties": { "network_policy": { "const": "model_only" } },
                "required": ["network_policy"]
            },
            "then": {
                "properties": { "model_connection": { "type": "string" } },
                "required": ["model_connection"]
            },
            "else": { "properties": { "model_connection": { "type": "null" } } }
        })],
    );
}

// Regular expressions.

/// `^(?:body)$`, ending where both dialects agree the string ends.
fn anchored(body: &str) -> String {
    format!("^(?:{body})$(?!\\n)")
}

/// One code point inside a character class: `\uXXXX` in the Basic Multilingual Plane,
/// itself beyond it (the JSON writer escapes it).
fn class_char(c: char) -> String {
    if u32::from(c) <= 0xFFFF {
        format!("\\u{:04x}", u32::from(c))
    } else {
        c.to_string()
    }
}

/// The inside of a character class holding exactly the code points `pred` accepts, as ranges.
fn class_of(pred: impl Fn(char) -> bool) -> String {
    let mut out = String::new();
    let mut run: Option<(char, char)> = None;
    let flush = |run: (char, char), out: &mut String| {
        out.push_str(&class_char(run.0));
        if run.1 != run.0 {
            out.push('-');
            out.push_str(&class_char(run.1));
        }
    };
    for c in '\0'..=char::MAX {
        if !pred(c) {
            continue;
        }
        run = match run {
            Some((lo, hi)) if u32::from(hi) + 1 == u32::from(c) => Some((lo, c)),
            Some(done) => {
                flush(done, &mut out);
                Some((c, c))
            }
            None => Some((c, c)),
        };
    }
    if let Some(done) = run {
        flush(done, &mut out);
    }
    out
}

/// Rust's `char::is_control` (Unicode `Cc`): what paths, names and flags may not hold.
fn controls() -> String {
    class_of(char::is_control)
}

/// A word in either ASCII case: `env` gives `[Ee][Nn][Vv]`.
fn ascii_case_insensitive(word: &str) -> String {
    word.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Alternatives of literal words (letters, digits and `_`), each in either ASCII case.
fn words_ignoring_case(words: &[&str]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for w in words {
        let upper = w.to_ascii_uppercase();
        if !seen.contains(&upper) {
            seen.push(upper);
        }
    }
    seen.iter()
        .map(|w| ascii_case_insensitive(w))
        .collect::<Vec<_>>()
        .join("|")
}

/// `id` of a WorkUnit or AgentPreset: 1-200 of `[A-Za-z0-9._-]`, not starting with `.`.
pub(crate) fn id_pattern() -> String {
    let rest = rules::MAX_ID_BYTES - 1;
    anchored(&format!("[A-Za-z0-9_-][A-Za-z0-9._-]{{0,{rest}}}"))
}

/// A path component that is not empty, `.` or `..`, of characters outside `extra` and the
/// control characters (`/` is always outside).
fn component(extra: &str) -> String {
    format!(
        "(?!\\.\\.?(?:/|$))[^/{extra}{controls}]+",
        controls = controls()
    )
}

/// A scope entry (RepoPath rules, one trailing `/` allowed).
pub(crate) fn path_pattern_pattern() -> String {
    let c = component("\\\\");
    anchored(&format!("(?:{c}/)*{c}/?"))
}

/// A repository path (`RepoPath`).
pub(crate) fn repo_path_pattern() -> String {
    let c = component("\\\\");
    anchored(&format!("(?:{c}/)*{c}"))
}

/// A normalized absolute host path: `/` then components, none empty, `.` or `..`, no
/// trailing `/`, no control character.
pub(crate) fn host_path_pattern() -> String {
    let c = component("");
    anchored(&format!("(?:/{c})+"))
}

/// Some component of the entry is `.git` or a name a file system may take for it: exactly
/// what `PathPattern::names_git_dir` refuses, except lookalikes that need Unicode case rules
/// beyond ASCII to be recognised (those are admission's alone).
pub(crate) fn git_lookalike_pattern() -> String {
    let ign = class_of(crate::path::is_default_ignorable);
    // Characters whose lower case is longer in UTF-8 (`İ`): a name holding one is left to
    // admission, whose third rule compares byte lengths.
    let grows = class_of(|c| c.to_lowercase().map(char::len_utf8).sum::<usize>() > c.len_utf8());
    let i = format!("[{ign}]*");
    // `.git`, in any ASCII case, then any trailing dots and spaces, ignorables anywhere.
    let dot_git = format!("{i}\\.{i}[Gg]{i}[Ii]{i}[Tt][. {ign}]*");
    // Its NTFS short name `git~N`.
    let short = format!("{i}[Gg]{i}[Ii]{i}[Tt]{i}~{i}[0-9][0-9{ign}]*[. {ign}]*");
    // A name that held an ignorable and spells `git` once the ignorables are gone.
    let hidden = format!("(?=[^/]*[{ign}])[^/{grows}]*[Gg]{i}[Ii]{i}[Tt][^/{grows}]*");
    format!("(?:^|/)(?:{dot_git}|{short}|{hidden})(?:/|$)")
}

/// `host:port` as `Destination::parse` reads it (see [`crate::destination`]).
pub(crate) fn destination_pattern() -> String {
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    let ipv4 = format!("(?:{octet}\\.){{3}}{octet}");
    let label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    // At most 253 characters without the one trailing dot, and a last label that is not a
    // number (all digits, or `0x` and hex digits): such a host is read as an IPv4 address.
    let dns = format!(
        "(?=[A-Za-z0-9.-]{{1,253}}\\.?:)(?:{label}\\.)*(?![0-9]+\\.?:)(?!0[Xx][0-9A-Fa-f]*\\.?:){label}\\.?"
    );
    // Only the characters and the length of an IPv6 literal; its grammar is admission's.
    let ipv6 = "\\[[0-9A-Fa-f:.]{2,45}\\]";
    let port =
        "(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])";
    anchored(&format!("(?:{ipv4}|{dns}|{ipv6}):{port}"))
}

/// Text that is not empty once Rust's `str::trim` has removed white space.
pub(crate) fn not_blank_pattern() -> String {
    format!("[^{}]", class_of(char::is_whitespace))
}

// Marker types: named `$defs` for values that are plain strings in the Rust types.

macro_rules! string_def {
    ($(#[$doc:meta])* $name:ident, $generator:ident => $body:block) => {
        $(#[$doc])*
        pub(crate) struct $name;

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema($generator: &mut SchemaGenerator) -> Schema $body
        }
    };
}

string_def!(
    /// A WorkUnit or AgentPreset `id`.
    Id, _generator => {
        json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": rules::MAX_ID_BYTES,
            "pattern": id_pattern(),
            "description": "1-200 of A-Z a-z 0-9 . _ -, not starting with '.' (id_invalid)."
        })
    }
);

string_def!(
    /// A WorkUnit's objective.
    Objective, _generator => {
        json_schema!({
            "type": "string",
            "pattern": not_blank_pattern()
        })
    }
);

string_def!(
    /// An entry of `allowed_paths` or `filesystem_write`: a scope entry that can be writable.
    WritablePathPattern, generator => {
        let mut schema = generator.subschema_for::<crate::path::PathPattern>();
        if let Some(obj) = schema.as_object_mut() {
            obj.insert(
                "description".into(),
                "A scope entry that is writable: no component is the repository's .git or a name a file system may take for it (.GIT, .git., git~1, .g\\u200bit...) (path_protected).".into(),
            );
            // The type again, for ajv's strictTypes (it does not look through `$ref`).
            obj.insert("type".into(), "string".into());
            obj.insert("not".into(), json!({ "pattern": git_lookalike_pattern() }));
        }
        schema
    }
);

string_def!(
    /// A normalized absolute host path.
    HostPath, _generator => {
        json_schema!({
            "type": "string",
            "pattern": host_path_pattern(),
            "description": "A normalized absolute host path: '/' then components, none empty, '.' or '..', no trailing '/', no control character."
        })
    }
);

string_def!(
    /// An entry of a preset's `read_only_paths`.
    ReadOnlyPath, generator => {
        let mut schema = generator.subschema_for::<HostPath>();
        let trees = rules::HIDDEN_HOST_TREES.join("|");
        if let Some(obj) = schema.as_object_mut() {
            obj.insert(
                "description".into(),
                format!(
                    "A host path the worker may read: normalized and absolute, and neither one of these trees nor below one (read_only_path_invalid): {}.",
                    rules::HIDDEN_HOST_TREES.join(", ")
                )
                .into(),
            );
            obj.insert("type".into(), "string".into());
            obj.insert("not".into(), json!({ "pattern": format!("^(?:{trees})(?:/|$)") }));
        }
        schema
    }
);

string_def!(
    /// The value of one of a preset's fixed `env` entries.
    PresetEnvValue, _generator => {
        json_schema!({
            "type": "string",
            "maxLength": rules::MAX_PRESET_ENV_VALUE_BYTES,
            "pattern": anchored("[^\\u0000]*"),
            "not": { "pattern": format!("{}(?!base_url\\}}|token\\}})", regex_escape(rules::RESERVED_PLACEHOLDER_PREFIX)) },
            "description": "A fixed, non-secret value: no NUL, at most 32 KiB (env_value_invalid; admission counts bytes), never holding `{model_` but in the placeholders `{model_base_url}` and `{model_token}` corral fills in, which admission accepts only for a model_only preset whose trusted connection names an upstream (env_value_invalid), never naming a container engine's socket or port (env_container_socket; admission only)."
        })
    }
);

/// A preset's fixed `env`: names as the allowlist's, values [`PresetEnvValue`].
pub(crate) struct PresetEnv;

impl JsonSchema for PresetEnv {
    fn schema_name() -> Cow<'static, str> {
        "PresetEnv".into()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let name = generator.subschema_for::<PresetEnvName>();
        let value = generator.subschema_for::<PresetEnvValue>();
        json_schema!({
            "type": "object",
            "propertyNames": name,
            "patternProperties": {
                credential_name_pattern(): {
                    "description": "A credential name holds only the broker's placeholder token (env_credential_name).",
                    "const": "{model_token}"
                }
            },
            "additionalProperties": value,
            "description": "Fixed environment values set by the preset, never by the caller; a name may not also be on env_allowlist (env_name_invalid; admission only)."
        })
    }
}

string_def!(
    /// Where one of a preset's `home_files` goes, relative to HOME.
    HomeFilePath, _generator => {
        json_schema!({
            "type": "string",
            "minLength": 1,
            "maxLength": 4096,
            "pattern": home_file_path_pattern(),
            "description": "A path relative to HOME: '/'-separated components, none empty, '.' or '..', no leading or trailing '/', no backslash or control character (home_file_invalid; admission also refuses repeats and a path below another entry)."
        })
    }
);

string_def!(
    /// The name of a file beside the preset.
    SourceName, _generator => {
        json_schema!({
            "type": "string",
            "pattern": anchored("(?!\\.\\.?$)[^/\\u0000-\\u001f\\u007f]+"),
            "description": "A file name in the preset's own folder: no '/', not '.' or '..', no control character (home_file_invalid)."
        })
    }
);

/// schemars transform on `HomeFile`: exactly one of `content` and `source`.
pub(crate) fn home_file_rule(schema: &mut Schema) {
    require_keys_named(schema, &["path"]);
    add_all_of(
        schema,
        vec![json!({
            "description": "Exactly one of content and source, not null (home_file_invalid).",
            "oneOf": [
                { "properties": { "content": { "type": "string" } }, "required": ["content"] },
                { "properties": { "source": { "type": "string" } }, "required": ["source"] }
            ]
        })],
    );
}

fn require_keys_named(schema: &mut Schema, names: &[&str]) {
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("required".into(), json!(names));
    }
}

/// `path` of a home file: the scope path rules without glob meaning, and no trailing `/`.
fn home_file_path_pattern() -> String {
    let comp = format!("(?!\\.\\.?(?:/|$))[^/\\\\{}]+", controls());
    anchored(&format!("{comp}(?:/{comp})*"))
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

string_def!(
    /// One fixed argument of a preset's `argv`.
    ArgvEntry, _generator => {
        json_schema!({
            "type": "string",
            "pattern": anchored("[^\\u0000]*"),
            "description": "One fixed argument, never taken from the WorkUnit; no NUL (argv_invalid)."
        })
    }
);

string_def!(
    /// The option word of the `argument` prompt transport.
    PromptFlag, _generator => {
        let banned = format!("{}{}", class_of(char::is_whitespace), controls());
        json_schema!({
            "type": "string",
            "pattern": anchored(&format!("-[^{banned}]+")),
            "description": "The preset's own option word the objective follows, such as --prompt: '-' and at least one more character, no white space or control character (prompt_flag_invalid)."
        })
    }
);

string_def!(
    /// A name of a preset's `env_allowlist`.
    EnvName, _generator => { env_name_schema(true) }
);

string_def!(
    /// A name of a preset's fixed `env`: as [`EnvName`], but a credential name may hold the
    /// broker's `{model_token}` ([`PresetEnv`]).
    PresetEnvName, _generator => { env_name_schema(false) }
);

/// The credential names (`env_credential_name`), ignoring ASCII case.
fn credential_name_pattern() -> String {
    let names = words_ignoring_case(rules::CREDENTIAL_ENV_NAMES);
    let prefixes = words_ignoring_case(rules::CREDENTIAL_ENV_PREFIXES);
    let suffixes = words_ignoring_case(rules::CREDENTIAL_ENV_SUFFIXES);
    format!("^(?:(?:{names})$(?!\\n)|{prefixes}|[A-Za-z0-9_]*(?:{suffixes})$(?!\\n))")
}

fn env_name_schema(refuse_credentials: bool) -> Schema {
    let reserved = words_ignoring_case(rules::RESERVED_ENV_NAMES);
    let loader = words_ignoring_case(rules::CODE_INJECTION_ENV_NAMES);
    let loader_prefix = ascii_case_insensitive(rules::CODE_INJECTION_ENV_PREFIX);
    let mut refused = vec![
        json!({
            "description": "corral sets it inside the sandbox (env_name_invalid).",
            "pattern": anchored(&reserved)
        }),
        json!({
            "description": "changes how code is loaded before the worker runs (env_name_invalid).",
            "pattern": format!("^(?:(?:{loader})$(?!\\n)|{loader_prefix})")
        }),
    ];
    let description = if refuse_credentials {
        refused.push(json!({
            "description": "names a credential (env_credential_name).",
            "pattern": credential_name_pattern()
        }));
        "An environment variable name the caller may pass to the worker: [A-Za-z_][A-Za-z0-9_]*, at most 256 characters (env_name_invalid); and, ignoring ASCII case, not a name corral sets or a loader or shell start-up setting (env_name_invalid), nor a credential (env_credential_name)."
    } else {
        "A name of a preset's fixed env: [A-Za-z_][A-Za-z0-9_]*, at most 256 characters (env_name_invalid); and, ignoring ASCII case, not a name corral sets or a loader or shell start-up setting (env_name_invalid). A credential name may only hold {model_token} (env_credential_name)."
    };
    json_schema!({
        "type": "string",
        "maxLength": rules::MAX_ENV_NAME_BYTES,
        "pattern": anchored("[A-Za-z_][A-Za-z0-9_]*"),
        "description": description,
        "not": { "anyOf": refused }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic, reason = "test code")]
mod tests {
    use super::*;

    #[test]
    fn classes_are_ranges_of_the_predicate() {
        assert_eq!(controls(), "\\u0000-\\u001f\\u007f-\\u009f");
        assert_eq!(
            class_of(|c| c == 'a' || c == 'b' || c == 'd'),
            "\\u0061-\\u0062\\u0064"
        );
        assert!(class_of(crate::path::is_default_ignorable).ends_with("\u{E0000}-\u{E0FFF}"));
    }

    /// The `.git` rules of the schema spell `g`, `i`, `t` in ASCII only: no other code point
    /// lowercases to text holding them, except `İ`, whose `i` is followed by U+0307.
    #[test]
    fn only_ascii_letters_lowercase_to_g_i_t() {
        for c in '\0'..=char::MAX {
            let lower: String = c.to_lowercase().collect();
            if lower.contains(['g', 'i', 't']) {
                assert!(
                    matches!(c, 'g' | 'i' | 't' | 'G' | 'I' | 'T' | '\u{130}'),
                    "{c:?} lowercases to {lower:?}"
                );
            }
        }
        assert_eq!('\u{130}'.to_lowercase().collect::<String>(), "i\u{307}");
    }

    #[test]
    fn ids_are_versioned_urls() {
        assert_eq!(
            schema_id("work-unit").unwrap(),
            "https://corral-sandbox.github.io/corral/schemas/work-unit/v1.schema.json"
        );
        for name in SCHEMA_NAMES {
            assert!(
                schema_id(name).unwrap().ends_with("/v1.schema.json"),
                "{name}"
            );
        }
        assert_eq!(schema_id("nope"), None);
    }
}

string_def!(
    /// A plain URL path: a model upstream's path prefix.
    PlainUrlPath, _generator => {
        json_schema!({
            "type": "string",
            "maxLength": 2048,
            "pattern": anchored("(?!.*//)(?!.*/\\.{1,2}(?:/|$))/[\\u0021\\u0022\\u0024\\u0026-\\u003e\\u0040-\\u005b\\u005d-\\u007e]*"),
            "description": "A plain absolute URL path: '/', then printable ASCII without %, \\, ?, # or '//', and no '.' or '..' segment (model_upstream_invalid)."
        })
    }
);

string_def!(
    /// A method a model upstream's broker forwards.
    UpstreamMethod, _generator => {
        json_schema!({
            "type": "string",
            "enum": rules::MODEL_UPSTREAM_METHODS,
            "description": "A method the broker forwards (model_upstream_invalid)."
        })
    }
);

string_def!(
    /// An HTTP token: a credential header's name or scheme.
    HttpToken, _generator => {
        json_schema!({
            "type": "string",
            "maxLength": 64,
            "pattern": anchored("[A-Za-z0-9!#$%&'*+.^_`|~-]*"),
            "description": "An HTTP token (RFC 9110): letters, digits and !#$%&'*+-.^_`|~, at most 64 (model_upstream_invalid; a header name must not be empty or one the broker sets itself: admission only)."
        })
    }
);
