//! `cargo xtask ci`: the complete test sequence (README.md's test command).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

fn step(root: &Path, name: &str, program: &str, args: &[&str]) -> Result<()> {
    println!("==> {name}: {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(root)
        .status()
        .with_context(|| format!("starting {program}"))?;
    if !status.success() {
        bail!("step `{name}` failed ({status})");
    }
    Ok(())
}

pub fn run(root: &Path) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    step(root, "format", &cargo, &["fmt", "--all", "--check"])?;
    crate::layers::run(root)?;
    crate::schemas::run(root, true)?;
    crate::fixtures::run(root, true)?;
    step(
        root,
        "clippy",
        &cargo,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    step(
        root,
        "tests",
        &cargo,
        &["test", "--workspace", "--no-fail-fast"],
    )?;
    step(
        root,
        "example documents against the schemas",
        "python3",
        &["tests/validate_examples.py"],
    )?;
    step(
        root,
        "schemas in ajv strict mode",
        "node",
        &["tests/ajv_strict.cjs"],
    )?;
    step(root, "fuzz targets", "bash", &["fuzz/smoke.sh"])?;
    // The whole host qualification suite, black-box through the `corral` binary: no change
    // can land that reopens an escape.
    println!("==> host qualification suite: cargo xtask adversarial");
    crate::adversarial::run(root, &[])?;
    println!("ci: all steps passed");
    Ok(())
}
