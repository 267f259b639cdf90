//! Preset-owned configuration: fixed environment values and files placed in the worker's
//! private HOME. Maintainer-owned, never chosen by a WorkUnit or a caller; checked here as
//! strictly as everything else the worker receives.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use corral_contract::documents::{AgentPreset, HomeFile};
use corral_contract::path::PathPattern;
use corral_contract::rules::{
    MAX_HOME_FILE_BYTES, MAX_HOME_FILES, MAX_HOME_FILES_BYTES, MAX_PRESET_ENV_VALUE_BYTES,
    RESERVED_PLACEHOLDER_PREFIX,
};
use corral_contract::{ReasonCode, Rejection};

use crate::env::{container_engine_reference, forbidden_env_name};

/// Checks the preset's fixed `env`; every problem is reported.
pub(crate) fn check_env(preset: &AgentPreset, broker: bool, out: &mut Vec<Rejection>) {
    for (name, value) in &preset.env {
        let field = Some(format!("preset.env.{name}"));
        if let Some((code, why)) = forbidden_env_name(name) {
            // Agents read their key from a credential-named variable (OPENAI_API_KEY); with
            // the broker that variable holds the run's placeholder, worthless outside the
            // run, and nothing else (ADR-0095).
            let placeholder_only =
                broker && code == ReasonCode::EnvCredentialName && value == "{model_token}";
            if !placeholder_only {
                out.push(Rejection::new(code, field, format!("{name}: {why}")));
                continue;
            }
        }
        if preset.env_allowlist.iter().any(|a| a == name) {
            out.push(Rejection::new(
                ReasonCode::EnvNameInvalid,
                field,
                format!(
                    "{name} is both fixed by the preset's env and allowlisted for the caller: \
                     keep it in one of the two"
                ),
            ));
            continue;
        }
        let why = if value.contains('\0') {
            Some("holds a NUL byte".to_owned())
        } else if value.len() > MAX_PRESET_ENV_VALUE_BYTES {
            Some(format!(
                "is {} bytes, more than {MAX_PRESET_ENV_VALUE_BYTES}",
                value.len()
            ))
        } else {
            placeholder_problem(value, broker)
        };
        if let Some(why) = why {
            out.push(Rejection::new(
                ReasonCode::EnvValueInvalid,
                field,
                format!("value of {name} {why}"),
            ));
        } else if let Some(what) = container_engine_reference(value) {
            out.push(Rejection::new(
                ReasonCode::EnvContainerSocket,
                field,
                format!("value of {name} points at a container engine ({what})"),
            ));
        }
    }
}

/// The placeholders corral fills in where the credential broker serves the run (ADR-0095).
pub const MODEL_PLACEHOLDERS: &[&str] = &["{model_base_url}", "{model_token}"];

/// Why `text`'s `{model_...}` use is refused, if it is: an undefined placeholder, or any
/// where no broker serves the run (the text would name nothing).
fn placeholder_problem(text: &str, broker: bool) -> Option<String> {
    if !text.contains(RESERVED_PLACEHOLDER_PREFIX) {
        return None;
    }
    if !broker {
        return Some(format!(
            "holds {RESERVED_PLACEHOLDER_PREFIX:?}, reserved for placeholders corral fills in \
             only for a model_only preset whose trusted connection names an upstream"
        ));
    }
    let mut rest = text.to_owned();
    for p in MODEL_PLACEHOLDERS {
        rest = rest.replace(p, "");
    }
    rest.contains(RESERVED_PLACEHOLDER_PREFIX).then(|| {
        format!(
            "holds a {RESERVED_PLACEHOLDER_PREFIX}...}} placeholder corral does not define (only {})",
            MODEL_PLACEHOLDERS.join(" and ")
        )
    })
}

/// Checks the preset's `home_files` and returns them as path -> text when all are sound.
/// `disk_bytes`: the WorkUnit's, which they count against.
pub(crate) fn check_home_files(
    preset: &AgentPreset,
    disk_bytes: Option<u64>,
    broker: bool,
    out: &mut Vec<Rejection>,
) -> BTreeMap<String, String> {
    let before = out.len();
    let mut add = |field: String, detail: String| {
        out.push(Rejection::new(
            ReasonCode::HomeFileInvalid,
            Some(field),
            detail,
        ));
    };
    if preset.home_files.len() > MAX_HOME_FILES {
        add(
            "preset.home_files".into(),
            format!(
                "{} files, more than {MAX_HOME_FILES}",
                preset.home_files.len()
            ),
        );
    }
    let mut files = BTreeMap::new();
    let mut total = 0usize;
    for (i, f) in preset.home_files.iter().enumerate() {
        let at = format!("preset.home_files[{i}]");
        if let Err(e) = PathPattern::new(&f.path) {
            add(format!("{at}.path"), format!("{:?}: {e}", f.path));
        } else if f.path.ends_with('/') {
            add(
                format!("{at}.path"),
                format!("{:?} names a folder; name the file", f.path),
            );
        }
        let text = match (&f.content, &f.source) {
            (Some(c), None) => Some(c),
            (None, Some(s)) => {
                add(
                    format!("{at}.source"),
                    format!(
                        "{s:?} was not read: load the preset with its folder \
                         (corral_admission::load_preset) so the file's text is in content"
                    ),
                );
                None
            }
            _ => {
                add(
                    at.clone(),
                    "exactly one of content and source is required".into(),
                );
                None
            }
        };
        if let Some(text) = text {
            if text.len() > MAX_HOME_FILE_BYTES {
                add(
                    format!("{at}.content"),
                    format!("{} bytes, more than {MAX_HOME_FILE_BYTES}", text.len()),
                );
            }
            if let Some(why) = placeholder_problem(text, broker) {
                add(format!("{at}.content"), format!("the text {why}"));
            }
            total = total.saturating_add(text.len());
            if files.insert(f.path.clone(), text.clone()).is_some() {
                add(format!("{at}.path"), format!("{:?} is named twice", f.path));
            }
        }
    }
    // A file may not be a folder of another: `a` and `a/b` cannot both be files.
    for path in files.keys() {
        let below = format!("{path}/");
        if let Some(other) = files.keys().find(|o| o.starts_with(&below)) {
            let i = preset
                .home_files
                .iter()
                .position(|f| &f.path == path)
                .unwrap_or(0);
            add(
                format!("preset.home_files[{i}].path"),
                format!("{path:?} is a file, and {other:?} needs it as a folder"),
            );
        }
    }
    if total > MAX_HOME_FILES_BYTES {
        add(
            "preset.home_files".into(),
            format!("{total} bytes together, more than {MAX_HOME_FILES_BYTES}"),
        );
    }
    if let Some(disk) = disk_bytes
        && total as u64 > disk
    {
        add(
            "preset.home_files".into(),
            format!("{total} bytes together, more than the WorkUnit's disk_bytes ({disk})"),
        );
    }
    if out.len() == before {
        files
    } else {
        BTreeMap::new()
    }
}

/// Why a preset could not be loaded with its folder.
#[derive(Debug, thiserror::Error)]
pub enum LoadPresetError {
    /// The preset file itself: unreadable, or not a valid AgentPreset.
    #[error("{0}")]
    Document(String),
    /// A `home_files` source: the field and why.
    #[error("{field}: {detail}")]
    Source {
        /// The field, `preset.home_files[N].source`.
        field: String,
        /// What is wrong, naming the file.
        detail: String,
    },
}

/// Parses an AgentPreset's bytes and reads each `home_files` `source` from `folder` (the
/// preset file's own folder) into `content`, so the preset that admission sees, and whose
/// digest the manifest records, holds the bytes. A source is a plain file name in that folder,
/// a regular file and not a link, UTF-8, at most 1 MiB; anything else is refused naming it.
pub fn load_preset(bytes: &[u8], folder: &Path) -> Result<AgentPreset, LoadPresetError> {
    let mut preset: AgentPreset =
        crate::parse_document(bytes).map_err(|e| LoadPresetError::Document(e.describe()))?;
    for (i, f) in preset.home_files.iter_mut().enumerate() {
        let (Some(name), None) = (&f.source, &f.content) else {
            continue;
        };
        let field = format!("preset.home_files[{i}].source");
        let text = read_source(folder, name).map_err(|detail| LoadPresetError::Source {
            field: field.clone(),
            detail,
        })?;
        *f = HomeFile {
            path: f.path.clone(),
            content: Some(text),
            source: None,
        };
    }
    Ok(preset)
}

fn read_source(folder: &Path, name: &str) -> Result<String, String> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.chars().any(char::is_control);
    if !plain {
        return Err(format!(
            "{name:?} must be a file name in the preset's folder (no '/', not '.' or '..')"
        ));
    }
    let path = folder.join(name);
    let shown = path.display();
    // The folder is the maintainer's; a link is still refused, so what the review of the
    // folder saw is what runs.
    let meta = std::fs::symlink_metadata(&path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(format!("{shown} is not a regular file (links are refused)"));
    }
    let file = std::fs::File::open(&path).map_err(|e| format!("{shown}: {e}"))?;
    // The file opened is the one looked at (not a link put there in between).
    let opened = file.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
        return Err(format!("{shown} changed while it was read"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_HOME_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() > MAX_HOME_FILE_BYTES {
        return Err(format!(
            "{shown} is larger than {MAX_HOME_FILE_BYTES} bytes"
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 text"))
}
