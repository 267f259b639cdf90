//! `corral show MANIFEST` and `corral logs MANIFEST`: a stored run as a person reads it.
//! Both verify before they show: the manifest must be intact (canonical, and hash to its
//! name when it is named by a digest), and every artifact printed is read through the store's
//! reader, which checks its bytes against the digest. Nothing tampered is shown as if it were
//! the run's.

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;

use clap::Args;
use corral_manifest::{LocalArtifactBundleReader, VerifyStatus, verify_manifest_file};

use crate::display::escape;
use crate::exit;

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The manifest file (a store path, or a saved `corral run --json`).
    pub manifest: PathBuf,
    /// The artifact store (default: the store the manifest is in, else the default store).
    #[arg(long, value_name = "DIR")]
    pub artifacts: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct LogsArgs {
    /// The manifest file (a store path, or a saved `corral run --json`).
    pub manifest: PathBuf,
    /// The worker's stderr instead of its stdout.
    #[arg(long)]
    pub stderr: bool,
    /// The artifact store (default: the store the manifest is in, else the default store).
    #[arg(long, value_name = "DIR")]
    pub artifacts: Option<PathBuf>,
}

/// Lines of each log `show` prints; `corral logs` prints all of it.
const LOG_LINES: usize = 40;

/// Loads the manifest and checks the manifest file itself; `Err` is the exit code, after
/// one stderr line.
fn load(
    manifest: &std::path::Path,
    artifacts: Option<&PathBuf>,
    what: &str,
) -> Result<(corral_contract::ResultManifest, LocalArtifactBundleReader), u8> {
    let store = crate::run::store_for(manifest, artifacts);
    let reader = LocalArtifactBundleReader::new(&store);
    let shown = escape(&manifest.display().to_string());
    match verify_manifest_file(manifest, &reader) {
        Err(e) => {
            eprintln!("corral: {what}: {}", escape(&e.to_string()));
            Err(exit::FAILED)
        }
        Ok((m, report)) => match report.entries.first().map(|e| &e.status) {
            Some(VerifyStatus::Intact) => Ok((m, reader)),
            _ => {
                let why = report
                    .entries
                    .first()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                eprintln!(
                    "corral: {what}: {shown} is not intact ({}): not shown",
                    escape(&why)
                );
                Err(exit::FAILED)
            }
        },
    }
}

pub fn show(args: &ShowArgs) -> u8 {
    let (m, reader) = match load(&args.manifest, args.artifacts.as_ref(), "show") {
        Ok(x) => x,
        Err(code) => return code,
    };
    let mut code = exit::OK;
    out!(
        "corral run {} ({})",
        escape(&m.work_unit.id),
        m.work_unit.digest
    );
    out!(
        "  preset      {} ({})",
        escape(&m.preset.id),
        m.preset.digest
    );
    out!(
        "  executable  {} ({})",
        escape(&m.executable.path),
        m.executable.digest
    );
    out!("  base        {}", escape(&m.repository.base_sha));
    for line in crate::summary::lines(&m, None) {
        out!("{line}");
    }
    for (name, log) in [("stdout", &m.logs.stdout), ("stderr", &m.logs.stderr)] {
        match reader.read(&log.digest) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let total = text.lines().count();
                out!(
                    "--- {name} ({} bytes{}{}) ---",
                    log.bytes,
                    if log.truncated { ", truncated" } else { "" },
                    if total > LOG_LINES {
                        format!("; the first {LOG_LINES} of {total} lines: corral logs")
                    } else {
                        String::new()
                    }
                );
                for line in text.lines().take(LOG_LINES) {
                    out!("{}", escape(line));
                }
            }
            Err(e) => {
                eprintln!("corral: show: {name}: {}", escape(&e.to_string()));
                code = exit::FAILED;
            }
        }
    }
    if let Some(c) = &m.candidate {
        match reader.read(&c.patch.digest) {
            Ok(patch) => {
                out!("--- patch ({} bytes) ---", patch.len());
                for line in String::from_utf8_lossy(&patch).lines() {
                    out!("{}", escape(line));
                }
            }
            Err(e) => {
                eprintln!("corral: show: patch: {}", escape(&e.to_string()));
                code = exit::FAILED;
            }
        }
    }
    code
}

pub fn logs(args: &LogsArgs) -> u8 {
    let (m, reader) = match load(&args.manifest, args.artifacts.as_ref(), "logs") {
        Ok(x) => x,
        Err(code) => return code,
    };
    let log = if args.stderr {
        &m.logs.stderr
    } else {
        &m.logs.stdout
    };
    let bytes = match reader.read(&log.digest) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("corral: logs: {}", escape(&e.to_string()));
            return exit::FAILED;
        }
    };
    if std::io::stdout().is_terminal() {
        // The worker's bytes never reach a terminal raw (OUT-04).
        for line in String::from_utf8_lossy(&bytes).lines() {
            out!("{}", escape(line));
        }
    } else {
        // Into a pipe or a file: the stored bytes exactly. A closed pipe is the reader's
        // choice.
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(&bytes).and_then(|()| out.flush());
    }
    exit::OK
}
