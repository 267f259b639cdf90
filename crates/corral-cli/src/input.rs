//! Reading the input documents: every failure is one line naming the file and the field.

use std::path::Path;

use corral_admission::{load::MAX_DOCUMENT_BYTES, parse_document};
use corral_contract::AgentPreset;
use serde::de::DeserializeOwned;

use crate::display::escape;

/// A bad input file, already formatted as the one stderr line the contract asks for.
#[derive(Debug)]
pub struct BadInput(pub String);

/// Reads and parses one document.
pub fn load<T: DeserializeOwned + serde::Serialize>(path: &Path) -> Result<T, BadInput> {
    let (bytes, shown) = read(path)?;
    // The field names and values come from the file: escaped before they reach a terminal.
    parse_document(&bytes).map_err(|e| BadInput(format!("{shown}: {}", escape(&e.describe()))))
}

/// Reads and parses an AgentPreset, with the `home_files` sources beside it read in.
pub fn load_preset(path: &Path) -> Result<AgentPreset, BadInput> {
    let (bytes, shown) = read(path)?;
    // `preset.json` alone has the empty parent: the current folder.
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    corral_admission::load_preset(&bytes, folder)
        .map_err(|e| BadInput(format!("{shown}: {}", escape(&e.to_string()))))
}

fn read(path: &Path) -> Result<(Vec<u8>, String), BadInput> {
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
    Ok((bytes, shown))
}
