//! TRUST-07: the supervisor killed at the worst moment (corpus §9b, issue 17 items 2-3).
//!
//! `corral run` is killed with SIGKILL at seeded points of the three phases where it writes
//! on the host: while it materializes a base commit into its cache (a cold cache of its own
//! per point), while the capture helper turns the worker's change into objects and a patch,
//! and while the artifacts and the manifest go into the store. The base (`repos/wide.sh`,
//! [`FILES`] files) and the worker's change ([`OUT`] files and [`BIG`] bytes of file and of
//! output) are sized so each phase lasts long enough on this host for a kill to land inside
//! it. A point waits until the outside sees its phase under way (the run's staging folder in
//! the cache, its capture scratch folder, a new file in the store), waits its seeded delay
//! (0 for each phase's first point), then stops corral and its helpers (SIGSTOP, so what was
//! in flight can be looked at), and kills corral.
//!
//! After each kill, once corral's reaper (ADR-0092) has exited: every file in the store
//! hashes to its name and none is a temporary; the cache holds no staging folder and no
//! published entry without its stamp; no group, process, mount or temporary folder of that
//! corral remains; and the next `corral run` on the same cache and store succeeds, its worker
//! finds its base intact (a torn checkout reused would show), and `corral verify` passes.
//!
//! Controls: every phase had at least one kill that found something of that phase in flight
//! (so the points really landed inside the phases), and the same kill during materialization
//! with the reaper killed first leaves the staging folder behind (the checks see what a dead
//! corral leaves), which the next corral collects.
//!
//! The suite runs [`DEFAULT_POINTS`] points; `cargo xtask adversarial --filter TRUST-07
//! --crash-points 50` runs the corpus's 50.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::trust::{names_in, sq};
use super::vars;
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{Ctx, Prepared, RunSpec, drain, truncate, walk};

pub fn cases() -> Vec<Case> {
    vec![Case {
        id: "TRUST-07",
        title: "The supervisor killed at the worst moment",
        guarantee: "nothing is lost or corrupted; nothing is left behind",
        script: Some(attack!("TRUST-07.py")),
        judge: trust_07,
    }]
}

/// Kill points of the suite's run (the corpus asks for 50: `--crash-points 50`).
pub const DEFAULT_POINTS: usize = 12;
/// Files of the base commit: materializing them is the first phase.
const FILES: usize = 1500;
/// Small files the worker writes: capturing them is the second phase.
const OUT: usize = 1500;
/// Bytes of the worker's big file and of its output: storing them is the third phase.
const BIG: u64 = 4_000_000;
/// A bound on a hang, never a pace: a run, a reaper or a dying process that takes longer is
/// stuck.
const HANG: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Materialize,
    Capture,
    Store,
}

impl Phase {
    const ALL: [Phase; 3] = [Phase::Materialize, Phase::Capture, Phase::Store];

    fn name(self) -> &'static str {
        match self {
            Phase::Materialize => "materialization",
            Phase::Capture => "capture",
            Phase::Store => "store writes",
        }
    }

    /// The latest seeded delay after the phase is seen, in ms: about half the phase measured
    /// on this host (136, 178 and 30 ms), so the kills spread over it.
    fn spread_ms(self) -> u64 {
        match self {
            Phase::Materialize => 60,
            Phase::Capture => 80,
            Phase::Store => 12,
        }
    }
}

/// splitmix64: the seeded delays, the same on every run of the suite.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Point `i`: its phase and its delay after the phase is seen.
fn point(i: usize) -> (Phase, Duration) {
    let phase = Phase::ALL[i % 3];
    let ms = if i < 3 {
        0
    } else {
        splitmix(0x0072_7573_742d_3037 ^ i as u64) % (phase.spread_ms() + 1)
    };
    (phase, Duration::from_millis(ms))
}

/// One killed run as the outside saw it.
struct Kill {
    pid: u32,
    /// Something of the phase was in flight when corral was stopped and killed.
    hit: bool,
    /// What of corral's was on the host at the kill.
    in_flight: Vec<String>,
    /// corral had printed its manifest (it finished before the kill).
    finished: bool,
}

/// The children of `pid` (every thread's).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let c = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    }
    out
}

fn cmdline(pid: u32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default())
        .replace('\0', " ")
}

/// Whether `pid` has exited (gone, or a zombie nobody reaped yet).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

/// Every descendant of `pid`, except the subtree of `skip` (corral's reaper).
fn descendants(pid: u32, skip: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for c in children(p) {
            if c != skip && !out.contains(&c) {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

/// Sends `sig` to each of `pids` with a system call (a `kill` process is too slow to land
/// inside corral's store writes in an emulated guest). A pid already gone is no error.
fn signal(sig: rustix::process::Signal, pids: &[u32]) {
    for p in pids {
        if let Some(pid) = i32::try_from(*p)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, sig);
        }
    }
}

fn wait_until(deadline: Duration, mut done: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while !done() {
        if t.elapsed() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Where one point's corral keeps things.
struct Places {
    /// `$XDG_CACHE_HOME/corral`.
    cache: PathBuf,
    /// The artifact store's `sha256/`.
    store: PathBuf,
}

impl Places {
    /// What of corral `pid` is on the host: its staging folders, scratch folders, probe
    /// folders, temporaries in the cache and the store, and its groups.
    fn of(&self, pid: u32) -> Vec<String> {
        let mut found = Vec::new();
        let infix = format!("-{pid}-");
        for n in names_in(&self.cache.join("tmp")) {
            if n.contains(&infix) {
                found.push(format!("staging tmp/{n}"));
            }
        }
        for n in names_in(&self.cache.join("base")) {
            if n.ends_with(&format!(".tmp-{pid}")) {
                found.push(format!("cache temporary base/{n}"));
            }
        }
        for n in names_in(&self.cache) {
            if n.starts_with("corral-probe-") && n.contains(&infix) {
                found.push(format!("probe folder {n}"));
            }
        }
        for n in names_in(&self.store) {
            if n.starts_with('.') && n.contains(&infix) {
                found.push(format!("store temporary {n}"));
            }
        }
        // corral's temporary directory: its environment names no TMPDIR.
        for n in names_in(Path::new("/tmp")) {
            if n.starts_with(&format!("corral-capture-{pid}-")) {
                found.push(format!("capture scratch /tmp/{n}"));
            }
        }
        let groups = [format!("corral-{pid}-"), format!("corral-probe-{pid}-")];
        walk(Path::new("/sys/fs/cgroup"), 6, &mut |p| {
            if let Some(n) = p.file_name().map(|n| n.to_string_lossy().into_owned())
                && groups.iter().any(|g| n.starts_with(g.as_str()))
                && p.is_dir()
            {
                found.push(format!("cgroup {}", p.display()));
            }
        });
        found
    }

    /// Whether `phase` of corral `pid` is under way, as the outside sees it.
    fn under_way(&self, phase: Phase, pid: u32, store_before: &BTreeSet<String>) -> bool {
        match phase {
            Phase::Materialize => names_in(&self.cache.join("tmp"))
                .iter()
                .any(|n| n.contains(&format!("-{pid}-"))),
            Phase::Capture => names_in(Path::new("/tmp"))
                .iter()
                .any(|n| n.starts_with(&format!("corral-capture-{pid}-"))),
            Phase::Store => !names_in(&self.store).is_subset(store_before),
        }
    }

    /// Files in the store that do not hash to their name, and temporaries left in it.
    fn store_faults(&self) -> Vec<String> {
        let mut bad = Vec::new();
        for n in names_in(&self.store) {
            if n.starts_with('.') {
                bad.push(format!("a temporary stays visible in the store: {n}"));
                continue;
            }
            match std::fs::read(self.store.join(&n)) {
                Ok(bytes) => {
                    let got = hex(&Sha256::digest(&bytes));
                    if got != n {
                        bad.push(format!("store file {n} hashes to {got}"));
                    }
                }
                Err(e) => bad.push(format!("store file {n} unreadable: {e}")),
            }
        }
        bad
    }

    /// Published base entries without their stamp (torn, yet where a reuse would look).
    fn torn_entries(&self) -> Vec<String> {
        names_in(&self.cache.join("base"))
            .into_iter()
            .filter(|n| n.len() == 40 && n.bytes().all(|b| b.is_ascii_hexdigit()))
            .filter(|n| {
                !self
                    .cache
                    .join("base")
                    .join(n)
                    .join(".git/.corral-complete")
                    .is_file()
            })
            .collect()
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Runs `p` and kills corral at `delay` after `phase` is seen under way. With `no_reaper`,
/// corral's reaper is killed first (the control).
fn kill_run(
    ctx: &mut Ctx,
    p: &Prepared,
    places: &Places,
    phase: Phase,
    delay: Duration,
    no_reaper: bool,
) -> Result<Kill> {
    let store_before = names_in(&places.store);
    let mut child = Command::new(&ctx.h.corral)
        .args(&p.args)
        .arg("--json")
        .env_clear()
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting corral run")?;
    let pid = child.id();
    ctx.supervisors.push(pid);
    let pipes = drain(&mut child);
    // corral starts its reaper before anything else.
    let mut reaper = None;
    let found = wait_until(HANG, || {
        reaper = children(pid)
            .into_iter()
            .find(|c| cmdline(*c).contains("__corral-reaper"));
        reaper.is_some() || child.try_wait().ok().flatten().is_some()
    });
    let Some(reaper) = reaper.filter(|_| found) else {
        let _ = child.kill();
        let _ = child.wait();
        bail!("corral {pid} started no reaper");
    };
    let mut seen = false;
    let ended = !wait_until(HANG, || {
        seen = places.under_way(phase, pid, &store_before);
        seen || child.try_wait().ok().flatten().is_some()
    });
    if ended {
        let _ = child.kill();
        let _ = child.wait();
        bail!(
            "corral {pid} neither ended nor reached its {}",
            phase.name()
        );
    }
    if seen {
        std::thread::sleep(delay);
    }
    // Only once the phase is under way: killed before it reports ready, the reaper would
    // fail corral's start instead.
    if no_reaper {
        signal(rustix::process::Signal::KILL, &[reaper]);
        if !wait_until(HANG, || exited(reaper)) {
            bail!("corral's reaper {reaper} did not die");
        }
    }
    // Stop corral, then everything it started but the reaper, and look at what is in flight.
    signal(rustix::process::Signal::STOP, &[pid]);
    let frozen = descendants(pid, reaper);
    signal(rustix::process::Signal::STOP, &frozen);
    let in_flight = places.of(pid);
    // Read while corral is stopped: its reaper removes its temporaries once it is killed.
    let stored_at_kill = !names_in(&places.store).is_subset(&store_before);
    signal(rustix::process::Signal::KILL, &[pid]);
    let _ = child.wait();
    signal(rustix::process::Signal::CONT, &frozen);
    let (out, _err) = (
        pipes.0.join().unwrap_or_default(),
        pipes.1.join().unwrap_or_default(),
    );
    let finished = !out.is_empty();
    let hit = !finished
        && match phase {
            Phase::Materialize => in_flight.iter().any(|s| s.starts_with("staging ")),
            Phase::Capture => in_flight.iter().any(|s| s.starts_with("capture scratch ")),
            Phase::Store => stored_at_kill,
        };
    if !wait_until(HANG, || exited(reaper)) {
        bail!("corral's reaper {reaper} was still running {HANG:?} after corral was killed");
    }
    if !wait_until(HANG, || frozen.iter().all(|p| exited(*p))) {
        bail!("corral's children {frozen:?} outlived it by {HANG:?}");
    }
    Ok(Kill {
        pid,
        hit,
        in_flight,
        finished,
    })
}

/// A whole run; returns (exit, manifest, worker output).
fn full_run(ctx: &Ctx, p: &Prepared, manifest_file: &Path) -> Result<(i32, Value, String)> {
    let out = Command::new(&ctx.h.corral)
        .args(&p.args)
        .arg("--json")
        .env_clear()
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .context("corral run")?;
    std::fs::write(manifest_file, &out.stdout)?;
    let m: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let log = m["logs"]["stdout"]["digest"]
        .as_str()
        .and_then(|d| d.strip_prefix("sha256:"))
        .and_then(|d| std::fs::read(p.artifacts.join("sha256").join(d)).ok())
        .unwrap_or_default();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&log[..log.len().min(4096)]),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.code().unwrap_or(-1), m, text))
}

/// `corral verify` of a saved manifest against `store_root`.
fn verify(ctx: &Ctx, manifest_file: &Path, store_root: &Path) -> (bool, String) {
    match Command::new(&ctx.h.corral)
        .arg("verify")
        .arg(manifest_file)
        .arg("--artifacts")
        .arg(store_root)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
    {
        Ok(o) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
        ),
        Err(e) => (false, e.to_string()),
    }
}

fn trust_07(ctx: &mut Ctx) -> Result<Verdict> {
    let mut j = Judge::new();
    let points = ctx.h.crash_points;
    let builder = ctx.h.fixture("repos/wide.sh");
    let wrapper = ctx.dir.join("wide.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/usr/bin/env bash\nexec bash {} \"$1\" \"$2\" {FILES}\n",
            sq(&builder.to_string_lossy())
        ),
    )?;
    let (repo, sha) = ctx.repo(&wrapper.to_string_lossy(), &ctx.dir.join("repo"))?;
    let store_root = ctx.dir.join("artifacts");
    let mut spec =
        RunSpec::new("TRUST-07.py").args([FILES.to_string(), OUT.to_string(), BIG.to_string()]);
    spec.max_output_bytes = 16 << 20;
    spec.max_patch_bytes = 16 << 20;
    spec.disk_bytes = 256 << 20;
    spec.memory_bytes = 512 << 20;
    spec.wall_seconds = HANG.as_secs();
    spec.cpu_seconds = HANG.as_secs();
    // Each point on its own cache home: cold for materialization points, warmed first for
    // the others.
    let prepare = |ctx: &mut Ctx, name: &str, cache_home: &Path| -> Result<Prepared> {
        let mut s = spec.clone();
        s.corral_env = vec![(
            "XDG_CACHE_HOME".to_owned(),
            cache_home.to_string_lossy().into_owned(),
        )];
        ctx.prepare_on(&s, &vars([]), name, &repo, &sha, &store_root)
    };
    let warm_home = ctx.dir.join("cache-warm");
    let warm = prepare(ctx, "warm", &warm_home)?;
    let (code, m, text) = full_run(ctx, &warm, &ctx.dir.join("warm.json"))?;
    j.require(
        code == 0 && m["outcome"] == "candidate_captured" && text.contains("BASE "),
        format!(
            "the run without a kill succeeds (exit {code}, outcome {}): {}",
            m["outcome"],
            truncate(&text, 300)
        ),
    );
    let mut hits = [0usize; 3];
    let mut landed = [0usize; 3];
    let mut examples: [Option<String>; 3] = [None, None, None];
    for i in 0..=points {
        // The last point is the control: the reaper killed first, during materialization.
        let control = i == points;
        let (phase, delay) = if control {
            (Phase::Materialize, Duration::ZERO)
        } else {
            point(i)
        };
        let home = match phase {
            Phase::Materialize => ctx.dir.join(format!("cache-{i}")),
            Phase::Capture | Phase::Store => warm_home.clone(),
        };
        let places = Places {
            cache: ctx.h.cache_in(&home),
            store: store_root.join("sha256"),
        };
        let p = prepare(ctx, &format!("p{i}"), &home)?;
        let k = kill_run(ctx, &p, &places, phase, delay, control)?;
        let what = format!(
            "point {i} ({}, +{} ms{})",
            phase.name(),
            delay.as_millis(),
            if control { ", reaper killed first" } else { "" }
        );
        let left = places.of(k.pid);
        if k.hit && examples[phase as usize].is_none() {
            examples[phase as usize] = Some(format!("{what}: in flight {:?}", k.in_flight));
        }
        if control {
            if !k.finished && !left.is_empty() {
                j.note(format!("control: {what}: the killed corral left {left:?}"));
            }
            j.control(
                !k.finished && !left.is_empty(),
                format!(
                    "{what}: without its reaper, the killed corral left {left:?} (in flight: {:?})",
                    k.in_flight
                ),
            );
        } else {
            let ix = phase as usize;
            landed[ix] += usize::from(!k.finished);
            hits[ix] += usize::from(k.hit);
            for l in &left {
                j.breach(true, format!("{what}: left behind: {l}"));
            }
        }
        for f in places.store_faults() {
            j.breach(true, format!("{what}: {f}"));
        }
        for t in places.torn_entries() {
            j.breach(
                true,
                format!("{what}: base/{t} published without its stamp"),
            );
        }
        for proc in ctx.processes_with_nonce() {
            j.breach(true, format!("{what}: a process of the run stays: {proc}"));
        }
        let dir = ctx.dir.to_string_lossy().into_owned();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        for m in mounts.lines().filter(|l| l.contains(&dir)) {
            j.breach(true, format!("{what}: a mount stays: {m}"));
        }
        // The next run on what is left succeeds, on its intact base.
        let file = ctx.dir.join(format!("next-{i}.json"));
        let (code, m, text) = full_run(ctx, &p, &file)?;
        j.breach(
            code != 0 || m["outcome"] != "candidate_captured",
            format!(
                "{what}: the next run failed (exit {code}, outcome {}): {}",
                m["outcome"],
                truncate(&text, 300)
            ),
        );
        j.breach(
            text.contains(&format!("ESC-{}", ctx.n)),
            format!("{what}: the next run's worker: {}", truncate(&text, 300)),
        );
        if code == 0 {
            let (ok, out) = verify(ctx, &file, &store_root);
            j.breach(
                !ok,
                format!("{what}: corral verify: {}", truncate(&out, 300)),
            );
        }
        if control {
            let still = places.of(k.pid);
            j.breach(
                !still.is_empty(),
                format!("{what}: the next corral did not collect {still:?}"),
            );
        }
    }
    for ph in Phase::ALL {
        let ix = ph as usize;
        j.control(
            hits[ix] > 0,
            format!(
                "{} of the kills during {} found it in flight ({} of them before corral finished)",
                hits[ix],
                ph.name(),
                landed[ix]
            ),
        );
    }
    for e in examples.into_iter().flatten() {
        j.note(e);
    }
    j.note(format!(
        "{points} seeded kill points (materialization, capture, store writes: {hits:?} in \
         flight), each followed by a successful run on what was left"
    ));
    Ok(j.verdict())
}
