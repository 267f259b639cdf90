//! `cargo xtask <chore>`: the project's chores, in Rust.
//!
//! - `layers`: fails when an internal crate depends on one it must not (ARCHITECTURE.md).
//! - `schemas [--check]`: writes `schemas/*.schema.json`, or fails with a diff when they drift.
//! - `fixtures [--check]`: regenerates the fnmatch corpus from python3's `fnmatchcase`.
//! - `ci`: the whole test sequence README.md names.
//! - `adversarial`: the host qualification suite (every corpus case through `corral run`).
//! - `vm`: QEMU guests with Debian's kernels in systemd's cgroup v2 layouts, one command each.
#![forbid(unsafe_code)]

mod adversarial;
mod ci;
mod fixtures;
mod layers;
mod schemas;
mod vm;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    // Qualifying a host needs no checkout: run outside cargo (an installed or copied
    // `xtask` binary), the suite writes its fixtures into a private folder of its own.
    if args.first().map(String::as_str) == Some("adversarial")
        && std::env::var_os("CARGO_MANIFEST_DIR").is_none()
    {
        return adversarial::run_standalone(&args[1..]);
    }
    let root = workspace_root()?;
    match args.first().map(String::as_str) {
        Some("layers") => layers::run(&root),
        Some("schemas") => schemas::run(&root, check),
        Some("fixtures") => fixtures::run(&root, check),
        Some("ci") => ci::run(&root),
        Some("adversarial") => adversarial::run(&root, &args[1..]),
        Some("vm") => vm::run(&root, &args[1..]),
        _ => bail!(
            "usage: cargo xtask <layers | schemas [--check] | fixtures [--check] | ci | \
             adversarial [--list] [--filter IDS] [--json F] [--sarif F] [--corral BIN] [--repeat N] [--cpu-hog] [--crash-points N] [--verbose] | \
             vm [--kernel K] [--layout L] [--tmp T] [-- COMMAND]>"
        ),
    }
}

fn workspace_root() -> Result<PathBuf> {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").context("run through `cargo xtask`")?;
    let root = PathBuf::from(manifest_dir)
        .parent()
        .context("xtask has a parent directory")?
        .to_path_buf();
    Ok(root)
}

/// Writes `content` to `path`, or with `check`, fails with a unified-style diff when the file
/// differs (generated files must be regenerated, never hand-edited).
pub(crate) fn write_or_check(path: &std::path::Path, content: &str, check: bool) -> Result<bool> {
    let current = std::fs::read_to_string(path).unwrap_or_default();
    if current == content {
        return Ok(true);
    }
    if check {
        eprintln!(
            "{} is out of date; run `cargo xtask` to regenerate:",
            path.display()
        );
        print_diff(&current, content);
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, content).with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(true)
}

/// A small line diff (first differences only) so drift is visible in CI logs.
fn print_diff(old: &str, new: &str) {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let mut shown = 0;
    for i in 0..old.len().max(new.len()) {
        let (a, b) = (old.get(i), new.get(i));
        if a != b {
            if let Some(a) = a {
                eprintln!("{:>6} - {a}", i + 1);
            }
            if let Some(b) = b {
                eprintln!("{:>6} + {b}", i + 1);
            }
            shown += 1;
            if shown >= 40 {
                eprintln!("       ... (more differences)");
                break;
            }
        }
    }
}
