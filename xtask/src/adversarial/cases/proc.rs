//! PROC: process-tree isolation and cleanup (corpus §2).
//!
//! Survival is observed from the host: every attack puts the nonce into the command lines of
//! its long-lived processes (`exec -a name-{N}`, argv, code text), and a [`Watcher`] samples
//! `/proc` while corral runs, tracking every process whose command line holds the nonce
//! (corral's own command line does: its documents live under the case folder) and all their
//! descendants. That record is the positive control of the detector (the attack's processes
//! were seen alive, in the states the corpus names), and what must be gone after the run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{describe, started, trivial_run, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{Control, Ctx, Ready, RunObs, RunSpec, sh, truncate};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "PROC-01",
            title: "Background job with nohup and disown",
            guarantee: "no descendant survives the run",
            script: Some(attack!("PROC-01.sh")),
            judge: proc_01,
        },
        Case {
            id: "PROC-02",
            title: "Double fork, setsid, closed fds and ignored signals",
            guarantee: "no descendant survives, even when daemonized in a new session",
            script: Some(attack!("PROC-02.sh")),
            judge: proc_02,
        },
        Case {
            id: "PROC-03",
            title: "Timeout with a TERM-ignoring process, fork storm, zombies, stopped task",
            guarantee: "timeout kills everything",
            script: Some(attack!("PROC-03.sh")),
            judge: proc_03,
        },
        Case {
            id: "PROC-04",
            title: "Cancellation, and the supervisor being killed",
            guarantee: "cancellation kills everything; nothing outlives the supervisor",
            script: Some(attack!("PROC-04.sh")),
            judge: proc_04,
        },
        Case {
            id: "PROC-05",
            title: "Escape through host service managers and terminal multiplexers",
            guarantee: "no process runs outside the sandbox tree",
            script: Some(attack!("PROC-05.py")),
            judge: proc_05,
        },
        Case {
            id: "PROC-06",
            title: "Escaping the cgroup by migration",
            guarantee: "cleanup and resource limits stay attached to every process",
            script: Some(attack!("PROC-06.py")),
            judge: proc_06,
        },
        Case {
            id: "PROC-07",
            title: "Nested PID and user namespaces used to dodge cleanup",
            guarantee: "no descendant survives",
            script: Some(attack!("PROC-07.sh")),
            judge: proc_07,
        },
    ]
}

// ---------------------------------------------------------------------------------------
// Host-side process observation (shared with sig.rs and out.rs).

/// One host process as `/proc` shows it.
#[derive(Clone, Debug)]
pub(super) struct ProcInfo {
    pub pid: u32,
    pub ppid: u32,
    pub state: char,
    pub start: u64,
    pub cmd: String,
}

impl ProcInfo {
    pub fn line(&self) -> String {
        format!(
            "pid {} [{}] {}",
            self.pid,
            self.state,
            truncate(&self.cmd, 100)
        )
    }
}

pub(super) fn proc_info(pid: u32) -> Option<ProcInfo> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let state = f.first()?.chars().next()?;
    let ppid = f.get(1)?.parse().ok()?;
    let start = f.get(19)?.parse().ok()?;
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
    Some(ProcInfo {
        pid,
        ppid,
        state,
        start,
        cmd: cmd.trim_end().to_owned(),
    })
}

/// Every host process but the harness itself.
pub(super) fn scan() -> Vec<ProcInfo> {
    let me = std::process::id();
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Ok(pid) = name.parse::<u32>()
                && pid != me
                && let Some(p) = proc_info(pid)
            {
                v.push(p);
            }
        }
    }
    v
}

/// Host processes whose command line contains `pat`.
pub(super) fn matching(pat: &str) -> Vec<ProcInfo> {
    scan().into_iter().filter(|p| p.cmd.contains(pat)).collect()
}

/// Is this exact process (pid and start time) still there (zombies count)?
pub(super) fn alive(pid: u32, start: u64) -> bool {
    proc_info(pid).is_some_and(|p| p.start == start)
}

/// SIGKILLs every process whose command line contains `pat` (controls' leftovers) and waits
/// up to 3 s for them to go. Returns what it found.
pub(super) fn kill_matching(pat: &str) -> Vec<ProcInfo> {
    let found = matching(pat);
    for p in &found {
        let _ = Command::new("kill")
            .args(["-KILL", &p.pid.to_string()])
            .status();
    }
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3)
        && found
            .iter()
            .any(|p| alive(p.pid, p.start) && p.state != 'Z')
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    found
}

/// What the watcher saw of one process.
#[derive(Clone, Debug, Default)]
pub(super) struct Seen {
    /// Every command line the process showed. A process forked by corral's init shows
    /// corral's own (longer) command line until it execs the worker: keeping only one
    /// reading (the longest, once) lost the worker's own command line whenever the first
    /// sample fell before its `execve`, which made PROC-06's control miss the worker.
    pub cmds: BTreeSet<String>,
    pub states: BTreeSet<char>,
    /// The `/proc/<pid>/cgroup` lines seen (deduplicated).
    pub cgroups: BTreeSet<String>,
    /// A release handshake happened (see [`Watcher::start_with_release`]): a cgroup reading
    /// was taken after the process signalled it had made every attempt, then it was released.
    pub released: bool,
}

#[derive(Debug, Default)]
pub(super) struct WatchLog {
    /// (pid, start time) -> what was seen.
    pub seen: BTreeMap<(u32, u64), Seen>,
}

impl WatchLog {
    /// Tracked processes whose command line contains `pat`.
    pub fn with(&self, pat: &str) -> Vec<(&(u32, u64), &Seen)> {
        self.seen
            .iter()
            .filter(|(_, s)| s.cmds.iter().any(|c| c.contains(pat)))
            .collect()
    }
    /// Tracked processes still on the host now.
    pub fn alive_now(&self) -> Vec<String> {
        self.seen
            .iter()
            .filter(|((pid, start), _)| alive(*pid, *start) && !zombie_reaped(*pid, *start))
            .filter_map(|((pid, _), _)| proc_info(*pid).map(|p| p.line()))
            .collect()
    }
    pub fn any_state(&self, pat: &str, state: char) -> bool {
        self.with(pat)
            .iter()
            .any(|(_, s)| s.states.contains(&state))
    }
}

/// Samples `/proc` every 30 ms on a thread, tracking processes whose command line contains
/// `pat` and all their descendants.
pub(super) struct Watcher {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<WatchLog>>,
}

/// `SIGUSR2`'s bit in `/proc/<pid>/status` `SigIgn`.
const SIGUSR2_BIT: u64 = 1 << (12 - 1);

/// Does the process ignore `SIGUSR2` now (the release handshake's "done, waiting" mark)?
/// Not `SigBlk` of `SIGUSR1`: while a task waits in `sigtimedwait` the kernel takes the
/// awaited signals out of its blocked set, so the mark would vanish exactly while it waits.
fn marked_done(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        })
        .is_some_and(|m| m & SIGUSR2_BIT != 0)
}

impl Watcher {
    pub fn start(pat: &str, cgroups: bool) -> Self {
        Self::start_with_release(pat, cgroups, None)
    }

    /// Like [`Watcher::start`]; in addition, a tracked process whose command line contains
    /// `release` and that ignores `SIGUSR2` (its "done" mark) gets one more cgroup reading and
    /// then `SIGUSR1`. A script that blocks `SIGUSR1`, sets the mark after its last attempt
    /// and waits for `SIGUSR1` (`sigtimedwait`) is so observed after its attempts, however
    /// short it is: a poll alone can miss a process that lives a few tens of milliseconds
    /// (PROC-06, ADR-0060).
    pub fn start_with_release(pat: &str, cgroups: bool, release: Option<&str>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, pat) = (stop.clone(), pat.to_owned());
        let release = release.map(str::to_owned);
        let handle = std::thread::spawn(move || {
            let mut log = WatchLog::default();
            let mut tracked: BTreeSet<u32> = BTreeSet::new();
            loop {
                let last = s.load(Ordering::SeqCst);
                let all = scan();
                // Parents first is not guaranteed: iterate until the set is stable.
                loop {
                    let before = tracked.len();
                    for p in &all {
                        if p.cmd.contains(&pat) || tracked.contains(&p.ppid) {
                            tracked.insert(p.pid);
                        }
                    }
                    if tracked.len() == before {
                        break;
                    }
                }
                for p in all.iter().filter(|p| tracked.contains(&p.pid)) {
                    let e = log.seen.entry((p.pid, p.start)).or_default();
                    if !e.cmds.contains(&p.cmd) {
                        e.cmds.insert(p.cmd.clone());
                    }
                    e.states.insert(p.state);
                    if cgroups
                        && p.state != 'Z'
                        && let Ok(c) = std::fs::read_to_string(format!("/proc/{}/cgroup", p.pid))
                        && still_running(p.pid)
                    {
                        // An exiting task is moved to the root cgroup (cgroup v1's
                        // cgroup_exit): only a reading taken while it still ran counts.
                        e.cgroups.insert(c.trim().replace('\n', " "));
                    }
                    if let Some(r) = &release
                        && !e.released
                        && p.state != 'Z'
                        && p.cmd.contains(r.as_str())
                        && marked_done(p.pid)
                    {
                        // The mark is set after the last attempt, so this reading is too.
                        if let Ok(c) = std::fs::read_to_string(format!("/proc/{}/cgroup", p.pid))
                            && still_running(p.pid)
                        {
                            e.cgroups.insert(c.trim().replace('\n', " "));
                            let _ = Command::new("kill")
                                .args(["-USR1", &p.pid.to_string()])
                                .status();
                            e.released = true;
                        }
                    }
                }
                if last {
                    break;
                }
                std::thread::sleep(Duration::from_millis(30));
            }
            log
        });
        Self {
            stop,
            handle: Some(handle),
        }
    }

    pub fn finish(mut self) -> WatchLog {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Runs the attack through corral with a watcher on the nonce.
pub(super) fn watched_run(
    ctx: &mut Ctx,
    spec: &RunSpec,
    v: &BTreeMap<String, String>,
    cgroups: bool,
) -> Result<(RunObs, WatchLog)> {
    watched_run_releasing(ctx, spec, v, cgroups, None)
}

/// [`watched_run`] with [`Watcher::start_with_release`].
pub(super) fn watched_run_releasing(
    ctx: &mut Ctx,
    spec: &RunSpec,
    v: &BTreeMap<String, String>,
    cgroups: bool,
    release: Option<&str>,
) -> Result<(RunObs, WatchLog)> {
    let w = Watcher::start_with_release(&ctx.n, cgroups, release);
    let run = ctx.run(spec, v);
    let log = w.finish();
    Ok((run?, log))
}

/// Survivors of the run: tracked processes still there right after the run and 1 s later,
/// plus any process with the nonce.
fn survivors(ctx: &Ctx, log: &WatchLog, pause: Duration) -> Vec<String> {
    let mut v = log.alive_now();
    v.extend(matching(&ctx.n).iter().map(ProcInfo::line));
    std::thread::sleep(pause);
    v.extend(log.alive_now());
    v.extend(matching(&ctx.n).iter().map(ProcInfo::line));
    v.sort();
    v.dedup();
    v
}

fn judge_survivors(ctx: &Ctx, log: &WatchLog, j: &mut Judge) {
    for s in survivors(ctx, log, Duration::from_secs(1)) {
        j.breach(true, format!("survived the run: {s}"));
    }
}

/// Registers a cleanup that SIGKILLs anything with the nonce (if a judge bails early).
fn reap_on_cleanup(ctx: &mut Ctx) {
    let n = ctx.n.clone();
    ctx.on_cleanup(move || {
        kill_matching(&n);
    });
}

fn file_size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------
// PROC-01

fn proc_01(ctx: &mut Ctx) -> Result<Verdict> {
    reap_on_cleanup(ctx);
    let spec = RunSpec::new("PROC-01.sh");
    let v = vars([]);
    let mut j = Judge::new();
    let trivial = trivial_run(ctx, &spec, &mut j)?;
    let (run, log) = watched_run(ctx, &spec, &v, false)?;
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    let pat = format!(".alive-{}", ctx.n);
    j.control(
        !log.with(&pat).is_empty(),
        "the host saw the sandboxed background job alive during the run",
    );
    // The worker exits after 1 s; waiting for the job it left would last the wall budget.
    let bound = Duration::from_secs(1) + trivial.grace;
    j.breach(
        run.elapsed > bound,
        format!(
            "corral returned {:.1} s after start (the worker exits after 1 s; bound {:.1} s)",
            run.elapsed.as_secs_f64(),
            bound.as_secs_f64()
        ),
    );
    judge_survivors(ctx, &log, &mut j);
    j.note(describe(&run));
    j.note(format!(
        "changed paths: {:?} (the job's file lives in corral's private workspace, gone after the run)",
        run.changed_paths()
    ));
    // Outside the sandbox the same job outlives the script and keeps appending.
    let ctl = ctx.control(&spec, &v, &Control::default())?;
    let file = ctl.ws.join("src").join(format!(".alive-{}", ctx.n));
    let s1 = file_size(&file);
    std::thread::sleep(Duration::from_millis(600));
    let s2 = file_size(&file);
    let left = kill_matching(&pat);
    j.control(
        !left.is_empty() && s2 > s1,
        format!(
            "outside the sandbox the job survived the script ({} process(es)) and its file grew {s1} -> {s2} bytes",
            left.len()
        ),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// PROC-02

fn proc_02(ctx: &mut Ctx) -> Result<Verdict> {
    reap_on_cleanup(ctx);
    let spec = RunSpec::new("PROC-02.sh");
    let v = vars([]);
    let mut j = Judge::new();
    let trivial = trivial_run(ctx, &spec, &mut j)?;
    let (run, log) = watched_run(ctx, &spec, &v, false)?;
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    let daemon = format!(".daemon-{}", ctx.n);
    let sleeper = format!("sleep100000-{}", ctx.n);
    j.control(
        !log.with(&daemon).is_empty(),
        "the host saw the sandboxed daemon alive during the run",
    );
    j.control(
        !log.with(&sleeper).is_empty(),
        "the host saw the sandboxed setsid sleeper alive during the run",
    );
    // The worker starts a daemon (Python) and exits after 1 s more; waiting for the daemon
    // would last the wall budget.
    let bound = Duration::from_secs(2) + trivial.grace;
    j.breach(
        run.elapsed > bound,
        format!(
            "corral returned after {:.1} s (bound {:.1} s)",
            run.elapsed.as_secs_f64(),
            bound.as_secs_f64()
        ),
    );
    judge_survivors(ctx, &log, &mut j);
    j.note(describe(&run));
    let ctl = ctx.control(&spec, &v, &Control::default())?;
    let file = ctl.ws.join("src").join(&daemon);
    let s1 = file_size(&file);
    std::thread::sleep(Duration::from_millis(600));
    let s2 = file_size(&file);
    let d = kill_matching(&daemon);
    let s = kill_matching(&sleeper);
    j.control(
        !d.is_empty() && s2 > s1,
        format!("outside the sandbox the daemon survived and wrote on ({s1} -> {s2} bytes)"),
    );
    j.control(
        !s.is_empty(),
        "outside the sandbox the setsid sleeper survived",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// PROC-03

fn proc_03(ctx: &mut Ctx) -> Result<Verdict> {
    reap_on_cleanup(ctx);
    let mut spec = RunSpec::new("PROC-03.sh");
    spec.wall_seconds = 3;
    spec.cpu_seconds = 30;
    let mut j = Judge::new();
    let trivial = trivial_run(ctx, &spec, &mut j)?;
    let (run, log) = watched_run(ctx, &spec, &vars([]), false)?;
    let n = ctx.n.clone();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    j.breach(
        run.termination() != "wall_timeout",
        format!("termination is {:?}, not wall_timeout", run.termination()),
    );
    // Wall 3 s + the kill/collect grace this host needs: a worker that outlived its wall
    // would exceed it.
    let bound = Duration::from_secs(3) + trivial.grace;
    j.breach(
        run.elapsed > bound,
        format!(
            "corral returned after {:.1} s (bound {:.1} s: the trivial run took {:.1} s)",
            run.elapsed.as_secs_f64(),
            bound.as_secs_f64(),
            trivial.run.elapsed.as_secs_f64()
        ),
    );
    judge_survivors(ctx, &log, &mut j);
    j.control(
        log.any_state(&format!("stopped-{n}"), 'T'),
        "the host saw the sandbox's stopped task (state T) during the run",
    );
    j.control(
        !log.with(&format!("sleep1000-{n}")).is_empty(),
        "the host saw the fork storm's sleepers during the run",
    );
    let zombies = log
        .seen
        .values()
        .filter(|s| s.states.contains(&'Z'))
        .count();
    j.note(format!(
        "{} sandbox processes seen during the run, {zombies} of them as zombies",
        log.seen.len()
    ));
    j.note(describe(&run));
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// PROC-04

/// Cgroup directories named `corral-<pid>-*` for these supervisor pids, and the tasks inside.
fn groups_of(pids: &[u32]) -> Vec<(PathBuf, String)> {
    let prefixes: Vec<String> = pids.iter().map(|p| format!("corral-{p}-")).collect();
    let mut v = Vec::new();
    crate::adversarial::harness::walk(Path::new("/sys/fs/cgroup"), 6, &mut |p| {
        if let Some(name) = p.file_name().map(|n| n.to_string_lossy().into_owned())
            && prefixes.iter().any(|pre| name.starts_with(pre.as_str()))
            && p.is_dir()
        {
            let tasks = std::fs::read_to_string(p.join("cgroup.procs"))
                .unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(",");
            v.push((p.to_path_buf(), tasks));
        }
    });
    v
}

/// Both PROC-04 sleepers are alive on the host.
fn both_sleepers(n: &str) -> Ready {
    let (a, b) = (format!("sleep1000-a-{n}"), format!("sleep1000-b-{n}"));
    Ready(Arc::new(move || {
        let all = scan();
        all.iter().any(|p| p.cmd.contains(&a)) && all.iter().any(|p| p.cmd.contains(&b))
    }))
}

fn proc_04(ctx: &mut Ctx) -> Result<Verdict> {
    reap_on_cleanup(ctx);
    let n = ctx.n.clone();
    let mut j = Judge::new();
    let trivial = trivial_run(ctx, &RunSpec::new("PROC-04.sh"), &mut j)?;
    // (a) SIGTERM to corral 0.5 s after the host sees both sleepers: cancelled, and
    // everything gone. The clock starts when the sleepers are seen, not when corral starts:
    // a slow host may take longer than any fixed delay to start the worker.
    let mut spec = RunSpec::new("PROC-04.sh");
    spec.wall_seconds = 30;
    spec.cancel_after = Some(Duration::from_millis(500));
    spec.ready = Some(both_sleepers(&n));
    let (run, log) = watched_run(ctx, &spec, &vars([]), false)?;
    j.require(
        started(&run),
        format!("(a) the worker ran ({})", describe(&run)),
    );
    j.control(
        log.with(&format!("sleep1000-a-{n}")).len() + log.with(&format!("sleep1000-b-{n}")).len()
            == 2,
        "(a) the host saw both sandboxed sleepers during the run",
    );
    j.breach(
        run.termination() != "cancelled",
        format!("(a) termination {:?}, not cancelled", run.termination()),
    );
    let after_term = run
        .signalled_at
        .map(|t| run.elapsed.saturating_sub(t).as_secs_f64());
    j.require(
        after_term.is_some(),
        format!(
            "(a) the harness sent SIGTERM (sleepers seen at {:?})",
            run.ready_at
        ),
    );
    // Cancelling is killing and collecting: the grace a trivial run needs here.
    j.breach(
        after_term.is_some_and(|t| t > trivial.grace.as_secs_f64()),
        format!(
            "(a) corral returned {after_term:.1?} s after SIGTERM (bound {:.1} s: the trivial run took {:.1} s)",
            trivial.grace.as_secs_f64(),
            trivial.run.elapsed.as_secs_f64()
        ),
    );
    judge_survivors(ctx, &log, &mut j);
    j.note(format!("(a) {}", describe(&run)));

    // (b) SIGKILL to corral 0.5 s after the host sees both sleepers: every sandbox process
    // gone within the grace (the kernel's teardown is as slow as the host).
    let mut spec = RunSpec::new("PROC-04.sh");
    spec.wall_seconds = 30;
    spec.kill_after = Some(Duration::from_millis(500));
    spec.ready = Some(both_sleepers(&n));
    let (run, log) = watched_run(ctx, &spec, &vars([]), false)?;
    let killed_at = Instant::now();
    let sup = run.supervisor_pid;
    j.require(
        run.exit == -1 && !run.has_manifest(),
        format!("(b) corral died by SIGKILL (exit {})", run.exit),
    );
    j.control(
        log.with(&format!("sleep1000-a-{n}")).len() + log.with(&format!("sleep1000-b-{n}")).len()
            == 2,
        "(b) the host saw both sandboxed sleepers before corral was killed",
    );
    let mut left = log.alive_now();
    while !left.is_empty() && killed_at.elapsed() < trivial.grace {
        std::thread::sleep(Duration::from_millis(20));
        left = log.alive_now();
    }
    for s in &left {
        j.breach(
            true,
            format!(
                "(b) still there {:.1} s after corral was SIGKILLed: {s}",
                trivial.grace.as_secs_f64()
            ),
        );
    }
    let tracked = log.seen.len();
    j.note(format!(
        "(b) {tracked} processes of corral's tree tracked; all gone {:.2} s after the SIGKILL",
        killed_at.elapsed().as_secs_f64()
    ));
    // Groups a SIGKILLed supervisor cannot remove: they must be empty; corral's next start
    // collects them (stale owner pid).
    let groups = groups_of(&[sup]);
    for (g, tasks) in &groups {
        j.breach(
            !tasks.is_empty(),
            format!("(b) group {} still holds tasks {tasks}", g.display()),
        );
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let dir = ctx.dir.to_string_lossy().into_owned();
    for m in mounts.lines().filter(|l| l.contains(&dir)) {
        j.breach(true, format!("(b) mount left on the host: {m}"));
    }
    let (_, status) = sh(&format!(
        "git -C '{}' status --porcelain --ignored 2>&1",
        run.repo.display()
    ));
    j.breach(
        !status.trim().is_empty(),
        format!(
            "(b) the host repository changed: {}",
            truncate(status.trim(), 200)
        ),
    );
    let next = ctx.run(&RunSpec::new("PROC-04.sh").args(["--trivial"]), &vars([]))?;
    let after = groups_of(&[sup]);
    j.breach(
        !after.is_empty(),
        format!(
            "(b) the killed supervisor's groups were not collected by the next corral run: {:?}",
            after
                .iter()
                .map(|g| g.0.display().to_string())
                .collect::<Vec<_>>()
        ),
    );
    j.note(format!(
        "(b) {} empty group(s) of the SIGKILLed supervisor {sup} collected by the next run ({})",
        groups.len(),
        describe(&next)
    ));
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// PROC-05

fn proc_05(ctx: &mut Ctx) -> Result<Verdict> {
    reap_on_cleanup(ctx);
    let n = ctx.n.clone();
    // The host's bus stand-in under /run/user/0 (no user manager or bus runs on this host).
    let user0 = Path::new("/run/user/0");
    let created_user0 = !user0.exists();
    let bus_dir = user0.join(format!("corral-adv-{n}"));
    std::fs::create_dir_all(&bus_dir)?;
    let _ = sh(&format!(
        "chmod 755 '{}' '{}'",
        user0.display(),
        bus_dir.display()
    ));
    {
        let (d, u) = (bus_dir.clone(), user0.to_path_buf());
        ctx.on_cleanup(move || {
            let _ = std::fs::remove_dir_all(&d);
            if created_user0 {
                let _ = std::fs::remove_dir(&u);
            }
        });
    }
    let bus = bus_dir.join("bus");
    let tally = ctx.unix_listener(&bus.to_string_lossy())?;
    // A real tmux server on the host, as uid 65534, socket in the case folder.
    let tdir = ctx.dir.join("tmux");
    std::fs::create_dir_all(&tdir)?;
    let _ = sh(&format!("chown 65534:65534 '{}'", tdir.display()));
    let sock = tdir.join("sock");
    let tmux = |args: &str| {
        sh(&format!(
            "cd / && env -i PATH=/usr/bin:/bin HOME=/ SHELL=/bin/sh setpriv --reuid=65534 --regid=65534 \
             --clear-groups tmux -S '{}' {args} 2>&1",
            sock.display()
        ))
    };
    let (ok, out) =
        tmux("new-session -d -s adv 'sleep 600' \\; set-option -g default-shell /bin/sh");
    {
        let s = sock.clone();
        ctx.on_cleanup(move || {
            let _ = sh(&format!(
                "setpriv --reuid=65534 --regid=65534 --clear-groups tmux -S '{}' kill-server",
                s.display()
            ));
        });
    }
    let touched_in = tdir.join("touched-by-sandbox");
    let touched_ctl = tdir.join("touched-by-control");
    let spec = RunSpec::new("PROC-05.py").args(["{BUS}", "{TMUX}", "{TOUCH}"]);
    let mut j = Judge::new();
    j.require(ok, format!("the host tmux server started: {}", out.trim()));
    let run = ctx.run(
        &spec,
        &vars([
            ("BUS", bus.to_string_lossy().into_owned()),
            ("TMUX", sock.to_string_lossy().into_owned()),
            ("TOUCH", touched_in.to_string_lossy().into_owned()),
        ]),
    )?;
    std::thread::sleep(Duration::from_millis(300));
    let inside = tally.hits();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    for e in ctx.escapes(&run.output()) {
        j.breach(true, format!("inside the sandbox: {e}"));
    }
    j.breach(
        inside > 0,
        format!("the host bus stand-in accepted {inside} connection(s) from the sandbox"),
    );
    j.breach(
        touched_in.exists(),
        "the host tmux server ran the sandbox's command",
    );
    let ctl = ctx.control(
        &spec,
        &vars([
            ("BUS", bus.to_string_lossy().into_owned()),
            ("TMUX", sock.to_string_lossy().into_owned()),
            ("TOUCH", touched_ctl.to_string_lossy().into_owned()),
        ]),
        &Control::default(),
    )?;
    let t = Instant::now();
    // A bound on a hang, not a pace: the loop ends as soon as the file is there.
    while !touched_ctl.exists() && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(30));
    }
    j.control(
        tally.hits() > inside,
        "outside the sandbox (uid 65534) the bus stand-in accepted the connection",
    );
    j.control(
        touched_ctl.exists(),
        "outside the sandbox (uid 65534) the host tmux server ran the command",
    );
    let _ = tmux("kill-server");
    kill_matching(&sock.to_string_lossy());
    j.note(
        "no systemd user manager, D-Bus, at or cron daemon runs on this host: the listening \
         socket under /run/user/0 and a host tmux server stand in for them",
    );
    let _ = ctl;
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// PROC-06

fn proc_06(ctx: &mut Ctx) -> Result<Verdict> {
    reap_on_cleanup(ctx);
    let n = ctx.n.clone();
    let spec = RunSpec::new("PROC-06.py").args(["{ROOTS}", "{RELEASE}"]);
    let (run, log) = watched_run_releasing(
        ctx,
        &spec,
        &vars([
            ("ROOTS", "/sys/fs/cgroup".to_owned()),
            ("RELEASE", "release".to_owned()),
        ]),
        true,
        Some("PROC-06.py"),
    )?;
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    for e in ctx.escapes(&run.output()) {
        j.breach(true, format!("inside the sandbox: {e}"));
    }
    // Seen from the host, every sandbox process stays in corral's run group.
    let workers = log.with("PROC-06.py");
    j.control(
        workers
            .iter()
            .any(|(_, s)| s.released && !s.cgroups.is_empty()),
        "the host read the sandboxed worker's cgroup after its last attempt (release handshake)",
    );
    for (k, s) in &workers {
        for c in &s.cgroups {
            j.breach(
                !in_run_group(c),
                format!(
                    "sandbox pid {} seen outside corral's group: {}",
                    k.0,
                    truncate(c, 200)
                ),
            );
        }
    }
    judge_survivors(ctx, &log, &mut j);
    // Control: the same writes as root outside, confined to decoy groups the harness owns
    // (on pure cgroup v2, beneath the harness's own cgroup).
    let decoys = match harness_v2_cgroup() {
        Some(own) => vec![own.join(format!("corral-adv-{n}"))],
        None => vec![
            PathBuf::from(format!("/sys/fs/cgroup/pids/corral-adv-{n}")),
            PathBuf::from(format!("/sys/fs/cgroup/unified/corral-adv-{n}")),
        ],
    };
    let mut made = Vec::new();
    for d in &decoys {
        if std::fs::create_dir(d).is_ok() {
            made.push(d.clone());
        }
    }
    {
        let made = made.clone();
        ctx.on_cleanup(move || {
            for d in &made {
                let _ = std::fs::remove_dir(d);
            }
        });
    }
    let roots: Vec<String> = made.iter().map(|d| d.display().to_string()).collect();
    let ctl = ctx.control(
        &spec,
        &vars([("ROOTS", roots.join(",")), ("RELEASE", "-".to_owned())]),
        &Control {
            as_root: true,
            own_pidns: true,
            ..Control::default()
        },
    )?;
    let ctl_esc = ctx.escapes(&ctl.output());
    j.control(
        ctl_esc.iter().any(|e| e.contains("MOVED into")),
        "outside the sandbox (root) the write moved the process into the decoy group",
    );
    for d in &made {
        // The control has exited: its groups are empty again.
        let _ = std::fs::remove_dir(d);
    }
    j.note(format!(
        "control: {}",
        ctl_esc
            .iter()
            .map(|e| truncate(e, 120))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    j.note(truncate(run.out().lines().next().unwrap_or_default(), 200));
    Ok(j.verdict())
}

/// Whether a `/proc/<pid>/cgroup` reading (lines joined by spaces) puts the task in one of
/// corral's run groups, `corral-<pid>-<n>` (its descendants included): on cgroup v1 the
/// `pids` hierarchy's line, on pure cgroup v2 the unified `0::` line. corral's own scope or
/// leaf (`corral-scope-...`, `corral-supervisor-...`) is not a run group.
fn in_run_group(reading: &str) -> bool {
    let lines: Vec<&str> = reading.split(' ').collect();
    let line = lines
        .iter()
        .find(|l| l.contains(":pids:"))
        .or_else(|| lines.iter().find(|l| l.starts_with("0::")))
        .copied()
        .unwrap_or_default();
    let path = line.splitn(3, ':').nth(2).unwrap_or_default();
    path.split('/').any(|part| {
        part.strip_prefix("corral-").is_some_and(|rest| {
            let ids: Vec<&str> = rest.split('-').collect();
            ids.len() == 2
                && ids
                    .iter()
                    .all(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()))
        })
    })
}

/// The harness's own cgroup on a pure cgroup v2 host (`None` on v1 or hybrid hosts).
fn harness_v2_cgroup() -> Option<PathBuf> {
    if !Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        return None;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/')))
}

// ---------------------------------------------------------------------------------------
// PROC-07

fn proc_07(ctx: &mut Ctx) -> Result<Verdict> {
    reap_on_cleanup(ctx);
    let n = ctx.n.clone();
    let spec = RunSpec::new("PROC-07.sh");
    let (run, log) = watched_run(ctx, &spec, &vars([]), false)?;
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    judge_survivors(ctx, &log, &mut j);
    let out = run.output();
    let nested = out.contains("nested");
    j.note(format!(
        "inside: nested user+pid namespace {}; {}",
        if nested { "allowed" } else { "refused" },
        truncate(
            &out.lines()
                .filter(|l| l.contains("unshare"))
                .collect::<Vec<_>>()
                .join("; "),
            200
        )
    ));
    j.note(describe(&run));
    // Outside, as root (the bare pid namespace needs it), the pid-namespace sleeper outlives
    // the script; the nested one dies with its namespace's init either way.
    let ctl = ctx.control(
        &spec,
        &vars([]),
        &Control {
            as_root: true,
            ..Control::default()
        },
    )?;
    let p = kill_matching(&format!("sleep100000-p-{n}"));
    let u = kill_matching(&format!("sleep100000-u-{n}"));
    j.control(
        !p.is_empty(),
        "outside the sandbox the sleeper in its own pid namespace survived the script",
    );
    j.note(format!(
        "control: {} pid-ns and {} nested-userns sleeper(s) survived outside; {}",
        p.len(),
        u.len(),
        truncate(ctl.output().trim(), 160)
    ));
    Ok(j.verdict())
}

/// The task exists, is neither a zombie nor dead, and is not exiting (read after its cgroup
/// file). An exiting task is moved to the root cgroup early in `do_exit` (cgroup v1's
/// `cgroup_exit`), before it turns zombie, but after `PF_EXITING` (0x4) is set in its flags.
fn still_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let (_, rest) = s.rsplit_once(')')?;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let state = f.first()?.chars().next()?;
            let flags: u64 = f.get(6)?.parse().ok()?;
            Some(!matches!(state, 'Z' | 'X' | 'x') && flags & 0x4 == 0)
        })
        .unwrap_or(false)
}

/// A zombie runs no code; one left by an exited process is reparented to the host's init,
/// which reaps it when it gets to it (this VM's init does so lazily under load). It counts
/// as a survivor only if it is still there after 2 s.
fn zombie_reaped(pid: u32, start: u64) -> bool {
    let t = Instant::now();
    loop {
        match proc_info(pid) {
            Some(p) if p.start == start && p.state == 'Z' => {}
            Some(p) if p.start == start => return false,
            _ => return true,
        }
        if t.elapsed() > Duration::from_secs(2) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::in_run_group;

    #[test]
    fn run_groups_are_recognised_on_v1_and_v2() {
        assert!(in_run_group("12:pids:/corral-77-0 0::/"));
        assert!(in_run_group(
            "0::/system.slice/corral-scope-9-1.scope/corral-9-0/init"
        ));
        assert!(!in_run_group("0::/system.slice/corral-scope-9-1.scope"));
        assert!(!in_run_group(
            "0::/system.slice/corral-vm.service/corral-supervisor-9"
        ));
        assert!(!in_run_group("12:pids:/ 0::/corral-1-2"));
        assert!(!in_run_group("0::/corral-adv-x"));
    }
}
