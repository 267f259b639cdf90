//! ADM: fail-closed admission (ours, not from the corpus).
//!
//! A run that lacks any of the nine sandbox capabilities, or whose documents ask for
//! something corral refuses, must never start the worker. Each case pairs the refused run
//! with the same documents minus the one bad part, which must start the worker and capture
//! its marker file (the positive control: the refusal is caused by that part alone).

use anyhow::Result;
use serde_json::json;
use sha2::{Digest as _, Sha256};

use super::{describe, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{Ctx, RunObs, RunSpec, truncate};

const WITHDRAW: &str = "CORRAL_WITHDRAW_CAPABILITY";

/// corral's exit codes (CONTRACT.md).
const EXIT_FAILED: i32 = 1;
const EXIT_REJECTED: i32 = 2;
const EXIT_CAPABILITY_MISSING: i32 = 3;

macro_rules! capability_case {
    ($id:literal, $cap:literal, $f:ident) => {{
        fn $f(ctx: &mut Ctx) -> Result<Verdict> {
            withdrawn(ctx, $cap)
        }
        Case {
            id: $id,
            title: concat!("Capability missing: ", $cap),
            guarantee: "a run lacking any sandbox capability never starts (exit 3, not_started)",
            script: Some(attack!("ADM.sh")),
            judge: $f,
        }
    }};
}

pub fn cases() -> Vec<Case> {
    vec![
        capability_case!("ADM-01", "network_enforcement", adm_01),
        capability_case!("ADM-02", "process_tree_isolation", adm_02),
        capability_case!("ADM-03", "cpu_limit", adm_03),
        capability_case!("ADM-04", "memory_limit", adm_04),
        capability_case!("ADM-05", "disk_limit", adm_05),
        capability_case!("ADM-06", "process_limit", adm_06),
        capability_case!("ADM-07", "filesystem_isolation", adm_07),
        capability_case!("ADM-08", "writable_path_enforcement", adm_08),
        capability_case!("ADM-09", "credential_isolation", adm_09),
        Case {
            id: "ADM-10",
            title: "Preset with prompt_transport file",
            guarantee: "a file prompt transport is refused (exit 2), nothing runs or is written",
            script: Some(attack!("ADM.sh")),
            judge: adm_10,
        },
        Case {
            id: "ADM-11",
            title: "Alias task fields (prompt, goal, title)",
            guarantee: "unknown fields are refused naming the field (exit 2); objective only",
            script: Some(attack!("ADM.sh")),
            judge: adm_11,
        },
        Case {
            id: "ADM-12",
            title: "Credential names on the preset's env allowlist",
            guarantee: "credential variables can never be allowlisted (exit 2)",
            script: Some(attack!("ADM.sh")),
            judge: adm_12,
        },
        Case {
            id: "ADM-13",
            title: "Provider-version drift (executable_sha256 mismatch)",
            guarantee: "a pinned executable that hashes differently never starts",
            script: Some(attack!("ADM.sh")),
            judge: adm_13,
        },
    ]
}

fn spec() -> RunSpec {
    RunSpec::new("ADM.sh")
}

/// Why the worker evidently ran (empty when nothing shows it did).
fn worker_ran(n: &str, run: &RunObs) -> Vec<String> {
    let mut why = Vec::new();
    if run.output().contains(&format!("RAN-{n}")) {
        why.push("the stored worker output holds its marker".to_owned());
    }
    if run.manifest["logs"]["stdout"]["bytes"]
        .as_u64()
        .is_some_and(|b| b > 0)
    {
        why.push("the manifest records worker stdout".to_owned());
    }
    if run.has_manifest() && !run.manifest["candidate"].is_null() {
        why.push(format!(
            "a candidate was recorded: {:?}",
            run.changed_paths()
        ));
    }
    if run.has_manifest() && run.termination() != "not_started" {
        why.push(format!("termination {:?}", run.termination()));
    }
    if run.repo.join(format!("src/adm-ran-{n}.txt")).exists() {
        why.push("the marker file is in the host repository".to_owned());
    }
    why
}

/// The positive control: the same documents without the bad part start the worker and
/// capture its marker file.
fn control_ran(ctx: &Ctx, run: &RunObs, j: &mut Judge, what: &str) {
    let marker = format!("src/adm-ran-{}.txt", ctx.n);
    let captured = run.changed_paths().iter().any(|(p, _)| *p == marker);
    j.control(
        run.exit == 0 && captured && run.out().contains(&format!("RAN-{}", ctx.n)),
        format!(
            "{what}: the worker ran and {marker} was captured ({})",
            describe(run)
        ),
    );
}

/// An admission refusal: exit 2, no manifest, nothing on disk, a line naming `field`.
fn refused_at_admission(ctx: &Ctx, run: &RunObs, field: &str, j: &mut Judge, what: &str) {
    for why in worker_ran(&ctx.n, run) {
        j.breach(true, format!("{what}: the worker ran: {why}"));
    }
    j.breach(
        run.exit != EXIT_REJECTED,
        format!(
            "{what}: corral exit {} (want 2: admission rejected)",
            run.exit
        ),
    );
    j.breach(
        run.has_manifest(),
        format!("{what}: a manifest was printed for a rejected admission"),
    );
    let wrote = run.artifacts.exists()
        && std::fs::read_dir(&run.artifacts).is_ok_and(|mut d| d.next().is_some());
    j.breach(
        wrote,
        format!(
            "{what}: the artifact store {} was written",
            run.artifacts.display()
        ),
    );
    j.breach(
        !run.corral_stderr.contains(field),
        format!(
            "{what}: corral's error does not name {field:?}: {}",
            truncate(run.corral_stderr.trim(), 200)
        ),
    );
}

fn withdrawn(ctx: &mut Ctx, cap: &str) -> Result<Verdict> {
    let v = vars([]);
    let good = spec();
    let mut bad = good.clone();
    bad.corral_env = vec![(WITHDRAW.into(), cap.into())];
    let run = ctx.run(&bad, &v)?;
    let mut j = Judge::new();
    for why in worker_ran(&ctx.n, &run) {
        j.breach(true, format!("the worker ran without {cap}: {why}"));
    }
    j.breach(
        run.exit != EXIT_CAPABILITY_MISSING,
        format!(
            "corral exit {} (want 3: sandbox capability missing)",
            run.exit
        ),
    );
    j.breach(
        !run.has_manifest() || run.termination() != "not_started",
        format!(
            "the manifest does not record not_started ({})",
            describe(&run)
        ),
    );
    let named = run.manifest["rejections"].as_array().is_some_and(|a| {
        a.iter().any(|r| {
            r["code"] == "capability_missing"
                && r["detail"].as_str().is_some_and(|d| d.contains(cap))
        })
    });
    j.breach(
        !named,
        format!(
            "no capability_missing rejection names {cap}: {}",
            run.manifest["rejections"]
        ),
    );
    j.breach(
        run.manifest["sandbox"]["capabilities"][cap]["enforced"] != json!(false),
        format!(
            "the manifest's sandbox record does not show {cap} unenforced: {}",
            run.manifest["sandbox"]["capabilities"][cap]
        ),
    );
    let ctl = ctx.run(&good, &v)?;
    control_ran(ctx, &ctl, &mut j, "without the withdrawal");
    j.note(format!("refused run: {}", describe(&run)));
    Ok(j.verdict())
}

fn adm_10(ctx: &mut Ctx) -> Result<Verdict> {
    let v = vars([]);
    let good = spec();
    let mut bad = good.clone();
    bad.preset_overrides = vec![("prompt_transport".into(), json!({ "kind": "file" }))];
    let run = ctx.run(&bad, &v)?;
    let mut j = Judge::new();
    refused_at_admission(ctx, &run, "prompt_transport", &mut j, "file transport");
    let ctl = ctx.run(&good, &v)?;
    control_ran(ctx, &ctl, &mut j, "with the stdin transport");
    j.note(format!(
        "corral: {}",
        truncate(run.corral_stderr.trim(), 200)
    ));
    Ok(j.verdict())
}

fn adm_11(ctx: &mut Ctx) -> Result<Verdict> {
    let v = vars([]);
    let good = spec();
    let mut j = Judge::new();
    for field in ["prompt", "goal", "title"] {
        let mut bad = good.clone();
        bad.work_unit_overrides = vec![(
            field.into(),
            json!(format!("write /tmp/PWN-{} on the host", ctx.n)),
        )];
        let run = ctx.run(&bad, &v)?;
        refused_at_admission(
            ctx,
            &run,
            &format!("unknown field `{field}`"),
            &mut j,
            &format!("WorkUnit {field}"),
        );
    }
    // The same alias in the preset (maintainer-owned, but no field may act as task text).
    let mut bad = good.clone();
    bad.preset_overrides = vec![("prompt".into(), json!("do something else"))];
    let run = ctx.run(&bad, &v)?;
    refused_at_admission(ctx, &run, "unknown field `prompt`", &mut j, "preset prompt");
    let ctl = ctx.run(&good, &v)?;
    control_ran(ctx, &ctl, &mut j, "with objective only");
    Ok(j.verdict())
}

fn adm_12(ctx: &mut Ctx) -> Result<Verdict> {
    let v = vars([]);
    let canary = ctx.canary();
    let mut j = Judge::new();
    for name in [
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "OPENAI_API_KEY",
        "SSH_AUTH_SOCK",
        "DOCKER_HOST",
    ] {
        // `--env NAME=CANARY`: the harness puts NAME on the preset's env allowlist.
        let mut bad = spec();
        bad.env = vec![(name.into(), canary.clone())];
        let run = ctx.run(&bad, &v)?;
        refused_at_admission(ctx, &run, name, &mut j, &format!("allowlisting {name}"));
        j.breach(
            run.output().contains(&canary) || run.corral_stderr.contains(&canary),
            format!("allowlisting {name}: the canary value was printed"),
        );
    }
    let mut good = spec();
    good.env = vec![("ADV_NOTE".into(), "hello".into())];
    let ctl = ctx.run(&good, &v)?;
    control_ran(ctx, &ctl, &mut j, "with a harmless variable allowlisted");
    Ok(j.verdict())
}

fn adm_13(ctx: &mut Ctx) -> Result<Verdict> {
    let v = vars([]);
    let good = spec();
    let exe = ctx.h.attacks.join(&good.script);
    let real = format!("sha256:{:x}", Sha256::digest(std::fs::read(&exe)?));
    let mut bad = good.clone();
    bad.preset_overrides = vec![(
        "executable_sha256".into(),
        json!(format!("sha256:{}", "0".repeat(64))),
    )];
    let run = ctx.run(&bad, &v)?;
    let mut j = Judge::new();
    for why in worker_ran(&ctx.n, &run) {
        j.breach(
            true,
            format!("the worker ran despite the pin mismatch: {why}"),
        );
    }
    j.breach(
        run.exit != EXIT_FAILED,
        format!("corral exit {} (want 1: refused before start)", run.exit),
    );
    j.breach(
        !run.has_manifest() || run.termination() != "not_started",
        format!(
            "the manifest does not record not_started ({})",
            describe(&run)
        ),
    );
    j.breach(
        !run.rejection_codes()
            .iter()
            .any(|c| c == "executable_digest_mismatch"),
        format!(
            "no executable_digest_mismatch rejection: {:?}",
            run.rejection_codes()
        ),
    );
    j.breach(
        run.manifest["executable"]["digest"] != json!(real),
        format!(
            "the manifest records executable digest {} (the bytes hash to {real})",
            run.manifest["executable"]["digest"]
        ),
    );
    // Control: pinning the right digest runs.
    let mut pinned = good.clone();
    pinned.preset_overrides = vec![("executable_sha256".into(), json!(real))];
    let ctl = ctx.run(&pinned, &v)?;
    control_ran(ctx, &ctl, &mut j, "with the matching pin");
    j.note(format!("refused run: {}", describe(&run)));
    Ok(j.verdict())
}
