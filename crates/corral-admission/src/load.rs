//! Parsing documents from bytes with errors that name the field, line and column.

use serde::de::DeserializeOwned;

/// Largest document corral reads; anything bigger is bad input, not a memory hazard.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// A document that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message} (line {line}, column {column})")]
pub struct DocumentError {
    /// Dotted path of the offending field (`permissions.network`), or `.` for the document.
    pub field: String,
    pub message: String,
    pub line: usize,
    pub column: usize,
}

/// Parses one JSON document into `T`, rejecting unknown fields, duplicate fields, trailing
/// data and documents over [`MAX_DOCUMENT_BYTES`].
pub fn parse_document<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DocumentError> {
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
            message: strip_position(&inner.to_string()),
            line: inner.line(),
            column: inner.column(),
        }
    })?;
    de.end().map_err(|inner| DocumentError {
        field: ".".into(),
        message: strip_position(&inner.to_string()),
        line: inner.line(),
        column: inner.column(),
    })?;
    Ok(value)
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

    #[test]
    fn trailing_data_rejected() {
        assert!(parse_document::<serde_json::Value>(b"{} {}").is_err());
    }
}
