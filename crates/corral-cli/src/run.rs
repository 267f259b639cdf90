//! `corral run`, `corral verify`, `corral probe`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use corral_linux::LinuxSandboxExecutor;
use corral_manifest::{LocalArtifactBundleReader, verify_manifest_file};
use corral_runner::{RunError, RunInputs, RunReport, run_attempt};
use corral_sandbox::{CancelToken, LocalSandboxExecutor};

use crate::admit::{field_of, file_of, load_inputs};
use crate::display::{escape, print_bytes_line, print_json};
use crate::exit;
use crate::input::BadInput;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The WorkUnit document.
    #[arg(long, value_name = "FILE")]
    pub work_unit: PathBuf,
    /// The maintainer-owned AgentPreset.
    #[arg(long, value_name = "FILE")]
    pub preset: PathBuf,
    /// The canonical repository (never modified).
    #[arg(long, value_name = "DIR")]
    pub repo: PathBuf,
    /// The trusted connections document (model_only presets).
    #[arg(long, value_name = "FILE")]
    pub connections: Option<PathBuf>,
    /// A worker environment variable; its name must be on the preset's env_allowlist.
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// The artifact store (default: a folder under the user's data directory).
    #[arg(long, value_name = "DIR")]
    pub artifacts: Option<PathBuf>,
    /// Print the manifest as JSON instead of its path.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub log: crate::logging::LogArgs,
}

/// `$XDG_DATA_HOME/corral` or `~/.local/share/corral`, or `/var/lib/corral` without a home.
pub fn default_data_dir() -> PathBuf {
    xdg_dir("XDG_DATA_HOME", ".local/share", "/var/lib/corral")
}

/// corral's own executable as found when it started, before `choose_mode` may have left the
/// mount namespace it was started in (main).
static OWN_EXE: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();

/// Records corral's own path (main, before the mode is chosen).
pub fn record_own_exe() {
    OWN_EXE.get_or_init(find_own_exe);
}

fn find_own_exe() -> Result<PathBuf, String> {
    std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| format!("cannot find corral's own executable: {e}"))
}

/// corral's own executable's path: the one recorded at start, else found now.
pub fn own_exe() -> Result<PathBuf, String> {
    OWN_EXE.get_or_init(find_own_exe).clone()
}

/// Base checkouts are materialized by this very binary, re-run as the confined checkout
/// helper (ADR-0070). It is started as `/proc/self/exe`: the kernel resolves that link to the
/// very file corral runs from whatever the mount namespace (a path may have left it, above)
/// and whatever has since been put at the path.
pub fn checkout_isolation() -> Result<corral_runner::Isolation, String> {
    Ok(corral_runner::Isolation::Helper {
        exe: PathBuf::from("/proc/self/exe"),
    })
}

/// The base cache's bounds: ADR-0070's defaults, or the operator's `CORRAL_BASE_MAX_ENTRIES`,
/// `CORRAL_BASE_MAX_BYTES` and `CORRAL_CACHE_MAX_BYTES` (corral's own environment; never a
/// WorkUnit field).
pub fn cache_limits() -> Result<corral_runner::CacheLimits, String> {
    let mut limits = corral_runner::CacheLimits::default();
    for (name, slot) in [
        ("CORRAL_BASE_MAX_ENTRIES", &mut limits.checkout.max_entries),
        ("CORRAL_BASE_MAX_BYTES", &mut limits.checkout.max_bytes),
        ("CORRAL_CACHE_MAX_BYTES", &mut limits.budget_bytes),
    ] {
        if let Some(v) = std::env::var_os(name) {
            *slot = v
                .to_str()
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    format!(
                        "environment: {name}: expected a positive whole number of {}",
                        if name.ends_with("ENTRIES") {
                            "entries"
                        } else {
                            "bytes"
                        }
                    )
                })?;
        }
    }
    Ok(limits)
}

/// `$XDG_CACHE_HOME/corral` or `~/.cache/corral`, or `/var/cache/corral` without a home.
pub fn default_cache_dir() -> PathBuf {
    xdg_dir("XDG_CACHE_HOME", ".cache", "/var/cache/corral")
}

fn xdg_dir(var: &str, home_rel: &str, fallback: &str) -> PathBuf {
    if let Some(d) = std::env::var_os(var).filter(|d| Path::new(d).is_absolute()) {
        return PathBuf::from(d).join("corral");
    }
    match std::env::var_os("HOME").filter(|h| Path::new(h).is_absolute()) {
        Some(h) => PathBuf::from(h).join(home_rel).join("corral"),
        None => PathBuf::from(fallback),
    }
}

/// Paths corral records (in manifests, evidence, messages) must be shown byte for byte, so
/// one that is not UTF-8 is bad input naming where it came from, never a lossy guess. A
/// `--repo` is checked as given and as it resolves (a link may point at such a name).
pub fn utf8_path(what: &str, path: &Path) -> Result<(), String> {
    let resolved = path.canonicalize().ok();
    let bad = [Some(path), resolved.as_deref()]
        .into_iter()
        .flatten()
        .find(|p| p.to_str().is_none());
    match bad {
        None => Ok(()),
        Some(p) => Err(format!(
            "{what} {}: the path is not valid UTF-8, which corral cannot record exactly; use \
             a path whose names are UTF-8",
            escape(&p.to_string_lossy())
        )),
    }
}

/// Parses `--env NAME=VALUE` values; a malformed one is bad input.
fn parse_env(values: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut env = BTreeMap::new();
    for v in values {
        let Some((name, value)) = v.split_once('=').filter(|(n, _)| !n.is_empty()) else {
            return Err(format!("--env {:?}: expected NAME=VALUE", escape(v)));
        };
        if env.insert(name.to_owned(), value.to_owned()).is_some() {
            return Err(format!("--env {:?}: given twice", escape(name)));
        }
    }
    Ok(env)
}

/// Cancels the run on SIGINT, SIGTERM or SIGHUP; the sandbox is torn down, the manifest says
/// `cancelled`.
fn cancel_on_signals(cancel: &CancelToken) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        let token = cancel.clone();
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                token.cancel();
            }
        });
    }
}

pub fn run(args: &RunArgs) -> u8 {
    let verbose = crate::logging::init(&args.log);
    let env = match parse_env(&args.env) {
        Ok(env) => env,
        Err(line) => {
            eprintln!("corral: {line}");
            return exit::REJECTED;
        }
    };
    let inputs = match load_inputs(&args.work_unit, &args.preset, args.connections.as_ref()) {
        Ok(i) => i,
        Err(bad) => {
            for BadInput(line) in &bad {
                eprintln!("corral: {line}");
            }
            return exit::REJECTED;
        }
    };
    let artifacts = args
        .artifacts
        .clone()
        .unwrap_or_else(|| default_data_dir().join("artifacts"));
    let cache = default_cache_dir();
    let (artifacts_name, cache_name) = (
        if args.artifacts.is_some() {
            "--artifacts"
        } else {
            "the artifact store (XDG_DATA_HOME or HOME)"
        },
        "the base cache (XDG_CACHE_HOME or HOME)",
    );
    for (what, path) in [
        ("--repo", args.repo.as_path()),
        (artifacts_name, artifacts.as_path()),
        (cache_name, cache.as_path()),
    ] {
        if let Err(line) = utf8_path(what, path) {
            eprintln!("corral: {line}");
            return exit::REJECTED;
        }
    }
    if let Err(line) = start_reaper(Some(&artifacts)) {
        eprintln!("corral: {line}");
        return exit::FAILED;
    }
    let cancel = match CancelToken::new() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("corral: cannot create a cancel token: {e}");
            return exit::FAILED;
        }
    };
    cancel_on_signals(&cancel);
    let executor = match executor() {
        Ok(e) => e,
        Err(line) => {
            eprintln!("corral: {line}");
            return exit::REJECTED;
        }
    };
    let (cache_limits, checkout) = match (cache_limits(), checkout_isolation()) {
        (Ok(l), Ok(i)) => (l, i),
        (Err(line), _) | (_, Err(line)) => {
            eprintln!("corral: {line}");
            return exit::REJECTED;
        }
    };
    let run_inputs = RunInputs {
        work_unit: &inputs.work_unit,
        preset: &inputs.preset,
        connections: inputs.connections.as_ref(),
        env: &env,
        repo: &args.repo,
        artifacts: &artifacts,
        cache: &cache,
        cache_limits,
        checkout: &checkout,
    };
    // The live line and step logs would overwrite each other on one stderr.
    let progress = (!verbose && crate::progress::Ticker::wanted(args.json))
        .then(|| crate::progress::Ticker::start(&inputs.work_unit.budget));
    let result = run_attempt(&run_inputs, &executor, &cancel);
    drop(progress);
    match result {
        Ok(report) => {
            print_report(&report, args.json, &inputs.work_unit.budget);
            if let Some(line) =
                attempt_failed_line(&report.manifest.manifest, &inputs.work_unit.budget)
            {
                eprintln!("corral: {line}");
            }
            report.exit_code
        }
        Err(err) => report_error(
            &err,
            &args.work_unit,
            &args.preset,
            args.connections.as_ref(),
        ),
    }
}

pub fn report_error(err: &RunError, wu: &Path, preset: &Path, conn: Option<&PathBuf>) -> u8 {
    match err {
        RunError::Rejected(rejections) => {
            for r in rejections {
                eprintln!(
                    "corral: rejected: {}: {}: {} [{}]",
                    file_of(r, wu, preset, conn),
                    field_of(r),
                    escape(&r.detail),
                    r.code
                );
            }
        }
        RunError::BadInput(m) => eprintln!("corral: {}", escape(m)),
        RunError::BadWorkUnitField { field, detail } => eprintln!(
            "corral: {}: {field}: {}",
            escape(&wu.display().to_string()),
            escape(detail)
        ),
        RunError::Internal(m) => eprintln!("corral: internal error: {}", escape(m)),
        RunError::Store(m) => eprintln!("corral: {}", escape(m)),
    }
    err.exit_code()
}

/// One line for a failed attempt, in the manifest's words: what ended it, what was used and
/// the budget (`attempt_failed: wall_timeout after 2.0 s of 2 s`). None for other outcomes.
pub fn attempt_failed_line(
    m: &corral_contract::ResultManifest,
    budget: &corral_contract::documents::Budget,
) -> Option<String> {
    use corral_contract::manifest::{Outcome, Termination};
    if m.outcome != Outcome::AttemptFailed {
        return None;
    }
    let e = &m.execution;
    let secs = |ms: u64| format!("{:.1} s", ms as f64 / 1000.0);
    let of = |b: Option<u64>, unit: &str| b.map(|b| format!(" of {b}{unit}")).unwrap_or_default();
    let what = match e.termination {
        Termination::WallTimeout => format!(
            "wall_timeout after {}{}",
            secs(e.wall_ms),
            of(budget.wall_seconds, " s")
        ),
        Termination::CpuLimit => format!(
            "cpu_limit after {} of CPU{}",
            secs(e.cpu_ms),
            of(budget.cpu_seconds, " s")
        ),
        Termination::MemoryLimit => format!(
            "memory_limit: peak {} bytes{}",
            e.peak_memory_bytes,
            of(budget.memory_bytes, " bytes")
        ),
        Termination::Exited => format!(
            "the worker exited {} after {}",
            e.exit_code.map_or("?".to_owned(), |c| c.to_string()),
            secs(e.wall_ms)
        ),
        Termination::Signaled => format!(
            "the worker was killed by signal {} after {}",
            e.signal.map_or("?".to_owned(), |s| s.to_string()),
            secs(e.wall_ms)
        ),
        Termination::Cancelled => format!("cancelled after {}", secs(e.wall_ms)),
        Termination::NotStarted => "not_started: the worker never ran".to_owned(),
    };
    Some(format!("attempt_failed: {what}"))
}

fn print_report(report: &RunReport, json: bool, budget: &corral_contract::documents::Budget) {
    use std::io::IsTerminal as _;
    let m = &report.manifest.manifest;
    // A person at a terminal gets the summary `corral demo` prints (rejections included);
    // scripts get the manifest path (or the manifest) on stdout and the reasons on stderr.
    let summary = !json && std::io::stdout().is_terminal();
    if summary {
        for line in crate::summary::lines(m, Some(budget)) {
            out!("{line}");
        }
    }
    if !(summary && std::io::stderr().is_terminal()) {
        // Why a candidate was rejected, one stderr line each, with `--json` too.
        let outcome = crate::display::word(&m.outcome);
        for r in &m.rejections {
            let path = r
                .path
                .as_deref()
                .map(|p| format!("{}: ", escape(p)))
                .unwrap_or_default();
            eprintln!(
                "corral: {outcome}: {path}{} [{}]",
                escape(&r.detail),
                r.code
            );
        }
    }
    if json {
        // The stored manifest's own canonical bytes, byte for byte (`corral verify` accepts them).
        print_bytes_line(&report.manifest.bytes);
    } else {
        out!("{}", report.manifest.path.display());
    }
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The manifest file.
    pub manifest: PathBuf,
    /// The artifact store (default: the store the manifest is in, else the default store).
    #[arg(long, value_name = "DIR")]
    pub artifacts: Option<PathBuf>,
    /// One JSON document (`corral.verify-report/v1`) instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// The artifact store a manifest's artifacts are read from: `--artifacts`, else the store the
/// manifest file lies in (`<store>/sha256/<hex>`), else the default store.
pub fn store_for(manifest: &Path, artifacts: Option<&PathBuf>) -> PathBuf {
    artifacts
        .cloned()
        .unwrap_or_else(|| match manifest.parent() {
            Some(p) if p.file_name().is_some_and(|n| n == "sha256") => p
                .parent()
                .map_or_else(|| default_data_dir().join("artifacts"), Path::to_path_buf),
            _ => default_data_dir().join("artifacts"),
        })
}

/// `verify --json`: the same keys whether the manifest could be read or not.
fn print_verify_json(
    manifest: &Path,
    intact: bool,
    entries: Vec<corral_contract::VerifyReportEntry>,
    error: Option<&str>,
) {
    print_json(&corral_contract::VerifyReport {
        schema_version: corral_contract::reports::VERIFY_REPORT_SCHEMA.to_owned(),
        manifest: manifest.to_string_lossy().into_owned(),
        intact,
        entries,
        error: error.map(str::to_owned),
    });
}

pub fn verify(args: &VerifyArgs) -> u8 {
    let artifacts = store_for(&args.manifest, args.artifacts.as_ref());
    let reader = LocalArtifactBundleReader::new(&artifacts);
    match verify_manifest_file(&args.manifest, &reader) {
        Ok((_, report)) => {
            if args.json {
                let entries = report
                    .entries
                    .iter()
                    .map(|e| corral_contract::VerifyReportEntry {
                        role: e.role.to_string(),
                        digest: e.digest.clone(),
                        status: e.status.state(),
                        detail: e.detail(),
                    })
                    .collect();
                print_verify_json(&args.manifest, report.intact(), entries, None);
            } else {
                for e in &report.entries {
                    out!("{}", escape(&e.to_string()));
                }
                if report.intact() {
                    out!("intact");
                }
            }
            if report.intact() {
                exit::OK
            } else {
                eprintln!(
                    "corral: verify: {} is not intact",
                    escape(&args.manifest.display().to_string())
                );
                exit::FAILED
            }
        }
        Err(e) => {
            eprintln!("corral: verify: {}", escape(&e.to_string()));
            if args.json {
                print_verify_json(&args.manifest, false, Vec::new(), Some(&e.to_string()));
            }
            exit::FAILED
        }
    }
}

#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// Print the capabilities as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub log: crate::logging::LogArgs,
}

/// The environment variable that withdraws capabilities from the probe's report.
pub const WITHDRAW_ENV: &str = "CORRAL_WITHDRAW_CAPABILITY";

/// The Linux executor with this host's probe, minus any capability named in
/// `CORRAL_WITHDRAW_CAPABILITY` (comma-separated). The host qualification suite uses it to
/// show that every capability, when missing, refuses the run before the worker starts
/// (ADR-0060). It can only take capabilities away, never attest one, so it cannot weaken a
/// run; an unknown name is bad input (exit 2), never ignored.
/// Starts corral's reaper (ADR-0092) for the cache, the temporary directory and `artifacts`:
/// whatever ends this process, its cgroups and temporary files go when it does. Before
/// anything of the kind is made (the probe makes cgroups and folders).
pub fn start_reaper(artifacts: Option<&Path>) -> Result<(), String> {
    let owner = corral_linux::rootless::workspace_owner();
    let places = crate::reaper::Places {
        cache: Some(default_cache_dir()),
        checkouts: owner.map(|o| corral_runner::cache_root_for(&default_cache_dir(), Some(o))),
        artifacts: artifacts.map(Path::to_path_buf),
    };
    crate::reaper::start(&places).map_err(|e| {
        format!(
            "cannot start corral's reaper (/proc/self/exe {}): {e}",
            crate::reaper::REAPER_ARG
        )
    })
}

/// The backend's configuration: the probe tests idmapped mounts where the base checkouts
/// live (corral's cache), since a run's workspace lower is one of them.
pub fn linux_config() -> corral_linux::LinuxConfig {
    let mut config = corral_linux::LinuxConfig::default();
    let dir = default_cache_dir();
    if std::fs::create_dir_all(&dir).is_ok() {
        config.probe_dir = Some(dir);
    }
    config
}

fn executor() -> Result<LinuxSandboxExecutor, String> {
    let Some(list) = std::env::var_os(WITHDRAW_ENV) else {
        return Ok(LinuxSandboxExecutor::with_config(linux_config()));
    };
    let list = list.to_string_lossy().into_owned();
    if let Ok(h) = corral_linux::cgroup::Hierarchy::detect_host() {
        let _ = h.collect_stale();
    }
    let config = linux_config();
    let mut report = corral_linux::probe::probe(&config);
    for name in list.split(',').filter(|n| !n.is_empty()) {
        let cap = corral_contract::Capability::ALL
            .into_iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| {
                format!("{WITHDRAW_ENV}: {name:?} is not one of the nine capabilities")
            })?;
        report = report.without(cap, &format!("withdrawn by {WITHDRAW_ENV}"));
    }
    Ok(LinuxSandboxExecutor::with_probe(config, report))
}

pub fn probe(args: &ProbeArgs) -> u8 {
    crate::logging::init(&args.log);
    let t = std::time::Instant::now();
    if let Err(line) = start_reaper(None) {
        eprintln!("corral: {line}");
        return exit::FAILED;
    }
    let executor = match executor() {
        Ok(e) => e,
        Err(line) => {
            eprintln!("corral: {line}");
            return exit::REJECTED;
        }
    };
    let caps = executor.capabilities();
    let missing = caps.missing();
    for cap in corral_contract::Capability::ALL {
        tracing::info!(
            capability = cap.name(),
            enforced = caps.get(cap).enforced,
            "probe: {}",
            caps.get(cap).evidence
        );
    }
    tracing::info!(
        backend = executor.backend(),
        missing = missing.len(),
        ms = u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX),
        "probe done"
    );
    if args.json {
        print_json(&corral_contract::ProbeReportDocument {
            schema_version: corral_contract::reports::PROBE_REPORT_SCHEMA.to_owned(),
            backend: executor.backend().to_owned(),
            capabilities: caps.clone(),
            landlock_abi: executor.probe_report().landlock_abi,
            all_enforced: missing.is_empty(),
        });
    } else {
        out!("backend: {}", executor.backend());
        out!("mode: {}", corral_linux::rootless::mode());
        let all = corral_contract::Capability::ALL;
        let first = caps.get(all[0]);
        if all
            .iter()
            .all(|c| !caps.get(*c).enforced && caps.get(*c).evidence == first.evidence)
        {
            // One cause for all nine (not root, say): said once.
            out!(
                "MISSING  all nine capabilities: {}",
                escape(&first.evidence)
            );
        } else {
            for cap in all {
                let e = caps.get(cap);
                out!(
                    "{} {:<26} {}",
                    if e.enforced { "enforced" } else { "MISSING " },
                    cap.name(),
                    escape(&e.evidence)
                );
            }
        }
        if missing.is_empty() {
            out!("all nine capabilities are enforced on this host");
        } else {
            out!(
                "{} capability(ies) missing: no worker can run here",
                missing.len()
            );
        }
    }
    if missing.is_empty() {
        exit::OK
    } else {
        exit::CAPABILITY_MISSING
    }
}
