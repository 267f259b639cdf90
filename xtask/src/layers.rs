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
    (
        "corral-checkout",
        &["corral-contract", "corral-capture", "corral-process"],
    ),
    ("corral-manifest", &["corral-contract", "corral-capture"]),
    ("corral-export", &["corral-contract", "corral-admission"]),
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
            "corral-checkout",
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
            "corral-checkout",
            "corral-manifest",
            "corral-runner",
            "corral-export",
        ],
    ),
    ("xtask", &["corral-contract"]),
];

/// Extra internal crates a crate may use as **dev-dependencies only** (its tests and
/// benches), never as normal or build dependencies. `corral-linux`'s tests drive the real
/// egress proxy through the sandbox (ADR-0030); the library stays independent of it.
/// corral-contract's tests depend on corral-contract itself, to turn its `schema` feature on
/// (ADR-0090): no edge to another crate. The egress lab's tests and the capture benchmark use
/// the process primitive's namespace and rusage calls, which keep `unsafe` out of those
/// crates (ADR-0093). corral-checkout's helper tests enter rootless mode as an ordinary user,
/// as corral does, before they start (ADR-0080): the library never knows the backend.
pub const DEV_ONLY: &[(&str, &[&str])] = &[
    ("corral-linux", &["corral-egress"]),
    ("corral-checkout", &["corral-linux"]),
    ("corral-contract", &["corral-contract"]),
    ("corral-egress", &["corral-process"]),
    ("corral-capture", &["corral-process"]),
];

/// One internal dependency edge: the crate depended on, and whether it is a dev-dependency
/// only (`kind: "dev"` in `cargo metadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub name: String,
    pub dev: bool,
}

/// Checks `deps` (crate -> its internal dependency edges) against the tables.
pub fn violations(deps: &BTreeMap<String, Vec<Edge>>) -> Vec<String> {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let dev_only: BTreeMap<&str, &[&str]> = DEV_ONLY.iter().copied().collect();
    let mut out = Vec::new();
    for (krate, internal) in deps {
        let Some(ok) = allowed.get(krate.as_str()) else {
            out.push(format!(
                "{krate} is not in the layer map (xtask/src/layers.rs, ARCHITECTURE.md)"
            ));
            continue;
        };
        let dev_ok = dev_only.get(krate.as_str()).copied().unwrap_or(&[]);
        for Edge { name: dep, dev } in internal {
            let fine = ok.contains(&dep.as_str()) || (*dev && dev_ok.contains(&dep.as_str()));
            if !fine {
                let kind = if *dev {
                    " (even as a dev-dependency)"
                } else {
                    ""
                };
                out.push(format!("{krate} must not depend on {dep}{kind}"));
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
        let internal: Vec<Edge> = p["dependencies"]
            .as_array()
            .context("dependencies")?
            .iter()
            .filter_map(|d| Some((d["name"].as_str()?, d["kind"].as_str() == Some("dev"))))
            .filter(|(d, _)| members.iter().any(|m| m == d))
            .map(|(d, dev)| Edge {
                name: d.to_owned(),
                dev,
            })
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

    fn deps(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<Edge>> {
        kinds(pairs, false)
    }

    fn kinds(pairs: &[(&str, &[&str])], dev: bool) -> BTreeMap<String, Vec<Edge>> {
        pairs
            .iter()
            .map(|(k, v)| {
                let edges = v
                    .iter()
                    .map(|s| Edge {
                        name: (*s).to_owned(),
                        dev,
                    })
                    .collect();
                ((*k).to_owned(), edges)
            })
            .collect()
    }

    #[test]
    fn dev_only_edges_are_allowed_only_as_dev() {
        let edge = &[("corral-linux", &["corral-egress"][..])];
        assert!(violations(&kinds(edge, true)).is_empty());
        assert!(violations(&kinds(edge, false))[0].contains("must not"));
        assert!(!violations(&kinds(&[("corral-egress", &["corral-sandbox"])], true)).is_empty());
        // corral-contract's tests on itself (its `schema` feature), never as a normal edge.
        let own = &[("corral-contract", &["corral-contract"][..])];
        assert!(violations(&kinds(own, true)).is_empty());
        assert!(!violations(&kinds(own, false)).is_empty());
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
