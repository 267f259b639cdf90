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
use super::harness::{CtlObs, Ctx, RunObs};

mod adm;
mod cap;
mod cred;
mod fs;
mod krn;
mod net;
mod out;
mod proc;
mod res;
mod sig;

/// Every case, in corpus order, then ours.
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
    v.extend(adm::cases());
    v
}

/// Extra fixture files cases need (path under tests/adversarial, content, executable).
pub fn extra_fixtures() -> Vec<(String, String, bool)> {
    let mut v = Vec::new();
    v.extend(net::extra_fixtures());
    v
}

/// Placeholder values for `ctx.run` / `ctx.control`.
pub fn vars<const K: usize>(pairs: [(&str, String); K]) -> BTreeMap<String, String> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The common shape: the sandboxed run must have started the worker and printed no
/// `ESC-<N>` line; the control (outside the sandbox) must have printed at least one for
/// each of `labels` (a label is a substring of the ESC line).
pub fn judge_escapes(ctx: &Ctx, run: &RunObs, ctl: &CtlObs, labels: &[&str], j: &mut Judge) {
    j.require(started(run), format!("the worker ran ({})", describe(run)));
    for e in ctx.escapes(&run.output()) {
        j.breach(true, format!("inside the sandbox: {e}"));
    }
    let ctl_esc = ctx.escapes(&ctl.output());
    for l in labels {
        j.control(
            ctl_esc.iter().any(|e| e.contains(l)),
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
        if run.has_manifest() {
            String::new()
        } else {
            format!(
                ", no manifest: {}",
                super::harness::truncate(&run.corral_stderr, 300)
            )
        }
    )
}
