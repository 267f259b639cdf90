//! `corral cache ls | gc`: the base checkout cache (ADR-0070).

use clap::{Args, Subcommand};
use corral_runner::BaseCache;

use crate::exit;
use crate::run::{cache_limits, default_cache_dir};

#[derive(Subcommand, Debug)]
pub enum CacheCommand {
    /// List the cached base checkouts: size, entries, last use, whether a run holds one.
    Ls(LsArgs),
    /// Evict least recently used checkouts that no run holds, down to a size budget.
    Gc(GcArgs),
}

#[derive(Args, Debug)]
pub struct LsArgs {
    /// Print the entries as one JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
pub struct GcArgs {
    /// Keep at most this many bytes (default: the cache budget, `CORRAL_CACHE_MAX_BYTES`
    /// or 8 GiB).
    #[arg(long, value_name = "BYTES", conflicts_with = "all")]
    max_bytes: Option<u64>,
    /// Remove every checkout no run holds.
    #[arg(long)]
    all: bool,
}

fn open() -> Result<BaseCache, u8> {
    let limits = cache_limits().map_err(|line| {
        eprintln!("corral: {line}");
        exit::REJECTED
    })?;
    // The cache runs use in this mode: in rootless mode with subordinate ids the worker owns
    // its checkouts, and they live apart (ADR-0080).
    let dir = corral_runner::cache_root_for(
        &default_cache_dir(),
        corral_linux::rootless::workspace_owner(),
    );
    BaseCache::open(&dir, limits)
        .map(|c| c.with_owner(corral_linux::rootless::workspace_owner()))
        .map_err(|e| {
            eprintln!(
                "corral: cache {}: {e}",
                crate::display::escape(&dir.display().to_string())
            );
            exit::FAILED
        })
}

pub fn run(cmd: &CacheCommand) -> u8 {
    let cache = match open() {
        Ok(c) => c,
        Err(code) => return code,
    };
    match cmd {
        CacheCommand::Ls(args) => {
            let entries = match cache.list() {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("corral: cache ls: {e}");
                    return exit::FAILED;
                }
            };
            if args.json {
                let doc = serde_json::json!({
                    "cache": cache.root().display().to_string(),
                    "entries": entries,
                });
                crate::display::print_json(&doc);
            } else {
                let total: u64 = entries.iter().map(|e| e.bytes).sum();
                out!(
                    "{} base checkout(s), {} in {}",
                    entries.len(),
                    human(total),
                    crate::display::escape(&cache.root().display().to_string())
                );
                for e in &entries {
                    out!(
                        "  {}  {:>10}  {:>8} entries  last used {}{}",
                        e.base_sha,
                        human(e.bytes),
                        e.entries,
                        ago(e.last_used),
                        if e.in_use { "  (in use)" } else { "" }
                    );
                }
            }
            exit::OK
        }
        CacheCommand::Gc(args) => {
            let budget = if args.all {
                0
            } else {
                args.max_bytes
                    .unwrap_or(cache_limits().map_or(0, |l| l.budget_bytes))
            };
            match cache.gc(budget, None) {
                Ok(r) => {
                    out!(
                        "removed {} checkout(s), freed {}, {} kept{}",
                        r.removed.len(),
                        human(r.freed_bytes),
                        human(r.kept_bytes),
                        if r.busy.is_empty() {
                            String::new()
                        } else {
                            format!(" ({} in use, kept)", r.busy.len())
                        }
                    );
                    exit::OK
                }
                Err(e) => {
                    eprintln!("corral: cache gc: {e}");
                    exit::FAILED
                }
            }
        }
    }
}

/// "12 s ago", "3 min ago", "5 h ago", "2 d ago" (from seconds since the epoch).
fn ago(epoch_secs: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let d = now.saturating_sub(epoch_secs);
    match d {
        0..60 => format!("{d} s ago"),
        60..3600 => format!("{} min ago", d / 60),
        3600..86_400 => format!("{} h ago", d / 3600),
        _ => format!("{} d ago", d / 86_400),
    }
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
