#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
use std::time::{Duration, Instant};

use corral_process::{BoundedCommand, ProcessExit, run_bounded_process};

fn sh(script: &str) -> BoundedCommand {
    let mut c = BoundedCommand::new("/bin/sh");
    c.args = vec!["-c".into(), script.into()];
    c.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    c.wall_timeout = Duration::from_secs(10);
    c
}

#[test]
fn exit_code_and_both_streams() {
    let o = run_bounded_process(&sh("echo out; echo err >&2; exit 7")).unwrap();
    assert_eq!(o.exit, ProcessExit::Exited(7));
    assert_eq!(o.stdout.bytes, b"out\n");
    assert_eq!(o.stderr.bytes, b"err\n");
}

#[test]
fn both_pipes_full_do_not_deadlock_and_capture_is_bounded() {
    let mut c = sh("head -c 8000000 /dev/zero >&2; head -c 8000000 /dev/zero; echo done >&2");
    c.max_output_bytes = 1000;
    let t = Instant::now();
    let o = run_bounded_process(&c).unwrap();
    assert_eq!(o.exit, ProcessExit::Exited(0));
    // A deadlock would never end; the bound is not a pace.
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    assert_eq!(o.stdout.bytes.len(), 1000);
    assert_eq!(o.stdout.total_bytes, 8_000_000);
    assert!(o.stdout.truncated && o.stderr.truncated);
    assert_eq!(o.stderr.total_bytes, 8_000_005);
}

#[test]
fn wall_timeout_kills_the_process_group() {
    let mut c = sh("sleep 100 & sleep 100");
    c.wall_timeout = Duration::from_millis(300);
    let t = Instant::now();
    let o = run_bounded_process(&c).unwrap();
    assert_eq!(o.exit, ProcessExit::TimedOut);
    // The sleepers of 100 s did not end on their own (a bound, not a pace).
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

#[test]
fn background_child_holding_the_pipes_does_not_hang() {
    // The background child leaves the process group, so group cleanup cannot reach it; the
    // status still comes from wait and the readers stop after the grace period.
    // (setsid execs in place: not a group leader, so `$!` is the sleeper's own pid.)
    let c = sh("setsid sleep 100 & echo $! >&2; echo main-done; exit 0");
    let t = Instant::now();
    let o = run_bounded_process(&c).unwrap();
    let elapsed = t.elapsed();
    // The sleeper, ended by its own pid: the test leaves nothing behind.
    let pid = String::from_utf8_lossy(&o.stderr.bytes).trim().to_owned();
    assert!(pid.parse::<u32>().is_ok(), "{pid:?}");
    let _ = std::process::Command::new("kill").arg(&pid).status();
    assert_eq!(o.exit, ProcessExit::Exited(0));
    assert_eq!(o.stdout.bytes, b"main-done\n");
    // The readers stopped after the grace period, not when the sleeper ended.
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
}

#[test]
fn closed_stdio_status_comes_from_wait() {
    let o = run_bounded_process(&sh("exec >&- 2>&-; sleep 0.3; exit 7")).unwrap();
    assert_eq!(o.exit, ProcessExit::Exited(7));
}

#[test]
fn stdin_bytes_then_eof_and_new_session() {
    let mut c = sh("cat; ps -o sid= -p $$; ps -o pid= -p $$");
    c.stdin = Some(b"hello\n".to_vec());
    let o = run_bounded_process(&c).unwrap();
    let out = String::from_utf8(o.stdout.bytes).unwrap();
    let mut l = out.lines();
    assert_eq!(l.next(), Some("hello"));
    let sid = l.next().unwrap().trim().to_owned();
    let pid = l.next().unwrap().trim().to_owned();
    assert_eq!(sid, pid, "the child leads a new session");
}

#[test]
fn group_cleanup_happens_on_normal_exit_too() {
    let marker = format!("corral-proc-test-{}", std::process::id());
    let o = run_bounded_process(&sh(&format!(
        "sh -c 'exec -a {marker} sleep 30' >/dev/null 2>&1 & exit 0"
    )))
    .unwrap();
    assert_eq!(o.exit, ProcessExit::Exited(0));
    std::thread::sleep(Duration::from_millis(100));
    let ps = std::process::Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "background member of the group survived"
    );
}

#[test]
fn it_is_not_a_sandbox() {
    // The child sees the host: this process's /proc entry, the host's files and network.
    let secret = std::env::temp_dir().join(format!("corral-not-a-sandbox-{}", std::process::id()));
    std::fs::write(&secret, "HOST-SECRET").unwrap();
    let o = run_bounded_process(&sh(&format!(
        "cat {}; test -d /proc/{} && echo SEES-SUPERVISOR; id -u",
        secret.display(),
        std::process::id()
    )))
    .unwrap();
    std::fs::remove_file(&secret).unwrap();
    let out = String::from_utf8(o.stdout.bytes).unwrap();
    assert!(
        out.contains("HOST-SECRET") && out.contains("SEES-SUPERVISOR"),
        "{out}"
    );
}

#[test]
fn inherited_descriptors_arrive_as_3_and_4_and_nothing_else_does() {
    use std::os::fd::AsRawFd as _;
    let t = std::env::temp_dir().join(format!("corral-inherit-{}", std::process::id()));
    std::fs::write(&t, b"three\n").unwrap();
    let a = std::fs::File::open(&t).unwrap();
    let b = std::fs::File::open("/dev/null").unwrap();
    let mut c = sh("cat <&3; readlink /proc/self/fd/4; ls /proc/self/fd | sort -n | tr '\\n' ' '");
    // Listed in the order the child numbers them (b's number may be below a's).
    c.inherit_fds = vec![a.as_raw_fd(), b.as_raw_fd()];
    let o = run_bounded_process(&c).unwrap();
    std::fs::remove_file(&t).unwrap();
    assert_eq!(o.exit, ProcessExit::Exited(0), "{:?}", o.stderr);
    let out = String::from_utf8(o.stdout.bytes).unwrap();
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("three"));
    assert_eq!(lines.next(), Some("/dev/null"));
    // ls's own directory fd is the one extra entry.
    let fds: Vec<u32> = lines
        .next()
        .unwrap()
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    // Under `cargo test` this process holds cargo's jobserver pipe without close-on-exec:
    // before close_range in the child it arrived there too (seen as fd 251).
    assert_eq!(fds, [0, 1, 2, 3, 4, 5], "inherited: {fds:?}");
}

/// A program that cannot be executed is an error that says why, with descriptors to pass on
/// (the path where the child closes what it inherited): the child keeps std's exec-error pipe
/// until exec, instead of closing it and aborting (`output.write(&bytes).is_ok()`), which hid
/// a failed exec of corral's checkout helper. Control: the same command with an executable
/// program runs.
#[test]
fn a_program_that_cannot_run_is_an_error_not_an_abort() {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::PermissionsExt as _;
    let dir = std::env::temp_dir().join(format!("corral-noexec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prog = dir.join("not-executable");
    std::fs::write(&prog, b"#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o644)).unwrap();
    let null = std::fs::File::open("/dev/null").unwrap();
    let mut c = BoundedCommand::new(&prog);
    c.inherit_fds = vec![null.as_raw_fd()];
    let r = run_bounded_process(&c);
    let denied = matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied);
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let control = run_bounded_process(&c).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(denied, "{r:?}");
    assert_eq!(control.exit, ProcessExit::Exited(0));
}

/// A caller killed with SIGKILL leaves no child running (`PR_SET_PDEATHSIG`): this test runs
/// itself as the caller, which starts `sleep 1003` through the primitive and prints the
/// sleeper's pid; the test kills the caller and sees the sleeper end. Control: while the
/// caller lives, the sleeper runs.
#[test]
fn a_caller_killed_with_sigkill_takes_its_child_with_it() {
    const ROLE: &str = "CORRAL_PROCESS_TEST_CALLER";
    if std::env::var_os(ROLE).is_some() {
        let _ = run_bounded_process(&sh("echo $$; exec sleep 1003"));
        return;
    }
    let mut caller = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_caller_killed_with_sigkill_takes_its_child_with_it",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, "1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The sleeper: the caller's grandchild whose command line is `sleep 1003`.
    let find = || {
        let out = std::process::Command::new("pgrep")
            .args(["-x", "-f", "sleep 1003"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|p| p.parse::<u32>().unwrap())
            .find(|p| {
                // Its parent is the caller (the primitive's `sh` exec'd into it).
                std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .ok()
                    .and_then(|s| {
                        let rest = s.rsplit_once(')')?.1.to_owned();
                        rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                    })
                    == Some(caller.id())
            })
    };
    let t = Instant::now();
    let sleeper = loop {
        if let Some(p) = find() {
            break p;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the sleeper never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Control: alive while the caller is.
    assert!(std::path::Path::new(&format!("/proc/{sleeper}")).exists());
    caller.kill().unwrap();
    caller.wait().unwrap();
    let t = Instant::now();
    while std::fs::read_to_string(format!("/proc/{sleeper}/stat")).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    }) {
        // A bound, not a pace: SIGKILL is delivered at once.
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the child outlived its caller"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
