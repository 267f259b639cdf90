//! The case table: one module per corpus category, plus our fail-closed admission cases.
//!
//! Conventions for a judge (see `case::Judge`):
//! - run the attack through `ctx.run(&spec, &vars)` (the real `corral run`);
//! - read only what the outside can see (the `RunObs`, listener tallies, host files);
//! - pair every refusal with a positive control (`ctx.control(...)`, or the same attack with
//!   the one guard off) that must fire, else the case is inconclusive;
//! - the generic checks (markers, surviving processes, cgroups, host snapshot) run around
//!   every case in `adversarial::run_case`.

use std::collections::BTreeMap;

use super::case::{Case, Judge};
use std::time::Duration;

use anyhow::Result;

use super::harness::{CtlObs, Ctx, RunObs, RunSpec};

/// One attack script of `tests/adversarial/attacks/`, the single source (lintable, runnable
/// by hand), embedded so the suite also runs without a checkout: `(file name, source)`.
macro_rules! attack {
    ($file:literal) => {
        (
            $file,
            include_str!(concat!("../../../../tests/adversarial/attacks/", $file)),
        )
    };
}

mod adm;
mod cap;
mod crash;
mod cred;
mod fs;
mod krn;
mod net;
mod out;
mod proc;
mod res;
mod sig;
mod trust;

/// Every case, in corpus order, then ours.
/// TRUST-07's kill points in the suite (`--crash-points` changes it).
pub const CRASH_POINTS: usize = crash::DEFAULT_POINTS;

pub fn all() -> Vec<Case> {
    let mut v = Vec::new();
    v.extend(net::cases());
    v.extend(proc::cases());
    v.extend(res::cases());
    v.extend(fs::cases());
    v.extend(cred::cases());
    v.extend(krn::cases());
    v.extend(sig::cases());
    v.extend(out::cases());
    v.extend(cap::cases());
    v.extend(trust::cases());
    v.extend(crash::cases());
    v.extend(adm::cases());
    v
}

/// Extra fixture files cases need (path under tests/adversarial, content, executable).
pub fn extra_fixtures() -> Vec<(String, String, bool)> {
    let mut v = Vec::new();
    v.extend(net::extra_fixtures());
    v.extend(trust::extra_fixtures());
    v
}

/// corral's own start-up and collection on this host, now, and the grace a bound on "corral
/// returned promptly" adds to the worker's own time.
pub struct Trivial {
    pub run: RunObs,
    /// Three times the trivial run's whole time plus two seconds, at least 8 s.
    pub grace: Duration,
}

/// Runs `spec` in the preludes' `--trivial` mode (the script exits at once; no signal, no
/// ready condition) and requires that it ran. Every bound on how soon corral returns takes
/// its grace from this, never from an assumed host speed: in a TCG guest beside a busy host
/// corral takes seconds to set a sandbox up, and fixed bounds made OUT-03 and PROC-03 fail
/// there (ADR-0060).
pub fn trivial_run(ctx: &mut Ctx, spec: &RunSpec, j: &mut Judge) -> Result<Trivial> {
    let mut t = spec.clone().args(["--trivial"]);
    t.cancel_after = None;
    t.kill_after = None;
    t.ready = None;
    let run = ctx.run(&t, &vars([]))?;
    j.require(
        run.termination() == "exited" && run.exit_code() == Some(0) && run.out() == "trivial\n",
        format!("the trivial run ran ({})", describe(&run)),
    );
    // The load beside the suite changes between the trivial run and the case's (a guest
    // booting, a build): 6.6 s against a bound of 6.6 s (PROC-02, 6.1 guest, 2026-12-06) with
    // twice-plus-one, at least 4 s. What the bounds tell apart is a corral that returns
    // promptly from one that waits out a 30 s wall budget, never returns, or reads a
    // terabyte (CAP-12), so the grace can be generous.
    let grace = Duration::from_secs(8).max(run.elapsed * 3 + Duration::from_secs(2));
    Ok(Trivial { run, grace })
}

/// Placeholder values for `ctx.run` / `ctx.control`.
pub fn vars<const K: usize>(pairs: [(&str, String); K]) -> BTreeMap<String, String> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The common shape: the sandboxed run must have started the worker and printed no
/// `ESC-<N>` line; the control (outside the sandbox) must have printed at least one for
/// each of `labels` (a label is a substring of the ESC line).
pub fn judge_escapes(ctx: &Ctx, run: &RunObs, ctl: &CtlObs, labels: &[&str], j: &mut Judge) {
    escapes_inside(ctx, run, j);
    control_escapes(ctx, ctl, labels, j);
}

/// The run must have started the worker, and every `ESC-<N>` line it stored is a breach.
pub fn escapes_inside(ctx: &Ctx, run: &RunObs, j: &mut Judge) {
    j.require(started(run), format!("the worker ran ({})", describe(run)));
    esc_breaches(ctx, run, j);
}

/// Every `ESC-<N>` line the run stored is a breach.
pub fn esc_breaches(ctx: &Ctx, run: &RunObs, j: &mut Judge) {
    for e in ctx.escapes(&run.output()) {
        j.breach(true, format!("inside the sandbox: {e}"));
    }
}

/// The control must have printed an `ESC-<N>` line containing each of `labels`.
pub fn control_escapes(ctx: &Ctx, ctl: &CtlObs, labels: &[&str], j: &mut Judge) {
    let esc = ctx.escapes(&ctl.output());
    for l in labels {
        j.control(
            esc.iter().any(|e| e.contains(l)),
            format!("outside the sandbox the attack `{l}` got through"),
        );
    }
}

/// The worker started (a manifest exists and its termination is not `not_started`).
pub fn started(run: &RunObs) -> bool {
    run.has_manifest() && run.termination() != "not_started" && !run.termination().is_empty()
}

/// One line about a run for evidence.
pub fn describe(run: &RunObs) -> String {
    format!(
        "corral exit {}, outcome {}, termination {}, worker exit {:?}, {:.1} s{}",
        run.exit,
        run.outcome(),
        run.termination(),
        run.exit_code(),
        run.elapsed.as_secs_f64(),
        if !run.has_manifest() {
            format!(
                ", no manifest: {}",
                super::harness::truncate(&run.corral_stderr, 300)
            )
        } else if run.exit == 3 {
            // A capability missing: corral's stderr says which, and why.
            format!(
                ", corral said: {}",
                super::harness::truncate(run.corral_stderr.trim(), 400)
            )
        } else {
            String::new()
        }
    )
}

/// The case ids of `../shared/threats/adversarial-corpus.md` the table covers, in its order.
#[cfg(test)]
pub const CORPUS_IDS: [&str; 86] = [
    "NET-01",
    "NET-02",
    "NET-03",
    "NET-04",
    "NET-05",
    "NET-06",
    "NET-07",
    "NET-08",
    "NET-09",
    "NET-10",
    "NET-11",
    "NET-12",
    "NET-13",
    "PROC-01",
    "PROC-02",
    "PROC-03",
    "PROC-04",
    "PROC-05",
    "PROC-06",
    "PROC-07",
    "RES-CPU-01",
    "RES-MEM-01",
    "RES-MEM-02",
    "RES-MEM-03",
    "RES-DISK-01",
    "RES-DISK-02",
    "RES-DISK-03",
    "RES-DISK-04",
    "RES-PID-01",
    "RES-PID-02",
    "FS-01",
    "FS-02",
    "FS-03",
    "FS-04",
    "FS-05",
    "FS-06",
    "FS-07",
    "FS-08",
    "FS-09",
    "FS-10",
    "FS-11",
    "CRED-01",
    "CRED-02",
    "CRED-03",
    "CRED-04",
    "CRED-05",
    "CRED-06",
    "CRED-07",
    "CRED-08",
    "KRN-01",
    "KRN-02",
    "KRN-03",
    "KRN-04",
    "KRN-05",
    "KRN-06",
    "SIG-01",
    "SIG-02",
    "OUT-01",
    "OUT-02",
    "OUT-03",
    "OUT-04",
    "OUT-05",
    "OUT-06",
    "CAP-01",
    "CAP-02",
    "CAP-03",
    "CAP-04",
    "CAP-05",
    "CAP-06",
    "CAP-07",
    "CAP-08",
    "CAP-09",
    "CAP-10",
    "CAP-11",
    "CAP-12",
    "CAP-13",
    "TRUST-01",
    "TRUST-02",
    "TRUST-03",
    "TRUST-04",
    "TRUST-05",
    "TRUST-06",
    "TRUST-07",
    "NET-14",
    "NET-15",
    "NET-16",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_corpus_case_is_in_the_table_once_and_ids_are_unique() {
        let cases = all();
        let ids: Vec<&str> = cases.iter().map(|c| c.id).collect();
        for id in CORPUS_IDS {
            assert_eq!(
                ids.iter().filter(|i| **i == id).count(),
                1,
                "{id} must be in the case table exactly once"
            );
        }
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "duplicate case ids");
        for c in &cases {
            assert!(!c.guarantee.is_empty() && !c.title.is_empty(), "{}", c.id);
            assert!(
                [
                    "NET", "PROC", "RES", "FS", "CRED", "KRN", "SIG", "OUT", "CAP", "TRUST", "ADM"
                ]
                .contains(&c.category()),
                "{}: unknown category",
                c.id
            );
        }
    }
}
