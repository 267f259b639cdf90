//! SIG: signals to the supervisor (corpus §7), and the pseudo-terminal driver the `[PTY]`
//! cases share (SIG-02, OUT-04, OUT-06).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::Value;

use super::proc::{Watcher, proc_info};
use super::{describe, started, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{AS_NOBODY, Control, Ctx, RunSpec, truncate};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "SIG-01",
            title: "Signalling every process",
            guarantee: "process isolation; the supervisor survives",
            script: Some(attack!("SIG-01.sh")),
            judge: sig_01,
        },
        Case {
            id: "SIG-02",
            title: "Terminal job control and terminal state",
            guarantee: "the supervisor (and its terminal) is not disturbed",
            script: Some(attack!("SIG-02.sh")),
            judge: sig_02,
        },
    ]
}

// ---------------------------------------------------------------------------------------
// SIG-01

fn sig_01(ctx: &mut Ctx) -> Result<Verdict> {
    let n = ctx.n.clone();
    // The canary: a host `sleep` as the sandbox's uid, outside everything.
    let mut canary = {
        use std::os::unix::process::CommandExt as _;
        Command::new("sleep")
            .arg("600")
            .uid(65534)
            .gid(65534)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the canary sleep")?
    };
    let cpid = canary.id();
    ctx.on_cleanup(move || {
        let _ = Command::new("kill")
            .args(["-KILL", &cpid.to_string()])
            .status();
    });
    let cstart = proc_info(cpid).map(|p| p.start).unwrap_or_default();
    // Sample the canary's state during the run (a stop may be undone later).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut states = std::collections::BTreeSet::new();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                match proc_info(cpid) {
                    Some(p) if p.start == cstart => {
                        states.insert(p.state);
                    }
                    _ => {
                        states.insert('-');
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            states
        })
    };
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let mut spec = RunSpec::new("SIG-01.sh").args([pid_max.clone()]);
    // Control first: the same attack in a pid namespace of its own, with its decoy there.
    // Its duration sets the run's wall budget: the sweep makes one kill() per pid number up
    // to pid_max (4M under systemd's sysctl), which takes seconds natively and tens of
    // seconds in an emulated guest; a fixed budget assumed a fast host (ADR-0060).
    let t0 = Instant::now();
    let ctl = ctx.control(
        &spec,
        &vars([]),
        &Control {
            own_pidns: true,
            timeout: Duration::from_secs(600),
            ..Control::default()
        },
    )?;
    let ctl_secs = t0.elapsed().as_secs();
    super::proc::kill_matching(&format!("decoy-{n}"));
    spec.wall_seconds = (4 * ctl_secs + 20).min(600);
    // The sweep is CPU-bound: its CPU budget is its wall budget (a 30 s CPU budget ended it
    // by cpu_limit in a 6.1 guest, where the control took 106 s).
    spec.cpu_seconds = spec.wall_seconds;
    let w = Watcher::start(&n, false);
    let run = ctx.run(&spec, &vars([]));
    let log = w.finish();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let states = sampler.join().unwrap_or_default();
    let run = run?;
    let now = proc_info(cpid).filter(|p| p.start == cstart);
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    j.require(
        run.out().contains("SIGSTOP delivered"),
        "the SIGSTOP sweep ran inside the sandbox",
    );
    j.breach(
        now.is_none(),
        format!("the host canary (uid 65534, pid {cpid}) was killed"),
    );
    j.breach(
        states.contains(&'T') || now.as_ref().is_some_and(|p| p.state == 'T'),
        format!("the host canary was stopped (states seen {states:?})"),
    );
    j.breach(
        run.exit < 0 || !run.has_manifest(),
        format!("corral did not return normally: {}", describe(&run)),
    );
    let sup: Vec<_> = log
        .seen
        .iter()
        .filter(|((pid, _), _)| *pid == run.supervisor_pid)
        .collect();
    j.require(!sup.is_empty(), "the watcher sampled corral itself");
    for (_, s) in &sup {
        j.breach(
            s.states.contains(&'T'),
            format!("corral was stopped (states {:?})", s.states),
        );
    }
    j.note(format!(
        "termination {:?} signal {:?} (the worker dies of its own kill -TERM 0)",
        run.termination(),
        run.manifest["execution"]["signal"]
    ));
    j.note(truncate(
        &run.out().lines().collect::<Vec<_>>().join("; "),
        300,
    ));
    let _ = canary.kill();
    let _ = canary.wait();
    let out = ctl.output();
    j.note(format!(
        "the control's sweep took {ctl_secs} s; the run's wall and CPU budget {} s",
        spec.wall_seconds
    ));
    j.control(
        out.contains("DECOY-STOPPED"),
        "in its own pid namespace the sweep stopped the same-uid decoy",
    );
    j.control(
        out.contains("DECOY-KILLED"),
        "in its own pid namespace kill -9 -1 killed the same-uid decoy",
    );
    super::proc::kill_matching(&format!("decoy-{n}"));
    j.note("network none: corral starts no egress proxy in this mode");
    Ok(j.verdict())
}

fn corral_path(ctx: &Ctx) -> String {
    ctx.h.corral.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------
// The pseudo-terminal driver.

/// A Python driver: opens a pty, makes it the controlling terminal of a new session whose
/// leader acts like a job-control shell (runs the command as the foreground job in its own
/// process group, resumes it with SIGCONT whenever it stops, recording the stop), drains the
/// master, optionally types bytes into the terminal, samples the session's process states,
/// and reports the terminal's settings before and after as JSON.
const PTY_DRIVER: &str = r#"import fcntl, json, os, select, signal, sys, termios, time
report, limit, stdout_to, typed, argv = sys.argv[1], float(sys.argv[2]), sys.argv[3], bytes.fromhex(sys.argv[4]), sys.argv[5:]
master, slave = os.openpty()
before = termios.tcgetattr(slave)
leader_file = report + ".leader"
leader = os.fork()
if leader == 0:
    try:
        os.close(master)
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        if slave > 2:
            os.close(slave)
        for s in (signal.SIGTTOU, signal.SIGTTIN, signal.SIGTSTP):
            signal.signal(s, signal.SIG_IGN)
        job = os.fork()
        if job == 0:
            os.setpgid(0, 0)
            os.tcsetpgrp(0, os.getpgrp())
            for s in (signal.SIGTTOU, signal.SIGTTIN, signal.SIGTSTP):
                signal.signal(s, signal.SIG_DFL)
            if stdout_to != "-":
                fd = os.open(stdout_to, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.close(fd)
            os.execvp(argv[0], argv)
        try:
            os.setpgid(job, job)
        except OSError:
            pass
        try:
            os.tcsetpgrp(0, job)
        except OSError:
            pass
        stops = []
        while True:
            _, st = os.waitpid(job, os.WUNTRACED)
            if os.WIFSTOPPED(st):
                stops.append(os.WSTOPSIG(st))
                try:
                    os.tcsetpgrp(0, job)
                except OSError:
                    pass
                os.killpg(job, signal.SIGCONT)
                continue
            code = os.waitstatus_to_exitcode(st)
            break
        with open(leader_file, "w") as f:
            json.dump({"job": job, "stops": stops, "code": code}, f)
    finally:
        os._exit(0)

def session():
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = open(f"/proc/{d}/stat").read()
            f = st[st.rfind(")") + 2:].split()
            if int(f[3]) == leader:
                out.append((int(d), f[0], st[st.find("(") + 1:st.rfind(")")]))
        except (OSError, ValueError, IndexError):
            pass
    return out

buf = b""
stopped = {}
deadline = time.time() + limit
typed_at = time.time() + 0.7
timed_out = False
while True:
    r, _, _ = select.select([master], [], [], 0.03)
    if r:
        try:
            buf += os.read(master, 65536)
        except OSError:
            pass
    if typed and time.time() >= typed_at:
        os.write(master, typed)
        typed = b""
    for pid, state, comm in session():
        if state == "T":
            stopped[str(pid)] = comm
    pid, _ = os.waitpid(leader, os.WNOHANG)
    if pid:
        break
    if time.time() > deadline:
        timed_out = True
        break
after = termios.tcgetattr(slave)
leftover = []
for pid, state, comm in session():
    leftover.append(f"{pid} {state} {comm}")
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
try:
    os.waitpid(leader, 0)
except OSError:
    pass
while True:
    r, _, _ = select.select([master], [], [], 0.05)
    if not r:
        break
    try:
        d = os.read(master, 65536)
    except OSError:
        break
    if not d:
        break
    buf += d
lead = {}
try:
    lead = json.load(open(leader_file))
except (OSError, ValueError):
    pass
json.dump({"before": repr(before), "after": repr(after), "changed": before != after,
           "stopped": stopped, "leader": lead, "timed_out": timed_out,
           "leftover": leftover, "output": buf.hex()}, open(report, "w"))
"#;

/// What the pty driver saw.
#[derive(Debug)]
pub(super) struct PtyObs {
    /// The terminal's settings changed between before and after.
    pub changed: bool,
    pub before: String,
    pub after: String,
    /// Stop signals the job-control leader saw the job take.
    pub stops: Vec<i64>,
    /// Session processes sampled in state T (pid -> comm).
    pub stopped: BTreeMap<String, String>,
    pub job_pid: u32,
    pub job_code: Option<i64>,
    pub timed_out: bool,
    pub leftover: Vec<String>,
    /// Everything written to the terminal.
    pub output: Vec<u8>,
    pub elapsed: Duration,
}

impl PtyObs {
    pub fn contains(&self, needle: &[u8]) -> bool {
        self.output.windows(needle.len()).any(|w| w == needle)
    }
}

/// Runs `argv` as the foreground job of a fresh pseudo-terminal session (see [`PTY_DRIVER`]).
/// `stdout_to`: redirect the job's stdout to this file (else the terminal). `typed`: bytes
/// typed into the terminal 0.7 s after the start.
pub(super) fn pty_run(
    ctx: &Ctx,
    tag: &str,
    argv: &[String],
    env: &[(String, String)],
    stdout_to: Option<&Path>,
    typed: &[u8],
    limit: Duration,
) -> Result<PtyObs> {
    let driver = ctx.dir.join("ptydrv.py");
    std::fs::write(&driver, PTY_DRIVER)?;
    let report = ctx.dir.join(format!("pty-{tag}.json"));
    let hex: String = typed.iter().map(|b| format!("{b:02x}")).collect();
    let mut cmd = Command::new("python3");
    cmd.arg(&driver)
        .arg(&report)
        .arg(format!("{}", limit.as_secs_f64()))
        .arg(stdout_to.map_or("-".into(), |p| p.to_string_lossy().into_owned()))
        .arg(hex)
        .args(argv)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .current_dir(&ctx.dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t = Instant::now();
    let out = cmd.output().context("running the pty driver")?;
    let elapsed = t.elapsed();
    let v: Value = serde_json::from_slice(&std::fs::read(&report).unwrap_or_default())
        .with_context(|| {
            format!(
                "the pty driver wrote no report: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    let hexout = v["output"].as_str().unwrap_or("");
    let output = (0..hexout.len() / 2)
        .filter_map(|i| u8::from_str_radix(&hexout[2 * i..2 * i + 2], 16).ok())
        .collect();
    Ok(PtyObs {
        changed: v["changed"].as_bool().unwrap_or(true),
        before: v["before"].as_str().unwrap_or("").to_owned(),
        after: v["after"].as_str().unwrap_or("").to_owned(),
        stops: v["leader"]["stops"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default(),
        stopped: v["stopped"]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
        job_pid: v["leader"]["job"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .unwrap_or(0),
        job_code: v["leader"]["code"].as_i64(),
        timed_out: v["timed_out"].as_bool().unwrap_or(true),
        leftover: v["leftover"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        output,
        elapsed,
    })
}

/// A `corral run` under a pseudo-terminal: the documents are built like `Ctx::run` builds
/// them; with `json` the manifest goes to a file (returned parsed), else corral renders its
/// own summary to the terminal.
pub(super) struct PtyCorral {
    pub pty: PtyObs,
    pub manifest: Value,
    pub artifacts: PathBuf,
}

impl PtyCorral {
    pub fn log(&self, which: &str) -> Vec<u8> {
        self.manifest["logs"][which]["digest"]
            .as_str()
            .map(|d| {
                let hex = d.strip_prefix("sha256:").unwrap_or(d);
                std::fs::read(self.artifacts.join("sha256").join(hex)).unwrap_or_default()
            })
            .unwrap_or_default()
    }
    pub fn termination(&self) -> &str {
        self.manifest["execution"]["termination"]
            .as_str()
            .unwrap_or("")
    }
}

pub(super) fn pty_corral(
    ctx: &mut Ctx,
    tag: &str,
    spec: &RunSpec,
    v: &BTreeMap<String, String>,
    json_out: bool,
    typed: &[u8],
) -> Result<PtyCorral> {
    let prep = ctx.prepare(spec, v, &format!("pty-{tag}"))?;
    let mut cmd = vec![corral_path(ctx)];
    cmd.extend(prep.args.iter().cloned());
    if json_out {
        cmd.push("--json".into());
    }
    let mut env = prep.env.clone();
    env.push(("TERM".into(), "xterm".into()));
    let (dir, artifacts) = (prep.dir, prep.artifacts);
    let manifest_file = dir.join("manifest.json");
    let pty = pty_run(
        ctx,
        tag,
        &cmd,
        &env,
        json_out.then_some(manifest_file.as_path()),
        typed,
        Duration::from_secs(spec.wall_seconds + 60),
    )?;
    if pty.job_pid != 0 {
        ctx.supervisors.push(pty.job_pid);
    }
    let manifest = if json_out {
        serde_json::from_slice(&std::fs::read(&manifest_file).unwrap_or_default())
            .unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    if ctx.h.verbose {
        eprintln!(
            "[{}] pty run {tag}: {:?} in {:?}\n{}",
            ctx.id,
            pty.job_code,
            pty.elapsed,
            truncate(&String::from_utf8_lossy(&pty.output), 2000)
        );
    }
    Ok(PtyCorral {
        pty,
        manifest,
        artifacts,
    })
}

/// The attack script run as uid 65534 (no capabilities) as the foreground job of a pty.
pub(super) fn pty_control(
    ctx: &Ctx,
    tag: &str,
    script: &str,
    args: &[String],
    typed: &[u8],
    limit: Duration,
) -> Result<PtyObs> {
    let ws = ctx.dir.join(format!("ptyctl-{tag}"));
    std::fs::create_dir_all(&ws)?;
    let _ = Command::new("chown")
        .args(["65534:65534"])
        .arg(&ws)
        .status();
    let mut argv: Vec<String> = AS_NOBODY
        .iter()
        .chain(&["sh", "-c", "cd \"$1\" && shift && exec \"$@\"", "sh"])
        .map(|s| (*s).to_owned())
        .collect();
    argv.push(ws.to_string_lossy().into_owned());
    argv.push(ctx.h.attacks.join(script).to_string_lossy().into_owned());
    argv.push(ctx.n.clone());
    argv.extend(args.iter().cloned());
    let env = vec![
        ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ("HOME".into(), ws.display().to_string()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "xterm".into()),
    ];
    let obs = pty_run(ctx, tag, &argv, &env, None, typed, limit)?;
    if ctx.h.verbose {
        eprintln!(
            "[{}] pty control {tag}: {:?}\n{}",
            ctx.id,
            obs.job_code,
            truncate(&String::from_utf8_lossy(&obs.output), 2000)
        );
    }
    Ok(obs)
}

// ---------------------------------------------------------------------------------------
// SIG-02

fn sig_02(ctx: &mut Ctx) -> Result<Verdict> {
    let mut spec = RunSpec::new("SIG-02.sh");
    spec.wall_seconds = 15;
    let r = pty_corral(ctx, "run", &spec, &vars([]), true, b"")?;
    let mut j = Judge::new();
    let started_ok = r.manifest.is_object() && r.termination() != "not_started";
    j.require(
        started_ok,
        format!(
            "the worker ran (termination {:?}, corral exit {:?}, terminal: {})",
            r.termination(),
            r.pty.job_code,
            truncate(&String::from_utf8_lossy(&r.pty.output), 300)
        ),
    );
    let out = String::from_utf8_lossy(&r.log("stdout")).into_owned()
        + &String::from_utf8_lossy(&r.log("stderr"));
    for e in ctx.escapes(&out) {
        j.breach(true, format!("inside the sandbox: {e}"));
    }
    j.breach(
        !r.pty.stops.is_empty(),
        format!(
            "corral (the terminal's foreground job) was stopped by signals {:?}",
            r.pty.stops
        ),
    );
    let pid = r.pty.job_pid.to_string();
    j.breach(
        r.pty.stopped.contains_key(&pid),
        "corral was seen in state T",
    );
    j.breach(
        r.pty.changed,
        format!(
            "the supervisor's terminal settings changed: {} -> {}",
            truncate(&r.pty.before, 120),
            truncate(&r.pty.after, 120)
        ),
    );
    j.breach(
        r.pty.contains(b"\x1b[?1049h"),
        "the sandbox's escape sequence reached the supervisor's terminal",
    );
    j.breach(r.pty.timed_out, "corral did not return under the pty");
    j.breach(
        !r.pty.leftover.is_empty(),
        format!(
            "processes left in the terminal's session: {:?}",
            r.pty.leftover
        ),
    );
    j.note(format!(
        "termination {:?}, worker said: {}",
        r.termination(),
        truncate(&out.lines().collect::<Vec<_>>().join("; "), 300)
    ));
    // Control: the same attack as the terminal's foreground job, outside the sandbox.
    let c = pty_control(ctx, "ctl", "SIG-02.sh", &[], b"", Duration::from_secs(15))?;
    j.control(
        !c.stops.is_empty(),
        "outside, the attack stopped the terminal's foreground job",
    );
    j.control(
        c.changed,
        "outside, the attack changed the terminal's settings",
    );
    j.control(
        c.contains(b"\x1b[?1049h"),
        "outside, the escape sequence reached the terminal",
    );
    j.note(format!("control stops {:?}", c.stops));
    Ok(j.verdict())
}
