//! `cargo xtask layers`: internal crates depend strictly downward.
//!
//! The table below is the layer map of ARCHITECTURE.md. A crate not in the table, or an
//! internal dependency not allowed for it, fails the check.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// For each internal crate, the internal crates it may depend on (normal, build and dev).
pub const ALLOWED: &[(&str, &[&str])] = &[
    ("corral-contract", &[]),
    ("corral-admission", &["corral-contract"]),
    ("corral-process", &[]),
    (
        "corral-sandbox",
        &["corral-contract", "corral-admission", "corral-process"],
    ),
    (
        "corral-linux",
        &[
            "corral-contract",
            "corral-admission",
            "corral-process",
            "corral-sandbox",
        ],
    ),
    ("corral-egress", &["corral-contract"]),
    ("corral-capture", &["corral-contract"]),
    ("corral-manifest", &["corral-contract", "corral-capture"]),
    (
        "corral-runner",
        &[
            "corral-contract",
            "corral-admission",
            "corral-process",
            "corral-sandbox",
            "corral-linux",
            "corral-egress",
            "corral-capture",
            "corral-manifest",
        ],
    ),
    (
        "corral-cli",
        &[
            "corral-contract",
            "corral-admission",
            "corral-process",
            "corral-sandbox",
            "corral-linux",
            "corral-egress",
            "corral-capture",
            "corral-manifest",
            "corral-runner",
        ],
    ),
    ("xtask", &["corral-contract"]),
];

/// Checks `deps` (crate -> its internal dependencies) against the table.
pub fn violations(deps: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut out = Vec::new();
    for (krate, internal) in deps {
        let Some(ok) = allowed.get(krate.as_str()) else {
            out.push(format!(
                "{krate} is not in the layer map (xtask/src/layers.rs, ARCHITECTURE.md)"
            ));
            continue;
        };
        for dep in internal {
            if !ok.contains(&dep.as_str()) {
                out.push(format!("{krate} must not depend on {dep}"));
            }
        }
    }
    out
}

pub fn run(root: &Path) -> Result<()> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let meta: Value = serde_json::from_slice(&output.stdout)?;
    let packages = meta["packages"].as_array().context("packages")?;
    let members: Vec<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    let mut deps = BTreeMap::new();
    for p in packages {
        let name = p["name"].as_str().context("name")?.to_owned();
        let internal: Vec<String> = p["dependencies"]
            .as_array()
            .context("dependencies")?
            .iter()
            .filter_map(|d| d["name"].as_str())
            .filter(|d| members.iter().any(|m| m == d))
            .map(str::to_owned)
            .collect();
        deps.insert(name, internal);
    }
    let bad = violations(&deps);
    if !bad.is_empty() {
        for line in &bad {
            eprintln!("layers: {line}");
        }
        bail!("{} layering violation(s)", bad.len());
    }
    println!(
        "layers: {} crates, all dependencies point downward",
        deps.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deps(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.iter().map(|s| (*s).to_owned()).collect()))
            .collect()
    }

    #[test]
    fn catches_forbidden_edges() {
        assert!(
            violations(&deps(&[("corral-linux", &["corral-capture"])]))[0].contains("must not")
        );
        assert!(!violations(&deps(&[("corral-capture", &["corral-linux"])])).is_empty());
        assert!(!violations(&deps(&[("corral-contract", &["corral-admission"])])).is_empty());
        assert!(!violations(&deps(&[("corral-new", &[])])).is_empty());
        assert!(violations(&deps(&[("corral-admission", &["corral-contract"])])).is_empty());
    }
}
