//! Parsing documents from bytes with errors that name the field, line and column.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Largest document corral reads; anything bigger is bad input, not a memory hazard.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// A document that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct DocumentError {
    /// Dotted path of the offending field (`permissions.network`, `argv[2]`), or `.` for the
    /// document itself.
    pub field: String,
    /// What is wrong, in plain words.
    pub message: String,
    /// 1-based position of the problem, or 0 when it has none (a shape found after parsing).
    pub line: usize,
    /// 1-based column of the problem on `line`, or 0 when it has none.
    pub column: usize,
}

impl DocumentError {
    /// One line that names where, then what: `field: message (line L, column C)`; for the
    /// document itself `line L, column C: message`, or `the document: message` when the
    /// problem has no position (a shape found after parsing).
    pub fn describe(&self) -> String {
        let at = (self.line > 0).then(|| format!("line {}, column {}", self.line, self.column));
        match (self.field.as_str(), at) {
            ("." | "?", Some(at)) => format!("{at}: {}", self.message),
            ("." | "?", None) => format!("the document: {}", self.message),
            (field, Some(at)) => format!("{field}: {} ({at})", self.message),
            (field, None) => format!("{field}: {}", self.message),
        }
    }
}

/// Parses one JSON document into `T`, rejecting unknown fields, duplicate fields, trailing
/// data, documents over [`MAX_DOCUMENT_BYTES`], and objects written as arrays.
pub fn parse_document<T: DeserializeOwned + Serialize>(bytes: &[u8]) -> Result<T, DocumentError> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(DocumentError {
            field: ".".into(),
            message: format!("document is larger than {MAX_DOCUMENT_BYTES} bytes"),
            line: 0,
            column: 0,
        });
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let field = err.path().to_string();
        let inner = err.into_inner();
        DocumentError {
            field,
            message: plain_words(bytes, &inner),
            line: inner.line(),
            column: inner.column(),
        }
    })?;
    de.end().map_err(|inner| DocumentError {
        field: ".".into(),
        message: plain_words(bytes, &inner),
        line: inner.line(),
        column: inner.column(),
    })?;
    // serde's derived structs also take the sequence form (`["corral.work-unit/v1", "wu-1",
    // ...]`), binding values by position: no field name is ever checked then, which defeats
    // "unknown fields are an error naming the field". Every place that is an object in the
    // typed value must have been an object in the document.
    let written: Value = serde_json::from_slice(bytes).map_err(|inner| DocumentError {
        field: ".".into(),
        message: plain_words(bytes, &inner),
        line: inner.line(),
        column: inner.column(),
    })?;
    let typed = serde_json::to_value(&value).map_err(|e| DocumentError {
        field: ".".into(),
        message: format!("cannot be represented as JSON: {e}"),
        line: 0,
        column: 0,
    })?;
    if let Some(field) = array_for_object(&written, &typed, String::new()) {
        return Err(DocumentError {
            field: if field.is_empty() { ".".into() } else { field },
            message: "expected a JSON object with named fields, found an array".into(),
            line: 0,
            column: 0,
        });
    }
    Ok(value)
}

/// The path of the first place where `typed` has an object and `written` an array.
fn array_for_object(written: &Value, typed: &Value, path: String) -> Option<String> {
    match (written, typed) {
        (Value::Array(_), Value::Object(_)) => Some(path),
        (Value::Object(w), Value::Object(t)) => w.iter().find_map(|(k, wv)| {
            let tv = t.get(k)?;
            let sub = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            array_for_object(wv, tv, sub)
        }),
        (Value::Array(w), Value::Array(t)) => w
            .iter()
            .zip(t)
            .enumerate()
            .find_map(|(i, (wv, tv))| array_for_object(wv, tv, format!("{path}[{i}]"))),
        _ => None,
    }
}

/// serde_json's message in the contract's words: no position (reported apart), no Rust type
/// names (`struct WorkUnit`, `u64`), and a number too big for its field as it was written,
/// not as the float serde_json turned it into.
fn plain_words(bytes: &[u8], err: &serde_json::Error) -> String {
    let mut msg = strip_position(&err.to_string());
    if let Some(start) = msg.find("floating point `")
        && let Some(literal) = number_before(bytes, err.line(), err.column())
    {
        let end = msg[start + 16..]
            .find('`')
            .map_or(msg.len(), |e| start + 16 + e + 1);
        msg.replace_range(start..end, &format!("number {literal}"));
    }
    for (rust, words) in [
        ("u64", "an integer from 0 to 18446744073709551615"),
        ("u32", "an integer from 0 to 4294967295"),
        ("u16", "an integer from 0 to 65535"),
        ("u8", "an integer from 0 to 255"),
        ("usize", "an integer from 0 to 18446744073709551615"),
        ("i64", "an integer"),
        ("a boolean", "true or false"),
    ] {
        let from = format!("expected {rust}");
        if msg.ends_with(&from) {
            msg.truncate(msg.len() - from.len());
            msg.push_str("expected ");
            msg.push_str(words);
        }
    }
    if let Some(i) = msg.find("expected struct ") {
        msg.truncate(i);
        msg.push_str("expected a JSON object");
    }
    msg
}

/// The number literal that ends at 1-based (`line`, `column`) of `bytes`, as written.
fn number_before(bytes: &[u8], line: usize, column: usize) -> Option<String> {
    let start_of_line = if line <= 1 {
        0
    } else {
        bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(line - 2)?
            .0
            + 1
    };
    let end = (start_of_line + column).min(bytes.len());
    let is_num = |b: &u8| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E');
    let mut begin = end;
    while begin > start_of_line && is_num(&bytes[begin - 1]) {
        begin -= 1;
    }
    let lit = std::str::from_utf8(&bytes[begin..end]).ok()?;
    (!lit.is_empty() && lit.bytes().any(|b| b.is_ascii_digit())).then(|| lit.to_owned())
}

/// serde_json appends " at line L column C"; we report those separately.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(idx) => msg[..idx].to_owned(),
        None => msg.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_contract::WorkUnit;

    #[test]
    fn unknown_field_is_named() {
        let err =
            parse_document::<WorkUnit>(br#"{"schema_version":"x","prompt":"hi"}"#).unwrap_err();
        assert_eq!(err.field, "prompt");
        assert!(
            err.message.contains("unknown field `prompt`"),
            "{}",
            err.message
        );
    }

    #[test]
    fn nested_unknown_field_and_position() {
        let doc = b"{\n \"security\": {\"sandbox_required\": true, \"goal\": 1}}";
        let err = parse_document::<WorkUnit>(doc).unwrap_err();
        assert_eq!(err.field, "security.goal");
        assert_eq!(err.line, 2);
    }

    #[test]
    fn malformed_json_reports_line_and_column() {
        let err = parse_document::<WorkUnit>(b"{\n\n  \"id\": ,}").unwrap_err();
        assert_eq!((err.line, err.column), (3, 9));
    }

    /// A complete WorkUnit (the README's example).
    fn work_unit() -> Value {
        serde_json::json!({
            "schema_version": "corral.work-unit/v1",
            "id": "wu-0001",
            "objective": "Fix the off-by-one",
            "repository": { "base_sha": "0123456789abcdef0123456789abcdef01234567" },
            "security": { "sandbox_required": true },
            "permissions": {
                "process_execution": true, "secrets": [], "network": "none",
                "network_allowlist": [], "filesystem_write": ["src/"]
            },
            "budget": {
                "wall_seconds": 600, "cpu_seconds": 600, "memory_bytes": 2147483648u64,
                "disk_bytes": 1073741824, "max_processes": 256, "max_output_bytes": 1048576,
                "max_patch_bytes": 1048576
            },
            "constraints": { "allowed_paths": ["src/"], "forbidden_paths": [".github/"] }
        })
    }

    fn parse_value(v: &Value) -> Result<WorkUnit, DocumentError> {
        parse_document::<WorkUnit>(v.to_string().as_bytes())
    }

    /// The object's values in order, as serde's sequence form of a struct binds them.
    fn as_array(v: &Value) -> Value {
        Value::Array(
            v.as_object()
                .map(|o| o.values().cloned().collect())
                .unwrap_or_default(),
        )
    }

    #[test]
    fn a_document_written_as_an_array_is_refused() {
        // Control: the document as an object parses.
        let wu = work_unit();
        parse_value(&wu).unwrap();
        // serde_json keeps keys sorted, so bind the values in the struct's field order.
        let order = [
            "schema_version",
            "id",
            "objective",
            "repository",
            "security",
            "permissions",
            "budget",
            "constraints",
        ];
        let seq = Value::Array(order.iter().map(|k| wu[*k].clone()).collect());
        let err = parse_value(&seq).unwrap_err();
        assert_eq!(err.field, ".");
        // serde bound every value by position; only the shape check caught it.
        assert!(err.message.contains("found an array"), "{err}");
        assert!(!err.to_string().contains("struct"), "{err}");
    }

    #[test]
    fn a_nested_object_written_as_an_array_is_named() {
        let mut wu = work_unit();
        wu["security"] = as_array(&wu["security"]);
        let err = parse_value(&wu).unwrap_err();
        assert_eq!(err.field, "security", "{err}");
        assert!(err.message.contains("found an array"), "{err}");
        assert_eq!((err.line, err.column), (0, 0));
        assert_eq!(
            err.to_string(),
            "security: expected a JSON object with named fields, found an array"
        );
    }

    #[test]
    fn an_integer_too_big_is_shown_as_written() {
        let err =
            parse_document::<WorkUnit>(b"{\"budget\": {\"wall_seconds\": 18446744073709551616}}")
                .unwrap_err();
        assert_eq!(err.field, "budget.wall_seconds");
        assert!(err.message.contains("18446744073709551616"), "{err}");
        assert!(
            !err.message.contains("e+19") && !err.message.contains("e19"),
            "{err}"
        );
        assert!(!err.message.contains("u64"), "{err}");
    }

    #[test]
    fn the_document_itself_is_not_named_dot_or_question_mark() {
        let err = parse_document::<WorkUnit>(b"{\n  \"id\": \"x\",\n  oops\n}").unwrap_err();
        assert_eq!(err.to_string(), "line 3, column 3: key must be a string");
        let err = parse_document::<WorkUnit>(b"{} x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1, column 2: missing field `schema_version`"
        );
    }

    #[test]
    fn trailing_data_rejected() {
        assert!(parse_document::<serde_json::Value>(b"{} {}").is_err());
    }
}
