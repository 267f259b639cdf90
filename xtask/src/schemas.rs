//! `cargo xtask schemas`: the JSON Schemas in `schemas/` come from the contract types.
//!
//! The files hold exactly what `corral schema NAME` prints (`pretty_json`: sorted keys,
//! invisible code points as `\uXXXX` escapes).

use std::path::Path;

use anyhow::{Result, bail};
use corral_contract::canonical::pretty_json;
use corral_contract::schema::{SCHEMA_NAMES, schema_for_name};

pub fn run(root: &Path, check: bool) -> Result<()> {
    let mut ok = true;
    for name in SCHEMA_NAMES {
        let Some(schema) = schema_for_name(name) else {
            bail!("no schema for {name}");
        };
        let text = pretty_json(&schema)? + "\n";
        let path = root.join("schemas").join(format!("{name}.schema.json"));
        ok &= crate::write_or_check(&path, &text, check)?;
    }
    if !ok {
        bail!("schemas drifted from the contract types");
    }
    Ok(())
}
