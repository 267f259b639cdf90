//! `cargo xtask schemas`: the JSON Schemas in `schemas/` come from the contract types.

use std::path::Path;

use anyhow::{Result, bail};
use corral_contract::schema::{SCHEMA_NAMES, schema_for_name};

pub fn run(root: &Path, check: bool) -> Result<()> {
    let mut ok = true;
    for name in SCHEMA_NAMES {
        let Some(schema) = schema_for_name(name) else {
            bail!("no schema for {name}");
        };
        let text = serde_json::to_string_pretty(&schema)? + "\n";
        let path = root.join("schemas").join(format!("{name}.schema.json"));
        ok &= crate::write_or_check(&path, &text, check)?;
    }
    if !ok {
        bail!("schemas drifted from the contract types");
    }
    Ok(())
}
