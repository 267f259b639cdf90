//! OUT: output and stdin capture (corpus §8).

use std::io::Read as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::proc::{Watcher, kill_matching, matching};
use super::sig::{pty_control, pty_corral};
use super::{describe, started, trivial_run, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{Control, Ctx, RunObs, RunSpec, sh, truncate};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "OUT-01",
            title: "Output floods, one huge line, and binary bytes",
            guarantee: "stdout and stderr capture is bounded",
            script: Some(attack!("OUT-01.sh")),
            judge: out_01,
        },
        Case {
            id: "OUT-02",
            title: "Deadlock when both pipes fill",
            guarantee: "the run ends and output is captured",
            script: Some(attack!("OUT-02.py")),
            judge: out_02,
        },
        Case {
            id: "OUT-03",
            title: "A descendant holds the pipe open, or stdio is closed early",
            guarantee: "the run ends correctly, and cleanup happens",
            script: Some(attack!("OUT-03.sh")),
            judge: out_03,
        },
        Case {
            id: "OUT-04",
            title: "Escape sequences and fake status lines in the output",
            guarantee: "captured output cannot be used to attack the reader",
            script: Some(attack!("OUT-04.sh")),
            judge: out_04,
        },
        Case {
            id: "OUT-05",
            title: "Side channels that bypass the capture",
            guarantee: "output is bounded and captured",
            script: Some(attack!("OUT-05.py")),
            judge: out_05,
        },
        Case {
            id: "OUT-06",
            title: "stdin",
            guarantee: "stdin does not expose the supervisor or make the run hang",
            script: Some(attack!("OUT-06.sh")),
            judge: out_06,
        },
    ]
}

fn log_meta(run: &RunObs, which: &str) -> (u64, bool) {
    let l = &run.manifest["logs"][which];
    (
        l["bytes"].as_u64().unwrap_or(u64::MAX),
        l["truncated"].as_bool().unwrap_or(false),
    )
}

/// Starts an attack script outside the sandbox as uid 65534 with piped stdout and stderr
/// (for controls that need to watch the pipes themselves).
fn spawn_nobody(ctx: &Ctx, tag: &str, script: &str, args: &[&str]) -> Result<Child> {
    use std::os::unix::process::CommandExt as _;
    let ws = ctx.dir.join(format!("spawn-{tag}"));
    std::fs::create_dir_all(&ws)?;
    let _ = Command::new("chown").arg("65534:65534").arg(&ws).status();
    Command::new(ctx.h.attacks.join(script))
        .arg(&ctx.n)
        .args(args)
        .current_dir(&ws)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &ws)
        .uid(65534)
        .gid(65534)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawning the control")
}

// ---------------------------------------------------------------------------------------
// OUT-01

fn out_01(ctx: &mut Ctx) -> Result<Verdict> {
    let cap: u64 = 64 << 10;
    let mut spec = RunSpec::new("OUT-01.sh");
    spec.max_output_bytes = cap;
    spec.wall_seconds = 20;
    let mut j = Judge::new();
    let base = ctx.run(&spec.clone().args(["trivial"]), &vars([]))?;
    let bin: &[u8] = b"a\0b\xff\xfe\n";
    // Control: below the cap the counters are exact and nothing is flagged, bytes verbatim.
    j.control(
        base.stdout == bin && log_meta(&base, "stdout") == (6, false),
        format!(
            "a small run's stdout is stored verbatim, 6 bytes, not truncated (got {:?}, {:?})",
            truncate(&String::from_utf8_lossy(&base.stdout), 40),
            log_meta(&base, "stdout")
        ),
    );
    let run = ctx.run(&spec, &vars([]))?;
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    j.breach(
        !run.has_manifest(),
        format!(
            "no valid manifest JSON (corral exit {}): {}",
            run.exit,
            truncate(&run.corral_stderr, 200)
        ),
    );
    // `logs.<stream>.bytes` is what the worker wrote (documented); the stored artifact is
    // what corral kept.
    let written = [
        ("stdout", 6 + 200_000_000 + 50_000_000 + 12),
        ("stderr", 50_000_000),
    ];
    for (which, expect) in written {
        let (bytes, truncated) = log_meta(&run, which);
        let kept = if which == "stdout" {
            run.stdout.len()
        } else {
            run.stderr.len()
        } as u64;
        j.breach(
            kept > cap,
            format!("{which}: {kept} bytes stored, over the cap {cap}"),
        );
        j.breach(
            !truncated,
            format!("{which}: the flood was not flagged truncated"),
        );
        j.require(
            bytes == expect && kept == cap,
            format!("{which}: the manifest counts {bytes} bytes written (expected {expect}), {kept} stored (cap {cap})"),
        );
    }
    j.breach(
        !run.stdout.starts_with(bin),
        format!(
            "NUL / invalid UTF-8 not kept verbatim: {:?}",
            &run.stdout[..run.stdout.len().min(8)]
        ),
    );
    j.control(
        run.stdout.get(bin.len()..bin.len() + 4096) == Some(&[b'A'; 4096][..]),
        "the flood reached the capture (4 KiB of A after the binary bytes)",
    );
    let bound = base.peak_rss_kib + 8 * 1024;
    j.breach(
        run.peak_rss_kib > bound,
        format!(
            "corral's peak RSS {} KiB over the bound {} KiB (baseline {} KiB + 8 MiB)",
            run.peak_rss_kib, bound, base.peak_rss_kib
        ),
    );
    j.breach(
        run.termination() != "exited",
        format!("the flood run ended by {:?}", run.termination()),
    );
    j.note(format!(
        "peak RSS {} KiB (baseline {} KiB); {}",
        run.peak_rss_kib,
        base.peak_rss_kib,
        describe(&run)
    ));
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// OUT-02

fn out_02(ctx: &mut Ctx) -> Result<Verdict> {
    let mut j = Judge::new();
    for (mode, small, big) in [
        ("err-first", "stdout", "stderr"),
        ("out-first", "stderr", "stdout"),
    ] {
        let mut spec = RunSpec::new("OUT-02.py").args([mode]);
        spec.wall_seconds = 20;
        let run = ctx.run(&spec, &vars([]))?;
        j.require(
            started(&run),
            format!("{mode}: the worker ran ({})", describe(&run)),
        );
        // A deadlock holds the worker until its wall budget ends it; how long an 8 MiB
        // write takes is the host's speed, not the guarantee.
        let wall_ms = run.manifest["execution"]["wall_ms"].as_u64().unwrap_or(0);
        j.breach(
            run.termination() != "exited",
            format!(
                "{mode}: the run took {wall_ms} ms and ended {:?} (a pipe deadlock)",
                run.termination()
            ),
        );
        let small_bytes = if small == "stdout" {
            &run.stdout
        } else {
            &run.stderr
        };
        j.breach(
            small_bytes != b"done\n",
            format!(
                "{mode}: {small} not captured: {:?}",
                truncate(&String::from_utf8_lossy(small_bytes), 40)
            ),
        );
        let (bytes, truncated) = log_meta(&run, big);
        let kept = if big == "stdout" {
            run.stdout.len()
        } else {
            run.stderr.len()
        };
        j.breach(
            kept != 256 << 10 || !truncated || bytes != 8 << 20,
            format!(
                "{mode}: {big} stored {kept} bytes of {bytes} written, truncated {truncated} (cap 256 KiB)"
            ),
        );
        j.note(format!("{mode}: {}", describe(&run)));
    }
    // Control: a reader that drains stdout before stderr deadlocks on the same attack.
    let mut child = spawn_nobody(ctx, "naive", "OUT-02.py", &["err-first"])?;
    let mut out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut b);
        }
        b
    });
    let t = Instant::now();
    let mut exited = false;
    while t.elapsed() < Duration::from_secs(2) {
        if child.try_wait()?.is_some() {
            exited = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    drop(child.stderr.take());
    let _ = reader.join();
    j.control(
        !exited,
        "outside, a reader that drains stdout first deadlocks (the writer blocks on a full stderr pipe)",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// OUT-03

/// Reads a pipe on a thread; returns when EOF came (relative to `t0`).
fn eof_watch<R: std::io::Read + Send + 'static>(
    r: Option<R>,
    t0: Instant,
) -> std::thread::JoinHandle<(Vec<u8>, Duration)> {
    std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut b);
        }
        (b, t0.elapsed())
    })
}

fn out_03(ctx: &mut Ctx) -> Result<Verdict> {
    let n = ctx.n.clone();
    {
        let n = n.clone();
        ctx.on_cleanup(move || {
            kill_matching(&n);
        });
    }
    let mut j = Judge::new();
    let trivial = trivial_run(ctx, &RunSpec::new("OUT-03.sh"), &mut j)?;
    // (a)
    let mut spec = RunSpec::new("OUT-03.sh").args(["a"]);
    spec.wall_seconds = 30;
    let w = Watcher::start(&n, false);
    let run = ctx.run(&spec, &vars([]));
    let log = w.finish();
    let run = run?;
    j.require(
        started(&run),
        format!("(a) the worker ran ({})", describe(&run)),
    );
    j.breach(
        run.exit_code() != Some(0) || run.termination() != "exited",
        format!(
            "(a) the main process's exit 0 was not reported: {}",
            describe(&run)
        ),
    );
    // The main process exits after 0.5 s; waiting for the straggler's EOF would last the
    // wall budget. Not a fixed 5 s: a TCG guest beside busy CI took 5.1 s (ADR-0060).
    let bound = Duration::from_millis(500) + trivial.grace;
    j.breach(
        run.elapsed > bound,
        format!(
            "(a) corral waited {:.1} s (the main process exits after 0.5 s; bound {:.1} s)",
            run.elapsed.as_secs_f64(),
            bound.as_secs_f64()
        ),
    );
    j.breach(
        !run.out().contains("main-done"),
        "(a) main-done was not captured",
    );
    j.control(
        !log.with(&format!("sleep100000-h-{n}")).is_empty(),
        "(a) the host saw the pipe-holding straggler during the run",
    );
    std::thread::sleep(Duration::from_millis(300));
    for s in log.alive_now() {
        j.breach(true, format!("(a) survived: {s}"));
    }
    for p in matching(&n) {
        j.breach(true, format!("(a) survived: {}", p.line()));
    }
    j.note(format!("(a) {}", describe(&run)));
    // (a) control: outside, EOF never comes while the straggler lives.
    let t0 = Instant::now();
    let mut child = spawn_nobody(ctx, "a", "OUT-03.sh", &["a"])?;
    let out_t = eof_watch(child.stdout.take(), t0);
    let err_t = eof_watch(child.stderr.take(), t0);
    let _ = child.wait();
    let exited = t0.elapsed();
    std::thread::sleep(Duration::from_millis(1500));
    let held = !out_t.is_finished();
    let stragglers = kill_matching(&format!("sleep100000-h-{n}"));
    kill_matching(&format!("sleep100000-s-{n}"));
    let _ = out_t.join();
    let _ = err_t.join();
    j.control(
        held && !stragglers.is_empty(),
        format!(
            "(a) outside, stdout stayed open 1.5 s after the main process exited ({:.2} s) and the straggler survived",
            exited.as_secs_f64()
        ),
    );
    // (b)
    let mut spec = RunSpec::new("OUT-03.sh").args(["b"]);
    spec.wall_seconds = 30;
    let run = ctx.run(&spec, &vars([]))?;
    j.require(
        started(&run),
        format!("(b) the worker ran ({})", describe(&run)),
    );
    j.breach(
        run.exit_code() != Some(7) || run.termination() != "exited",
        format!("(b) exit 7 not reported: {}", describe(&run)),
    );
    // At least the 3 s sleep (a status taken at EOF would come at once); at most that and
    // the grace this host needs.
    let wall_ms = run.manifest["execution"]["wall_ms"].as_u64().unwrap_or(0);
    let most = 3000 + u64::try_from(trivial.grace.as_millis()).unwrap_or(u64::MAX);
    j.breach(
        !(2800..=most).contains(&wall_ms),
        format!(
            "(b) wall {wall_ms} ms, expected 2800..={most} ms (status from wait, not from EOF)"
        ),
    );
    j.note(format!("(b) {}", describe(&run)));
    // (b) control: outside, EOF comes at once, the exit status 3 s later.
    let t0 = Instant::now();
    let mut child = spawn_nobody(ctx, "b", "OUT-03.sh", &["b"])?;
    let out_t = eof_watch(child.stdout.take(), t0);
    let status = child.wait()?;
    let exited = t0.elapsed();
    let (_, eof_at) = out_t.join().unwrap_or_default();
    drop(child.stderr.take());
    // EOF well before the exit status (the sleep between them is 3 s), however slowly the
    // shell started.
    j.control(
        exited.saturating_sub(eof_at) >= Duration::from_millis(2500) && status.code() == Some(7),
        format!(
            "(b) outside, EOF came at {:.2} s and exit {:?} at {:.2} s",
            eof_at.as_secs_f64(),
            status.code(),
            exited.as_secs_f64()
        ),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// OUT-04

/// The attack's sequences that must never reach a terminal raw.
const RAW: &[(&str, &[u8])] = &[
    ("OSC 52 clipboard", b"\x1b]52;"),
    ("OSC 0 title", b"\x1b]0;pwn"),
    ("CSI 6n report request", b"\x1b[6n"),
    ("CSI 21t report request", b"\x1b[21t"),
    ("fake status line", b"[supervisor] run OK"),
    ("fake result line", b"__RESULT__"),
];

fn has(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn out_04(ctx: &mut Ctx) -> Result<Verdict> {
    let mut spec = RunSpec::new("OUT-04.sh");
    spec.wall_seconds = 20;
    let mut j = Judge::new();
    let run = ctx.run(&spec, &vars([]))?;
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    j.breach(
        run.exit_code() != Some(3) || run.outcome() != "attempt_failed" || run.exit != 1,
        format!("the verdict is not the worker's exit 3: {}", describe(&run)),
    );
    j.control(
        has(&run.stdout, b"\x1b]52;c;") && has(&run.stderr, b"\x1b[6n"),
        "the raw sequences reached corral's capture (stored verbatim as evidence)",
    );
    // corral's own rendering, under a terminal (its progress ticker is on) and without --json.
    let r = pty_corral(ctx, "render", &spec, &vars([]), false, b"")?;
    j.require(
        r.pty.job_code == Some(1),
        format!(
            "the rendered run returned 1 (got {:?}): {}",
            r.pty.job_code,
            truncate(&String::from_utf8_lossy(&r.pty.output), 200)
        ),
    );
    for (what, seq) in RAW {
        j.breach(
            r.pty.contains(seq),
            format!("corral's terminal output passed the {what} raw"),
        );
    }
    // And corral's output on plain pipes.
    let (_, plain) = sh(&format!(
        "cd / && env -i PATH=/usr/bin:/bin HOME='{}' XDG_CACHE_HOME='{}' XDG_DATA_HOME='{}' '{}' \
         run --work-unit '{d}/work-unit.json' --preset '{d}/preset.json' --repo '{d}/repo' \
         --artifacts '{d}/artifacts' 2>&1",
        ctx.h.scratch.join("home").display(),
        ctx.h.scratch.join("cache").display(),
        ctx.h.scratch.join("data").display(),
        ctx.h.corral.display(),
        d = ctx.dir.join("pty-render").display()
    ));
    for (what, seq) in RAW {
        j.breach(
            has(plain.as_bytes(), seq),
            format!("corral's plain output passed the {what} raw"),
        );
    }
    j.note(format!(
        "rendered: {:?}",
        truncate(&String::from_utf8_lossy(&r.pty.output), 200)
    ));
    // Control: outside, the same bytes reach the reader raw.
    let ctl = ctx.control(&spec, &vars([]), &Control::default())?;
    j.control(
        ctl.stdout.contains("\x1b]52;c;") && ctl.stdout.contains("[supervisor] run OK"),
        "outside, the attack's raw sequences reach the reader",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// OUT-05

fn dmesg_has(pat: &str) -> bool {
    let (_, out) = sh("dmesg 2>&1");
    out.contains(pat)
}

fn out_05(ctx: &mut Ctx) -> Result<Verdict> {
    let pwn = format!("PWN-{}", ctx.n);
    let spec = RunSpec::new("OUT-05.py").args(["{MODE}"]);
    let mut j = Judge::new();
    let before = dmesg_has(&pwn);
    let run = ctx.run(&spec, &vars([("MODE", "in".into())]))?;
    j.require(
        started(&run),
        format!("the worker ran ({})", describe(&run)),
    );
    j.require(!before, "the kernel log had no marker before the run");
    for e in ctx.escapes(&run.output()) {
        j.breach(true, format!("inside the sandbox: {e}"));
    }
    j.breach(
        dmesg_has(&pwn),
        "the sandbox's marker is in the host kernel log",
    );
    let out = run.output();
    if out.contains("PROC1-WRITE-OK") {
        j.breach(
            !out.contains(&format!("via-proc1-{}", ctx.n)),
            "a write to /proc/1/fd/1 bypassed the captured pipe",
        );
    }
    let (_, journal) = sh(&format!(
        "journalctl --since -5min 2>/dev/null | grep -c {pwn}"
    ));
    j.breach(
        journal.trim().parse::<u32>().unwrap_or(0) > 0,
        "the marker is in the host journal",
    );
    j.note(truncate(
        &out.lines()
            .filter(|l| l.starts_with('/') || l.contains("exit"))
            .collect::<Vec<_>>()
            .join("; "),
        400,
    ));
    // Control: as root outside (own pid and mount namespaces), the kernel log takes the line.
    let ctl = ctx.control(
        &spec,
        &vars([("MODE", "ctl".into())]),
        &Control {
            as_root: true,
            own_pidns: true,
            ..Control::default()
        },
    )?;
    j.control(
        dmesg_has(&pwn),
        format!(
            "outside (root), the marker reached the host kernel log: {}",
            truncate(ctl.output().trim(), 120)
        ),
    );
    j.note("no syslog or journald runs on this host (/dev/log and the journal sockets are absent)");
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// OUT-06

fn out_06(ctx: &mut Ctx) -> Result<Verdict> {
    let typed = format!("typed-{}\n\x04\x04", ctx.n);
    let mut spec = RunSpec::new("OUT-06.sh");
    spec.wall_seconds = 20;
    // corral under a terminal: the worker's stdin must be neither that terminal nor carry
    // what is typed into it.
    let r = pty_corral(ctx, "run", &spec, &vars([]), true, typed.as_bytes())?;
    let out = String::from_utf8_lossy(&r.log("stdout")).into_owned();
    let mut j = Judge::new();
    j.require(
        r.manifest.is_object() && r.termination() != "not_started",
        format!(
            "the worker ran (termination {:?}, corral exit {:?})",
            r.termination(),
            r.pty.job_code
        ),
    );
    for e in ctx.escapes(&out) {
        j.breach(true, format!("inside the sandbox: {e}"));
    }
    j.breach(
        out.contains(&format!("typed-{}", ctx.n)),
        "the worker read what was typed into the supervisor's terminal",
    );
    j.breach(
        !out.contains("got:[]"),
        "the worker's read did not end with got:[]",
    );
    let ms: Option<u64> = out
        .lines()
        .find_map(|l| l.strip_prefix("elapsed_ms="))
        .and_then(|v| v.trim().parse().ok());
    // A held stdin makes `cat` wait for the wall budget, or `read -t 5` time out at 5 s:
    // below 4.5 s means EOF came, however slowly the host starts three processes.
    j.breach(
        ms.is_none_or(|m| m >= 4500),
        format!("stdin did not reach EOF at once (elapsed {ms:?} ms)"),
    );
    let wall = r.manifest["execution"]["wall_ms"]
        .as_u64()
        .unwrap_or(u64::MAX);
    j.breach(
        r.termination() != "exited",
        format!("the run took {wall} ms, ended {:?}", r.termination()),
    );
    let objective = format!("cat-read:adversarial case {}", ctx.id);
    let cat: Vec<&str> = out.lines().filter(|l| l.starts_with("cat-read:")).collect();
    j.breach(
        cat.iter().any(|l| *l != objective),
        format!("stdin carried more than the objective: {cat:?}"),
    );
    j.note(format!(
        "stdin carried {cat:?} (the stdin prompt transport), fd 0: {}",
        out.lines()
            .find(|l| l.starts_with("fd0"))
            .unwrap_or_default()
    ));
    // Control: the same script as a terminal's foreground job reads what is typed there.
    let c = pty_control(
        ctx,
        "ctl",
        "OUT-06.sh",
        &[],
        typed.as_bytes(),
        Duration::from_secs(15),
    )?;
    j.control(
        c.contains(format!("cat-read:typed-{}", ctx.n).as_bytes()),
        "outside, with the terminal as stdin, the script read what was typed",
    );
    j.control(
        c.contains(format!("ESC-{} stdin is a terminal", ctx.n).as_bytes()),
        "outside, the script noticed its stdin is a terminal",
    );
    Ok(j.verdict())
}
