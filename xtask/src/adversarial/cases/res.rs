//! RES: resource limits (corpus §3): CPU, memory, writable disk, processes.
//!
//! Every case runs the attack through the real `corral run` with small budgets and judges
//! from outside: the manifest's `execution` (termination, `cpu_ms`, `peak_memory_bytes`,
//! `wall_ms`), that corral itself returned a manifest, what the attack reported (the bytes it
//! managed to write, the threads it managed to start), the run's own cgroup sampled while it
//! ran, and the host (`/proc/meminfo`, `df`, `/dev/shm`, `/proc/sysvipc`, leftover files).
//! Each detector is proven live by a positive control: the same attack outside the sandbox as
//! uid 65534 (sizes capped just above the sandbox's limit, files removed afterwards), or as
//! root on a throwaway process, or the same attack inside with a larger budget.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{describe, esc_breaches, started, trivial_run, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{Control, Ctx, RunObs, RunSpec, walk};

const MIB: u64 = 1 << 20;
/// Small budgets keep the cases fast.
const MEM: u64 = 128 * MIB;
const DISK: u64 = 32 * MIB;
/// How long corral may take beyond the wall budget to kill, capture and write the manifest.
const GRACE: Duration = Duration::from_secs(30);

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "RES-CPU-01",
            title: "Busy loops on all cores, a fork chain, and RT priority",
            guarantee: "CPU limit: the cgroup quota and cpu_seconds hold; no RT or negative nice",
            script: Some(attack!("RES-CPU-01.sh")),
            judge: res_cpu_01,
        },
        Case {
            id: "RES-MEM-01",
            title: "Anonymous memory balloon and oom_score_adj -1000",
            guarantee: "memory limit: OOM-killed inside the run's cgroup, corral reports it",
            script: Some(attack!("RES-MEM-01.py")),
            judge: res_mem_01,
        },
        Case {
            id: "RES-MEM-02",
            title: "tmpfs and memfd balloons charged outside the limit",
            guarantee: "memory and disk limits cover /dev/shm, /tmp, memfd; nothing outlives the run",
            script: Some(attack!("RES-MEM-02.py")),
            judge: res_mem_02,
        },
        Case {
            id: "RES-MEM-03",
            title: "SysV and POSIX IPC that persist after the run",
            guarantee: "IPC objects die with the sandbox's IPC namespace; memory returns",
            script: Some(attack!("RES-MEM-03.py")),
            judge: res_mem_03,
        },
        Case {
            id: "RES-DISK-01",
            title: "Filling the workspace and the holes of a sparse file",
            guarantee: "writable-disk limit: ENOSPC at disk_bytes; corral still writes its result",
            script: Some(attack!("RES-DISK-01.py")),
            judge: res_disk_01,
        },
        Case {
            id: "RES-DISK-02",
            title: "Writes outside the workspace",
            guarantee: "one shared disk cap covers every writable place; nothing persists on the host",
            script: Some(attack!("RES-DISK-02.py")),
            judge: res_disk_02,
        },
        Case {
            id: "RES-DISK-03",
            title: "Unlinked open file to defeat du-based accounting",
            guarantee: "writable-disk limit enforced by a size-capped mount, not by du",
            script: Some(attack!("RES-DISK-03.py")),
            judge: res_disk_03,
        },
        Case {
            id: "RES-DISK-04",
            title: "Running out of inodes, and a 20000-level tree",
            guarantee: "inode cap; capture stays bounded and never skips a deep entry",
            script: Some(attack!("RES-DISK-04.py")),
            judge: res_disk_04,
        },
        Case {
            id: "RES-PID-01",
            title: "Fork bomb and thread bomb",
            guarantee: "process limit: pids.max holds; the host and corral stay responsive",
            script: Some(attack!("RES-PID-01.py")),
            judge: res_pid_01,
        },
        Case {
            id: "RES-PID-02",
            title: "Exhausting per-user counters the host user shares",
            guarantee: "resource limits do not spill onto a host user or another sandbox",
            script: Some(attack!("RES-PID-02.py")),
            judge: res_pid_02,
        },
    ]
}

// ---------------------------------------------------------------------------------------
// Attack scripts
// ---------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------
// Outside observations
// ---------------------------------------------------------------------------------------

/// A `/proc/meminfo` field in KiB.
fn meminfo(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(&format!("{key}:")))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Free bytes of the file systems of `/tmp` and `/` (`df -B1`).
fn df_avail() -> [u64; 2] {
    let out = Command::new("df")
        .args(["-B1", "--output=avail", "/tmp", "/"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let v: Vec<u64> = out
        .lines()
        .skip(1)
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    [
        v.first().copied().unwrap_or(0),
        v.get(1).copied().unwrap_or(0),
    ]
}

/// The host's memory-backed and disk state, taken before and after a run.
#[derive(Clone, Copy, Debug)]
struct HostMem {
    avail_kib: u64,
    shmem_kib: u64,
}

fn host_mem() -> HostMem {
    HostMem {
        avail_kib: meminfo("MemAvailable"),
        shmem_kib: meminfo("Shmem"),
    }
}

/// Waits for Shmem to settle back near `base`; returns the last reading (KiB). 30 s is a
/// bound on a leak, not a pace: the loop ends as soon as it settles.
fn shmem_settled(base: u64, slack_kib: u64) -> u64 {
    let t = Instant::now();
    loop {
        let now = meminfo("Shmem");
        if now <= base + slack_kib || t.elapsed() > Duration::from_secs(30) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for MemAvailable to come back within `slack_kib` of `base` (30 s bounds a leak; the
/// loop ends as soon as it is back).
fn avail_settled(base: u64, slack_kib: u64) -> u64 {
    let t = Instant::now();
    let mut best = 0;
    loop {
        best = best.max(meminfo("MemAvailable"));
        if best + slack_kib >= base || t.elapsed() > Duration::from_secs(30) {
            return best;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The path of this process's own group of a v1 controller (corral creates its groups
/// beneath its own, which it inherits from us).
fn own_cgroup(ctrl: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for l in text.lines() {
        let mut f = l.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        if ctrls.split(',').any(|c| c == ctrl) {
            let base = Path::new("/sys/fs/cgroup").join(ctrls);
            return Some(base.join(path.trim_start_matches('/')));
        }
    }
    None
}

/// The `corral-<pid>-<n>` group of a corral run the harness started (its pid's parent is
/// us), beneath `parent`.
fn our_run_group(parent: &Path) -> Option<PathBuf> {
    let me = std::process::id().to_string();
    for e in std::fs::read_dir(parent).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("corral-") else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // pid (comm) state ppid ...
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .unwrap_or("");
        if ppid == me {
            return Some(e.path());
        }
    }
    None
}

fn read_u64(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// What the monitor saw while a run went on.
#[derive(Clone, Debug, Default)]
struct Samples {
    samples: usize,
    avail_min_kib: u64,
    shmem_max_kib: u64,
    df_min: [u64; 2],
    /// The run's pids group was found (v1 `pids` controller).
    pids_seen: bool,
    pids_current_max: u64,
    pids_max: u64,
    pids_events_max: u64,
    /// Host probes: `sh -c true` as root (and as uid 65534 when asked).
    fork_runs: usize,
    fork_failures: Vec<String>,
    fork_slowest: Duration,
    /// uid 65534 probes (inotify_init1 and `sh -c true` through setpriv).
    nobody_runs: usize,
    nobody_failures: Vec<String>,
    /// The longest gap of a 10 ms sleep loop (host latency).
    gap_max: Duration,
    /// The run's `cpuacct.usage` (ns) as sampled: (time since the monitor started, value).
    cpu_series: Vec<(Duration, u64)>,
}

#[derive(Clone, Copy, Default)]
struct Probes {
    /// Run `sh -c true` every 150 ms.
    fork: bool,
    /// Run inotify_init1 and `sh -c true` as these ids every 200 ms: uid 65534's, or in
    /// rootless mode the invoking user's.
    nobody: Option<(u32, u32)>,
}

/// Samples the host and the run's cgroup every 10 ms on its own thread while a run goes on.
struct Monitor {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Samples>>,
}

impl Monitor {
    fn start(probes: Probes) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let pids_parent = own_cgroup("pids");
            let cpu_parent = own_cgroup("cpuacct");
            let t0 = Instant::now();
            let mut cpu_group: Option<PathBuf> = None;
            let mut s = Samples {
                avail_min_kib: u64::MAX,
                df_min: [u64::MAX; 2],
                ..Samples::default()
            };
            let mut last = Instant::now();
            let mut next_df = Instant::now();
            let mut next_fork = Instant::now();
            let mut next_nobody = Instant::now();
            let mut group: Option<PathBuf> = None;
            while !flag.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
                let gap = last.elapsed();
                s.gap_max = s.gap_max.max(gap);
                s.samples += 1;
                let m = host_mem();
                s.avail_min_kib = s.avail_min_kib.min(m.avail_kib);
                s.shmem_max_kib = s.shmem_max_kib.max(m.shmem_kib);
                if Instant::now() >= next_df {
                    let d = df_avail();
                    s.df_min = [s.df_min[0].min(d[0]), s.df_min[1].min(d[1])];
                    next_df = Instant::now() + Duration::from_millis(200);
                }
                if group.is_none() {
                    group = pids_parent.as_deref().and_then(our_run_group);
                }
                if cpu_group.is_none() {
                    cpu_group = cpu_parent.as_deref().and_then(our_run_group);
                }
                if let Some(g) = &cpu_group {
                    match read_u64(&g.join("cpuacct.usage")) {
                        Some(u) => s.cpu_series.push((t0.elapsed(), u)),
                        None => cpu_group = None,
                    }
                }
                if let Some(g) = &group {
                    if let Some(cur) = read_u64(&g.join("pids.current")) {
                        s.pids_seen = true;
                        s.pids_current_max = s.pids_current_max.max(cur);
                    }
                    if let Some(max) = read_u64(&g.join("pids.max")) {
                        s.pids_max = max;
                    }
                    let ev = std::fs::read_to_string(g.join("pids.events")).unwrap_or_default();
                    if let Some(v) = ev
                        .lines()
                        .find_map(|l| l.strip_prefix("max "))
                        .and_then(|v| v.trim().parse::<u64>().ok())
                    {
                        s.pids_events_max = s.pids_events_max.max(v);
                    }
                    if !g.exists() {
                        group = None;
                    }
                }
                if probes.fork && Instant::now() >= next_fork {
                    let t = Instant::now();
                    let ok = Command::new("sh")
                        .args(["-c", "true"])
                        .stdin(Stdio::null())
                        .status()
                        .map(|st| st.success());
                    s.fork_runs += 1;
                    s.fork_slowest = s.fork_slowest.max(t.elapsed());
                    if !matches!(ok, Ok(true)) {
                        s.fork_failures.push(format!("sh -c true as root: {ok:?}"));
                    }
                    next_fork = Instant::now() + Duration::from_millis(150);
                }
                if let Some(ids) = probes.nobody.filter(|_| Instant::now() >= next_nobody) {
                    let prefix = crate::adversarial::harness::as_ids(ids);
                    s.nobody_runs += 1;
                    for (what, argv) in [
                        (
                            "inotify_init1",
                            vec![
                                "/usr/bin/python3",
                                "-c",
                                "import ctypes;r=ctypes.CDLL(None).inotify_init1(0);print(r);\
                                 raise SystemExit(0 if r>=0 else 1)",
                            ],
                        ),
                        ("sh -c true", vec!["sh", "-c", "true"]),
                    ] {
                        let out = Command::new(&prefix[0])
                            .env_clear()
                            .env("PATH", "/usr/bin:/bin")
                            .args(&prefix[1..])
                            .args(&argv)
                            .stdin(Stdio::null())
                            .output();
                        match out {
                            Ok(o) if o.status.success() => {}
                            Ok(o) => s.nobody_failures.push(format!(
                                "{what} as uid {}: {} {}",
                                ids.0,
                                o.status,
                                String::from_utf8_lossy(&o.stderr).trim()
                            )),
                            Err(e) => s
                                .nobody_failures
                                .push(format!("{what} as uid {}: {e}", ids.0)),
                        }
                    }
                    next_nobody = Instant::now() + Duration::from_millis(200);
                }
                last = Instant::now();
            }
            s
        });
        Self {
            stop,
            handle: Some(handle),
        }
    }

    fn stop(mut self) -> Samples {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// `execution.<key>` of the manifest as a number.
fn exec_u64(run: &RunObs, key: &str) -> u64 {
    run.manifest["execution"][key].as_u64().unwrap_or(0)
}

/// The whitespace-split fields of every output line that starts with `tag `.
fn tagged(out: &str, tag: &str) -> Vec<Vec<String>> {
    let prefix = format!("{tag} ");
    out.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|r| r.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// Field `i` of the first `tag` line, as a number.
fn tagged_u64(out: &str, tag: &str, i: usize) -> Option<u64> {
    tagged(out, tag)
        .first()
        .and_then(|f| f.get(i))
        .and_then(|v| v.parse().ok())
}

/// The run returned a verdict: corral was not killed and wrote its manifest within its wall
/// budget plus grace. For resource cases that is part of the guarantee (a breach if not).
fn corral_survived(run: &RunObs, wall: u64, j: &mut Judge) {
    j.breach(
        !run.has_manifest(),
        format!("corral returned no manifest ({})", describe(run)),
    );
    j.breach(
        run.exit < 0,
        format!("corral itself died by a signal ({})", describe(run)),
    );
    j.breach(
        run.elapsed > Duration::from_secs(wall) + GRACE,
        format!(
            "corral took {:.1} s, more than wall {wall} s + {} s grace",
            run.elapsed.as_secs_f64(),
            GRACE.as_secs()
        ),
    );
}

/// Files named `name` on the host where a write outside the workspace could land
/// (depth-limited walk; `/` itself one level).
fn host_files_named(name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for (top, depth) in [
        ("/tmp", 6),
        ("/var/tmp", 4),
        ("/dev/shm", 3),
        ("/run", 4),
        ("/var/cache", 3),
        ("/root", 3),
        ("/home", 4),
        ("/workspace", 3),
        ("/", 1),
    ] {
        walk(Path::new(top), depth, &mut |p| {
            if p.file_name().is_some_and(|n| n == name) {
                found.push(p.to_path_buf());
            }
        });
    }
    found.sort();
    found.dedup();
    found
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / MIB as f64)
}

fn base_spec(script: &str) -> RunSpec {
    let mut s = RunSpec::new(script);
    s.wall_seconds = 15;
    s.cpu_seconds = 10;
    s.memory_bytes = MEM;
    s.disk_bytes = DISK;
    s.max_processes = 32;
    s
}

// ---------------------------------------------------------------------------------------
// Judges
// ---------------------------------------------------------------------------------------

fn res_cpu_01(ctx: &mut Ctx) -> Result<Verdict> {
    // Without a budget cap the group may use every CPU of the host (issue 14).
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get) as f64;
    let mut spec = base_spec("RES-CPU-01.sh").args(["full"]);
    spec.cpu_seconds = 2;
    spec.max_processes = 100;
    let v = vars([]);
    let mut j = Judge::new();
    let trivial = trivial_run(ctx, &spec, &mut j)?;
    let mon = Monitor::start(Probes::default());
    let run = ctx.run(&spec, &v)?;
    let s = mon.stop();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    j.require(
        run.output().contains("busy loops started"),
        "the busy loops started",
    );
    corral_survived(&run, spec.wall_seconds, &mut j);
    esc_breaches(ctx, &run, &mut j);
    let (cpu, wall) = (exec_u64(&run, "cpu_ms"), exec_u64(&run, "wall_ms"));
    let term = run.termination().to_owned();
    j.breach(
        term != "cpu_limit" && term != "wall_timeout",
        format!("the run was not ended by the CPU limit: termination {term}"),
    );
    j.breach(
        run.output().contains("still alive after 20 s"),
        "the attack outlived cpu_seconds 2 (slept 20 s)",
    );
    // corral polls the group's usage every 20 ms; over budget it SIGKILLs every task of the
    // group and lifts the CPU limit so the throttled tasks die at once (before that fix the
    // group kept spinning 155-300 ms past the budget). Between the crossing and the kill the
    // group may use its quota (`cores`) for a poll interval plus however long the host does
    // not schedule the supervisor (the monitor's worst 10 ms sleep-loop gap beyond its
    // 10 ms), and the 64 loops burn CPU until the kernel has delivered every kill, which
    // takes as long as this host is slow: a tenth of a trivial run's whole time. A fixed
    // 100 ms assumed a fast host; a 6.1 TCG guest beside busy CI ran 103-120 ms past the
    // budget (ADR-0060). On this host all three stay under 100 ms.
    let latency_ms = (s.gap_max.as_secs_f64() * 1000.0 - 10.0).max(0.0);
    let over_ms = 100f64
        .max(cores * (20.0 + 2.0 * latency_ms) + 50.0)
        .max(trivial.run.elapsed.as_secs_f64() * 100.0);
    let budget_bound = (spec.cpu_seconds * 1000) as f64 + over_ms;
    j.breach(
        cpu as f64 > budget_bound,
        format!(
            "cpu_ms {cpu} > cpu_seconds {} s + {over_ms:.0} ms (host latency {latency_ms:.0} ms): \
             the group ran past its CPU budget",
            spec.cpu_seconds
        ),
    );
    let limit_ns = spec.cpu_seconds * 1_000_000_000;
    let crossed = s.cpu_series.iter().find(|(_, u)| *u >= limit_ns);
    if let (Some((t_cross, _)), Some((t_last, u_last))) = (crossed, s.cpu_series.last()) {
        j.note(format!(
            "the group's cpuacct.usage passed cpu_seconds at +{} ms (monitor clock) and was \
             last seen at +{} ms with {} ms: the group ran {} ms more before it was gone",
            t_cross.as_millis(),
            t_last.as_millis(),
            u_last / 1_000_000,
            t_last.saturating_sub(*t_cross).as_millis()
        ));
    }
    let quota_bound = 1.1 * wall as f64 * cores + 100.0;
    j.breach(
        cpu as f64 > quota_bound,
        format!("cpu_ms {cpu} > 1.1 x wall {wall} ms x {cores} core(s) of quota"),
    );
    j.breach(
        s.gap_max > Duration::from_secs(2),
        format!(
            "host starved: a 10 ms sleep loop stalled {:?} during the run",
            s.gap_max
        ),
    );
    j.note(format!(
        "run 1 (cpu_seconds 2): termination {term}, cpu_ms {cpu}, wall_ms {wall}; \
         host 10 ms loop worst gap {:?}, so {over_ms:.0} ms allowed past the budget (trivial run {:.1} s)",
        s.gap_max,
        trivial.run.elapsed.as_secs_f64()
    ));
    // Control 1: the attack's demand. The same attack with a large cpu_seconds and a short
    // wall budget consumes more CPU than run 1's bound, which the manifest shows (so a
    // CPU limit that did not hold would have been seen); the quota still holds it to the
    // bandwidth. Other work on this host competes with the run's group as one scheduling
    // entity, so the group may get well under its quota: 10 s of wall leave room for that.
    let mut big = spec.clone();
    big.cpu_seconds = 60;
    big.wall_seconds = 10;
    let run2 = ctx.run(&big, &v)?;
    let (cpu2, wall2) = (exec_u64(&run2, "cpu_ms"), exec_u64(&run2, "wall_ms"));
    corral_survived(&run2, big.wall_seconds, &mut j);
    esc_breaches(ctx, &run2, &mut j);
    j.control(
        cpu2 as f64 > budget_bound,
        format!(
            "with cpu_seconds 60 and wall 10 s the same attack consumed more than run 1's \
             bound of {budget_bound:.0} ms (cpu_ms {cpu2}, termination {})",
            run2.termination()
        ),
    );
    let quota_bound2 = 1.1 * wall2 as f64 * cores + 100.0;
    j.breach(
        cpu2 as f64 > quota_bound2,
        format!("run 2: cpu_ms {cpu2} > 1.1 x wall {wall2} ms x {cores} core(s) of quota"),
    );
    j.breach(
        exec_u64(&run2, "cpu_cap_millicores") != cores as u64 * 1000,
        format!(
            "run 2: the manifest records cpu_cap_millicores {} where no budget set one (all {cores} \
             core(s) expected)",
            run2.manifest["execution"]["cpu_cap_millicores"]
        ),
    );
    j.note(format!(
        "run 2 (cpu_seconds 60, wall 10): termination {}, cpu_ms {cpu2}, wall_ms {wall2}",
        run2.termination()
    ));
    // Run 3: the preset caps the bandwidth at a quarter of a CPU (the lower of preset and
    // WorkUnit applies, admission's unit tests cover the WorkUnit's). The same attack may
    // use no more than that per wall second; run 2, uncapped, used more (the control), so a
    // cap that did not hold would have been seen.
    const CAP: u64 = 250;
    let mut capped = big.clone();
    capped.wall_seconds = 6;
    capped.preset_overrides = vec![("cpu_millicores".into(), serde_json::json!(CAP))];
    let run3 = ctx.run(&capped, &v)?;
    let (cpu3, wall3) = (exec_u64(&run3, "cpu_ms"), exec_u64(&run3, "wall_ms"));
    corral_survived(&run3, capped.wall_seconds, &mut j);
    esc_breaches(ctx, &run3, &mut j);
    j.require(
        run3.output().contains("busy loops started"),
        format!("run 3: the busy loops started ({})", describe(&run3)),
    );
    let share = CAP as f64 / 1000.0;
    let cap_bound = 1.1 * wall3 as f64 * share + 100.0;
    j.breach(
        cpu3 as f64 > cap_bound,
        format!(
            "run 3: cpu_ms {cpu3} > 1.1 x wall {wall3} ms x {share} CPU: the cap of {CAP} \
             millicores did not hold"
        ),
    );
    j.breach(
        exec_u64(&run3, "cpu_cap_millicores") != CAP,
        format!(
            "run 3: the manifest records cpu_cap_millicores {}, not the preset's {CAP}",
            run3.manifest["execution"]["cpu_cap_millicores"]
        ),
    );
    j.control(
        cpu2 as f64 > 1.1 * wall2 as f64 * share + 100.0,
        format!(
            "uncapped, the same attack used more than {share} CPU per wall second (run 2: \
             cpu_ms {cpu2} in wall_ms {wall2})"
        ),
    );
    j.note(format!(
        "run 3 (preset cpu_millicores {CAP}, wall 6): termination {}, cpu_ms {cpu3}, wall_ms {wall3}",
        run3.termination()
    ));
    // Control 2: as root on throwaway processes (chrt's `true`, the script's own shell and
    // python), the scheduling changes succeed: the ESC detector is live.
    let sched = RunSpec::new("RES-CPU-01.sh").args(["sched"]);
    let ctl = ctx.control(
        &sched,
        &v,
        &Control {
            as_root: true,
            timeout: Duration::from_secs(10),
            ..Control::default()
        },
    )?;
    let esc = ctx.escapes(&ctl.output());
    for l in ["chrt -f 99", "renice -n -20", "sched_setscheduler"] {
        j.control(
            esc.iter().any(|e| e.contains(l)),
            format!("as root outside, `{l}` succeeded"),
        );
    }
    Ok(j.verdict())
}

fn res_mem_01(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = base_spec("RES-MEM-01.py").args([
        "balloon".to_owned(),
        (4 * MEM).to_string(),
        MEM.to_string(),
    ]);
    let v = vars([]);
    let before = host_mem();
    let mon = Monitor::start(Probes::default());
    let run = ctx.run(&spec, &v)?;
    let s = mon.stop();
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    j.require(
        run.output().contains("BALLOON "),
        "the balloon started growing",
    );
    corral_survived(&run, spec.wall_seconds, &mut j);
    esc_breaches(ctx, &run, &mut j);
    let peak = exec_u64(&run, "peak_memory_bytes");
    j.breach(
        run.termination() != "memory_limit",
        format!(
            "corral did not report the memory limit: termination {}",
            run.termination()
        ),
    );
    j.breach(
        peak > MEM,
        format!(
            "peak_memory_bytes {} above the {} limit",
            mib(peak),
            mib(MEM)
        ),
    );
    j.breach(
        run.output().contains("BALLOON done"),
        "the balloon reached 4 x the limit",
    );
    let drop_kib = before.avail_kib.saturating_sub(s.avail_min_kib);
    // Other work shares this host: allow 1 GiB of noise on top of the limit.
    j.breach(
        drop_kib * 1024 > MEM + (1 << 30),
        format!(
            "host MemAvailable dropped by {} during the run",
            mib(drop_kib * 1024)
        ),
    );
    let after = avail_settled(before.avail_kib, 256 << 10);
    j.breach(
        after + (256 << 10) < before.avail_kib,
        format!(
            "host MemAvailable did not come back: {} KiB before, {after} KiB after",
            before.avail_kib
        ),
    );
    let grown = tagged(&run.output(), "BALLOON")
        .iter()
        .filter_map(|f| f.first().and_then(|v| v.parse::<u64>().ok()))
        .max()
        .unwrap_or(0);
    j.note(format!(
        "termination {}, peak_memory_bytes {}, balloon reported {} before the kill; host \
         MemAvailable {} KiB before, min {} KiB during, {after} KiB after",
        run.termination(),
        mib(peak),
        mib(grown),
        before.avail_kib,
        s.avail_min_kib
    ));
    let swaps = std::fs::read_to_string("/proc/swaps")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .count();
    j.note(format!(
        "host swap devices: {swaps} (with none, memory.memsw is not needed for the limit to \
         hold; corral sets it when swap accounting exists)"
    ));
    // Controls: outside as uid 65534 the balloon grows past the same limit (the detector
    // fires). The oom_score_adj detector: this host's root lacks CAP_SYS_RESOURCE in its
    // bounding set, so -1000 is refused even to root; the same write of a value an
    // unprivileged process may set (+500, on the throwaway script process) is accepted and
    // reported.
    let small = base_spec("RES-MEM-01.py").args([
        "balloon".to_owned(),
        (MEM + 32 * MIB).to_string(),
        MEM.to_string(),
    ]);
    let ctl = ctx.control(&small, &v, &Control::default())?;
    j.control(
        ctx.escapes(&ctl.output())
            .iter()
            .any(|e| e.contains("balloon holds")),
        format!("outside as uid 65534 the balloon grew past {}", mib(MEM)),
    );
    let adj = base_spec("RES-MEM-01.py").args(["oomadj", "0", "0", "500"]);
    let ctl = ctx.control(&adj, &v, &Control::default())?;
    j.control(
        ctx.escapes(&ctl.output())
            .iter()
            .any(|e| e.contains("oom_score_adj 500 accepted")),
        "outside as uid 65534, the write of oom_score_adj 500 was accepted and reported",
    );
    Ok(j.verdict())
}

fn res_mem_02(ctx: &mut Ctx) -> Result<Verdict> {
    let n = ctx.n.clone();
    let cap = (4 * MEM).to_string();
    let mut args = vec![(4 * MEM).to_string()];
    for d in [
        "/dev/shm",
        "/tmp",
        "/var/tmp",
        "/run/user/65534",
        "/workspace",
        "/workspace/src",
    ] {
        args.push(format!("{d}={cap}"));
    }
    let spec = base_spec("RES-MEM-02.py").args(args);
    let v = vars([]);
    let shm_fill = PathBuf::from(format!("/dev/shm/fill-{n}"));
    {
        let p = shm_fill.clone();
        ctx.on_cleanup(move || {
            let _ = std::fs::remove_file(p);
        });
    }
    let before = host_mem();
    let mon = Monitor::start(Probes::default());
    let run = ctx.run(&spec, &v)?;
    let s = mon.stop();
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    corral_survived(&run, spec.wall_seconds, &mut j);
    esc_breaches(ctx, &run, &mut j);
    let out = run.output();
    let fills = tagged(&out, "FILL");
    j.require(
        !fills.is_empty(),
        "the attack reported its fills (FILL lines)",
    );
    let mut sum = 0;
    for f in &fills {
        let got: u64 = f.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        sum += got;
        j.breach(
            got > DISK,
            format!(
                "fill of {} reached {} (disk_bytes {})",
                f.first().map_or("?", String::as_str),
                mib(got),
                mib(DISK)
            ),
        );
    }
    j.breach(
        sum > DISK,
        format!(
            "the fills together reached {}, above the shared disk_bytes {}",
            mib(sum),
            mib(DISK)
        ),
    );
    let memfd_at = tagged(&out, "MEMFD_AT")
        .iter()
        .filter_map(|f| f.first().and_then(|v| v.parse::<u64>().ok()))
        .max()
        .unwrap_or(0);
    j.breach(
        memfd_at > MEM,
        format!(
            "a memfd held {} under a {} memory limit",
            mib(memfd_at),
            mib(MEM)
        ),
    );
    let peak = exec_u64(&run, "peak_memory_bytes");
    j.breach(
        peak > MEM,
        format!("peak_memory_bytes {} above the limit", mib(peak)),
    );
    j.breach(
        shm_fill.exists(),
        format!("{} exists on the host", shm_fill.display()),
    );
    let shmem_after = shmem_settled(before.shmem_kib, 32 << 10);
    j.breach(
        shmem_after > before.shmem_kib + (32 << 10),
        format!(
            "host Shmem grew from {} KiB to {shmem_after} KiB and stayed",
            before.shmem_kib
        ),
    );
    let after = avail_settled(before.avail_kib, 256 << 10);
    j.breach(
        after + (256 << 10) < before.avail_kib,
        format!(
            "host MemAvailable did not come back: {} KiB before, {after} KiB after",
            before.avail_kib
        ),
    );
    j.note(format!(
        "fills: {}; memfd reached {} ({}); termination {}, peak_memory_bytes {}; host Shmem {} KiB before, \
         max {} KiB during, {shmem_after} KiB after",
        fills
            .iter()
            .map(|f| f.join(" "))
            .collect::<Vec<_>>()
            .join(", "),
        mib(memfd_at),
        {
            let r: Vec<&str> = out
                .lines()
                .filter(|l| l.starts_with("MEMFD ") || l.starts_with("MEMFD_RC"))
                .collect();
            if r.is_empty() {
                "killed before it could report".to_owned()
            } else {
                r.join(", ")
            }
        },
        run.termination(),
        mib(peak),
        before.shmem_kib,
        s.shmem_max_kib
    ));
    // Control, outside as uid 65534: a small fill of the host /dev/shm shows up there, a
    // fill of the control's workspace passes disk_bytes, and a memfd passes the memory
    // limit: each detector fires.
    let ctl_spec = base_spec("RES-MEM-02.py").args([
        (MEM + 32 * MIB).to_string(),
        format!("/dev/shm={MIB}"),
        format!("{{WS}}/src={}", DISK + 4 * MIB),
    ]);
    let ctl = ctx.control(&ctl_spec, &v, &Control::default())?;
    let cout = ctl.output();
    j.control(
        shm_fill.exists(),
        format!(
            "the control's {} is visible on the host",
            shm_fill.display()
        ),
    );
    let _ = std::fs::remove_file(&shm_fill);
    let csum: u64 = tagged(&cout, "FILL")
        .iter()
        .filter_map(|f| f.get(1).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    j.control(
        csum > DISK,
        format!("outside, the fills passed {} ({})", mib(DISK), mib(csum)),
    );
    j.control(
        tagged(&cout, "MEMFD_AT")
            .iter()
            .filter_map(|f| f.first().and_then(|v| v.parse::<u64>().ok()))
            .any(|at| at > MEM),
        format!("outside, a memfd grew past {}", mib(MEM)),
    );
    Ok(j.verdict())
}

/// Keys and ids of `/proc/sysvipc/<kind>` (key is the first column, decimal).
fn sysv_keys(kind: &str) -> Vec<(i64, String)> {
    std::fs::read_to_string(format!("/proc/sysvipc/{kind}"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let key = f.next()?.parse().ok()?;
            let id = f.next()?.to_owned();
            Some((key, id))
        })
        .collect()
}

/// Does the host IPC namespace have the POSIX message queue `/mq-<N>`? (Opened read-only by
/// a root python; `unlink` removes it.)
fn host_mq(n: &str, unlink: bool) -> bool {
    let code = format!(
        "import ctypes,os,sys\nl=ctypes.CDLL(None,use_errno=True)\n\
         r=l.mq_open(b'/mq-{n}',os.O_RDONLY)\nprint('OPEN' if r>=0 else 'ABSENT')\n\
         {}",
        if unlink {
            format!("l.mq_unlink(b'/mq-{n}')\n")
        } else {
            String::new()
        }
    );
    Command::new("python3")
        .args(["-c", &code])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("OPEN"))
        .unwrap_or(false)
}

fn res_mem_03(ctx: &mut Ctx) -> Result<Verdict> {
    let n = ctx.n.clone();
    let key = i64::from_str_radix(&n[..8], 16).unwrap_or(0) & 0x7FFF_FFFF;
    let psx = PathBuf::from(format!("/dev/shm/psx-{n}"));
    {
        let (p, n2) = (psx.clone(), n.clone());
        ctx.on_cleanup(move || {
            for (flag, kind) in [("-M", "shm"), ("-Q", "msg"), ("-S", "sem")] {
                if sysv_keys(kind).iter().any(|(k, _)| *k == key) {
                    let _ = Command::new("ipcrm")
                        .args([flag, &key.to_string()])
                        .status();
                }
            }
            let _ = std::fs::remove_file(p);
            host_mq(&n2, true);
        });
    }
    let spec = base_spec("RES-MEM-03.py").args([(2 * MEM).to_string()]);
    let v = vars([]);
    let before = host_mem();
    let run = ctx.run(&spec, &v)?;
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    corral_survived(&run, spec.wall_seconds, &mut j);
    esc_breaches(ctx, &run, &mut j);
    let out = run.output();
    j.require(
        tagged_u64(&out, "SHM", 0).is_some(),
        "the attack created its SysV segment inside (SHM line)",
    );
    for kind in ["shm", "msg", "sem"] {
        j.breach(
            sysv_keys(kind).iter().any(|(k, _)| *k == key),
            format!("the sandbox's SysV {kind} (key {key:#x}) exists on the host"),
        );
    }
    j.breach(
        psx.exists(),
        format!("{} exists on the host", psx.display()),
    );
    j.breach(
        host_mq(&n, false),
        format!("POSIX message queue /mq-{n} exists in the host IPC namespace"),
    );
    let shmem_after = shmem_settled(before.shmem_kib, 32 << 10);
    j.breach(
        shmem_after > before.shmem_kib + (32 << 10),
        format!(
            "host Shmem grew from {} KiB to {shmem_after} KiB and stayed",
            before.shmem_kib
        ),
    );
    let peak = exec_u64(&run, "peak_memory_bytes");
    j.breach(
        peak > MEM,
        format!("peak_memory_bytes {} above the limit", mib(peak)),
    );
    j.note(format!(
        "inside: {}; touching {} of it ended with termination {}, peak_memory_bytes {}; host \
         Shmem {} KiB before, {shmem_after} KiB after",
        ["MSG", "SEM", "PSXSHM", "MQ", "SHM"]
            .iter()
            .map(|t| format!(
                "{t} {}",
                tagged(&out, t)
                    .first()
                    .map(|f| f.join(" "))
                    .unwrap_or_default()
            ))
            .collect::<Vec<_>>()
            .join(", "),
        mib(2 * MEM),
        run.termination(),
        mib(peak),
        before.shmem_kib
    ));
    // Control, outside as uid 65534 in the host IPC namespace: every object it creates is
    // visible to the harness (then removed).
    let ctl_spec = base_spec("RES-MEM-03.py").args([MIB.to_string()]);
    ctx.control(&ctl_spec, &v, &Control::default())?;
    for kind in ["shm", "msg", "sem"] {
        j.control(
            sysv_keys(kind).iter().any(|(k, _)| *k == key),
            format!("the control's SysV {kind} (key {key:#x}) is in /proc/sysvipc/{kind}"),
        );
    }
    j.control(
        psx.exists(),
        format!("the control's {} is on the host", psx.display()),
    );
    j.control(
        host_mq(&n, true),
        format!("the control's /mq-{n} opens in the host IPC namespace"),
    );
    Ok(j.verdict())
}

fn res_disk_01(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = base_spec("RES-DISK-01.py").args([
        "/workspace/src".to_owned(),
        "200G".to_owned(),
        (4 * DISK).to_string(),
    ]);
    let v = vars([]);
    let df0 = df_avail();
    let mon = Monitor::start(Probes::default());
    let run = ctx.run(&spec, &v)?;
    let s = mon.stop();
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    corral_survived(&run, spec.wall_seconds, &mut j);
    esc_breaches(ctx, &run, &mut j);
    let out = run.output();
    j.require(
        out.contains("WROTE sparse"),
        "the attack reached the sparse-file part",
    );
    j.breach(
        out.contains("FALLOCATE rc=0"),
        "fallocate -l 200G succeeded inside",
    );
    for f in tagged(&out, "WROTE") {
        let got: u64 = f.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
        j.breach(
            got > DISK,
            format!(
                "{} file took {} (disk_bytes {})",
                f.first().map_or("?", String::as_str),
                mib(got),
                mib(DISK)
            ),
        );
    }
    disk_df_check(&df0, &s, &mut j);
    j.note(format!(
        "inside: {}; outcome {}, termination {}, rejections {:?}; the workspace tmpfs is \
         memory-backed, so the host disk is not where it lands (df checked anyway)",
        out.lines()
            .filter(|l| l.starts_with("WROTE") || l.starts_with("FALLOCATE"))
            .collect::<Vec<_>>()
            .join(", "),
        run.outcome(),
        run.termination(),
        run.rejection_codes()
    ));
    // Control, outside as uid 65534 in the control's own workspace copy (removed with the
    // case): fallocate succeeds and both fills pass disk_bytes; the detectors fire.
    let cap = (DISK + 8 * MIB).to_string();
    let ctl_spec = base_spec("RES-DISK-01.py").args(["{WS}/src".to_owned(), cap.clone(), cap]);
    let ctl = ctx.control(&ctl_spec, &v, &Control::default())?;
    let cout = ctl.output();
    j.control(
        cout.contains("FALLOCATE rc=0"),
        "outside, fallocate past disk_bytes succeeded",
    );
    j.control(
        tagged(&cout, "WROTE").iter().any(|f| {
            f.first().is_some_and(|w| w == "sparse")
                && f.get(1)
                    .and_then(|v| v.parse::<u64>().ok())
                    .is_some_and(|g| g > DISK)
        }),
        "outside, the sparse file's hole took more than disk_bytes",
    );
    Ok(j.verdict())
}

/// Host free space (`/tmp`'s and `/`'s file systems) must not drop by more than the disk
/// budget (plus noise: other work shares this host).
fn disk_df_check(df0: &[u64; 2], s: &Samples, j: &mut Judge) {
    const NOISE: u64 = 512 * MIB;
    for (i, name) in ["/tmp", "/"].iter().enumerate() {
        if s.df_min[i] == u64::MAX || df0[i] == 0 {
            continue;
        }
        let drop = df0[i].saturating_sub(s.df_min[i]);
        j.breach(
            drop > DISK + NOISE,
            format!(
                "free space of {name}'s file system dropped by {} during the run",
                mib(drop)
            ),
        );
    }
}

fn res_disk_02(ctx: &mut Ctx) -> Result<Verdict> {
    let n = ctx.n.clone();
    let name = format!("o-{n}");
    let dirs = [
        "/tmp",
        "/var/tmp",
        "$HOME",
        "/dev/shm",
        "/run",
        "/var/cache",
    ];
    {
        let name = name.clone();
        ctx.on_cleanup(move || {
            for d in ["/tmp", "/var/tmp", "/dev/shm", "/run", "/var/cache"] {
                let _ = std::fs::remove_file(Path::new(d).join(&name));
            }
        });
    }
    let mut args = vec![(4 * DISK).to_string()];
    args.extend(dirs.iter().map(|d| (*d).to_owned()));
    let spec = base_spec("RES-DISK-02.py").args(args.clone());
    let v = vars([]);
    let df0 = df_avail();
    let mon = Monitor::start(Probes::default());
    let run = ctx.run(&spec, &v)?;
    let s = mon.stop();
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    corral_survived(&run, spec.wall_seconds, &mut j);
    esc_breaches(ctx, &run, &mut j);
    let out = run.output();
    let outs = tagged(&out, "OUT");
    j.require(
        outs.len() == dirs.len(),
        format!("the attack reported all {} writes", dirs.len()),
    );
    let sum: u64 = outs
        .iter()
        .filter_map(|f| f.get(1).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    j.breach(
        sum > DISK,
        format!(
            "writes outside the workspace took {} together, above disk_bytes {}",
            mib(sum),
            mib(DISK)
        ),
    );
    for f in &outs {
        let err = f.get(2).map_or("?", String::as_str);
        j.breach(
            !["ENOSPC", "EROFS", "EACCES", "EDQUOT", "ENOENT", "EPERM"].contains(&err),
            format!("write to {} ended with {err}, not a refusal", f.join(" ")),
        );
    }
    let found = host_files_named(&name);
    j.breach(
        !found.is_empty(),
        format!("{name} on the host after the run: {found:?}"),
    );
    disk_df_check(&df0, &s, &mut j);
    j.note(format!(
        "inside: {}; host search for {name}: /tmp /var/tmp /dev/shm /run /var/cache /root \
         /home and / (depth-limited)",
        outs.iter()
            .map(|f| f.join(" "))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    // Control, outside as uid 65534 (HOME = its own scratch folder), 17 MiB per place:
    // files named o-<N> appear on the host and the writes pass disk_bytes together.
    args[0] = (DISK / 2 + MIB).to_string();
    let ctl_spec = base_spec("RES-DISK-02.py").args(args);
    let ctl = ctx.control(&ctl_spec, &v, &Control::default())?;
    let cfound = host_files_named(&name);
    j.control(
        !cfound.is_empty(),
        format!("the control's {name} files are found on the host ({cfound:?})"),
    );
    let csum: u64 = tagged(&ctl.output(), "OUT")
        .iter()
        .filter_map(|f| f.get(1).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    j.control(
        csum > DISK,
        format!("outside, the writes passed disk_bytes ({})", mib(csum)),
    );
    for p in cfound {
        let _ = std::fs::remove_file(p);
    }
    Ok(j.verdict())
}

fn res_disk_03(ctx: &mut Ctx) -> Result<Verdict> {
    let spec =
        base_spec("RES-DISK-03.py").args(["/workspace/src".to_owned(), (4 * DISK).to_string()]);
    let v = vars([]);
    let df0 = df_avail();
    let mon = Monitor::start(Probes::default());
    let run = ctx.run(&spec, &v)?;
    let s = mon.stop();
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    corral_survived(&run, spec.wall_seconds, &mut j);
    esc_breaches(ctx, &run, &mut j);
    let out = run.output();
    let got = tagged_u64(&out, "UNLINKED", 0);
    j.require(got.is_some(), "the attack reported its write (UNLINKED)");
    let got = got.unwrap_or(0);
    j.breach(
        got > DISK,
        format!(
            "the unlinked file took {} (disk_bytes {})",
            mib(got),
            mib(DISK)
        ),
    );
    disk_df_check(&df0, &s, &mut j);
    let df1 = df_avail();
    j.note(format!(
        "inside: {}; host free space /tmp {} -> {} after",
        out.lines()
            .filter(|l| ["UNLINKED", "DU", "AFTER"].iter().any(|t| l.starts_with(t)))
            .collect::<Vec<_>>()
            .join(", "),
        mib(df0[0]),
        mib(df1[0])
    ));
    // Control, outside as uid 65534 in its own workspace copy: the unlinked file passes
    // disk_bytes (space returns when it exits).
    let ctl_spec =
        base_spec("RES-DISK-03.py").args(["{WS}/src".to_owned(), (DISK + 8 * MIB).to_string()]);
    let ctl = ctx.control(&ctl_spec, &v, &Control::default())?;
    j.control(
        tagged_u64(&ctl.output(), "UNLINKED", 0).is_some_and(|g| g > DISK),
        "outside, the unlinked file passed disk_bytes",
    );
    Ok(j.verdict())
}

fn res_disk_04(ctx: &mut Ctx) -> Result<Verdict> {
    let v = vars([]);
    let mut j = Judge::new();
    // 1. Inode flood: 50000 empty files in the writable scope (the tmpfs of a 16 MiB budget
    // has about 4.3k inodes).
    let mut flood = base_spec("RES-DISK-04.py").args(["flood", "50000"]);
    flood.disk_bytes = 16 * MIB;
    let run = ctx.run(&flood, &v)?;
    j.require(
        started(&run),
        format!("flood: the worker ran ({})", describe(&run)),
    );
    corral_survived(&run, flood.wall_seconds, &mut j);
    esc_breaches(ctx, &run, &mut j);
    let out = run.output();
    let f = tagged(&out, "FLOOD");
    let (count, err) = f
        .first()
        .map(|f| {
            (
                f.first().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0),
                f.get(1).cloned().unwrap_or_default(),
            )
        })
        .unwrap_or_default();
    j.require(!f.is_empty(), "flood: the attack reported its count");
    j.breach(
        !f.is_empty() && !["ENOSPC", "EDQUOT"].contains(&err.as_str()),
        format!("flood: {count} files created with no inode cap hit ({err})"),
    );
    if run.outcome() == "candidate_captured" {
        let n = run.changed_paths().len() as u64;
        j.breach(
            n != count,
            format!("flood: captured {n} changed paths for {count} files created"),
        );
    }
    j.note(format!(
        "flood: {}; outcome {}, rejections {:?}, corral took {:.1} s",
        f.first().map(|f| f.join(" ")).unwrap_or_default(),
        run.outcome(),
        run.rejection_codes(),
        run.elapsed.as_secs_f64()
    ));
    // 2. A 20000-level tree under src/ whose leaf is a forbidden **/*.pem: a walker that
    // stops at PATH_MAX and skips the leaf would capture it unchecked.
    let mut deep = base_spec("RES-DISK-04.py").args(["deep", "20000", "x.pem", "2"]);
    deep.disk_bytes = 128 * MIB;
    deep.memory_bytes = 256 * MIB;
    // A bound on a hang: the tree must pass PATH_MAX however slow the host (a 6.1 guest
    // beside busy CI reached 2000 levels in the 2 s the script once stopped at).
    deep.wall_seconds = 120;
    let run = ctx.run(&deep, &v)?;
    j.require(
        started(&run),
        format!("deep: the worker ran ({})", describe(&run)),
    );
    corral_survived(&run, deep.wall_seconds, &mut j);
    esc_breaches(ctx, &run, &mut j);
    let out = run.output();
    let depth = tagged_u64(&out, "DEEP", 0).unwrap_or(0);
    j.require(
        depth * 2 > 4096,
        format!("deep: the tree went past PATH_MAX (depth {depth})"),
    );
    j.breach(
        run.outcome() == "candidate_captured",
        format!(
            "deep: a tree {depth} levels deep with a forbidden leaf was captured ({} paths)",
            run.changed_paths().len()
        ),
    );
    j.note(format!(
        "deep: {}; outcome {}, rejections {:?}, corral took {:.1} s (each level costs more \
         than the last inside the sandbox, so past PATH_MAX the tree grows for 2 s instead of \
         to 20000)",
        tagged(&out, "DEEP")
            .first()
            .map(|f| f.join(" "))
            .unwrap_or_default(),
        run.outcome(),
        run.rejection_codes(),
        run.elapsed.as_secs_f64()
    ));
    // Controls: outside as uid 65534 the flood passes the sandbox's inode budget with no
    // ENOSPC (in a folder of the host's /dev/shm, removed afterwards); and a shallow tree
    // with the same forbidden leaf is rejected by the same run path.
    let flood_dir = PathBuf::from(format!("/dev/shm/corral-adv-flood-{}", ctx.n));
    {
        let d = flood_dir.clone();
        ctx.on_cleanup(move || {
            let _ = std::fs::remove_dir_all(d);
        });
    }
    let ctl_flood = base_spec("RES-DISK-04.py").args([
        "flood".to_owned(),
        "6000".to_owned(),
        flood_dir.to_string_lossy().into_owned(),
    ]);
    let ctl = ctx.control(&ctl_flood, &v, &Control::default())?;
    j.control(
        tagged(&ctl.output(), "FLOOD")
            .first()
            .is_some_and(|f| f.get(1).is_some_and(|e| e == "cap")),
        "outside, 6000 files were created with no inode cap hit",
    );
    let _ = std::fs::remove_dir_all(&flood_dir);
    let shallow = base_spec("RES-DISK-04.py").args(["deep", "3", "x.pem", "5"]);
    let run = ctx.run(&shallow, &v)?;
    j.control(
        run.outcome() != "candidate_captured" && !run.rejection_codes().is_empty(),
        format!(
            "a 3-level tree with the forbidden leaf is rejected (outcome {}, rejections {:?})",
            run.outcome(),
            run.rejection_codes()
        ),
    );
    Ok(j.verdict())
}

fn res_pid_01(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = base_spec("RES-PID-01.py").args(["bomb", "10000"]);
    let v = vars([]);
    let mon = Monitor::start(Probes {
        fork: true,
        nobody: None,
    });
    let run = ctx.run(&spec, &v)?;
    let s = mon.stop();
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    corral_survived(&run, spec.wall_seconds, &mut j);
    esc_breaches(ctx, &run, &mut j);
    let out = run.output();
    let max = spec.max_processes;
    let threads = tagged_u64(&out, "THREADS", 0);
    let forks = tagged_u64(&out, "FORKS", 0);
    j.require(
        threads.is_some() && forks.is_some(),
        "the attack reported its thread and fork counts",
    );
    j.breach(
        threads.unwrap_or(0) >= max,
        format!(
            "{} threads started under max_processes {max}",
            threads.unwrap_or(0)
        ),
    );
    j.breach(
        forks.unwrap_or(0) >= max,
        format!(
            "{} processes forked under max_processes {max}",
            forks.unwrap_or(0)
        ),
    );
    j.require(out.contains("BOMB done"), "the fork bomb ran for 3 s");
    if s.pids_seen {
        j.breach(
            s.pids_current_max > max,
            format!(
                "the run's pids.current reached {} (max_processes {max})",
                s.pids_current_max
            ),
        );
    }
    j.breach(
        !s.fork_failures.is_empty(),
        format!("the harness could not fork: {:?}", s.fork_failures),
    );
    j.breach(
        s.fork_slowest > Duration::from_secs(2) || s.gap_max > Duration::from_secs(2),
        format!(
            "the host stalled: slowest sh -c true {:?}, worst 10 ms loop gap {:?}",
            s.fork_slowest, s.gap_max
        ),
    );
    j.note(format!(
        "inside: {}; pids group seen {}: pids.current max {}, pids.max {}, pids.events max {}; \
         harness ran sh -c true {} times (slowest {:?}); termination {}",
        out.lines()
            .filter(|l| ["THREADS", "FORKS", "FORK during"]
                .iter()
                .any(|t| l.starts_with(t)))
            .collect::<Vec<_>>()
            .join(", "),
        s.pids_seen,
        s.pids_current_max,
        s.pids_max,
        s.pids_events_max,
        s.fork_runs,
        s.fork_slowest,
        run.termination()
    ));
    // Control, outside as uid 65534: 48 threads and 48 processes (more than max_processes)
    // start; both count detectors fire. No bomb outside.
    let ctl_spec = base_spec("RES-PID-01.py").args(["bounded", "48"]);
    let ctl = ctx.control(&ctl_spec, &v, &Control::default())?;
    let cout = ctl.output();
    j.control(
        tagged_u64(&cout, "THREADS", 0).is_some_and(|n| n >= max),
        "outside, the thread count passed max_processes",
    );
    j.control(
        tagged_u64(&cout, "FORKS", 0).is_some_and(|n| n >= max),
        "outside, the fork count passed max_processes",
    );
    Ok(j.verdict())
}

fn res_pid_02(ctx: &mut Ctx) -> Result<Verdict> {
    // The corpus tags this `[U]`: per-user counters (inotify instances, keyring quota, pipe
    // pages, RLIMIT_NPROC) are kept per uid, and a user namespace charges its creator too.
    // Root mode: corral gives each supervisor a uid of its own; the harness, as host uid 65534
    // (the usual "nobody" a sandbox would otherwise be), must keep working while the sandbox
    // exhausts inotify instances and processes, and the sandbox gets the whole per-uid quota
    // (it is charged to no one else). Rootless mode (ADR-0080): the worker's counters are
    // charged up to the invoking user, whose own programs share that limit; corral caps what
    // its namespace may take, and the user's own probes must keep working while the sandbox
    // exhausts its share.
    let mut spec = base_spec("RES-PID-02.py").args(["3"]);
    spec.max_processes = 32;
    let v = vars([]);
    let limit: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(128);
    let (who, ids) = match &ctx.h.as_user {
        Some((name, uid)) => (
            format!("the invoking user {name} (uid {uid})"),
            (*uid, ctx.h.as_gid),
        ),
        None => ("host uid 65534".to_owned(), (65534, 65534)),
    };
    let rootless = ctx.h.as_user.is_some();
    let mon = Monitor::start(Probes {
        fork: false,
        nobody: Some(ids),
    });
    let run = ctx.run(&spec, &v)?;
    let s = mon.stop();
    let out = run.output();
    let fails = |s: &Samples, what: &str| {
        s.nobody_failures
            .iter()
            .filter(|f| f.starts_with(what))
            .count()
    };
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("INOTIFY "))
        .unwrap_or("");
    let inside: usize = line
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let mut j = Judge::new();
    if rootless {
        // Its share: the sandbox ran into its own limit (EMFILE) below the user's.
        j.require(
            started(&run) && line.contains("EMFILE") && inside > 0,
            format!(
                "the sandbox exhausted the inotify instances its run may take ({inside} of \
                 the user's {limit}, then {}; {})",
                line.split_whitespace().nth(1).unwrap_or("no error"),
                describe(&run)
            ),
        );
    } else {
        j.require(
            started(&run) && inside + 1 >= limit,
            format!(
                "the sandbox exhausted its inotify instances ({inside} of {limit}; {})",
                describe(&run)
            ),
        );
    }
    let (ino, sh) = (fails(&s, "inotify_init1"), fails(&s, "sh -c true"));
    j.breach(
        ino > 0 || sh > 0,
        format!(
            "while the sandbox held {inside} inotify instances, {who} failed inotify_init1 \
             {ino} and sh -c true {sh} of {} time(s)",
            s.nobody_runs
        ),
    );
    j.require(s.nobody_runs > 0, format!("the harness probed as {who}"));
    // Control: the same exhaustion outside as the same uid (no forks there: the host has no
    // pids limit for it) starves the harness's probes of that uid.
    let mon = Monitor::start(Probes {
        fork: false,
        nobody: Some(ids),
    });
    let ctl_spec = spec.clone().args(["3", "0"]);
    let ctl = ctx.control(
        &ctl_spec,
        &v,
        &Control {
            as_ids: Some(ids),
            ..Control::default()
        },
    )?;
    let c = mon.stop();
    j.control(
        fails(&c, "inotify_init1") > 0,
        format!(
            "outside, the same uid exhausting inotify made the harness's inotify_init1 as \
             {who} fail ({} of {} probes; control said {})",
            fails(&c, "inotify_init1"),
            c.nobody_runs,
            ctl.stdout.lines().next().unwrap_or("")
        ),
    );
    j.note(format!(
        "inside: {}",
        out.lines()
            .filter(|l| l.starts_with("INOTIFY") || l.starts_with("FORKS"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(j.verdict())
}
