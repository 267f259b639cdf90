//! KRN: kernel attack surface and seccomp (corpus §6).
//!
//! Every refused call is paired with the same call outside the sandbox, where it reaches the
//! kernel (a fd, EINVAL, EFAULT, EBADF, ...): so the refusal inside is the sandbox's own. Calls
//! that even host root cannot make on this kernel (a feature built out) are named in the
//! evidence instead of being counted as controls.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::{describe, judge_escapes, started, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{
    AS_NOBODY, Control, CtlObs, Ctx, RunObs, RunSpec, set_mode, sh, truncate,
};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "KRN-01",
            title: "Terminal injection: TIOCSTI (and 64-bit), TIOCLINUX, TIOCCONS, TIOCSETD",
            guarantee: "process isolation; nothing executes in the supervisor's terminal",
            script: Some(attack!("KRN-01.py")),
            judge: krn_01,
        },
        Case {
            id: "KRN-02",
            title: "io_uring as a seccomp bypass",
            guarantee: "network and filesystem enforcement (io_uring unavailable)",
            script: Some(attack!("KRN-02.py")),
            judge: krn_02,
        },
        Case {
            id: "KRN-03",
            title: "userfaultfd, perf_event_open, bpf, keyctl and module loading",
            guarantee: "a reduced kernel attack surface",
            script: Some(attack!("KRN-03.py")),
            judge: krn_03,
        },
        Case {
            id: "KRN-04",
            title: "ia32 and x32 syscall ABIs",
            guarantee: "seccomp rules cannot be sidestepped",
            script: Some(attack!("KRN-04.sh")),
            judge: krn_04,
        },
        Case {
            id: "KRN-05",
            title: "Filters that compare arguments whole instead of masking flags",
            guarantee: "seccomp rules cannot be sidestepped",
            script: Some(attack!("KRN-05.py")),
            judge: krn_05,
        },
        Case {
            id: "KRN-06",
            title: "Module autoload through rare socket families",
            guarantee: "a reduced kernel attack surface",
            script: Some(attack!("KRN-06.py")),
            judge: krn_06,
        },
    ]
}

fn read_sysctl(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "<absent>".into())
}

/// `CONFIG_X=y` in the running kernel's config (None when the config is not readable).
fn kernel_config(option: &str) -> Option<bool> {
    let (ok, out) = sh("zcat /proc/config.gz 2>/dev/null || cat /boot/config-$(uname -r)");
    if !ok || out.trim().is_empty() {
        return None;
    }
    Some(
        out.lines()
            .any(|l| l == format!("{option}=y") || l == format!("{option}=m")),
    )
}

// ---------------------------------------------------------------------------------------
// KRN-01

/// Runs a command with a fresh pty as its controlling terminal and stdin (stdout and stderr
/// go to files in `dir`); afterwards reads back whatever input reached the pty (the victim's
/// view: TIOCSTI puts bytes in the pty's input queue). Prints one JSON line.
const PTY_HELPER: &str = r#"
import fcntl, json, os, pty, select, subprocess, sys, termios, time, tty
d, limit, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
m, s = pty.openpty()
tty.setraw(s)
def ctty():
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
echoed = b""
with open(os.path.join(d, "stdout"), "wb") as o, open(os.path.join(d, "stderr"), "wb") as e:
    p = subprocess.Popen(cmd, stdin=s, stdout=o, stderr=e, start_new_session=True,
                         preexec_fn=ctty, cwd=d)
    print(json.dumps({"pid": p.pid}), flush=True)
    end = time.time() + limit
    while p.poll() is None and time.time() < end:
        r, _, _ = select.select([m], [], [], 0.05)
        if r:
            try:
                echoed += os.read(m, 4096)
            except OSError:
                pass
    timed_out = p.poll() is None
    if timed_out:
        p.kill()
    p.wait()
time.sleep(0.2)
injected = b""
fcntl.fcntl(s, fcntl.F_SETFL, fcntl.fcntl(s, fcntl.F_GETFL) | os.O_NONBLOCK)
try:
    while True:
        b = os.read(s, 4096)
        if not b:
            break
        injected += b
except OSError:
    pass
print(json.dumps({"rc": p.returncode, "timed_out": timed_out,
                  "injected": injected.decode("latin1"), "echoed": echoed.decode("latin1")}),
      flush=True)
"#;

struct PtyObs {
    rc: i64,
    injected: String,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    pid: u32,
    elapsed: Duration,
}

fn pty_exec(dir: &Path, limit: u64, cmd: &[String], env: &[(&str, String)]) -> Result<PtyObs> {
    std::fs::create_dir_all(dir)?;
    set_mode(dir, 0o755)?;
    let mut c = Command::new("/usr/bin/python3");
    c.arg("-c")
        .arg(PTY_HELPER)
        .arg(dir)
        .arg(limit.to_string())
        .args(cmd)
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        );
    for (k, v) in env {
        c.env(k, v);
    }
    let start = Instant::now();
    let out = c
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("running the pty helper")?;
    let elapsed = start.elapsed();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok());
    let pid = lines
        .next()
        .and_then(|v| v["pid"].as_u64())
        .context("pty helper printed no pid")?;
    let Some(res) = lines.next() else {
        bail!(
            "pty helper failed: {}",
            truncate(&String::from_utf8_lossy(&out.stderr), 400)
        );
    };
    if res["timed_out"].as_bool() == Some(true) {
        bail!("the command under the pty did not finish within {limit} s");
    }
    Ok(PtyObs {
        rc: res["rc"].as_i64().unwrap_or(-1),
        injected: res["injected"].as_str().unwrap_or("").to_owned(),
        stdout: std::fs::read(dir.join("stdout")).unwrap_or_default(),
        stderr: std::fs::read(dir.join("stderr")).unwrap_or_default(),
        pid: u32::try_from(pid).unwrap_or(0),
        elapsed,
    })
}

/// `corral run` exactly as `Ctx::run` builds it, but started under a pty that is corral's
/// controlling terminal and stdin. Returns the run and what input reached the pty.
fn run_under_pty(ctx: &mut Ctx, spec: &RunSpec) -> Result<(RunObs, String)> {
    let prep = ctx.prepare(spec, &BTreeMap::new(), "pty-run")?;
    let mut cmd = vec![ctx.h.corral.to_string_lossy().into_owned()];
    cmd.extend(prep.args.iter().cloned());
    cmd.push("--json".into());
    let env: Vec<(&str, String)> = prep
        .env
        .iter()
        .filter(|(k, _)| k != "PATH")
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let p = pty_exec(&prep.dir.join("io"), spec.wall_seconds + 60, &cmd, &env)?;
    ctx.supervisors.push(p.pid);
    let obs = ctx.observe(
        prep,
        i32::try_from(p.rc).unwrap_or(-1),
        &p.stdout,
        String::from_utf8_lossy(&p.stderr).into_owned(),
        p.elapsed,
        p.pid,
        0,
    );
    if ctx.h.verbose {
        eprintln!("[{}] pty input {:?}", ctx.id, p.injected);
    }
    Ok((obs, p.injected))
}

fn krn_01(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = RunSpec::new("KRN-01.py");
    let (run, injected) = run_under_pty(ctx, &spec)?;
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    for e in ctx.escapes(&run.output()) {
        j.breach(true, format!("inside the sandbox: {e}"));
    }
    j.breach(
        !injected.is_empty(),
        format!("the supervisor's pty received input: {injected:?}"),
    );
    let out = run.output();
    j.require(
        out.contains("TIOCSTI 64-bit fd 0:") && out.contains("/dev/tty:"),
        "the attack reported every call",
    );
    for l in out
        .lines()
        .filter(|l| l.starts_with("TIOCSTI fd 0:") || l.starts_with("/dev/tty:"))
    {
        j.note(format!("inside: {l}"));
    }

    // Control: the same script outside, as uid 65534 (root when the host restricts legacy
    // TIOCSTI to CAP_SYS_ADMIN), with a pty the harness owns as its controlling terminal.
    let legacy = read_sysctl("/proc/sys/dev/tty/legacy_tiocsti");
    let mut cmd: Vec<String> = vec!["timeout".into(), "-s".into(), "KILL".into(), "20".into()];
    if legacy == "1" {
        cmd.extend(AS_NOBODY.map(String::from));
    }
    cmd.push(
        ctx.h
            .attacks
            .join("KRN-01.py")
            .to_string_lossy()
            .into_owned(),
    );
    cmd.push(ctx.n.clone());
    cmd.push("control".into());
    let ctl = pty_exec(
        &ctx.dir.join("pty-control"),
        30,
        &cmd,
        &[("LANG", "C.UTF-8".into())],
    )?;
    let ctl_out =
        String::from_utf8_lossy(&ctl.stdout).into_owned() + &String::from_utf8_lossy(&ctl.stderr);
    if ctx.h.verbose {
        eprintln!(
            "[{}] pty control: exit {}, pty input {:?}\n{}",
            ctx.id,
            ctl.rc,
            ctl.injected,
            truncate(&ctl_out, 4000)
        );
    }
    let ctl_esc = ctx.escapes(&ctl_out);
    j.control(
        ctl_esc.iter().any(|e| e.contains("TIOCSTI fd 0 injected")),
        "outside, TIOCSTI on the controlling pty succeeded",
    );
    j.control(
        ctl_esc.iter().any(|e| e.contains("TIOCSTI 64-bit fd 0")),
        "outside, the 64-bit TIOCSTI request reached the pty",
    );
    j.control(
        ctl.injected.contains(&format!("touch /tmp/PWN-{}", ctx.n)),
        format!(
            "the harness read the control's injected input back from its pty ({:?})",
            truncate(&ctl.injected, 80)
        ),
    );
    j.note(format!(
        "host dev.tty.legacy_tiocsti={legacy}; control ran as {}; TIOCLINUX/TIOCCONS/TIOCSETD \
         are not tried outside (TIOCCONS would redirect the host console)",
        if legacy == "1" { "uid 65534" } else { "root" }
    ));
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// KRN-02

fn krn_02(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = RunSpec::new("KRN-02.py");
    let v = vars([]);
    let run = ctx.run(&spec, &v)?;
    let disabled = read_sysctl("/proc/sys/kernel/io_uring_disabled");
    // 1: only privileged (or io_uring_group) callers may set up a ring: control as root.
    let how = Control {
        as_root: disabled == "1",
        ..Control::default()
    };
    let ctl = ctx.control(&spec, &v, &how)?;
    let mut j = Judge::new();
    let mut labels = vec!["io_uring_enter returned", "io_uring_register returned"];
    if disabled == "2" {
        j.note(
            "kernel.io_uring_disabled=2: the host refuses io_uring_setup to everyone, so the \
             filter's refusal of setup cannot be told apart from the host's; the detector is \
             shown working on io_uring_enter/io_uring_register",
        );
    } else {
        labels.push("io_uring_setup returned");
    }
    judge_escapes(ctx, &run, &ctl, &labels, &mut j);
    j.note(format!(
        "host kernel.io_uring_disabled={disabled}; control as {}",
        if how.as_root { "root" } else { "uid 65534" }
    ));
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// KRN-03

fn krn_03(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = RunSpec::new("KRN-03.py");
    let v = vars([]);
    let run = ctx.run(&spec, &v)?;
    // Root: several of these are refused to unprivileged callers by the host itself
    // (unprivileged_bpf_disabled, CAP_DAC_READ_SEARCH, perf_event_paranoid). The arguments
    // are invalid or zeroed so the kernel fails harmlessly (EINVAL, ENOENT) or hands back a
    // fd that is closed at once; keyctl only looks up root's existing user keyring.
    let root = ctx.control(
        &spec,
        &v,
        &Control {
            as_root: true,
            ..Control::default()
        },
    )?;
    let mut j = Judge::new();
    let mut labels = vec![
        "userfaultfd(UFFD_USER_MODE_ONLY) returned",
        "perf_event_open returned",
        "bpf(BPF_MAP_CREATE) returned",
        "keyctl(GET_KEYRING_ID user) returned",
        "open_by_handle_at returned",
        "perf stat counted",
    ];
    let mut built_out = Vec::new();
    match kernel_config("CONFIG_MODULES") {
        Some(false) => built_out.push("init_module (CONFIG_MODULES is not set)"),
        _ => labels.push("init_module returned"),
    }
    match (
        kernel_config("CONFIG_KEXEC"),
        kernel_config("CONFIG_KEXEC_CORE"),
    ) {
        (Some(false), Some(false)) => built_out.push("kexec_load (CONFIG_KEXEC is not set)"),
        _ => labels.push("kexec_load returned"),
    }
    judge_escapes(ctx, &run, &root, &labels, &mut j);
    // The unprivileged view, for the record: which of these the host itself leaves open.
    let nobody = ctx.control(&spec, &v, &Control::default())?;
    let open: Vec<String> = ctx
        .escapes(&nobody.output())
        .iter()
        .filter_map(|e| {
            let rest = e.split_once(' ')?.1;
            Some(
                rest.split(" returned")
                    .next()?
                    .split(" counted")
                    .next()?
                    .to_owned(),
            )
        })
        .collect();
    j.note(format!(
        "outside as uid 65534 these reach the kernel: {}",
        open.join(", ")
    ));
    if !built_out.is_empty() {
        j.note(format!(
            "built out of this kernel (ENOSYS even for host root, so the filter's EPERM \
             cannot be checked against a reachable call): {}",
            built_out.join("; ")
        ));
    }
    j.note(format!(
        "host: unprivileged_bpf_disabled={}, perf_event_paranoid={}, unprivileged_userfaultfd={}",
        read_sysctl("/proc/sys/kernel/unprivileged_bpf_disabled"),
        read_sysctl("/proc/sys/kernel/perf_event_paranoid"),
        read_sysctl("/proc/sys/vm/unprivileged_userfaultfd")
    ));
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// KRN-04

fn krn_04(ctx: &mut Ctx) -> Result<Verdict> {
    if kernel_config("CONFIG_IA32_EMULATION") == Some(false)
        && kernel_config("CONFIG_X86_X32_ABI") != Some(true)
    {
        return Ok(Verdict::not_applicable(
            "the host kernel has neither IA32 emulation nor the x32 ABI: there is no second \
             syscall ABI to sidestep the filter with",
        ));
    }
    let (gcc, ver) = sh("gcc --version");
    if !gcc {
        bail!("gcc is not installed (scripts/setup.sh installs build-essential): {ver}");
    }
    // Compile the fixture's C program outside, then ship the binary as the executable.
    let bin = ctx.dir.join("krn04");
    let st = Command::new("sh")
        .arg(ctx.h.attacks.join("KRN-04.sh"))
        .arg(&ctx.n)
        .arg("--compile")
        .arg(&bin)
        .status()
        .context("compiling KRN-04")?;
    if !st.success() {
        bail!("compiling the KRN-04 program failed");
    }
    let name = format!("KRN-04-{}.bin", ctx.n);
    let shipped: PathBuf = ctx.h.attacks.join(&name);
    std::fs::copy(&bin, &shipped)?;
    set_mode(&shipped, 0o755)?;
    let s2 = shipped.clone();
    ctx.on_cleanup(move || {
        let _ = std::fs::remove_file(s2);
    });
    let spec = RunSpec::new(&name);
    let v = vars([]);
    let run = ctx.run(&spec, &v)?;
    let ctl = ctx.control(&spec, &v, &Control::default())?;
    let mut j = Judge::new();
    let ia32 = read_sysctl("/proc/sys/abi/ia32") != "0"; // absent on most kernels: enabled
    let boot = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let ia32_on = kernel_config("CONFIG_IA32_EMULATION") != Some(false)
        && !boot.contains("ia32_emulation=0")
        && !boot.contains("ia32_emulation=false")
        && ia32;
    let mut labels = Vec::new();
    if ia32_on {
        labels.extend(["ia32 getpid returned", "ia32 socketcall(AF_UNIX) returned"]);
    } else {
        j.note("ia32 emulation is disabled on this host: the ia32 part has no control");
    }
    if kernel_config("CONFIG_X86_X32_ABI") == Some(true) {
        labels.push("x32 socket(AF_UNIX) returned");
    } else {
        j.note(
            "the host kernel has no x32 ABI (CONFIG_X86_X32_ABI is not set): x32 calls are \
             ENOSYS outside too",
        );
    }
    judge_escapes(ctx, &run, &ctl, &labels, &mut j);
    let out = run.output();
    j.require(out.contains("done"), "the attack ran to its end");
    // Every probe must show a refusal: killed by SIGSYS or a refusing errno. Anything else
    // (another signal, a missing line) means the attack did not test what it claims.
    let probes: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("ia32 ") || l.starts_with("x32 "))
        .collect();
    j.require(
        probes.len() == 7,
        format!("the attack reported all 7 probes ({})", probes.len()),
    );
    for l in &probes {
        let refused = l.ends_with("(SIGSYS)")
            || [": -1 (", ": -38 (", ": -13 ("]
                .iter()
                .any(|e| l.contains(e));
        j.require(refused, format!("inside, a probe shows a refusal: {l}"));
    }
    let killed = out.lines().filter(|l| l.contains("(SIGSYS)")).count();
    j.note(format!(
        "inside: {killed} ia32 call(s) killed by SIGSYS; {}",
        out.lines()
            .filter(|l| l.starts_with("x32"))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// KRN-05

fn krn_05(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = RunSpec::new("KRN-05.py");
    let v = vars([]);
    let run = ctx.run(&spec, &v)?;
    let ctl = ctx.control(&spec, &v, &Control::default())?;
    let mut j = Judge::new();
    judge_escapes(
        ctx,
        &run,
        &ctl,
        &[
            "unshare(CLONE_NEWUSER|1<<40) returned",
            "clone3 returned",
            "setns returned",
            "open_tree returned",
            "mount_setattr returned",
            "unshare(CLONE_NEWNS|1<<32) returned",
            "unshare(CLONE_NEWUSER) returned",
        ],
        &mut j,
    );
    // clone3 may only be ENOSYS (its flags are in a struct the filter cannot read).
    for l in run.output().lines() {
        if l.starts_with("clone3:") && !l.contains("ENOSYS") {
            j.note(format!("inside: {l} (expected ENOSYS)"));
        }
        let refused_other = ["unshare", "setns", "open_tree", "mount_setattr"]
            .iter()
            .any(|p| l.starts_with(p))
            && !l.contains("EPERM")
            && !l.contains("ESC-");
        if refused_other {
            j.note(format!(
                "inside: {l} (refused, but the filter answers EPERM)"
            ));
        }
    }
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// KRN-06

fn res_lines(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("RES "))
        .filter_map(|l| l.split_once(' '))
        .flat_map(|(af, row)| {
            row.split_whitespace()
                .filter_map(|c| c.split_once('='))
                .map(|(t, r)| (format!("{af} {t}"), r.to_owned()))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn krn_06(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = RunSpec::new("KRN-06.py");
    let v = vars([]);
    let run = ctx.run(&spec, &v)?;
    // Root outside: creating (and closing at once) a socket is harmless, and shows the
    // families this kernel really has.
    let ctl: CtlObs = ctx.control(
        &spec,
        &v,
        &Control {
            as_root: true,
            ..Control::default()
        },
    )?;
    let mut j = Judge::new();
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    for e in ctx.escapes(&run.output()) {
        j.breach(true, format!("inside the sandbox: {e}"));
    }
    let inside = res_lines(&run.output());
    let outside = res_lines(&ctl.output());
    j.require(
        inside.len() == 28 * 4,
        format!("the attack reported all 112 calls ({})", inside.len()),
    );
    let ok_outside: Vec<&String> = outside
        .iter()
        .filter(|(_, r)| *r == "OK")
        .map(|(k, _)| k)
        .collect();
    let differ = inside
        .iter()
        .filter(|(k, r)| outside.get(*k).is_some_and(|o| o != *r))
        .count();
    j.control(
        !ok_outside.is_empty() || differ > 0,
        "outside (root) some family opens or answers differently than inside",
    );
    let inside_errnos: BTreeSet<&String> = inside.values().collect();
    let outside_errnos: BTreeSet<&String> = outside.values().collect();
    j.note(format!(
        "inside answers {:?}; outside {:?}; opened outside: {}; {differ} of {} calls answer \
         differently",
        inside_errnos,
        outside_errnos,
        ok_outside
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        inside.len()
    ));
    for l in run.output().lines().filter(|l| l.starts_with("INET ")) {
        j.note(format!("inside (AF_INET, in policy): {}", &l[5..]));
    }
    if !Path::new("/proc/modules").exists() {
        j.note(
            "this kernel has no loadable modules (no /proc/modules, CONFIG_MODULES unset): no \
             autoload is possible here; the filter's refusal is what is tested",
        );
    }
    Ok(j.verdict())
}
