//! Reading the input documents: every failure is one line naming the file and the field.

use std::path::Path;

use corral_admission::{load::MAX_DOCUMENT_BYTES, parse_document};
use serde::de::DeserializeOwned;

use crate::display::escape;

/// A bad input file, already formatted as the one stderr line the contract asks for.
#[derive(Debug)]
pub struct BadInput(pub String);

/// Reads and parses one document.
pub fn load<T: DeserializeOwned + serde::Serialize>(path: &Path) -> Result<T, BadInput> {
    let shown = escape(&path.display().to_string());
    let meta =
        std::fs::metadata(path).map_err(|e| BadInput(format!("{shown}: cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(BadInput(format!("{shown}: not a regular file")));
    }
    if meta.len() > MAX_DOCUMENT_BYTES as u64 {
        return Err(BadInput(format!(
            "{shown}: larger than {MAX_DOCUMENT_BYTES} bytes"
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| BadInput(format!("{shown}: cannot read: {e}")))?;
    // The field names and values come from the file: escaped before they reach a terminal.
    parse_document(&bytes).map_err(|e| BadInput(format!("{shown}: {}", escape(&e.describe()))))
}
