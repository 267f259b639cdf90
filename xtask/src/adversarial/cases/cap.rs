//! CAP: the post-run capture step (corpus §9).
//!
//! corral's design (ADR-0020, ADR-0040): capture walks the overlay *upper layer* of the
//! attempt and compares it with the base commit's tree, read from the canonical repository's
//! object database through corral's own temporary bare git directory (clean environment,
//! `-c core.fsmonitor=false -c core.hooksPath=/dev/null ...`, no path ever passed to git). The
//! worker's `/workspace/.git` is a read-only bind (and never read by capture), so corpus
//! variant A's `.git` writes fail with EROFS. Corpus variant B ("the harness plants the state
//! after the sandbox exits, before capture") cannot be done black-box: sandbox and capture are
//! one `corral run`, and the upper layer lives in a private detached tmpfs. Instead:
//! - the worker plants everything it *can* write (nested repositories and gitfiles under
//!   `src/`, `.gitattributes`, `.gitmodules`, hooks, configs included by path) next to a real
//!   change, so a capture that ran git in the workspace would fire the payload on the host as
//!   root (payload: `touch /tmp/PWN-{N}`, a host path the generic marker check watches; inside
//!   the sandbox `/tmp` is private);
//! - for CAP-01..03 the harness also plants the same hostile config, hooks and attributes in
//!   the *canonical* repository on the host before the run (the one place outside the sandbox
//!   corral's git touches), and the payload must still never run.
//!
//! Most cases use a root-writable scope (`allowed_paths: ["src/", "*.corral-adv-none"]`: the
//! glob matches nothing the attacks write, but its empty literal prefix makes the backend mount
//! the workspace root writable) and no literal forbidden directory, so out-of-scope writes such
//! as `.github/workflows/ci.yml` really land in the upper layer and only capture's scope check
//! stands between them and a candidate. Positive controls run the same attack outside the
//! sandbox in a copy of the repository as uid 65534, then a *naive* capture (plain `git status
//! --porcelain`, `git diff`, `git add -A`, prefix scope checks, following links) there; the
//! payload writes a marker in a harness-owned folder (`{MARK}`), never `PWN-{N}`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use super::{describe, started, trivial_run, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{AS_NOBODY, Control, Ctx, RunObs, RunSpec, set_mode, truncate};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "CAP-01",
            title: "core.fsmonitor runs inside the supervisor",
            guarantee: "the capture step is not an execution path",
            script: Some(attack!("CAP-01.py")),
            judge: cap_01,
        },
        Case {
            id: "CAP-02",
            title: "Hooks triggered by read-only-looking git commands",
            guarantee: "the capture step is not an execution path",
            script: Some(attack!("CAP-02.py")),
            judge: cap_02,
        },
        Case {
            id: "CAP-03",
            title: "Filter/diff drivers, include, pager, sshCommand, gpg.program",
            guarantee: "the capture step is not an execution path",
            script: Some(attack!("CAP-03.py")),
            judge: cap_03,
        },
        Case {
            id: "CAP-04",
            title: "Hiding out-of-scope changes from the change listing",
            guarantee: "changes outside the scope are rejected",
            script: Some(attack!("CAP-04.py")),
            judge: cap_04,
        },
        Case {
            id: "CAP-05",
            title: "Replacing .git, gitfile redirect, alternates, core.worktree",
            guarantee: "the capture step looks only at this workspace",
            script: Some(attack!("CAP-05.py")),
            judge: cap_05,
        },
        Case {
            id: "CAP-06",
            title: "Submodules and nested repositories",
            guarantee: "capture is not an execution path; out-of-scope changes are rejected",
            script: Some(attack!("CAP-06.py")),
            judge: cap_06,
        },
        Case {
            id: "CAP-07",
            title: "Symlinks in the change set",
            guarantee: "the capture step does not follow links out of the workspace",
            script: Some(attack!("CAP-07.py")),
            judge: cap_07,
        },
        Case {
            id: "CAP-08",
            title: "Race during capture with a leftover process",
            guarantee: "capture happens only after every sandbox process is dead",
            script: Some(attack!("CAP-08.py")),
            judge: cap_08,
        },
        Case {
            id: "CAP-09",
            title: "Hard links in the change set",
            guarantee: "the capture step is correct",
            script: Some(attack!("CAP-09.py")),
            judge: cap_09,
        },
        Case {
            id: "CAP-10",
            title: "Control characters, ..-looking names, parser confusion",
            guarantee: "the scope check cannot be fooled by names",
            script: Some(attack!("CAP-10.py")),
            judge: cap_10,
        },
        Case {
            id: "CAP-11",
            title: "Non-UTF-8, Unicode and case tricks, .git lookalikes",
            guarantee: "the scope check is byte-exact and drops nothing",
            script: Some(attack!("CAP-11.py")),
            judge: cap_11,
        },
        Case {
            id: "CAP-12",
            title: "Huge, sparse and special files",
            guarantee: "the capture step is bounded, and nothing blocks it",
            script: Some(attack!("CAP-12.py")),
            judge: cap_12,
        },
        Case {
            id: "CAP-13",
            title: "Files inside the scope that execute code later",
            guarantee: "the scope policy has no escape hatch through config files",
            script: Some(attack!("CAP-13.py")),
            judge: cap_13,
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// Shared judge helpers.

/// The scope most cases use: `src/` plus a glob that matches nothing written (its empty
/// literal prefix makes the workspace root writable), no literal forbidden directory.
fn wide(script: &str) -> RunSpec {
    let mut s = RunSpec::new(script);
    s.allowed_paths = vec!["src/".into(), "*.corral-adv-none".into()];
    s.forbidden_paths = vec!["**/*.pem".into()];
    s
}

/// `(code, path)` of every rejection in the manifest.
fn rejections(run: &RunObs) -> Vec<(String, String)> {
    run.manifest["rejections"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    (
                        r["code"].as_str().unwrap_or("").to_owned(),
                        r["path"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn has_rej(run: &RunObs, code: &str, path: &str) -> bool {
    rejections(run).iter().any(|(c, p)| c == code && p == path)
}

fn fmt_rej(run: &RunObs) -> String {
    truncate(
        &rejections(run)
            .iter()
            .map(|(c, p)| format!("{c}:{p:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        1500,
    )
}

/// Capture ran and produced a verdict (accepted or rejected), rather than failing.
fn captured(run: &RunObs) -> bool {
    matches!(run.outcome(), "candidate_captured" | "candidate_rejected")
}

/// The run must have reached capture; every `(code, path)` must be among its rejections.
fn expect(j: &mut Judge, run: &RunObs, want: &[(&str, &str)]) {
    j.require(started(run), format!("the worker ran ({})", describe(run)));
    j.require(
        captured(run),
        format!("capture ran to a verdict ({})", describe(run)),
    );
    if !captured(run) {
        return;
    }
    for (code, path) in want {
        j.breach(
            !has_rej(run, code, path),
            format!(
                "{path:?} was not rejected with {code} (outcome {}; rejections: {})",
                run.outcome(),
                fmt_rej(run)
            ),
        );
    }
}

/// Worker lines for notes (steps that succeeded or failed).
fn steps(run: &RunObs) -> String {
    let out = run.output();
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("OK ") || l.starts_with("ERR "))
        .collect();
    truncate(&lines.join(" ; "), 1500)
}

/// A `.git` write the worker reported as successful must have been rejected as git metadata
/// (ADR-0040 binds `.git` read-only; corpus variant A expects EROFS).
fn gitdir_guard(j: &mut Judge, run: &RunObs) {
    let out = run.output();
    let wrote: Vec<&str> = out.lines().filter(|l| l.starts_with("OK GITDIR")).collect();
    if wrote.is_empty() {
        j.note("every write into the worker's .git failed (read-only bind)");
        return;
    }
    let rejected = rejections(run)
        .iter()
        .any(|(c, p)| c == "git_metadata_changed" && (p == ".git" || p.starts_with(".git/")));
    j.breach(
        !rejected,
        format!(
            "the worker wrote into /workspace/.git ({}) and capture did not reject it",
            truncate(&wrote.join(" ; "), 300)
        ),
    );
}

/// A folder the uid-65534 control can write its marker into. Its name never contains
/// `PWN-{N}`, so the generic marker check does not mistake the control for a breach.
fn marks(ctx: &Ctx) -> Result<PathBuf> {
    let d = ctx.dir.join("marks");
    std::fs::create_dir_all(&d)?;
    set_mode(&d, 0o777)?;
    Ok(d)
}

/// The payload target for the sandboxed run: a host path the generic checks watch. Inside
/// the sandbox `/tmp` is private, so only a program run by corral on the host could create it.
fn host_mark(ctx: &Ctx) -> String {
    format!("/tmp/PWN-{}", ctx.n)
}

/// A naive capture outside the sandbox: `script` run by `sh` as uid 65534 in `ws`, with no
/// system or global git config. Returns stdout+stderr. 300 s is a bound on a hang.
fn naive(ws: &Path, script: &str) -> String {
    let home = ws.parent().unwrap_or(ws);
    let out = Command::new("timeout")
        .args(["-s", "KILL", "300"])
        .args(AS_NOBODY)
        .args(["sh", "-c", script])
        .current_dir(ws)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "adv")
        .env("GIT_AUTHOR_EMAIL", "adv@corral.invalid")
        .env("GIT_COMMITTER_NAME", "adv")
        .env("GIT_COMMITTER_EMAIL", "adv@corral.invalid")
        .output();
    match out {
        Ok(o) => format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => format!("naive capture could not start: {e}"),
    }
}

/// The usual naive capture: what a supervisor running plain git in the workspace would do.
const NAIVE_GIT: &str = "git status --porcelain -uall; git diff; git add -A; git diff --cached --stat; git commit -qm capture";

fn chown_tree(p: &Path) {
    let _ = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(p)
        .status();
}

/// Every byte corral stored for the run (artifacts, manifest) contains `needle`?
fn artifacts_contain(run: &RunObs, needle: &[u8]) -> bool {
    let mut hit = false;
    let mut files = Vec::new();
    crate::adversarial::harness::walk(&run.artifacts, 4, &mut |p| {
        if p.is_file() {
            files.push(p.to_path_buf());
        }
    });
    for f in files {
        if let Ok(b) = std::fs::read(&f)
            && contains(&b, needle)
        {
            hit = true;
        }
    }
    hit
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// A repository builder (an argument for `RunSpec::repo` / `Ctx::repo`) that runs the
/// standard fixture and then `plant` (a bash snippet, cwd = the repository, `$MARK` set) on
/// the host: corpus variant B, planted in the canonical repository corral's git reads.
fn hostile_repo(ctx: &Ctx, tag: &str, mark: &str, plant: &str) -> Result<String> {
    let standard = ctx.h.fixture("repos/standard.sh");
    let script = ctx.dir.join(format!("{tag}.sh"));
    let body = format!(
        "#!/usr/bin/env bash\nset -euo pipefail\nbase=$(bash {std} \"$1\" \"$2\" | tail -n1)\n\
         cd \"$1\"\nMARK={mark}\nexport GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null\n\
         {{\n{plant}\n}} >/dev/null 2>&1\necho \"$base\"\n",
        std = standard.display()
    );
    std::fs::write(&script, body)?;
    set_mode(&script, 0o755)?;
    Ok(script.to_string_lossy().into_owned())
}

/// Variant B for CAP-01..03: the harness plants `plant` in the canonical repository on the
/// host, then runs a harmless in-scope change through corral; the payload (host `/tmp`
/// marker, run as root if corral's git ran it) must never fire. Control: the same planted
/// repository, a naive `git status`/`diff`/`add`/`commit` as uid 65534 fires its marker.
fn variant_b(ctx: &mut Ctx, j: &mut Judge, plant: &str) -> Result<()> {
    let name = hostile_repo(ctx, "hostile-run", &host_mark(ctx), plant)?;
    let mut spec = RunSpec::new("CAP-01.py").args(["{MARK}", "inscope"]);
    spec.repo = name;
    let run = ctx.run(&spec, &vars([("MARK", host_mark(ctx))]))?;
    j.require(
        started(&run),
        format!("B: the worker ran ({})", describe(&run)),
    );
    j.require(
        run.outcome() == "candidate_captured",
        format!(
            "B: the in-scope change was captured ({}; {})",
            describe(&run),
            fmt_rej(&run)
        ),
    );
    j.breach(
        !run.changed_paths().iter().any(|(p, _)| p == "src/app.py"),
        format!(
            "B: src/app.py missing from changed_paths {:?}",
            run.changed_paths()
        ),
    );
    let m = marks(ctx)?.join("fired-b");
    let name = hostile_repo(ctx, "hostile-ctl", &m.to_string_lossy(), plant)?;
    let dir = ctx.dir.join("bctl");
    let (ws, _) = ctx.repo(&name, &dir.join("repo"))?;
    std::fs::write(ws.join("src/app.py"), "print('changed')\n")?;
    chown_tree(&dir);
    let out = naive(&ws, NAIVE_GIT);
    j.control(
        m.exists(),
        format!(
            "B: naive git in the planted canonical repository ran the payload ({})",
            truncate(&out, 200)
        ),
    );
    j.note("B: hostile config/hooks/attributes planted in the canonical repository on the host before the run; corral's git never ran them");
    Ok(())
}

/// Runs the control (same attack, uid 65534, copy of the repo) with `{MARK}` in a
/// harness-owned folder, then `naive_script` there. Returns (marker fired, naive output,
/// workspace).
fn control_naive(
    ctx: &mut Ctx,
    spec: &RunSpec,
    naive_script: &str,
) -> Result<(bool, String, PathBuf)> {
    let m = marks(ctx)?.join("fired-ctl");
    let v = vars([("MARK", m.to_string_lossy().into_owned())]);
    let ctl = ctx.control(spec, &v, &Control::default())?;
    let out = naive(&ctl.ws, naive_script);
    if ctx.h.verbose {
        eprintln!("[{}] naive capture:\n{}", ctx.id, truncate(&out, 3000));
    }
    Ok((m.exists(), out, ctl.ws))
}

// ---------------------------------------------------------------------------------------------
// CAP-01

fn cap_01(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = wide("CAP-01.py").args(["{MARK}"]);
    let run = ctx.run(&spec, &vars([("MARK", host_mark(ctx))]))?;
    let mut j = Judge::new();
    expect(&mut j, &run, &[("git_metadata_changed", "src/nested/.git")]);
    gitdir_guard(&mut j, &run);
    j.note(format!("worker: {}", steps(&run)));
    let (fired, out, _) = control_naive(ctx, &spec, NAIVE_GIT)?;
    j.control(
        fired,
        format!(
            "outside, plain `git status` ran the planted core.fsmonitor ({})",
            truncate(&out, 200)
        ),
    );
    variant_b(
        ctx,
        &mut j,
        "git config core.fsmonitor \"touch $MARK; false\"\n\
         printf '[core]\\n\\tfsmonitor = \"touch %s; false\"\\n' \"$MARK\" > .git/evil.cfg\n\
         git config include.path evil.cfg",
    )?;
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-02

fn cap_02(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = wide("CAP-02.py").args(["{MARK}"]);
    let run = ctx.run(&spec, &vars([("MARK", host_mark(ctx))]))?;
    let mut j = Judge::new();
    expect(&mut j, &run, &[("git_metadata_changed", "src/nested/.git")]);
    gitdir_guard(&mut j, &run);
    j.note(format!("worker: {}", steps(&run)));
    let (fired, out, _) = control_naive(ctx, &spec, NAIVE_GIT)?;
    j.control(
        fired,
        format!(
            "outside, plain git status/add/commit ran a planted hook ({})",
            truncate(&out, 200)
        ),
    );
    variant_b(
        ctx,
        &mut j,
        "for h in post-index-change reference-transaction pre-commit post-commit \
         post-checkout pre-auto-gc; do printf '#!/bin/sh\\ntouch %s\\n' \"$MARK\" > \
         .git/hooks/$h; chmod +x .git/hooks/$h; done",
    )?;
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-03

fn cap_03(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = wide("CAP-03.py").args(["{MARK}"]);
    let run = ctx.run(&spec, &vars([("MARK", host_mark(ctx))]))?;
    let mut j = Judge::new();
    expect(&mut j, &run, &[("path_out_of_scope", ".gitattributes")]);
    gitdir_guard(&mut j, &run);
    j.note(format!("worker: {}", steps(&run)));
    let (fired, out, _) = control_naive(ctx, &spec, NAIVE_GIT)?;
    j.control(
        fired,
        format!(
            "outside, plain git diff/add ran a planted filter or diff driver ({})",
            truncate(&out, 200)
        ),
    );
    variant_b(
        ctx,
        &mut j,
        "printf '* filter=x diff=x\\n' > .git/info/attributes\n\
         git config filter.x.clean \"sh -c 'touch $MARK; cat'\"\n\
         git config filter.x.smudge \"sh -c 'touch $MARK; cat'\"\n\
         git config diff.x.textconv \"sh -c 'touch $MARK; cat'\"\n\
         git config diff.external \"touch $MARK\"\n\
         git config core.pager \"touch $MARK; cat\"\n\
         git config core.sshCommand \"touch $MARK\"\n\
         git config gpg.program \"touch $MARK\"\n\
         git config core.askPass \"touch $MARK\"",
    )?;
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-04

fn cap_04(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = wide("CAP-04.py").args(["{MARK}"]);
    let run = ctx.run(&spec, &vars([("MARK", host_mark(ctx))]))?;
    let mut j = Judge::new();
    let hidden = [
        ".github/workflows/ci.yml",
        ".github/workflows/new.yml",
        ".github/.gitignore",
        ".gitattributes",
        ".env",
    ];
    let want: Vec<(&str, &str)> = hidden.iter().map(|p| ("path_out_of_scope", *p)).collect();
    expect(&mut j, &run, &want);
    j.breach(
        run.outcome() == "candidate_captured",
        "the run with out-of-scope changes was accepted",
    );
    gitdir_guard(&mut j, &run);
    j.note(format!("worker: {}", steps(&run)));
    // Control: outside, with a writable .git, every hiding trick works against plain git.
    let (_, out, ws) = control_naive(
        ctx,
        &spec,
        "git status --porcelain -uall; git diff --name-only HEAD",
    )?;
    let missed: Vec<&&str> = hidden
        .iter()
        .filter(|p| !out.contains(**p))
        .filter(|p| p.starts_with(".github/workflows/") || **p == ".gitattributes")
        .collect();
    j.control(
        !missed.is_empty() && ws.join(".github/workflows/new.yml").exists(),
        format!(
            "outside, plain `git status`/`git diff` did not list {missed:?} although the files changed ({})",
            truncate(&out, 300)
        ),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-05

fn cap_05(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = wide("CAP-05.py").args(["{MARK}"]);
    let run = ctx.run(&spec, &vars([("MARK", host_mark(ctx))]))?;
    let mut j = Judge::new();
    expect(
        &mut j,
        &run,
        &[
            ("path_out_of_scope", ".github/workflows/ci.yml"),
            ("git_metadata_changed", "src/.git"),
            ("git_metadata_changed", "src/other/.git"),
        ],
    );
    gitdir_guard(&mut j, &run);
    // Nothing outside the workspace may be listed.
    let host_paths: Vec<String> = rejections(&run)
        .into_iter()
        .map(|(_, p)| p)
        .chain(run.changed_paths().into_iter().map(|(p, _)| p))
        .filter(|p| {
            ["etc/", "root/", "usr/", "proc/", "/", "../"]
                .iter()
                .any(|h| p.starts_with(h))
        })
        .collect();
    j.breach(
        !host_paths.is_empty(),
        format!("host paths listed in the manifest: {host_paths:?}"),
    );
    let passwd = std::fs::read("/etc/passwd").unwrap_or_default();
    let first = passwd.split(|b| *b == b'\n').next().unwrap_or(b"").to_vec();
    j.breach(
        artifacts_contain(&run, &first),
        "the first line of the host's /etc/passwd is in corral's artifacts",
    );
    j.note(format!("worker: {}", steps(&run)));
    let (_, out, _) = control_naive(
        ctx,
        &spec,
        "git status --porcelain -uno 2>&1 | head -20; git status --porcelain -uall -- ':/etc/hostname' 2>&1",
    )?;
    j.control(
        out.contains(" D src/app.py") && out.contains("etc/hostname"),
        format!(
            "outside, plain `git status` with core.worktree=/ listed host paths ({})",
            truncate(&out, 300)
        ),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-06

fn cap_06(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = wide("CAP-06.py").args(["{MARK}"]);
    let run = ctx.run(&spec, &vars([("MARK", host_mark(ctx))]))?;
    let mut j = Judge::new();
    expect(
        &mut j,
        &run,
        &[
            ("git_metadata_changed", "src/nested/.git"),
            ("git_metadata_changed", "vendor/lib/.git"),
            ("path_out_of_scope", ".gitmodules"),
            ("symlink_escape", "src/h"),
            // Inside the nested repository: enumerated by corral's walker, not one opaque entry.
            ("path_forbidden", "src/nested/secret.pem"),
        ],
    );
    // The written submodule path is git metadata or out of scope; either way rejected.
    let rej = rejections(&run);
    j.breach(
        captured(&run)
            && !rej
                .iter()
                .any(|(_, p)| p == "vendor/lib" || p.starts_with("vendor/lib/")),
        format!(
            "nothing under the submodule path vendor/lib was rejected ({})",
            fmt_rej(&run)
        ),
    );
    j.breach(
        captured(&run) && !rej.iter().any(|(_, p)| p.starts_with("x\\x0d")),
        format!(
            "the symlink named \"x\\r\" was not rejected ({})",
            fmt_rej(&run)
        ),
    );
    j.note(format!(
        "rejections: {}; worker: {}",
        fmt_rej(&run),
        steps(&run)
    ));
    // git itself refuses `update = !cmd` from .gitmodules (CVE-2019-19604), and that refusal
    // would hide the rest: the naive capture restores .gitmodules first.
    let (fired, out, _) = control_naive(
        ctx,
        &spec,
        "git checkout -q -- .gitmodules; git status --porcelain; git diff",
    )?;
    j.control(
        fired,
        format!(
            "outside, plain `git status` recursed into the swapped submodule and ran its fsmonitor ({})",
            truncate(&out, 300)
        ),
    );
    j.control(
        out.contains("src/nested/") && !out.contains("secret.pem"),
        "outside, plain `git status` listed src/nested/ as one opaque entry",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-07

fn cap_07(ctx: &mut Ctx) -> Result<Verdict> {
    let secret = ctx.dir.join("host-secret");
    let needle = format!("CAP07HOST-{}", ctx.n);
    std::fs::write(&secret, &needle)?;
    set_mode(&secret, 0o644)?;
    let v = vars([
        ("MARK", host_mark(ctx)),
        ("SECRET", secret.to_string_lossy().into_owned()),
    ]);
    let spec = wide("CAP-07.py").args(["{MARK}", "{SECRET}"]);
    let run = ctx.run(&spec, &v)?;
    let mut j = Judge::new();
    let mut want: Vec<(&str, &str)> = [
        "src/a.txt",
        "src/p",
        "src/c",
        "src/rel",
        "src/k",
        "src/gh",
        "src/e",
        "src/g",
    ]
    .iter()
    .map(|p| ("symlink_escape", *p))
    .collect();
    want.push(("path_out_of_scope", ".github/workflows/x.yml"));
    expect(&mut j, &run, &want);
    j.breach(
        artifacts_contain(&run, needle.as_bytes()),
        "the host file a symlink pointed at is in corral's artifacts",
    );
    j.note(format!("rejections: {}", fmt_rej(&run)));
    // An allowed in-scope link must be recorded as a link (mode 120000, target as content).
    let spec2 = wide("CAP-07.py").args(["{MARK}", "{SECRET}", "inscope"]);
    let run2 = ctx.run(&spec2, &v)?;
    let patch = String::from_utf8_lossy(&run2.patch()).into_owned();
    j.require(
        run2.outcome() == "candidate_captured",
        format!("the in-scope link run was captured ({})", describe(&run2)),
    );
    j.breach(
        run2.outcome() == "candidate_captured"
            && !(patch.contains("new file mode 120000") && patch.contains("+app.py")),
        format!(
            "src/ok -> app.py not recorded as a symlink: {}",
            truncate(&patch, 300)
        ),
    );
    // Control: a naive capture that reads the changed files (following links) outside.
    let ctlv = vars([
        ("MARK", marks(ctx)?.join("x").to_string_lossy().into_owned()),
        ("SECRET", secret.to_string_lossy().into_owned()),
    ]);
    let ctl = ctx.control(&spec, &ctlv, &Control::default())?;
    let out = naive(
        &ctl.ws,
        "git status --porcelain -uall | cut -c4- | while read -r p; do cat \"$p\" 2>/dev/null; done",
    );
    j.control(
        out.contains(&needle),
        "outside, a naive capture that reads the listed files copied the host file behind src/c",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-08

fn cap_08(ctx: &mut Ctx) -> Result<Verdict> {
    let secret = ctx.dir.join("host-secret");
    let needle = format!("CAP08HOST-{}", ctx.n);
    std::fs::write(&secret, &needle)?;
    set_mode(&secret, 0o644)?;
    let v = vars([
        ("MARK", host_mark(ctx)),
        ("SECRET", secret.to_string_lossy().into_owned()),
    ]);
    let mut spec = RunSpec::new("CAP-08.py").args(["{MARK}", "{SECRET}", "run"]);
    spec.wall_seconds = 15;
    let mut j = Judge::new();
    let run = match ctx.run(&spec, &v) {
        Ok(r) => r,
        Err(e) => {
            j.breach(true, format!("corral did not finish: {e:#}"));
            return Ok(j.verdict());
        }
    };
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    let passwd = std::fs::read("/etc/passwd").unwrap_or_default();
    let first = passwd.split(|b| *b == b'\n').next().unwrap_or(b"").to_vec();
    let patch = run.patch();
    j.breach(
        contains(&patch, &first),
        "the host's /etc/passwd is in the patch",
    );
    j.breach(
        artifacts_contain(&run, needle.as_bytes()),
        "the host file behind the flipping link is in corral's artifacts",
    );
    let codes = run.rejection_codes();
    let ok_verdict = match run.outcome() {
        "candidate_captured" => {
            let p = String::from_utf8_lossy(&patch);
            // An accepted src/x must be the regular file with "ok".
            !p.contains("120000") && p.contains("+ok")
        }
        "candidate_rejected" => codes.iter().any(|c| c == "symlink_escape"),
        _ => codes.iter().any(|c| c == "capture_failed"),
    };
    j.breach(
        !ok_verdict,
        format!(
            "unexpected verdict with a flipping src/x: {} ({}; patch {})",
            describe(&run),
            fmt_rej(&run),
            truncate(&String::from_utf8_lossy(&patch), 200)
        ),
    );
    j.note(format!(
        "{}; rejections {}; the leftover daemon was killed before capture (generic process check)",
        describe(&run),
        fmt_rej(&run)
    ));
    let mut spec_c = spec.clone();
    spec_c.args = vec!["{MARK}".into(), "{SECRET}".into(), "control".into()];
    let ctl = ctx.control(
        &spec_c,
        &v,
        &Control {
            own_pidns: true,
            timeout: Duration::from_secs(10),
            ..Control::default()
        },
    );
    let ctl = ctl?;
    j.control(
        ctl.stdout.contains(&needle),
        format!(
            "outside, a naive read of src/x while the leftover ran followed the link to the host file ({})",
            truncate(&ctl.stdout, 200)
        ),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-09

fn cap_09(ctx: &mut Ctx) -> Result<Verdict> {
    let meta = |p: &str| {
        std::fs::metadata(p)
            .map(|m| {
                use std::os::unix::fs::MetadataExt as _;
                (m.mode(), m.uid(), m.gid(), m.nlink())
            })
            .ok()
    };
    let before = (meta("/etc/hostname"), meta("/etc/passwd"));
    let spec = wide("CAP-09.py").args(["{MARK}"]);
    let run = ctx.run(&spec, &vars([("MARK", host_mark(ctx))]))?;
    let mut j = Judge::new();
    expect(
        &mut j,
        &run,
        &[("path_out_of_scope", ".github/workflows/ci2.yml")],
    );
    gitdir_guard(&mut j, &run);
    let out = run.output();
    for host in ["src/h", "src/pw"] {
        j.breach(
            out.lines()
                .any(|l| l.starts_with("OK ln /etc/") && l.contains(host)),
            format!("a hard link from {host} to a host file succeeded"),
        );
    }
    let after = (meta("/etc/hostname"), meta("/etc/passwd"));
    j.breach(
        before != after,
        format!("host inode metadata changed: {before:?} -> {after:?}"),
    );
    j.note(format!("worker: {}", steps(&run)));
    let (fired, out, _) = control_naive(ctx, &spec, "git status --porcelain")?;
    j.control(
        fired,
        format!(
            "outside, the hard link made src/gitcfg edit .git/config and plain `git status` ran the fsmonitor ({})",
            truncate(&out, 200)
        ),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-10

fn cap_10(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = wide("CAP-10.py").args(["{MARK}"]);
    let run = ctx.run(&spec, &vars([("MARK", host_mark(ctx))]))?;
    let mut j = Judge::new();
    let upload = format!("--upload-pack=touch PWN-{}", ctx.n);
    expect(
        &mut j,
        &run,
        &[
            ("path_out_of_scope", ".github/workflows/x -> src/ok.txt"),
            ("path_out_of_scope", ".github/workflows/x -> src/inner.txt"),
            ("path_out_of_scope", "src-evil/p.py"),
            ("path_out_of_scope", "srcX"),
            ("path_out_of_scope", "-rf"),
            ("path_out_of_scope", &upload),
            ("path_invalid", "src/a\\x0ab"),
            ("path_invalid", "src/\\x1b[31mred"),
            ("path_invalid", "src/\\x09tab"),
            (
                "path_invalid",
                "src/..\\\\..\\\\.github\\\\workflows\\\\x.yml",
            ),
        ],
    );
    // Never URL-decoded: no rejection or change may name the decoded form.
    let all: Vec<String> = rejections(&run).into_iter().map(|(_, p)| p).collect();
    j.breach(
        all.iter().any(|p| p.contains("src/../") || p == ".github"),
        format!("a name was decoded or normalized: {all:?}"),
    );
    j.note(format!("rejections: {}", fmt_rej(&run)));
    // Control: the naive capture (porcelain v1 text, " -> " split, prefix scope) is fooled.
    let (_, out, _) = control_naive(ctx, &spec, "git status --porcelain -uall")?;
    let fooled: Vec<String> = out
        .lines()
        .filter_map(|l| l.get(3..))
        .map(|p| {
            let p = p.rsplit(" -> ").next().unwrap_or(p);
            p.trim_matches('"').to_owned()
        })
        .filter(|p| p.starts_with("src"))
        .filter(|p| p.starts_with("src-") || p == "srcX" || p.contains("ok.txt"))
        .collect();
    j.control(
        !fooled.is_empty(),
        format!(
            "outside, a naive porcelain-v1 parse with a prefix scope check accepted out-of-scope names ({})",
            truncate(&out, 300)
        ),
    );
    j.note(format!("naive capture accepted: {fooled:?}"));
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-11

fn cap_11(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = wide("CAP-11.py").args(["{MARK}"]);
    let run = ctx.run(&spec, &vars([("MARK", host_mark(ctx))]))?;
    let mut j = Judge::new();
    expect(
        &mut j,
        &run,
        &[
            ("path_not_utf8", ".github/workflows/\\xff\\xfe.yml"),
            ("path_not_utf8", "src/\\xc3("),
            ("path_out_of_scope", "Src/x"),
        ],
    );
    let rej = rejections(&run);
    // Lookalikes (at the root and inside the scope) must be protected.
    for d in [".GIT", ".Git", ".g\\u{200c}it", "git~1", ".git.", ".git "] {
        for p in [d.to_owned(), format!("src/{d}")] {
            j.breach(
                captured(&run)
                    && !rej.iter().any(|(c, rp)| {
                        (c == "path_protected" || c == "git_metadata_changed")
                            && (rp == &p || rp.starts_with(&format!("{p}/")))
                    }),
                format!("the .git lookalike {p:?} was not rejected as protected"),
            );
        }
    }
    j.breach(
        run.outcome() == "candidate_captured",
        "the run was accepted",
    );
    j.note(format!("rejections: {}", fmt_rej(&run)));
    // Control: a naive capture (porcelain, lossy decoding, prefix scope) accepts lookalikes
    // inside src/ and drops the undecodable bytes.
    let (_, out, _) = control_naive(
        ctx,
        &spec,
        "git -c core.quotePath=false status --porcelain -uall",
    )?;
    let accepted: Vec<&str> = out
        .lines()
        .filter_map(|l| l.get(3..))
        .filter(|p| p.starts_with("src/") && p.to_ascii_lowercase().contains("git"))
        .collect();
    j.control(
        !accepted.is_empty(),
        format!(
            "outside, a naive prefix scope check accepted .git lookalikes under src/ ({})",
            truncate(&out, 300)
        ),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-12

fn cap_12(ctx: &mut Ctx) -> Result<Verdict> {
    // 72 MiB of real data: over capture's 64 MiB per-file cap, inside the disk budget.
    let mut spec = wide("CAP-12.py").args(["{MARK}", "72"]);
    spec.disk_bytes = 160 << 20;
    spec.memory_bytes = 384 << 20;
    spec.wall_seconds = 30;
    let mut j = Judge::new();
    let trivial = trivial_run(ctx, &spec, &mut j)?;
    let run = match ctx.run(&spec, &vars([("MARK", host_mark(ctx))])) {
        Ok(r) => r,
        Err(e) => {
            j.breach(true, format!("corral did not finish: {e:#}"));
            return Ok(j.verdict());
        }
    };
    let mut want = vec![
        ("capture_limit", "src/sparse.bin"),
        ("capture_limit", "src/big.bin"),
        ("special_file", "src/pipe"),
    ];
    // The filter refuses socket(AF_UNIX) (NET-05), so the socket file usually cannot be
    // made; when it was, it must be rejected too.
    if run.out().contains("OK socket src/sock") {
        want.push(("special_file", "src/sock"));
    } else {
        j.note("socket(AF_UNIX) refused inside: no socket file to capture");
    }
    expect(&mut j, &run, &want);
    // corral's time beyond the worker's: reading even the smallest sparse size the
    // script tries (1 TiB) would take minutes; 20 s and this host's grace is ample.
    let worker = Duration::from_millis(run.manifest["execution"]["wall_ms"].as_u64().unwrap_or(0));
    let bound = Duration::from_secs(20) + trivial.grace;
    j.breach(
        run.elapsed.saturating_sub(worker) > bound,
        format!(
            "capture was not bounded ({:.1} s beyond the worker's, bound {:.1} s): {}",
            run.elapsed.saturating_sub(worker).as_secs_f64(),
            bound.as_secs_f64(),
            describe(&run)
        ),
    );
    j.breach(
        run.peak_rss_kib > 200 * 1024,
        format!(
            "corral's peak RSS {} KiB: it read a huge file into memory",
            run.peak_rss_kib
        ),
    );
    j.note(format!(
        "{}; peak RSS {} KiB; rejections {}; worker: {}",
        describe(&run),
        run.peak_rss_kib,
        fmt_rej(&run),
        steps(&run)
    ));
    // Control: a naive capture that opens every listed file blocks on the FIFO.
    let mut small = spec.clone();
    small.args = vec!["{MARK}".into(), "1".into()];
    let (_, out, _) = control_naive(
        ctx,
        &small,
        "timeout -s KILL 2 cat src/pipe >/dev/null; echo naive-cat-rc=$?",
    )?;
    j.control(
        out.contains("naive-cat-rc=137"),
        format!(
            "outside, a naive read of src/pipe blocked until killed ({})",
            truncate(&out, 200)
        ),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CAP-13

fn cap_13(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = wide("CAP-13.py").args(["{MARK}"]);
    let run = ctx.run(&spec, &vars([("MARK", host_mark(ctx))]))?;
    let mut j = Judge::new();
    let root = [
        ".envrc",
        ".vscode/tasks.json",
        ".vscode/settings.json",
        ".idea/workspace.xml",
        ".github/workflows/x.yml",
        "Makefile",
        "package.json",
        ".pre-commit-config.yaml",
        ".gitattributes",
        ".gitmodules",
        ".mcp.json",
        ".claude/commands/x.md",
        ".bashrc",
        ".gitconfig",
        ".ripgreprc",
    ];
    let want: Vec<(&str, &str)> = root.iter().map(|p| ("path_out_of_scope", *p)).collect();
    expect(&mut j, &run, &want);
    let npmrc = rejections(&run)
        .into_iter()
        .filter(|(_, p)| p == "src/.npmrc")
        .map(|(c, _)| c)
        .collect::<Vec<_>>();
    // Inside the granted scope, a file that runs code later still needs an exact entry.
    j.breach(
        !npmrc.iter().any(|c| c == "path_protected"),
        format!(
            "src/.npmrc (inside the granted scope src/, not named exactly) was not rejected as \
             path_protected: {npmrc:?}"
        ),
    );
    j.note(format!("rejections: {}", fmt_rej(&run)));
    // Control: outside, the attack really creates every file (the naive listing shows them).
    let m = marks(ctx)?.join("x");
    let ctl = ctx.control(
        &spec,
        &vars([("MARK", m.to_string_lossy().into_owned())]),
        &Control::default(),
    )?;
    let missing: Vec<&&str> = root
        .iter()
        .chain(&["src/.npmrc"])
        .filter(|p| !ctl.ws.join(p).is_file())
        .collect();
    j.control(
        missing.is_empty(),
        format!("outside, the attack wrote every file (missing {missing:?})"),
    );
    Ok(j.verdict())
}
