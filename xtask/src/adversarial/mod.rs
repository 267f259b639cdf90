//! `cargo xtask adversarial`: the host qualification suite (issue 6, ADR-0060).
//!
//! Every case of `../shared/threats/adversarial-corpus.md` (plus our fail-closed admission
//! cases) runs black-box through the real `corral run` path, with a positive control, and is
//! judged only from what the outside can observe: corral's exit code and manifest, the logs
//! it stored, host listeners, canaries, marker files, surviving processes, cgroups, mounts and
//! host file hashes. A case is `contained`, `escaped`, `inconclusive` (its control did not
//! fire, or the harness could not observe it) or `not applicable` (with the reason).

pub mod case;
pub mod cases;
pub mod fixtures;
pub mod harness;
pub mod host;
pub mod report;
pub mod tls;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use case::{Case, Outcome, Verdict};
use harness::{Ctx, Harness, progress};
use report::CaseResult;

struct Options {
    list: bool,
    filter: Vec<String>,
    json: PathBuf,
    sarif: PathBuf,
    corral: Option<PathBuf>,
    verbose: bool,
    /// Rounds of the whole selection (a flake shows up as a round that is not clean).
    repeat: u32,
    /// Keep every core busy with a spinning process per core while the cases run.
    cpu_hog: bool,
    /// TRUST-07's seeded kill points.
    crash_points: usize,
    /// Run every corral as this ordinary user (rootless mode, ADR-0080); the harness itself
    /// stays root to plant canaries and watch the host.
    as_user: Option<String>,
}

const USAGE: &str = "usage: cargo xtask adversarial [--list] [--filter ID|CATEGORY[,...]] \
     [--json FILE] [--sarif FILE] [--corral BIN] [--repeat N] [--cpu-hog] [--crash-points N] [--as-user NAME] [--verbose]\n\
     Runs the host qualification suite through the corral binary; exit 0 only when every \
     applicable case is contained and the host is left as it was. Only the whole suite \
     (no --filter) qualifies a host. --as-user NAME runs every corral as that ordinary user \
     (rootless mode; the user's systemd manager must run: `systemctl start user@UID.service`).";

fn parse(root: &Path, args: &[String]) -> Result<Options> {
    let out = root.join("target/adversarial");
    let mut o = Options {
        list: false,
        filter: Vec::new(),
        json: out.join("report.json"),
        sarif: out.join("report.sarif"),
        corral: None,
        verbose: false,
        repeat: 1,
        cpu_hog: false,
        crash_points: cases::CRASH_POINTS,
        as_user: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .with_context(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--list" => o.list = true,
            "--verbose" | "-v" => o.verbose = true,
            "--filter" => o.filter.extend(
                value("--filter")?
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            ),
            "--json" => o.json = PathBuf::from(value("--json")?),
            "--sarif" => o.sarif = PathBuf::from(value("--sarif")?),
            "--corral" => o.corral = Some(PathBuf::from(value("--corral")?)),
            "--repeat" => {
                o.repeat = value("--repeat")?
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .context("--repeat takes a whole number of rounds, 1 or more")?;
            }
            "--cpu-hog" => o.cpu_hog = true,
            "--as-user" => o.as_user = Some(value("--as-user")?),
            "--crash-points" => {
                o.crash_points = value("--crash-points")?
                    .parse()
                    .ok()
                    .filter(|n| *n >= 3)
                    .context("--crash-points takes a whole number, 3 or more (one per phase)")?;
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}; {USAGE}"),
        }
    }
    Ok(o)
}

/// A filter term selects a case when it equals its id or category, or is a prefix of the id
/// (`NET`, `NET-0`, `RES-MEM`, `CAP-04`).
fn selected(case: &Case, filter: &[String]) -> bool {
    filter.is_empty()
        || filter.iter().any(|f| {
            let f = f.to_ascii_uppercase();
            case.id == f || case.category() == f || case.id.starts_with(&f)
        })
}

/// The suite without a checkout: `xtask adversarial --corral BIN [...]` run directly (not
/// through cargo). The fixtures (attack scripts, presets, hostile repository builders) are
/// generated from the case table into a private folder, which is removed afterwards; reports
/// default to `./corral-qualification/` unless `--json`/`--sarif` say otherwise.
pub fn run_standalone(args: &[String]) -> Result<()> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    let listing = args.iter().any(|a| a == "--list");
    if !listing && !args.iter().any(|a| a == "--corral") {
        bail!(
            "outside a checkout the suite qualifies an installed corral: pass --corral BIN \
             (for example --corral $(command -v corral))"
        );
    }
    let dir = std::env::temp_dir().join(format!("corral-qualify-{}", std::process::id()));
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    std::fs::create_dir_all(&dir)?;
    let _remove = Remove(dir.clone());
    fixtures::generate(&dir, false, true)?;
    let mut args = args.to_vec();
    let cwd = std::env::current_dir()?;
    for (flag, name) in [("--json", "report.json"), ("--sarif", "report.sarif")] {
        if !args.iter().any(|a| a == flag) && !listing {
            args.push(flag.to_owned());
            args.push(
                cwd.join("corral-qualification")
                    .join(name)
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    run(&dir, &args)
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let o = parse(root, args)?;
    let all = cases::all();
    let chosen: Vec<&Case> = all.iter().filter(|c| selected(c, &o.filter)).collect();
    if chosen.is_empty() {
        bail!("--filter {:?} selects no case (see --list)", o.filter);
    }
    if o.list {
        for c in &chosen {
            println!(
                "{:<12} {:<5} {:<58} {}",
                c.id,
                c.category(),
                c.title,
                c.guarantee
            );
        }
        println!("{} case(s)", chosen.len());
        return Ok(());
    }
    preflight(root)?;
    let corral = match o.corral {
        Some(p) => p,
        None => build_corral(root)?,
    };
    let mut h = Harness::new(root, corral.clone(), o.verbose)?;
    if let Some(user) = &o.as_user {
        h.run_as_user(user)?;
    }
    h.crash_points = o.crash_points;
    self_check(&h)?;
    let suite_before = host::snapshot(&[&corral]);
    let started = Instant::now();
    let hog = CpuHog::start(o.cpu_hog)?;
    let mut results = Vec::new();
    let mut rounds: Vec<(u32, usize, usize)> = Vec::new();
    for round in 1..=o.repeat {
        let round_start = results.len();
        for (i, case) in chosen.iter().enumerate() {
            progress(&format!(
                "[{}/{}] {} {} ({:.0} s)",
                i + 1,
                chosen.len(),
                case.id,
                case.title,
                started.elapsed().as_secs_f64()
            ));
            let t = Instant::now();
            let verdict = run_case(&h, case);
            let mut r = CaseResult {
                id: case.id.to_owned(),
                category: case.category().to_owned(),
                title: case.title.to_owned(),
                guarantee: case.guarantee.to_owned(),
                script: case.script_file(),
                outcome: verdict.outcome,
                evidence: verdict.evidence,
                seconds: t.elapsed().as_secs_f64(),
            };
            if o.verbose || matches!(r.outcome, Outcome::Escaped | Outcome::Inconclusive) {
                progress("");
                eprintln!("{} {}: {}", r.id, r.outcome, r.evidence.join(" | "));
            } else if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                // Logs (CI) get one line per case instead of the redrawn status line.
                eprintln!(
                    "[{}/{}] {} {} ({:.1} s)",
                    i + 1,
                    chosen.len(),
                    r.id,
                    r.outcome,
                    r.seconds
                );
            }
            if o.repeat > 1 {
                r.evidence
                    .insert(0, format!("round {round} of {}", o.repeat));
            }
            results.push(r);
        }
        let bad_in_round = results[round_start..]
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Escaped | Outcome::Inconclusive))
            .count();
        rounds.push((round, results.len() - round_start, bad_in_round));
    }
    drop(hog);
    progress("");
    // Whatever one case's checks could not attribute still shows up here.
    let suite_after = host::snapshot(&[&corral]);
    let leftovers = host::diff(&suite_before, &suite_after);
    drop(h);
    let scratch_left = Path::new(&format!("/tmp/corral-adv-{}", std::process::id())).exists();
    report::print_table(&results);
    if o.repeat > 1 || o.cpu_hog {
        for (round, n, bad) in &rounds {
            println!(
                "round {round}{}: {n} cases, {bad} escaped or inconclusive",
                if o.cpu_hog { " (every core busy)" } else { "" }
            );
        }
    }
    report::write_json(&o.json, &results, &leftovers, started.elapsed(), &o.filter)?;
    report::write_sarif(&o.sarif, &results)?;
    println!("report: {} and {}", o.json.display(), o.sarif.display());
    let bad: Vec<&CaseResult> = results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Escaped | Outcome::Inconclusive))
        .collect();
    if !leftovers.is_empty() || scratch_left {
        bail!(
            "the suite left the host changed: {}{}",
            leftovers.join("; "),
            if scratch_left {
                " (scratch folder)"
            } else {
                ""
            }
        );
    }
    if !bad.is_empty() {
        bail!(
            "{} case(s) not contained: {}",
            bad.len(),
            bad.iter()
                .map(|r| format!("{} {}", r.id, r.outcome))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if o.filter.is_empty() {
        println!(
            "host qualified: every applicable case contained ({} cases in {:.0} s)",
            results.len(),
            started.elapsed().as_secs_f64()
        );
    } else {
        println!(
            "{} selected case(s) contained in {:.0} s (--filter {}); not a qualification: \
             only the whole suite qualifies a host",
            results.len(),
            started.elapsed().as_secs_f64(),
            o.filter.join(",")
        );
    }
    Ok(())
}

/// One spinning `sh` per core while it lives (`--cpu-hog`): the suite must judge the same on
/// a loaded host. Each is ended by its own pid.
struct CpuHog(Vec<std::process::Child>);

impl CpuHog {
    fn start(on: bool) -> Result<Self> {
        let n = if on {
            std::thread::available_parallelism().map_or(2, std::num::NonZero::get)
        } else {
            0
        };
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(std::process::Stdio::null())
                    .spawn()
                    .context("starting the CPU hog")?,
            );
        }
        Ok(Self(v))
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One case, with the generic host-side checks of corpus §0.3 around it.
fn run_case(h: &Harness, case: &Case) -> Verdict {
    let before = host::snapshot(&[]);
    let mut ctx = match Ctx::new(h, case.id) {
        Ok(c) => c,
        Err(e) => return Verdict::inconclusive(format!("harness error: {e:#}")),
    };
    let mut verdict =
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (case.judge)(&mut ctx))) {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => Verdict::inconclusive(format!("harness error: {e:#}")),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                Verdict::inconclusive(format!("harness panicked: {msg}"))
            }
        };
    let mut breaches = Vec::new();
    // Give a straggler the chance to show itself before looking.
    std::thread::sleep(std::time::Duration::from_millis(100));
    for m in ctx.markers() {
        breaches.push(format!("marker on the host: {}", m.display()));
    }
    for p in ctx.processes_with_nonce() {
        breaches.push(format!("process survived: {p}"));
    }
    for g in ctx.leftover_cgroups() {
        breaches.push(format!("cgroup left behind: {g}"));
    }
    ctx.finish();
    drop(ctx);
    breaches.extend(host::diff(&before, &host::snapshot(&[])));
    if !breaches.is_empty() && verdict.outcome != Outcome::NotApplicable {
        verdict.outcome = Outcome::Escaped;
        breaches.append(&mut verdict.evidence);
        verdict.evidence = breaches;
    }
    verdict
}

/// The generic checks' own positive control: a marker, a process carrying the nonce and a
/// changed host file planted on purpose must each be seen, or no case can be judged.
fn self_check(h: &Harness) -> Result<()> {
    let mut ctx = Ctx::new(h, "SELF")?;
    let marker = PathBuf::from(format!("/tmp/PWN-{}", ctx.n));
    std::fs::write(&marker, "self-check")?;
    let seen_marker = ctx.markers().contains(&marker);
    let _ = std::fs::remove_file(&marker);
    let mut child = Command::new("sh")
        .args(["-c", &format!("sleep 30; : {}", ctx.n)])
        .spawn()
        .context("self-check process")?;
    std::thread::sleep(std::time::Duration::from_millis(50));
    let seen_process = !ctx.processes_with_nonce().is_empty();
    let _ = child.kill();
    let _ = child.wait();
    let before = host::snapshot(&[]);
    let decoy = PathBuf::from(format!("/opt/corral-adv-self-{}", ctx.n));
    std::fs::write(&decoy, "x")?;
    let seen_change = !host::diff(&before, &host::snapshot(&[])).is_empty();
    let _ = std::fs::remove_file(&decoy);
    ctx.finish();
    if !(seen_marker && seen_process && seen_change) {
        bail!(
            "harness self-check failed (marker seen: {seen_marker}, process seen: \
             {seen_process}, host change seen: {seen_change}): no case could be judged"
        );
    }
    Ok(())
}

fn preflight(root: &Path) -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let euid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or("");
    if euid != "0" {
        bail!(
            "cargo xtask adversarial must run as root: corral's sandbox is rootful, and the \
             harness plants canaries in /root and builds network namespaces"
        );
    }
    for tool in ["git", "python3", "ip", "setpriv", "unshare", "timeout"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map(|o| !o.status.success())
            .unwrap_or(true)
        {
            bail!("{tool} is not installed (scripts/setup.sh installs it)");
        }
    }
    if !fixtures::generate(root, true, false)? {
        bail!("tests/adversarial is out of date: run `cargo xtask fixtures`");
    }
    Ok(())
}

/// Builds the `corral` binary under test (debug profile: the test command already built it).
fn build_corral(root: &Path) -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "-q", "-p", "corral-cli", "--bin", "corral"])
        .current_dir(root)
        .status()
        .context("cargo build")?;
    if !status.success() {
        bail!("building corral failed");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join("debug/corral");
    if !bin.exists() {
        bail!("{} was not built", bin.display());
    }
    Ok(bin)
}
