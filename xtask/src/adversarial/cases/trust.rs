//! TRUST: the supervisor's own trusted side (corpus §9b): hostile inputs to what corral runs
//! *outside* the sandbox with its own authority.
//!
//! TRUST-01..03 attack the base checkout. The base commit is hostile data (a fetch from an
//! untrusted remote is enough; git checks nothing by default), so `repos/hostile-tree.sh`
//! builds repositories whose only commit holds a tree git itself would never write, object by
//! object (`hash-object -t tree --literally`, `commit-tree`), and the case hands that commit to
//! `corral run` as `base_sha`. corral must refuse the tree (exit 2, a `[base_tree_invalid]`
//! or `[base_checkout_limit]` line naming the path, no manifest) before anything of it is
//! written, leave nothing in its cache, and never write or chmod a host file. The worker never
//! starts on such a base; the attack script of these cases is the *naive writer* the positive
//! controls run outside the sandbox (as uid 65534, on decoys the harness owns): a checkout
//! that joins each entry's name onto a path and writes by path, following links.
//!
//! TRUST-04 and TRUST-05 attack capture from inside the sandbox, like CAP-07 and CAP-13: the
//! worker writes symlink chains (resolved physically by capture, `symlink_escape`) and
//! "runs code when opened" names in spellings other file systems take for them
//! (`path_protected`). Their controls apply the same change outside and show where the links
//! really lead, and run the same attack with the names granted exactly.
//!
//! TRUST-06 races 16 `corral run` on two base commits no cache holds (two repositories built
//! by `repos/wide.sh`: the standard repository plus a few hundred files holding a nonce of
//! their own, so each commit is new and filling it takes a noticeable time), eight on each,
//! sharing one base cache (the case's own `XDG_CACHE_HOME`, cold) and one artifact store, with
//! a mix of endings (captured, failed, wall timeout, memory limit) and of network modes (none,
//! and allowlist runs that reach the harness's upstream on the host's loopback through their
//! own egress proxy). Every run must end with its own outcome and a manifest, its proxy must
//! serve and record its own requests only, the cache must hold one verified entry per commit
//! that a 17th run reuses, and nothing may stay in `tmp/`. The harness holds both commits'
//! lease locks (as an eviction would) until all 16 wait there, then lets go, so they meet in
//! the cache together however their start-up spreads them.
//! Its controls show the race was real (the cache was cold, the 16 overlapped, all started
//! before the entry existed, several held or waited on the fill lock at once) and that the
//! same race breaks a cache without a lock (the attack script's `naive` mode: 16 unlocked
//! "fill, then rename" fillers, run outside as uid 65534). Its budgets come from one racer
//! run alone first, on a cache of its own: the sleepers' wall from that measured time, every
//! other budget a bound on a hang.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use super::{describe, esc_breaches, started, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{
    AS_NOBODY, Control, CtlObs, Ctx, Net, Prepared, RunObs, RunSpec, truncate,
};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "TRUST-01",
            title: "A tree that names one entry twice",
            guarantee: "nothing outside the checkout directory is ever written, and no host file \
                        changes mode",
            script: Some(attack!("naive-checkout.py")),
            judge: trust_01,
        },
        Case {
            id: "TRUST-02",
            title: "Entry names that are not one path component",
            guarantee: "nothing outside the checkout directory is ever written, and no host file \
                        changes mode",
            script: Some(attack!("naive-checkout.py")),
            judge: trust_02,
        },
        Case {
            id: "TRUST-03",
            title: "A tree bomb",
            guarantee: "the host disk is protected; the base cache is bounded",
            script: Some(attack!("naive-checkout.py")),
            judge: trust_03,
        },
        Case {
            id: "TRUST-04",
            title: "Symlink chains in the candidate",
            guarantee: "a captured candidate never contains a link that resolves outside the \
                        allowed scope or the repository",
            script: Some(attack!("TRUST-04.py")),
            judge: trust_04,
        },
        Case {
            id: "TRUST-05",
            title: "\"Runs code when opened\" names in other spellings",
            guarantee: "CAP-13 holds on case-insensitive checkouts too",
            script: Some(attack!("TRUST-05.py")),
            judge: trust_05,
        },
        Case {
            id: "TRUST-06",
            title: "Racing attempts on one base commit",
            guarantee: "concurrent runs never break each other; every admitted run writes a \
                        manifest",
            script: Some(attack!("TRUST-06.py")),
            judge: trust_06,
        },
    ]
}

/// The repository builders: `repos/hostile-tree.sh` (TRUST-01..03) and `repos/wide.sh`
/// (TRUST-06).
pub fn extra_fixtures() -> Vec<(String, String, bool)> {
    vec![
        (
            format!("repos/{HOSTILE_TREE_FILE}"),
            HOSTILE_TREE.to_owned(),
            true,
        ),
        (format!("repos/{WIDE_FILE}"), WIDE.to_owned(), true),
    ]
}

const HOSTILE_TREE_FILE: &str = "hostile-tree.sh";

const HOSTILE_TREE: &str = include_str!("../../../../tests/adversarial/repos/hostile-tree.sh");

// ---------------------------------------------------------------------------------------------
// Shared by TRUST-01..03.

/// A positive control; when it fired, what it showed is kept as a note for the report.
fn control(j: &mut Judge, fired: bool, what: String) {
    if fired {
        j.note(format!("control: {what}"));
    }
    j.control(fired, what);
}

/// Single-quotes `s` for a shell.
pub(super) fn sq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A repository builder (for `RunSpec::repo` / `Ctx::repo`): `repos/hostile-tree.sh` with one
/// variant and its target.
fn tree_repo(ctx: &Ctx, tag: &str, variant: &str, target: Option<&Path>) -> Result<String> {
    let builder = ctx.h.fixture(&format!("repos/{HOSTILE_TREE_FILE}"));
    let script = ctx.dir.join(format!("{tag}.sh"));
    let body = format!(
        "#!/usr/bin/env bash\nexec bash {} \"$1\" \"$2\" {} {}\n",
        sq(&builder.to_string_lossy()),
        sq(variant),
        target.map(|t| sq(&t.to_string_lossy())).unwrap_or_default()
    );
    std::fs::write(&script, body)?;
    crate::adversarial::harness::set_mode(&script, 0o755)?;
    Ok(script.to_string_lossy().into_owned())
}

/// The run of a hostile base: the worker (the naive writer without arguments) must never start.
fn base_spec(repo: String) -> RunSpec {
    let mut s = RunSpec::new("naive-checkout.py");
    s.repo = repo;
    s
}

/// The commit a run's repository was built at.
fn head_of(repo: &Path) -> String {
    Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "HEAD"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .envs(crate::adversarial::harness::GIT_TRUST_ALL)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// The base commit must have been refused before the worker started: corral exited 2 with a
/// `[code]` line naming `at` (the escaped repository path; `None`: any), and wrote no manifest.
fn base_refused(j: &mut Judge, run: &RunObs, code: &str, at: Option<&str>, what: &str) {
    j.breach(
        run.exit == 0,
        format!(
            "{what}: corral exited 0 on the hostile base ({})",
            describe(run)
        ),
    );
    j.breach(
        run.has_manifest(),
        format!(
            "{what}: corral wrote a manifest, so it checked the hostile base out and ran ({})",
            describe(run)
        ),
    );
    j.breach(
        run.output().contains("RAN-"),
        format!("{what}: a worker ran on the hostile base"),
    );
    let tag = format!("[{code}]");
    let line = run
        .corral_stderr
        .lines()
        .find(|l| l.contains("repository.base_sha") && l.contains(&tag));
    let names = |l: &str| at.is_none_or(|p| l.contains(&format!("tree at {p:?}")));
    j.require(
        run.exit == 2 && line.is_some_and(names),
        format!(
            "{what}: corral refused the base commit (exit 2, a repository.base_sha line with \
             {tag}{}); got exit {}, stderr {:?}",
            at.map(|p| format!(" at {p:?}")).unwrap_or_default(),
            run.exit,
            truncate(&run.corral_stderr, 300)
        ),
    );
}

/// The base cache the harness's corral runs use (`$XDG_CACHE_HOME/corral`).
fn cache_root(ctx: &Ctx) -> PathBuf {
    ctx.h.cache_in(&ctx.h.scratch.join("cache"))
}

pub(super) fn names_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `corral cache ls --json` with the environment of the harness's runs.
fn cache_ls(ctx: &Ctx) -> Result<Value> {
    cache_ls_in(ctx, &ctx.h.scratch.join("cache"))
}

/// `corral cache ls --json` with the harness's environment and this `XDG_CACHE_HOME`.
fn cache_ls_in(ctx: &Ctx, xdg_cache: &Path) -> Result<Value> {
    let s = ctx.h.scratch.to_string_lossy().into_owned();
    let out = Command::new(&ctx.h.corral)
        .args(["cache", "ls", "--json"])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", format!("{s}/home"))
        .env("XDG_CACHE_HOME", xdg_cache)
        .env("XDG_DATA_HOME", format!("{s}/data"))
        .output()
        .context("corral cache ls")?;
    if !out.status.success() {
        bail!(
            "corral cache ls --json failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Nothing of a refused base may stay in the cache: no `base/<sha>` entry (checkout or
/// `.meta`), nothing `corral cache ls` lists for it, nothing new in `tmp/`.
fn cache_clean(ctx: &Ctx, j: &mut Judge, sha: &str, tmp_before: &BTreeSet<String>, what: &str) {
    let root = cache_root(ctx);
    let left: Vec<String> = names_in(&root.join("tmp"))
        .into_iter()
        .filter(|n| n.starts_with(sha) || !tmp_before.contains(n))
        .collect();
    j.breach(
        !left.is_empty(),
        format!("{what}: left in the cache's tmp/: {left:?}"),
    );
    for suffix in ["", ".meta"] {
        let p = root.join("base").join(format!("{sha}{suffix}"));
        j.breach(
            p.symlink_metadata().is_ok(),
            format!("{what}: the cache holds {}", p.display()),
        );
    }
    match cache_ls(ctx) {
        Ok(doc) => {
            let listed = doc["entries"]
                .as_array()
                .is_some_and(|a| a.iter().any(|e| e["base_sha"] == sha));
            j.breach(
                listed,
                format!("{what}: `corral cache ls` lists the hostile base {sha}"),
            );
        }
        Err(e) => {
            j.require(false, format!("{what}: {e:#}"));
        }
    }
}

/// A file's observable state: content, mode, inode, type.
#[derive(Debug, PartialEq, Eq)]
struct FileState {
    bytes: Vec<u8>,
    mode: u32,
    ino: u64,
    regular: bool,
}

fn file_state(p: &Path) -> Option<FileState> {
    let m = p.symlink_metadata().ok()?;
    Some(FileState {
        bytes: std::fs::read(p).unwrap_or_default(),
        mode: m.permissions().mode() & 0o7777,
        ino: m.ino(),
        regular: m.file_type().is_file(),
    })
}

fn chown_nobody(p: &Path) {
    let _ = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(p)
        .status();
}

/// Runs the naive writer outside the sandbox (uid 65534) on a fresh build of `repo`, writing
/// into `<control dir>/checkout`. Returns the control and that checkout directory.
fn naive_checkout(ctx: &mut Ctx, repo: String, cap: Option<u64>) -> Result<(CtlObs, PathBuf)> {
    let mut spec = base_spec(repo);
    let mut args = vec!["{WS}/../checkout".to_owned()];
    args.extend(cap.map(|c| c.to_string()));
    spec = spec.args(args);
    let ctl = ctx.control(&spec, &vars([]), &Control::default())?;
    let dest = ctl
        .ws
        .parent()
        .map_or_else(|| ctl.ws.join("checkout"), |p| p.join("checkout"));
    Ok((ctl, dest))
}

// ---------------------------------------------------------------------------------------------
// TRUST-01

fn trust_01(ctx: &mut Ctx) -> Result<Verdict> {
    let mut j = Judge::new();
    // The host file the tree's `evil` link points at: outside the repository, root's, 0644.
    let host = ctx.dir.join("host");
    std::fs::create_dir_all(&host)?;
    let target = host.join("app.conf");
    let original = format!("HOST-{} original content\n", ctx.n);
    std::fs::write(&target, &original)?;
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644))?;
    let before = file_state(&target);
    let repo = tree_repo(ctx, "dup-run", "dup", Some(&target))?;
    let tmp_before = names_in(&cache_root(ctx).join("tmp"));
    let run = ctx.run(&base_spec(repo), &vars([]))?;
    let sha = head_of(&run.repo);
    base_refused(
        &mut j,
        &run,
        "base_tree_invalid",
        Some("evil"),
        "120000 evil + 100755 evil",
    );
    let after = file_state(&target);
    j.breach(
        after != before,
        format!(
            "the host file the tree's link pointed at changed: {before:?} -> {after:?} (bytes, \
             mode, inode)"
        ),
    );
    cache_clean(ctx, &mut j, &sha, &tmp_before, "refused base");
    j.note(format!(
        "refused: {}",
        truncate(run.corral_stderr.trim(), 300)
    ));
    // Control: the naive writer on the same tree, its link aimed at a decoy copy of the host
    // file (the uid-65534 control's own), overwrites the decoy and makes it executable.
    let decoy_dir = ctx.dir.join("decoy");
    std::fs::create_dir_all(&decoy_dir)?;
    let decoy = decoy_dir.join("app.conf");
    std::fs::write(&decoy, &original)?;
    std::fs::set_permissions(&decoy, std::fs::Permissions::from_mode(0o644))?;
    chown_nobody(&decoy_dir);
    let repo = tree_repo(ctx, "dup-ctl", "dup", Some(&decoy))?;
    let (ctl, _) = naive_checkout(ctx, repo, None)?;
    let d = file_state(&decoy);
    let overwritten = d
        .as_ref()
        .is_some_and(|d| d.regular && d.bytes != original.as_bytes() && d.mode == 0o755);
    control(
        &mut j,
        overwritten,
        format!(
            "outside, the naive writer (symlink evil, then write and chmod evil by path) \
             overwrote the decoy and made it 0755 (decoy now {:?}; writer: {})",
            d.map(|d| format!("{:?} mode {:o}", String::from_utf8_lossy(&d.bytes), d.mode)),
            truncate(&ctl.output(), 300)
        ),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// TRUST-02

/// What the naive writer visibly does with one TRUST-02 tree.
#[derive(Clone, Copy)]
enum Shows {
    /// Writes `pwn` into the directory the `d` link points at.
    ThroughLink,
    /// Writes `pwn` beside its checkout directory (`..`).
    Beside,
    /// Writes `pwn` at the checkout's root, where the tree names no `pwn` (`.`).
    AtRoot,
    /// Lists the entry (it cannot write an empty name: EISDIR).
    Listed(&'static str),
    /// Writes this `.git` lookalike holding a core.fsmonitor config.
    GitAlike(&'static str),
}

/// `(variant of hostile-tree.sh, the path corral must name (escaped as corral shows it), what
/// the naive writer does with it)`.
const TRUST_02: &[(&str, &str, Shows)] = &[
    ("slash", "d/pwn", Shows::ThroughLink),
    ("dotdot", "..", Shows::Beside),
    ("dot", ".", Shows::AtRoot),
    ("empty", "", Shows::Listed("ENTRY 100644 b''")),
    ("git:GIT", ".GIT", Shows::GitAlike(".GIT")),
    ("git:dot", ".git.", Shows::GitAlike(".git.")),
    ("git:space", ".git ", Shows::GitAlike(".git ")),
    ("git:short", "git~1", Shows::GitAlike("git~1")),
    ("git:zwnj", ".g\\u{200c}it", Shows::GitAlike(".g\u{200c}it")),
];

fn trust_02(ctx: &mut Ctx) -> Result<Verdict> {
    let mut j = Judge::new();
    // The host directory the `d` link points at: root's, with one file in it.
    let hostdir = ctx.dir.join("hostdir");
    std::fs::create_dir_all(&hostdir)?;
    std::fs::write(hostdir.join("keep"), "keep\n")?;
    let decoy = ctx.dir.join("decoy-dir");
    std::fs::create_dir_all(&decoy)?;
    std::fs::write(decoy.join("keep"), "keep\n")?;
    chown_nobody(&decoy);
    let listing = names_in(&hostdir);
    let mut refused = Vec::new();
    for (i, (variant, at, shows)) in TRUST_02.iter().enumerate() {
        let what = format!("entry {at:?} ({variant})");
        let repo = tree_repo(ctx, &format!("tree-run{i}"), variant, Some(&hostdir))?;
        let tmp_before = names_in(&cache_root(ctx).join("tmp"));
        let run = ctx.run(&base_spec(repo), &vars([]))?;
        let sha = head_of(&run.repo);
        base_refused(&mut j, &run, "base_tree_invalid", Some(*at), &what);
        let now = names_in(&hostdir);
        j.breach(
            now != listing,
            format!("{what}: the host directory changed: {listing:?} -> {now:?}"),
        );
        cache_clean(ctx, &mut j, &sha, &tmp_before, &what);
        if let Some(l) = run
            .corral_stderr
            .lines()
            .find(|l| l.contains("[base_tree_invalid]"))
        {
            refused.push(truncate(
                l.split(": the base commit's tree at ").nth(1).unwrap_or(l),
                120,
            ));
        }
        // Control: the naive writer on the same tree (its link aimed at the decoy directory).
        let repo = tree_repo(ctx, &format!("tree-ctl{i}"), variant, Some(&decoy))?;
        let (ctl, dest) = naive_checkout(ctx, repo, None)?;
        let out = truncate(&ctl.output(), 300);
        let (fired, how) = match shows {
            Shows::ThroughLink => (
                decoy.join("pwn").is_file(),
                "wrote pwn into the directory the link d points at".to_owned(),
            ),
            Shows::Beside => (
                dest.parent().is_some_and(|p| p.join("pwn").is_file()),
                "wrote pwn beside (outside) its checkout directory".to_owned(),
            ),
            Shows::AtRoot => (
                dest.join("pwn").is_file(),
                "wrote pwn at the checkout's root, where the tree names no pwn".to_owned(),
            ),
            Shows::Listed(line) => (
                ctl.output().lines().any(|l| l == *line),
                format!("read the entry from the tree ({line})"),
            ),
            Shows::GitAlike(name) => (
                std::fs::read_to_string(dest.join(name).join("config"))
                    .is_ok_and(|c| c.contains("fsmonitor")),
                format!(
                    "wrote {name:?}/config with a core.fsmonitor (a case-insensitive, NTFS or \
                     HFS+ consumer takes it for .git/config)"
                ),
            ),
        };
        control(
            &mut j,
            fired,
            format!("{what}: outside, the naive writer {how} (writer: {out})"),
        );
    }
    j.note(format!("refused: {}", refused.join(" | ")));
    j.note(
        "a name with NUL cannot be written: a tree entry's name ends at its first NUL (git's \
         format), so that shape is a shorter name followed by a corrupt object id",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// TRUST-03

/// The operator ceilings the case sets (corral's defaults: 4 GiB and 250 000 entries, which
/// would make this case write 4 GiB before stopping).
const BOMB_MAX_BYTES: u64 = 64 << 20;
const BOMB_MAX_ENTRIES: u64 = 40;
const MIB: u64 = 1 << 20;
/// What the case tolerates beyond the ceiling in the cache's in-progress folder during a
/// run: the writer stops at the first file past it (the bomb's files are 1 MiB).
const DURING_SLACK: u64 = 16 * MIB;

/// Apparent size of a tree (`du -sb`).
fn du(p: &Path) -> u64 {
    Command::new("du")
        .arg("-sb")
        .arg(p)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Samples the size of a folder (`du -sb`) every 100 ms until stopped; returns the largest.
/// What corral writes there, and nothing else: the host's free space, which this case judged
/// before, moves with every other writer (a build beside the suite moved it by 19 MiB, and
/// the guests' disk images live on the same file system in CI).
struct DuMonitor {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<u64>>,
}

impl DuMonitor {
    fn start(p: PathBuf) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut max = 0;
            while !flag.load(Ordering::SeqCst) {
                max = max.max(du(&p));
                std::thread::sleep(Duration::from_millis(100));
            }
            max
        });
        Self {
            stop,
            handle: Some(handle),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or(u64::MAX)
    }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / MIB as f64)
}

/// One run of the bomb with an operator ceiling (`env`), judged from the outside.
fn bomb_run(
    ctx: &mut Ctx,
    j: &mut Judge,
    repo: &str,
    env: (&str, u64),
    detail: &str,
) -> Result<PathBuf> {
    let mut spec = base_spec(repo.to_owned());
    spec.corral_env = vec![(env.0.to_owned(), env.1.to_string())];
    let root = cache_root(ctx);
    std::fs::create_dir_all(&root)?;
    let tmp_before = names_in(&root.join("tmp"));
    let du_before = du(&root);
    let tmp_du_before = du(&root.join("tmp"));
    // Where a base checkout is written until it is complete.
    let monitor = DuMonitor::start(root.join("tmp"));
    let run = ctx.run(&spec, &vars([]))?;
    let tmp_du_max = monitor.stop();
    let what = format!("{}={}", env.0, env.1);
    base_refused(j, &run, "base_checkout_limit", None, &what);
    j.require(
        run.corral_stderr.contains(detail),
        format!(
            "{what}: the refusal names the ceiling ({detail:?}): {}",
            truncate(&run.corral_stderr, 300)
        ),
    );
    let sha = head_of(&run.repo);
    cache_clean(ctx, j, &sha, &tmp_before, &what);
    let du_after = du(&root);
    j.breach(
        du_after > du_before + MIB,
        format!(
            "{what}: the cache grew from {} to {} bytes",
            du_before, du_after
        ),
    );
    let grew_during = tmp_du_max.saturating_sub(tmp_du_before);
    j.breach(
        grew_during > BOMB_MAX_BYTES + DURING_SLACK,
        format!(
            "{what}: the cache's checkout in progress reached {} (ceiling {})",
            mib(grew_during),
            mib(BOMB_MAX_BYTES)
        ),
    );
    j.note(format!(
        "{what}: exit {} in {:.1} s; the checkout in progress reached {}, the cache {} -> {} \
         bytes; refused: {}",
        run.exit,
        run.elapsed.as_secs_f64(),
        mib(grew_during),
        du_before,
        du_after,
        truncate(run.corral_stderr.trim(), 240)
    ));
    Ok(run.repo)
}

fn trust_03(ctx: &mut Ctx) -> Result<Verdict> {
    let mut j = Judge::new();
    let repo = tree_repo(ctx, "bomb", "bomb", None)?;
    let probe = bomb_run(
        ctx,
        &mut j,
        &repo,
        ("CORRAL_BASE_MAX_BYTES", BOMB_MAX_BYTES),
        &format!("more than {BOMB_MAX_BYTES} bytes"),
    )?;
    bomb_run(
        ctx,
        &mut j,
        &repo,
        ("CORRAL_BASE_MAX_ENTRIES", BOMB_MAX_ENTRIES),
        &format!("more than {BOMB_MAX_ENTRIES} entries"),
    )?;
    // Controls: the expansion is real. Git's own listing of the tree adds up to 64 GiB from a
    // repository of a few KiB, and the naive writer really writes past the ceiling.
    let objects = du(&probe.join(".git/objects"));
    let listing = Command::new("sh")
        .arg("-c")
        .arg("git ls-tree -r --long HEAD | awk '{n++; s+=$4} END {printf \"%d %.0f\", n, s}'")
        .current_dir(&probe)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .envs(crate::adversarial::harness::GIT_TRUST_ALL)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut it = listing
        .split_whitespace()
        .map(|v| v.parse::<u64>().unwrap_or(0));
    let (files, expanded) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    control(
        &mut j,
        expanded > BOMB_MAX_BYTES && files > BOMB_MAX_ENTRIES,
        format!(
            "git ls-tree -r --long lists {files} files, {} expanded, from {} KiB of objects",
            mib(expanded),
            objects >> 10
        ),
    );
    let (ctl, dest) = naive_checkout(ctx, repo, Some(BOMB_MAX_BYTES))?;
    let wrote = du(&dest);
    control(
        &mut j,
        wrote > BOMB_MAX_BYTES && ctl.output().contains("EXPANDED past"),
        format!(
            "outside, the naive writer wrote {} before its own cap of {} (writer: {})",
            mib(wrote),
            mib(BOMB_MAX_BYTES),
            truncate(ctl.output().lines().last().unwrap_or(""), 120)
        ),
    );
    crate::adversarial::harness::remove_tree(&dest);
    j.note(format!(
        "ceilings set by the operator for this case ({} and {BOMB_MAX_ENTRIES} entries); \
         corral's defaults are 4 GiB and 250 000 entries, so unset it would write 4 GiB of \
         this bomb before refusing it",
        mib(BOMB_MAX_BYTES)
    ));
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// Shared by TRUST-04 and TRUST-05.

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

/// The detail of the first rejection of `path`.
fn detail_of(run: &RunObs, path: &str) -> String {
    run.manifest["rejections"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["path"] == path))
        .map(|r| truncate(r["detail"].as_str().unwrap_or(""), 300))
        .unwrap_or_else(|| "not rejected".to_owned())
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

/// The worker ran and capture reached a verdict; each `(code, path)` must be rejected.
fn expect_rejected(j: &mut Judge, run: &RunObs, want: &[(&str, &str)]) {
    j.require(started(run), format!("the worker ran ({})", describe(run)));
    let captured = matches!(run.outcome(), "candidate_captured" | "candidate_rejected");
    j.require(
        captured,
        format!("capture ran to a verdict ({})", describe(run)),
    );
    if !captured {
        return;
    }
    let got = rejections(run);
    for (code, path) in want {
        j.breach(
            !got.iter().any(|(c, p)| c == code && p == path),
            format!(
                "{path:?} was not rejected with {code} (outcome {}; rejections: {})",
                run.outcome(),
                fmt_rej(run)
            ),
        );
    }
}

/// Runs `script` with `sh -c` as uid 65534 in `dir` (no system or global git config); 300 s
/// is a bound on a hang, not a pace.
fn as_nobody(dir: &Path, script: &str) -> (bool, String) {
    let out = Command::new("timeout")
        .args(["-s", "KILL", "300"])
        .args(AS_NOBODY)
        .args(["sh", "-c", script])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir.parent().unwrap_or(dir))
        .env("LANG", "C.UTF-8")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .envs(crate::adversarial::harness::GIT_TRUST_ALL)
        .output();
    match out {
        Ok(o) => (
            o.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        ),
        Err(e) => (false, e.to_string()),
    }
}

// ---------------------------------------------------------------------------------------------
// TRUST-04

/// Resolves `target` lexically from the directory of `link` (both repository paths), the way a
/// checker that reads one link at a time would; `None` if it leaves the repository.
fn lexical(link: &str, target: &str) -> Option<String> {
    let mut stack: Vec<&str> = link.split('/').collect();
    stack.pop();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                stack.pop()?;
            }
            c => stack.push(c),
        }
    }
    Some(stack.join("/"))
}

fn realpath(p: &Path) -> String {
    Command::new("realpath")
        .arg("-m")
        .arg(p)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn trust_04(ctx: &mut Ctx) -> Result<Verdict> {
    let mut j = Judge::new();
    let spec = RunSpec::new("TRUST-04.py");
    let run = ctx.run(&spec, &vars([]))?;
    expect_rejected(
        &mut j,
        &run,
        &[
            ("symlink_escape", "src/sub/e"),
            ("symlink_escape", "src/deep/pw"),
        ],
    );
    let passwd = std::fs::read("/etc/passwd").unwrap_or_default();
    let first = passwd.split(|b| *b == b'\n').next().unwrap_or_default();
    let patch = run.patch();
    j.breach(
        !first.is_empty() && patch.windows(first.len()).any(|w| w == first),
        "the stored patch holds the host's /etc/passwd",
    );
    j.note(format!("rejections: {}", fmt_rej(&run)));
    for p in ["src/sub/e", "src/deep/pw"] {
        j.note(format!("{p}: {}", detail_of(&run, p)));
    }
    // The rule is physical resolution, not "no chains": a chain that stays inside is kept.
    let inside = ctx.run(&RunSpec::new("TRUST-04.py").args(["inside"]), &vars([]))?;
    let kept: Vec<String> = inside.changed_paths().into_iter().map(|(p, _)| p).collect();
    j.require(
        inside.outcome() == "candidate_captured"
            && ["src/sub/d", "src/sub/f"]
                .iter()
                .all(|p| kept.iter().any(|k| k == p)),
        format!(
            "the in-scope chain (src/sub/d -> ., src/sub/f -> d/../app.py) was captured ({}; \
             changed {kept:?}; rejections {})",
            describe(&inside),
            fmt_rej(&inside)
        ),
    );
    // Control: the same links made outside (uid 65534, a copy of the repository), the patch a
    // naive capture takes of them, `git apply` of it on a fresh clone, and realpath there.
    let ctl = ctx.control(&spec, &vars([]), &Control::default())?;
    let (ok, diff) = as_nobody(&ctl.ws, "git add -A && git diff --cached --binary");
    let patch_file = ctx.dir.join("trust04.patch");
    std::fs::write(&patch_file, &diff)?;
    let fresh = ctx.dir.join("fresh");
    let (fresh, _) = ctx.repo("standard", &fresh)?;
    let applied = Command::new("git")
        .arg("apply")
        .arg(&patch_file)
        .current_dir(&fresh)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &ctx.dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .envs(crate::adversarial::harness::GIT_TRUST_ALL)
        .output()
        .map(|o| {
            (
                o.status.success(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .unwrap_or((false, "git apply did not start".into()));
    j.require(
        ok && applied.0,
        format!(
            "outside, the naive patch applied on a fresh clone ({}{})",
            truncate(&diff, 200),
            applied.1
        ),
    );
    let e = realpath(&fresh.join("src/sub/e"));
    let scope = fresh.join("src").to_string_lossy().into_owned();
    let e_lex = lexical("src/sub/e", "d/../../docs/guide.md");
    control(
        &mut j,
        !e.is_empty() && !e.starts_with(&format!("{scope}/")),
        format!(
            "after git apply, src/sub/e resolves to {e} (outside the scope {scope}/; lexically \
             {e_lex:?})"
        ),
    );
    let pw = realpath(&fresh.join("src/deep/pw"));
    let through = std::fs::read(fresh.join("src/deep/pw")).unwrap_or_default();
    let target = format!(
        "{}/{}etc/passwd",
        (1..=12)
            .map(|i| format!("l{i:02}"))
            .collect::<Vec<_>>()
            .join("/"),
        "../".repeat(12)
    );
    control(
        &mut j,
        pw == "/etc/passwd" && !passwd.is_empty() && through == passwd,
        format!(
            "after git apply, src/deep/pw resolves to {pw} and reading it yields the host's \
             /etc/passwd ({} bytes; lexically {:?})",
            through.len(),
            lexical("src/deep/pw", &target)
        ),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// TRUST-05

/// `(the path as written, as the manifest shows it)`.
const TRUST_05_PATHS: &[(&str, &str)] = &[
    ("src/.VSCODE/tasks.json", "src/.VSCODE/tasks.json"),
    ("src/.NPMRC", "src/.NPMRC"),
    ("src/.Envrc", "src/.Envrc"),
    ("src/.npmrc.", "src/.npmrc."),
    ("src/.vscode /tasks.json", "src/.vscode /tasks.json"),
    (
        "src/.vs\u{200d}code/tasks.json",
        "src/.vs\\u{200d}code/tasks.json",
    ),
    ("src/.Claude/settings.json", "src/.Claude/settings.json"),
    ("src/.MCP.json", "src/.MCP.json"),
    ("src/NPMRC~1", "src/NPMRC~1"),
];

/// The entries that name every path above exactly, under the same folding (case, trailing
/// dots and spaces, ignorable code points); a short name is named only by a short name.
const TRUST_05_GRANT: &[&str] = &[
    "src/.vscode/",
    "src/.npmrc",
    "src/.envrc",
    "src/.claude/",
    "src/.mcp.json",
    "src/npmrc~1",
];

fn trust_05(ctx: &mut Ctx) -> Result<Verdict> {
    let mut j = Judge::new();
    let mark = format!("/tmp/PWN-{}", ctx.n);
    // The scope grants src/ and a glob over the .npmrc spellings: neither names one.
    let mut spec = RunSpec::new("TRUST-05.py").args(["{MARK}"]);
    spec.allowed_paths = vec!["src/".into(), "src/.npmrc*".into()];
    let run = ctx.run(&spec, &vars([("MARK", mark.clone())]))?;
    let want: Vec<(&str, &str)> = TRUST_05_PATHS
        .iter()
        .map(|(_, shown)| ("path_protected", *shown))
        .collect();
    expect_rejected(&mut j, &run, &want);
    j.note(format!(
        "scope src/ and the glob src/.npmrc* (a glob never names one); rejections: {}",
        fmt_rej(&run)
    ));
    // Control 1: the same attack with allowed_paths naming each spelling exactly (in its
    // folded form): every file is captured, so the rule alone rejected them above.
    let mut granted = spec.clone();
    granted.allowed_paths = vec!["src/".into()];
    granted
        .allowed_paths
        .extend(TRUST_05_GRANT.iter().map(|s| (*s).to_owned()));
    let ok = ctx.run(&granted, &vars([("MARK", mark.clone())]))?;
    let changed: Vec<String> = ok.changed_paths().into_iter().map(|(p, _)| p).collect();
    let missing: Vec<&str> = TRUST_05_PATHS
        .iter()
        .filter(|(raw, shown)| !changed.iter().any(|c| c == raw || c == shown))
        .map(|(_, shown)| *shown)
        .collect();
    control(
        &mut j,
        ok.outcome() == "candidate_captured" && missing.is_empty(),
        format!(
            "with allowed_paths {TRUST_05_GRANT:?} every spelling was captured ({}; missing \
             {missing:?}; rejections {})",
            describe(&ok),
            fmt_rej(&ok)
        ),
    );
    // Control 2: outside, the attack really writes every file.
    let m = ctx.dir.join("marks");
    std::fs::create_dir_all(&m)?;
    let ctl = ctx.control(
        &spec,
        &vars([("MARK", m.join("x").to_string_lossy().into_owned())]),
        &Control::default(),
    )?;
    let absent: Vec<&str> = TRUST_05_PATHS
        .iter()
        .filter(|(raw, _)| !ctl.ws.join(raw).is_file())
        .map(|(_, shown)| *shown)
        .collect();
    control(
        &mut j,
        absent.is_empty(),
        format!("outside, the attack wrote every file (missing {absent:?})"),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// TRUST-06

const WIDE_FILE: &str = "wide.sh";

/// The racing base: a commit no cache holds, with enough files that filling it takes a while.
const WIDE: &str = include_str!("../../../../tests/adversarial/repos/wide.sh");

/// Files `repos/wide.sh` adds under `lib/` (the worker checks each one).
const WIDE_FILES: usize = 400;
/// The least wall budget of the `sleep` workers. They check their base before they sleep, as
/// every racer does, with 15 other runs on the same CPUs: their budget comes from a measured
/// run of one racer alone on this host ([`Budgets::measured`]), never from an assumed speed
/// (ADR-0060: 2 s, then a fixed 40 s, ended them unheard in TCG guests).
const SLEEP_WALL_MIN: u64 = 40;
const BALLOON_MEMORY: u64 = 64 << 20;

/// The race's budgets on this host.
#[derive(Clone, Copy, Debug)]
struct Budgets {
    /// The `sleep` workers' wall budget: the ending they test.
    sleep_wall: u64,
    /// Every other racer's wall and CPU budgets, and the sleepers' CPU: bounds on a hang
    /// only, since those runs end on their own (or on memory).
    hang: u64,
}

impl Budgets {
    /// From one racer's whole `corral run` alone on a cold cache (`alone`): 16 runs sharing
    /// even one CPU take at most 16 times as long each; the fill and sandbox set-up that
    /// `alone` also holds are not on a worker's wall clock, which leaves room.
    fn measured(alone: Duration) -> Self {
        let sleep_wall = SLEEP_WALL_MIN.max((alone.as_secs() + 1) * 16);
        Self {
            sleep_wall,
            hang: 300.max(sleep_wall * 4),
        }
    }

    /// A race that has not ended by then has a hung run (a deadlock of concurrent fills).
    fn deadline(self) -> Duration {
        Duration::from_secs(self.hang + 120)
    }
}

/// What one racing worker does, and so how its run must end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Worker {
    Edit,
    /// Allowlist mode: an edit after a request through its proxy to the harness's upstream
    /// and one the proxy must refuse.
    Egress,
    Fail,
    Sleep,
    Balloon,
}

/// The 16 racers, interleaved so every kind is spawned early and late; racer `i` runs on
/// base `i % 2`, so both commits get every kind of ending and both network modes.
const RACERS: [Worker; 16] = {
    use Worker::{Balloon as B, Edit as E, Egress as N, Fail as F, Sleep as S};
    [E, N, F, E, S, E, N, F, E, B, E, S, N, F, E, B]
};

/// One of the race's two base commits.
struct WideBase {
    repo: PathBuf,
    sha: String,
    /// What its files name (`TRUST-<nonce>`), so a worker given the other commit's checkout
    /// notices.
    nonce: String,
}

impl Worker {
    fn mode(self) -> &'static str {
        match self {
            Worker::Edit => "edit",
            Worker::Egress => "net",
            Worker::Fail => "fail",
            Worker::Sleep => "sleep",
            Worker::Balloon => "balloon",
        }
    }

    /// corral's exit code, the manifest's outcome and termination, and the worker's exit
    /// code when it is fixed.
    fn expected(self) -> (i32, &'static str, &'static str, Option<i64>) {
        match self {
            Worker::Edit | Worker::Egress => (0, "candidate_captured", "exited", Some(0)),
            Worker::Fail => (1, "attempt_failed", "exited", Some(3)),
            Worker::Sleep => (1, "attempt_failed", "wall_timeout", None),
            Worker::Balloon => (1, "attempt_failed", "memory_limit", None),
        }
    }

    /// `port`: the harness's upstream on the host's 127.0.0.1 (every worker checks it is out
    /// of its direct reach; allowlist runs may reach it through their proxy).
    fn spec(
        self,
        marker: &str,
        cache_home: &Path,
        budgets: Budgets,
        base: &WideBase,
        port: u16,
    ) -> RunSpec {
        let mut s = RunSpec::new("TRUST-06.py").args([
            self.mode().to_owned(),
            marker.to_owned(),
            WIDE_FILES.to_string(),
            base.nonce.clone(),
            port.to_string(),
        ]);
        s.wall_seconds = budgets.hang;
        s.cpu_seconds = budgets.hang;
        match self {
            Worker::Sleep => s.wall_seconds = budgets.sleep_wall,
            Worker::Balloon => s.memory_bytes = BALLOON_MEMORY,
            // An IP literal: the only way the proxy connects to a loopback address.
            Worker::Egress => s.net = Net::Allowlist(vec![format!("127.0.0.1:{port}")]),
            Worker::Edit | Worker::Fail => {}
        }
        // One cache for every racer: the case's own, so it starts cold.
        s.corral_env = vec![(
            "XDG_CACHE_HOME".to_owned(),
            cache_home.to_string_lossy().into_owned(),
        )];
        s
    }
}

/// One racing `corral run` as the outside saw it.
struct Racer {
    worker: Worker,
    marker: String,
    /// Which of the race's bases it was given.
    base: usize,
    /// Spawned and reaped, from the race's start; `end` is `None` for a run still going at
    /// the deadline (killed then).
    start: Duration,
    end: Option<Duration>,
    /// corral's stdout: the stored manifest's bytes and a newline.
    stdout: Vec<u8>,
    /// The preset document the run was given.
    preset: Value,
    obs: RunObs,
}

/// Starts every prepared run at once (one `corral run --json` each) and waits for all of
/// them; a run still going after `deadline` is killed and reported with `end: None`.
fn race(
    ctx: &mut Ctx,
    jobs: Vec<(Worker, String, usize, Prepared)>,
    t0: std::time::Instant,
    deadline: Duration,
) -> Result<Vec<Racer>> {
    use std::process::Stdio;
    struct Live {
        worker: Worker,
        marker: String,
        base: usize,
        prepared: Prepared,
        child: std::process::Child,
        pipes: (JoinHandle<Vec<u8>>, JoinHandle<Vec<u8>>),
        start: Duration,
        end: Option<Duration>,
        code: i32,
    }
    let mut live: Vec<Live> = Vec::new();
    for (worker, marker, base, prepared) in jobs {
        let mut cmd = Command::new(&ctx.h.corral);
        cmd.args(&prepared.args)
            .arg("--json")
            .env_clear()
            .envs(prepared.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let start = t0.elapsed();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                for l in &mut live {
                    let _ = l.child.kill();
                    let _ = l.child.wait();
                }
                bail!("starting corral: {e}");
            }
        };
        ctx.supervisors.push(child.id());
        let pipes = crate::adversarial::harness::drain(&mut child);
        live.push(Live {
            worker,
            marker,
            base,
            prepared,
            child,
            pipes,
            start,
            end: None,
            code: -1,
        });
    }
    let mut done = vec![false; live.len()];
    loop {
        for (l, d) in live.iter_mut().zip(done.iter_mut()) {
            if *d {
                continue;
            }
            // A wait that fails (it does not here) ends the run as if killed by a signal.
            let status = l.child.try_wait();
            if let Ok(Some(_)) | Err(_) = status {
                *d = true;
                l.end = Some(t0.elapsed());
                l.code = status.ok().flatten().and_then(|s| s.code()).unwrap_or(-1);
            }
        }
        if done.iter().all(|d| *d) {
            break;
        }
        if t0.elapsed() > deadline {
            for (l, d) in live.iter_mut().zip(done.iter()) {
                if !*d {
                    let _ = l.child.kill();
                    let _ = l.child.wait();
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut out = Vec::new();
    for l in live {
        let stdout = l.pipes.0.join().unwrap_or_default();
        let stderr = String::from_utf8_lossy(&l.pipes.1.join().unwrap_or_default()).into_owned();
        let preset = std::fs::read(l.prepared.dir.join("preset.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        let elapsed = l.end.unwrap_or(deadline).saturating_sub(l.start);
        let pid = l.child.id();
        let obs = ctx.observe(l.prepared, l.code, &stdout, stderr, elapsed, pid, 0);
        out.push(Racer {
            worker: l.worker,
            marker: l.marker,
            base: l.base,
            start: l.start,
            end: l.end,
            stdout,
            preset,
            obs,
        });
    }
    Ok(out)
}

/// What a watcher of the cache saw during the race (a sample every 2 ms), per commit.
#[derive(Debug, Default)]
struct CacheWatch {
    samples: usize,
    /// When `base/<sha>` was first seen.
    published: BTreeMap<String, Duration>,
    /// The most processes in one sample that held or waited for a `flock` on the cache's
    /// files for the commit (`base/<sha>.*`, as `/proc/locks` shows them) before
    /// `base/<sha>` existed, how many locks were waited for then, and when.
    contenders: BTreeMap<String, (usize, usize, Duration)>,
    /// Every staging directory seen in `tmp/` (one per materialization).
    staging: BTreeSet<String>,
}

/// Samples the cache every 2 ms until `stop`: publication of each `base/<sha>`, the
/// processes holding or waiting for locks on its files, staging directories.
fn watch_cache(
    root: PathBuf,
    shas: Vec<String>,
    t0: std::time::Instant,
    stop: Arc<AtomicBool>,
) -> JoinHandle<CacheWatch> {
    std::thread::spawn(move || {
        let mut w = CacheWatch::default();
        let base = root.join("base");
        while !stop.load(Ordering::SeqCst) {
            let now = t0.elapsed();
            let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
            for sha in &shas {
                let published = base.join(sha).symlink_metadata().is_ok();
                if !published {
                    let inodes: BTreeSet<u64> = names_in(&base)
                        .iter()
                        .filter(|n| n.starts_with(&format!("{sha}.")))
                        .filter_map(|n| base.join(n).symlink_metadata().ok())
                        .map(|m| m.ino())
                        .collect();
                    let (mut pids, waiting) = flocks_on(&locks, &inodes);
                    // The harness's own gate (`hold_lease`) is not a racer.
                    pids.remove(&std::process::id());
                    let best = w.contenders.entry(sha.clone()).or_default();
                    if pids.len() > best.0 {
                        *best = (pids.len(), waiting, now);
                    }
                } else {
                    w.published.entry(sha.clone()).or_insert(now);
                }
            }
            w.staging.extend(names_in(&root.join("tmp")));
            w.samples += 1;
            std::thread::sleep(Duration::from_millis(2));
        }
        w
    })
}

/// Holds each `base/<sha>.lock` exclusively, as an eviction would, so every racer waits at
/// its lease (a shared lock) until `racers` of them wait there, or `bound` has passed; then
/// lets go, so they all go on at once. Without it the racers' start-up (16 corral processes,
/// each with its reaper and probe) spread their arrivals over more than the fill took in an
/// emulated guest, and no two met in the cache (an inconclusive control, never a finding).
/// Returns how many waited, and when it let go.
fn hold_lease(
    cache: &Path,
    shas: &[&str],
    racers: usize,
    bound: Duration,
    owner: Option<(u32, u32)>,
) -> Result<JoinHandle<(usize, Duration)>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::create_dir_all(cache.join("base"))?;
    // Rootless mode: corral runs as the user, and what the harness makes in its cache must be
    // the user's, as if corral had made it (the cache folders and the lock files).
    let give = |p: &Path| -> Result<()> {
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(p, Some(uid), Some(gid))
                .with_context(|| format!("chown {}", p.display()))?;
        }
        Ok(())
    };
    for d in cache
        .ancestors()
        .take_while(|d| d.ends_with("corral") || d.starts_with(cache))
        .collect::<Vec<_>>()
    {
        give(d)?;
    }
    give(&cache.join("base"))?;
    let mut held = Vec::new();
    let mut inodes = BTreeSet::new();
    for sha in shas {
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(cache.join("base").join(format!("{sha}.lock")))?;
        give(&cache.join("base").join(format!("{sha}.lock")))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
        inodes.insert(lock.metadata()?.ino());
        held.push(lock);
    }
    let t = std::time::Instant::now();
    Ok(std::thread::spawn(move || {
        loop {
            let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
            let (_, waiting) = flocks_on(&locks, &inodes);
            if waiting >= racers || t.elapsed() > bound {
                drop(held);
                return (waiting, t.elapsed());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }))
}

/// The harness's upstream for the allowlist racers, on the host's 127.0.0.1: answers
/// `GET /<marker>` with `UPSTREAM <marker>` and logs every request line it is sent (one
/// connection at a time is enough for three requests; each is bounded by a read timeout).
struct Upstream {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<String>>,
}

impl Upstream {
    fn start() -> Result<Self> {
        use std::io::{Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !flag.load(Ordering::SeqCst) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let _ = conn.set_nonblocking(false);
                // A bound on a hang: the proxies relay while 16 runs share the CPUs.
                let _ = conn.set_read_timeout(Some(Duration::from_secs(120)));
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let line = text.lines().next().unwrap_or("").to_owned();
                let path = line.split(' ').nth(1).unwrap_or("").trim_start_matches('/');
                let body = format!("UPSTREAM {path}\n");
                let _ = conn.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
                seen.push(line);
            }
            seen
        });
        Ok(Self { port, stop, thread })
    }

    /// Stops it; every request line it was sent.
    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap_or_default()
    }
}

/// The pids holding or waiting for a `flock` on one of `inodes` in `/proc/locks`, and how
/// many of those locks are waited for (`1: FLOCK ADVISORY WRITE <pid> <maj:min:ino> 0 EOF`;
/// a waiter has `->` after the id).
fn flocks_on(locks: &str, inodes: &BTreeSet<u64>) -> (BTreeSet<u32>, usize) {
    let (mut pids, mut waiting) = (BTreeSet::new(), 0);
    for line in locks.lines() {
        let mut t: Vec<&str> = line.split_whitespace().collect();
        let wait = t.get(1) == Some(&"->");
        if wait {
            t.remove(1);
        }
        let on = t.get(1) == Some(&"FLOCK")
            && t.get(5)
                .and_then(|d| d.rsplit(':').next())
                .and_then(|i| i.parse::<u64>().ok())
                .is_some_and(|i| inodes.contains(&i));
        if let (true, Some(pid)) = (on, t.get(4).and_then(|p| p.parse::<u32>().ok())) {
            pids.insert(pid);
            waiting += usize::from(wait);
        }
    }
    (pids, waiting)
}

/// `RACE-<N>-<ii>` markers in `text`.
fn race_markers(text: &str, prefix: &str) -> BTreeSet<String> {
    text.match_indices(prefix)
        .filter_map(|(i, _)| text.get(i..i + prefix.len() + 2))
        .filter(|m| m[prefix.len()..].bytes().all(|b| b.is_ascii_digit()))
        .map(str::to_owned)
        .collect()
}

fn git_out(repo: &Path, args: &[&str], stdin: Option<&[u8]>) -> Result<Vec<u8>> {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .envs(crate::adversarial::harness::GIT_TRUST_ALL)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("git {args:?}"))?;
    let mut pipe = child.stdin.take();
    let input = stdin.map(<[u8]>::to_vec).unwrap_or_default();
    let writer = std::thread::spawn(move || {
        if let Some(p) = pipe.as_mut() {
            let _ = p.write_all(&input);
        }
    });
    let out = child.wait_with_output()?;
    let _ = writer.join();
    if !out.status.success() {
        bail!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// Differences between the cache entry `dir` and the commit's tree, checked from outside:
/// every blob of `git ls-tree -r` is there with its mode and its blob id (`git hash-object`
/// of the cached file), nothing else is (beside corral's own `.git`), and the stamp names
/// the tree. Empty: the entry is the commit.
fn entry_differences(repo: &Path, sha: &str, dir: &Path) -> Result<Vec<String>> {
    let mut diffs = Vec::new();
    let tree = String::from_utf8_lossy(&git_out(
        repo,
        &["rev-parse", &format!("{sha}^{{tree}}")],
        None,
    )?)
    .trim()
    .to_owned();
    let stamp = std::fs::read_to_string(dir.join(".git/.corral-complete")).unwrap_or_default();
    if stamp.trim() != tree {
        diffs.push(format!(
            "the stamp .git/.corral-complete holds {:?}, the tree is {tree}",
            stamp.trim()
        ));
    }
    let listing = git_out(repo, &["ls-tree", "-r", "-z", sha], None)?;
    let mut blobs: Vec<(String, String, String)> = Vec::new();
    for rec in listing.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let rec = String::from_utf8_lossy(rec);
        let Some((meta, path)) = rec.split_once('\t') else {
            continue;
        };
        let f: Vec<&str> = meta.split(' ').collect();
        if f.len() == 3 && f[1] == "blob" {
            blobs.push((f[0].to_owned(), f[2].to_owned(), path.to_owned()));
        }
    }
    let mut on_disk = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p == dir.join(".git") {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                _ => {
                    on_disk.insert(
                        p.strip_prefix(dir)
                            .unwrap_or(&p)
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            }
        }
    }
    let wanted: BTreeSet<String> = blobs.iter().map(|b| b.2.clone()).collect();
    let missing: Vec<&String> = wanted.difference(&on_disk).collect();
    let extra: Vec<&String> = on_disk.difference(&wanted).collect();
    if !missing.is_empty() || !extra.is_empty() {
        diffs.push(format!(
            "{} of the commit's {} files missing ({:?}), {} extra ({:?})",
            missing.len(),
            wanted.len(),
            missing.iter().take(3).collect::<Vec<_>>(),
            extra.len(),
            extra.iter().take(3).collect::<Vec<_>>()
        ));
    }
    let present: Vec<&(String, String, String)> =
        blobs.iter().filter(|b| on_disk.contains(&b.2)).collect();
    let paths: String = present
        .iter()
        .map(|b| format!("{}\n", dir.join(&b.2).display()))
        .collect();
    let ids = git_out(
        repo,
        &["hash-object", "--no-filters", "--stdin-paths"],
        Some(paths.as_bytes()),
    )?;
    let ids: Vec<String> = String::from_utf8_lossy(&ids)
        .lines()
        .map(str::to_owned)
        .collect();
    for (b, id) in present
        .iter()
        .zip(ids.iter().chain(std::iter::repeat(&String::new())))
    {
        let mode = dir
            .join(&b.2)
            .symlink_metadata()
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        let exec = mode & 0o111 != 0;
        if *id != b.1 || (b.0 == "100755") != exec || b.0 == "120000" {
            diffs.push(format!(
                "{}: blob {id} mode {mode:o}, the commit has {} {}",
                b.2, b.1, b.0
            ));
        }
    }
    Ok(diffs)
}

/// sha256 hex of `bytes`.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The run's manifest is in the store under its digest and `corral verify` finds it and every
/// artifact it names intact. `Err`: why not.
fn verify_stored(ctx: &Ctx, store: &Path, stdout: &[u8]) -> Result<(), String> {
    let body = stdout.strip_suffix(b"\n").unwrap_or(stdout);
    let path = store.join("sha256").join(sha256_hex(body));
    if !path.is_file() {
        return Err(format!(
            "the manifest is not in the store as {}",
            path.display()
        ));
    }
    let out = Command::new(&ctx.h.corral)
        .arg("verify")
        .arg(&path)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .map_err(|e| format!("corral verify: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && text.lines().last() == Some("intact") {
        Ok(())
    } else {
        Err(format!(
            "corral verify exited {:?}: {}{}",
            out.status.code(),
            truncate(&text, 200),
            truncate(&String::from_utf8_lossy(&out.stderr), 200)
        ))
    }
}

/// Everything one racer's run must show: a manifest with its own expected ending, its own
/// marker only (logs, patch and egress records), its own preset, its own base commit, a
/// verified store copy; an allowlist run its own answer from the upstream.
fn judge_racer(
    ctx: &Ctx,
    j: &mut Judge,
    r: &Racer,
    bases: &[WideBase],
    store: &Path,
    prefix: &str,
    deadline: Duration,
) {
    let sha = bases.get(r.base).map_or("", |b| b.sha.as_str());
    let run = &r.obs;
    let who = format!("{} ({})", r.marker, r.worker.mode());
    let Some(end) = r.end else {
        j.breach(
            true,
            format!(
                "{who}: corral had not returned {} s after the race began (hung; killed)",
                deadline.as_secs()
            ),
        );
        return;
    };
    if !run.has_manifest() {
        j.breach(
            true,
            format!(
                "{who}: no manifest (corral exit {} after {:.2} s: {})",
                run.exit,
                end.saturating_sub(r.start).as_secs_f64(),
                truncate(run.corral_stderr.trim(), 300)
            ),
        );
        return;
    }
    j.breach(
        run.corral_stderr.contains("internal error"),
        format!(
            "{who}: {} (with a manifest)",
            truncate(run.corral_stderr.trim(), 300)
        ),
    );
    let (exit, outcome, termination, code) = r.worker.expected();
    let as_expected = run.exit == exit
        && run.outcome() == outcome
        && run.termination() == termination
        && code.is_none_or(|c| run.exit_code() == Some(c));
    j.breach(
        !as_expected,
        format!(
            "{who}: expected corral exit {exit}, {outcome}, {termination}{}; got {}",
            code.map(|c| format!(", worker exit {c}"))
                .unwrap_or_default(),
            describe(run)
        ),
    );
    j.breach(
        run.manifest["repository"]["base_sha"] != sha,
        format!(
            "{who}: the manifest names base {}, the run was given {sha}",
            run.manifest["repository"]["base_sha"]
        ),
    );
    let own_preset = corral_contract::canonical::digest_of(&r.preset).to_string();
    j.breach(
        run.manifest["preset"]["digest"] != own_preset.as_str(),
        format!(
            "{who}: the manifest names preset {}, the run was given {own_preset}",
            run.manifest["preset"]["digest"]
        ),
    );
    if let Err(e) = verify_stored(ctx, store, &r.stdout) {
        j.breach(true, format!("{who}: {e}"));
    }
    // Its logs are its own: its marker, no other run's.
    let output = run.output();
    let foreign: Vec<String> = race_markers(&output, prefix)
        .into_iter()
        .filter(|m| *m != r.marker)
        .collect();
    j.breach(
        !foreign.is_empty(),
        format!("{who}: its stored output names other runs: {foreign:?}"),
    );
    j.require(
        output.contains(&format!("WORKER {} ", r.marker)) && output.contains("BASE "),
        format!(
            "{who}: the worker ran and checked its base (output {:?})",
            truncate(&output, 200)
        ),
    );
    esc_breaches(ctx, run, j);
    // Its candidate is its own.
    let patch = String::from_utf8_lossy(&run.patch()).into_owned();
    let in_patch = race_markers(&patch, prefix);
    j.breach(
        in_patch.iter().any(|m| *m != r.marker),
        format!("{who}: its patch holds other runs' markers: {in_patch:?}"),
    );
    if r.worker == Worker::Edit {
        let own = format!("src/race/{}.txt", r.marker);
        let changed = run.changed_paths();
        j.breach(
            changed != [(own.clone(), "added".to_owned())] || !in_patch.contains(&r.marker),
            format!(
                "{who}: the candidate is not its own edit ({own} added, holding {}): changed \
                 {changed:?}, markers in the patch {in_patch:?}",
                r.marker
            ),
        );
    }
    judge_egress(j, r, &who, &output, prefix);
    j.breach(
        output.contains("WOKE ") || output.contains("BALLOON done"),
        format!(
            "{who}: the worker outlived its budget: {}",
            truncate(&output, 200)
        ),
    );
}

/// An allowlist racer got its own answer from the upstream through its proxy, and its
/// proxy refused its `<marker>.invalid`; its manifest records both and nothing of another
/// run. A run in mode none records nothing.
fn judge_egress(j: &mut Judge, r: &Racer, who: &str, output: &str, prefix: &str) {
    let records = r.obs.manifest["network"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let lower = prefix.to_ascii_lowercase();
    let foreign: Vec<&Value> = records
        .iter()
        .filter(|e| {
            let d = e["destination"].as_str().unwrap_or("");
            race_markers(d, &lower)
                .iter()
                .any(|m| *m != r.marker.to_ascii_lowercase())
        })
        .collect();
    j.breach(
        !foreign.is_empty(),
        format!("{who}: its manifest records other runs' requests: {foreign:?}"),
    );
    if r.worker != Worker::Egress {
        j.breach(
            !records.is_empty(),
            format!("{who}: a run in mode none records egress: {records:?}"),
        );
        return;
    }
    let answer = format!(
        "UPSTREAM-ANSWER {m} 'HTTP/1.1 200 OK' 'UPSTREAM {m}'",
        m = r.marker
    );
    j.breach(
        !output.contains(&answer),
        format!(
            "{who}: its request through its own proxy did not get its own answer ({answer:?}): \
             {}",
            truncate(output, 300)
        ),
    );
    j.breach(
        !output.contains(&format!("REFUSED-ANSWER {} 'HTTP/1.1 403", r.marker)),
        format!(
            "{who}: its proxy did not refuse {}.invalid: {}",
            r.marker.to_ascii_lowercase(),
            truncate(output, 300)
        ),
    );
    let has = |dest: &str, allowed: bool| {
        records.iter().any(|e| {
            e["destination"]
                .as_str()
                .is_some_and(|d| d.starts_with(dest))
                && e["allowed"] == allowed
        })
    };
    j.breach(
        !has("127.0.0.1:", true)
            || !has(
                &format!("{}.invalid:", r.marker.to_ascii_lowercase()),
                false,
            ),
        format!(
            "{who}: its manifest does not record its relayed request and its refusal: \
             {records:?}"
        ),
    );
}

/// Runs the naive base cache (the attack script's `naive` mode) 16 times at once as uid
/// 65534 on one shared folder: each looks for `base/<sha>`, copies the work tree of `repo`
/// into `tmp/` and renames it into place, with no lock. Returns how many published, the
/// errno of each failed rename, and how many reused what another published.
fn naive_race(ctx: &mut Ctx, repo: &Path, sha: &str) -> Result<(usize, Vec<String>, usize)> {
    use std::process::Stdio;
    let root = ctx.dir.join("naive");
    for d in ["base", "tmp"] {
        std::fs::create_dir_all(root.join(d))?;
    }
    chown_nobody(&root);
    let script = ctx.h.attacks.join("TRUST-06.py");
    let mut children = Vec::new();
    for _ in 0..RACERS.len() {
        // Bounds on a hang only: sixteen Python start-ups and copies of 400 files took
        // longer than a fixed 30 s in a TCG guest beside a busy host.
        let child = Command::new("timeout")
            .args(["-s", "KILL", "600"])
            .args(AS_NOBODY)
            .arg(&script)
            .arg(&ctx.n)
            .arg("naive")
            .arg(&root)
            .arg(sha)
            .arg(repo)
            .current_dir(&root)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &root)
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        match child {
            Ok(c) => children.push(c),
            Err(e) => {
                for c in &mut children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                bail!("starting the naive filler: {e}");
            }
        }
    }
    // The start signal once every filler is ready (so all of them start "at once"); the
    // deadline only ends the wait for a filler that never started.
    let until = std::time::Instant::now() + Duration::from_secs(300);
    while names_in(&root)
        .iter()
        .filter(|n| n.starts_with("ready-"))
        .count()
        < children.len()
        && std::time::Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::write(root.join("go"), "")?;
    let mut out = String::new();
    for c in children {
        let o = c.wait_with_output()?;
        out.push_str(&String::from_utf8_lossy(&o.stdout));
        out.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    let published = out.lines().filter(|l| *l == "PUBLISHED").count();
    let reused = out.lines().filter(|l| *l == "REUSED").count();
    let failed = out
        .lines()
        .filter_map(|l| l.strip_prefix("RENAME-FAILED "))
        .map(str::to_owned)
        .collect();
    Ok((published, failed, reused))
}

/// Cgroups the runs' capability probes (`corral-probe-<pid>-<n>`) left.
fn leftover_probe_groups(pids: &[u32]) -> Vec<String> {
    let prefixes: Vec<String> = pids.iter().map(|p| format!("corral-probe-{p}-")).collect();
    let mut found = Vec::new();
    crate::adversarial::harness::walk(Path::new("/sys/fs/cgroup"), 6, &mut |p| {
        if let Some(n) = p.file_name().map(|n| n.to_string_lossy().into_owned())
            && prefixes.iter().any(|pre| n.starts_with(pre.as_str()))
            && p.is_dir()
        {
            found.push(p.display().to_string());
        }
    });
    found
}

fn trust_06(ctx: &mut Ctx) -> Result<Verdict> {
    let mut j = Judge::new();
    let builder = ctx.h.fixture(&format!("repos/{WIDE_FILE}"));
    // Two repositories, each with a commit of its own: the second's files name another nonce.
    let mut bases = Vec::new();
    for (i, suffix) in ["", "-b"].iter().enumerate() {
        let wrapper = ctx.dir.join(format!("wide{i}.sh"));
        std::fs::write(
            &wrapper,
            format!(
                "#!/usr/bin/env bash\nexec bash {} \"$1\" \"$2{suffix}\" {WIDE_FILES}\n",
                sq(&builder.to_string_lossy())
            ),
        )?;
        let (repo, sha) = ctx.repo(
            &wrapper.to_string_lossy(),
            &ctx.dir.join(format!("repo{i}")),
        )?;
        bases.push(WideBase {
            repo,
            sha,
            nonce: format!("{}{suffix}", ctx.n),
        });
    }
    let shas: Vec<String> = bases.iter().map(|b| b.sha.clone()).collect();
    // One cache (the case's own XDG_CACHE_HOME) and one artifact store for all 17 runs.
    let cache_home = ctx.dir.join("cache");
    let store = ctx.dir.join("artifacts");
    let prefix = format!("RACE-{}-", ctx.n);
    let upstream = Upstream::start()?;
    let port = upstream.port;
    let verdict = race_and_judge(
        ctx,
        &mut j,
        &bases,
        &shas,
        &cache_home,
        &store,
        &prefix,
        port,
    );
    let requests = upstream.finish();
    verdict?;
    // The upstream saw each allowlist racer's request once, and nothing else.
    let mut want: Vec<String> = RACERS
        .iter()
        .enumerate()
        .filter(|(_, w)| **w == Worker::Egress)
        .map(|(i, _)| format!("GET /{prefix}{i:02} HTTP/1.1"))
        .collect();
    want.sort();
    let mut got = requests.clone();
    got.sort();
    j.breach(
        got != want,
        format!(
            "the upstream on 127.0.0.1:{port} was sent {got:?}; the allowlist racers asked for \
             {want:?} (one each, through their own proxies)"
        ),
    );
    j.note(format!(
        "the upstream on 127.0.0.1:{port} answered {} requests, one per allowlist racer",
        requests.len()
    ));
    // Control: the same race breaks a cache without a lock.
    let first = &bases[0];
    let (published, failed, reused) = naive_race(ctx, &first.repo, &first.sha)?;
    control(
        &mut j,
        published == 1 && !failed.is_empty(),
        format!(
            "outside, 16 unlocked fill-then-rename fillers (uid 65534) on one folder: {published} \
             published, {} renames failed ({:?}), {reused} reused",
            failed.len(),
            failed.iter().collect::<BTreeSet<_>>()
        ),
    );
    Ok(j.verdict())
}

/// TRUST-06's race, its controls, the cache afterwards and the 17th run.
#[allow(
    clippy::too_many_arguments,
    reason = "the race's fixed settings, passed once"
)]
fn race_and_judge(
    ctx: &mut Ctx,
    j: &mut Judge,
    bases: &[WideBase],
    shas: &[String],
    cache_home: &Path,
    store: &Path,
    prefix: &str,
    port: u16,
) -> Result<()> {
    let cache = ctx.h.cache_in(cache_home);
    // Control: the cache is cold for both commits.
    let before = cache_ls_in(ctx, cache_home)?;
    let listed_before = before["entries"].as_array().map_or(0, Vec::len);
    control(
        j,
        listed_before == 0
            && shas
                .iter()
                .all(|sha| cache.join("base").join(sha).symlink_metadata().is_err()),
        format!(
            "the cache was cold: `corral cache ls` listed {listed_before} entries and there \
             was no base/ entry for {shas:?} before the race"
        ),
    );
    // The budgets from this host's own speed: one racer alone, on a cache and a store of
    // its own (so the race's cache stays cold), the way every racer runs.
    let (budgets, alone) = {
        let start = Budgets::measured(Duration::ZERO);
        let marker = format!("CAL-{}", ctx.n);
        let p = ctx.prepare_on(
            &Worker::Edit.spec(
                &marker,
                &ctx.dir.join("cache-alone"),
                start,
                &bases[0],
                port,
            ),
            &vars([]),
            "alone",
            &bases[0].repo,
            &bases[0].sha,
            &ctx.dir.join("artifacts-alone"),
        )?;
        let t = std::time::Instant::now();
        let alone = race(ctx, vec![(Worker::Edit, marker, 0, p)], t, start.deadline())?;
        let ok = alone.first().is_some_and(|r| {
            r.end.is_some()
                && r.obs.exit == 0
                && r.obs.output().contains("BASE ")
                && r.obs.termination() == "exited"
        });
        let took = alone
            .first()
            .and_then(|r| r.end.map(|e| e.saturating_sub(r.start)))
            .unwrap_or_default();
        j.require(
            ok,
            format!(
                "one racer alone captured its edit ({:.1} s{})",
                took.as_secs_f64(),
                alone
                    .first()
                    .map(|r| format!(": {}", describe(&r.obs)))
                    .unwrap_or_default()
            ),
        );
        (Budgets::measured(took), took)
    };
    j.note(format!(
        "one racer alone took {:.1} s: the sleepers' wall budget is {} s, the other budgets \
         {} s (hang bounds)",
        alone.as_secs_f64(),
        budgets.sleep_wall,
        budgets.hang
    ));
    let deadline = budgets.deadline();
    let mut jobs = Vec::new();
    for (i, w) in RACERS.iter().enumerate() {
        let marker = format!("{prefix}{i:02}");
        let b = i % bases.len();
        let p = ctx.prepare_on(
            &w.spec(&marker, cache_home, budgets, &bases[b], port),
            &vars([]),
            &format!("race{i:02}"),
            &bases[b].repo,
            &bases[b].sha,
            store,
        )?;
        jobs.push((*w, marker, b, p));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = std::time::Instant::now();
    let sha_refs: Vec<&str> = shas.iter().map(String::as_str).collect();
    let gate = hold_lease(
        &cache,
        &sha_refs,
        jobs.len(),
        Duration::from_secs(budgets.hang),
        ctx.h.as_user.as_ref().map(|(_, uid)| (*uid, ctx.h.as_gid)),
    )?;
    let watcher = watch_cache(cache.clone(), shas.to_vec(), t0, stop.clone());
    let raced = race(ctx, jobs, t0, deadline);
    stop.store(true, Ordering::SeqCst);
    let watch = watcher.join().unwrap_or_default();
    let held = gate.join().unwrap_or_default();
    let raced = raced?;
    j.note(format!(
        "{} of the {} racers waited together at the cache's lease locks before they were let \
         go ({} ms after the start)",
        held.0,
        RACERS.len(),
        held.1.as_millis()
    ));
    for r in &raced {
        judge_racer(ctx, j, r, bases, store, prefix, deadline);
    }
    // Controls: the race was real. All 16 overlapped, on each commit all started before its
    // entry existed, and several were in the cache's locks for it at once while it did not.
    let last_start = raced.iter().map(|r| r.start).max().unwrap_or_default();
    let first_end = raced
        .iter()
        .map(|r| r.end.unwrap_or(deadline))
        .min()
        .unwrap_or_default();
    let ms = |d: Duration| d.as_millis();
    control(
        j,
        raced.len() == RACERS.len() && last_start < first_end,
        format!(
            "the {} runs overlapped: the last started at +{} ms, the first ended at +{} ms",
            raced.len(),
            ms(last_start),
            ms(first_end)
        ),
    );
    for (b, sha) in shas.iter().enumerate() {
        let last = raced
            .iter()
            .filter(|r| r.base == b)
            .map(|r| r.start)
            .max()
            .unwrap_or_default();
        let published = watch.published.get(sha).copied();
        control(
            j,
            published.is_some_and(|p| last < p),
            format!(
                "every run on base {b} started before base/{sha} existed (first seen at {}; \
                 last start +{} ms)",
                published.map_or("never".to_owned(), |p| format!("+{} ms", ms(p))),
                ms(last)
            ),
        );
        let (contenders, waiting, at) = watch.contenders.get(sha).copied().unwrap_or_default();
        control(
            j,
            contenders >= 2,
            format!(
                "several runs were in the cache for base {b} at once before its entry \
                 existed: at +{} ms {contenders} processes held or waited for locks on \
                 base/{sha}.* ({waiting} locks waited for; /proc/locks, {} samples)",
                ms(at),
                watch.samples
            ),
        );
    }
    let staging: Vec<&String> = watch
        .staging
        .iter()
        .filter(|s| shas.iter().any(|sha| s.starts_with(sha.as_str())))
        .collect();
    let endings: Vec<String> = raced
        .iter()
        .map(|r| {
            format!(
                "{}:{}:{}:{}-{}",
                &r.marker[prefix.len()..],
                r.worker.mode(),
                r.base,
                ms(r.start),
                r.end.map_or("hung".to_owned(), |e| format!("{}ms", ms(e)))
            )
        })
        .collect();
    j.note(format!(
        "materializations seen in tmp/: {} ({staging:?}); runs (marker:mode:base:start-end): {}",
        staging.len(),
        endings.join(" ")
    ));
    // The cache: one verified entry per commit, nothing in tmp/, nothing else in base/.
    let after = cache_ls_in(ctx, cache_home)?;
    let entries = after["entries"].as_array().cloned().unwrap_or_default();
    let mut known = BTreeSet::new();
    for (b, base) in bases.iter().enumerate() {
        let sha = &base.sha;
        let ours: Vec<&Value> = entries
            .iter()
            .filter(|e| e["base_sha"] == sha.as_str())
            .collect();
        j.breach(
            ours.len() != 1,
            format!(
                "`corral cache ls` after the race lists {} entries for base {b} ({sha}): {}",
                ours.len(),
                truncate(&after["entries"].to_string(), 400)
            ),
        );
        let tree_entries = git_out(&base.repo, &["ls-tree", "-r", "-t", sha], None)
            .map(|o| o.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count() as u64)
            .unwrap_or(0);
        if let Some(e) = ours.first() {
            j.breach(
                e["in_use"] != false || e["entries"] != tree_entries,
                format!(
                    "the entry for base {b} after the race: {e} (want not in use, \
                     {tree_entries} entries as `git ls-tree -r -t` counts them)"
                ),
            );
        }
        match entry_differences(&base.repo, sha, &cache.join("base").join(sha)) {
            Ok(d) => {
                j.breach(
                    !d.is_empty(),
                    format!(
                        "the cache entry for base {b} is not its commit: {}",
                        d.join("; ")
                    ),
                );
            }
            Err(e) => {
                j.require(
                    false,
                    format!("comparing the cache entry with base {b}'s commit: {e:#}"),
                );
            }
        }
        known.extend(
            ["", ".lock", ".fill", ".meta"]
                .iter()
                .map(|s| format!("{sha}{s}")),
        );
    }
    j.breach(
        entries.len() != bases.len(),
        format!(
            "`corral cache ls` after the race lists {} entries, want one per commit: {}",
            entries.len(),
            truncate(&after["entries"].to_string(), 400)
        ),
    );
    let tmp_left = names_in(&cache.join("tmp"));
    j.breach(
        !tmp_left.is_empty(),
        format!("left in the cache's tmp/: {tmp_left:?}"),
    );
    let base_names = names_in(&cache.join("base"));
    let stray: Vec<&String> = base_names.difference(&known).collect();
    j.breach(
        !stray.is_empty(),
        format!("the cache's base/ holds more than the two entries: {stray:?}"),
    );
    let store_tmp: Vec<String> = names_in(&store.join("sha256"))
        .into_iter()
        .filter(|n| n.starts_with('.'))
        .collect();
    j.breach(
        !store_tmp.is_empty(),
        format!("left in the shared artifact store: {store_tmp:?}"),
    );
    // A 17th run afterwards reuses base 0's entry (neither the manifest nor the JSON output
    // says so: corral keeps it; the same directory and .meta, no new staging directory,
    // show it).
    let sha = &bases[0].sha;
    let entry = cache.join("base").join(sha);
    let ino = |p: &Path| p.symlink_metadata().map(|m| m.ino()).ok();
    let meta = cache.join("base").join(format!("{sha}.meta"));
    let (entry_ino, meta_ino) = (ino(&entry), ino(&meta));
    let marker = format!("{prefix}{:02}", RACERS.len());
    let p = ctx.prepare_on(
        &Worker::Edit.spec(&marker, cache_home, budgets, &bases[0], port),
        &vars([]),
        "reuse",
        &bases[0].repo,
        sha,
        store,
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    let t1 = std::time::Instant::now();
    let watcher = watch_cache(cache.clone(), vec![sha.clone()], t1, stop.clone());
    let again = race(ctx, vec![(Worker::Edit, marker, 0, p)], t1, deadline);
    stop.store(true, Ordering::SeqCst);
    let rewatch = watcher.join().unwrap_or_default();
    let again = again?;
    for r in &again {
        judge_racer(ctx, j, r, bases, store, prefix, deadline);
    }
    let refilled: Vec<&String> = rewatch
        .staging
        .iter()
        .filter(|s| s.starts_with(sha.as_str()))
        .collect();
    j.breach(
        entry_ino.is_none()
            || ino(&entry) != entry_ino
            || ino(&meta) != meta_ino
            || !refilled.is_empty(),
        format!(
            "a 17th run did not reuse the entry the race left: base/{sha} inode {entry_ino:?} \
             -> {:?}, .meta {meta_ino:?} -> {:?}, materializations {refilled:?}",
            ino(&entry),
            ino(&meta)
        ),
    );
    let pids = ctx.supervisors.clone();
    for g in leftover_probe_groups(&pids) {
        j.breach(
            true,
            format!("a capability probe's cgroup left behind: {g}"),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_locks_lines_are_counted_per_inode_with_waiters() {
        let locks = "1: FLOCK  ADVISORY  READ 101 fe:00:77 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 102 fe:00:78 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 103 fe:00:78 0 EOF\n\
                     3: POSIX  ADVISORY  WRITE 104 fe:00:78 0 EOF\n\
                     4: FLOCK  ADVISORY  WRITE 105 fe:00:9 0 EOF\n";
        let (pids, waiting) = flocks_on(locks, &BTreeSet::from([77, 78]));
        assert_eq!(pids, BTreeSet::from([101, 102, 103]));
        assert_eq!(waiting, 1);
        assert_eq!(flocks_on(locks, &BTreeSet::new()).0.len(), 0);
    }

    #[test]
    fn race_markers_take_two_digits_after_the_prefix() {
        let m = race_markers(
            "a RACE-ab-03 b RACE-ab-1x RACE-ab-12\nRACE-cd-04",
            "RACE-ab-",
        );
        assert_eq!(
            m,
            BTreeSet::from(["RACE-ab-03".to_owned(), "RACE-ab-12".to_owned()])
        );
    }
}
