//! Adversarial tests: process tree, signals, file system, credentials, seccomp, network.
//! Each attack runs inside the sandbox and is paired with a positive control.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
mod common;
mod mode;
use std::time::{Duration, Instant};

use common::*;
use corral_contract::manifest::Termination;

fn marker(tag: &str) -> String {
    format!(
        "corral-marker-{tag}-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    )
}

#[test]
fn double_fork_setsid_daemon_does_not_survive_the_run() {
    let ws = Workspace::new("daemon");
    let m = marker("daemon");
    let o = Case::attack(&["daemon", &m]).run(&ws);
    assert_eq!(
        o.exit_code,
        Some(0),
        "{} {} {:?} {:?}",
        text(&o.stdout.bytes),
        text(&o.stderr.bytes),
        o.termination,
        o.signal
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        host_procs_with(&m).is_empty(),
        "daemon survived the sandbox"
    );
    assert_gone(&o);
    // Positive control: the same attack outside the sandbox leaves a survivor we can see.
    let m2 = marker("daemon-control");
    let st = std::process::Command::new(attack_bin())
        .args(["daemon", &m2])
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(300));
    let survivors = host_procs_with(&m2);
    assert!(
        !survivors.is_empty(),
        "control: the daemon should survive outside a sandbox"
    );
    for pid in survivors {
        // SAFETY-free: std has no kill; use the kill binary.
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

#[test]
fn timeout_kills_term_ignoring_stopped_and_forking_tasks() {
    let ws = Workspace::new("timeout");
    let m = marker("timeout");
    let mut c = Case::sh(&format!(
        "trap '' TERM INT HUP; (trap '' TERM; while :; do sleep 1000 & sleep 0.1; done) & sh -c 'kill -STOP $$' & {} daemon {m}; echo ready; while :; do :; done",
        attack_bin()
    ));
    c.use_attack_as_shell();
    // The budget counts from before set-up: 10 s leaves an emulated guest time to start the
    // worker, whose `ready` proves every task the timeout must end was there.
    c.budget.wall = 10;
    let t = Instant::now();
    let o = c.run(&ws);
    assert_eq!(o.termination, Termination::WallTimeout);
    assert!(
        text(&o.stdout.bytes).contains("ready"),
        "the worker never started its tasks within the budget: {} {}",
        text(&o.stdout.bytes),
        text(&o.stderr.bytes)
    );
    // The workers never end on their own: the budget ended them. The bound catches a
    // supervisor that waits on TERM-ignoring tasks; it is not a pace (an emulated guest
    // needs seconds to set up and tear down a sandbox).
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    assert!(
        host_procs_with(&m).is_empty(),
        "a descendant survived the timeout"
    );
    assert_gone(&o);
}

#[test]
fn cancellation_from_another_thread_kills_everything() {
    let ws = Workspace::new("cancel");
    let c = Case::sh("sleep 1000 & sleep 1000 & wait");
    let run = c.admitted();
    let cancel = corral_sandbox::CancelToken::new().unwrap();
    let c2 = cancel.clone();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        c2.cancel();
    });
    let t = Instant::now();
    let o = corral_sandbox::execute_admitted(executor(), &run, &ws.path, &cancel).unwrap();
    h.join().unwrap();
    assert_eq!(o.termination, Termination::Cancelled);
    // Sleepers of 1000 s: the cancellation ended them (a bound, not a pace).
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    assert_gone(&o);
}

#[test]
fn kill_minus_one_from_inside_leaves_the_supervisor_alive() {
    let ws = Workspace::new("kill1");
    // A canary on the host, same uid as the sandbox worker's would-be target set.
    let mut canary = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let o = Case::sh("kill -STOP -1; kill -9 -1; echo unreachable").run(&ws);
    // The shell killed itself (it is in the namespace it signalled); we are still here.
    assert!(
        matches!(o.termination, Termination::Signaled | Termination::Exited),
        "{:?}",
        o.termination
    );
    assert!(canary.try_wait().unwrap().is_none(), "host canary died");
    let state = std::fs::read_to_string(format!("/proc/{}/stat", canary.id())).unwrap();
    assert!(!state.contains(") T "), "host canary stopped: {state}");
    canary.kill().unwrap();
    canary.wait().unwrap();
    assert_gone(&o);
}

#[test]
fn system_dirs_git_and_unlisted_workspace_paths_are_read_only() {
    let ws = Workspace::new("ro");
    let script = "for f in /usr/bin/corral-pwn /etc/passwd /bin/sh /x /proc/sys/kernel/core_pattern README .git/config .github/pwn src/../README; do \
                  if (echo PWN >> $f) 2>/dev/null; then echo WROTE $f; else echo DENIED $f; fi; done; \
                  echo ok > src/ok.rs && echo WROTE-SRC";
    let o = Case::sh(script).run(&ws);
    let out = text(&o.stdout.bytes);
    assert!(
        !out.contains("WROTE /") && !out.contains("WROTE README") && !out.contains("WROTE .git"),
        "{out}"
    );
    assert!(!out.contains("WROTE .github"), "{out}");
    assert!(
        out.contains("WROTE-SRC"),
        "positive control: src/ is writable: {out}"
    );
    let up = o.workspace.as_ref().unwrap().upper_path();
    assert!(up.join("src/ok.rs").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path.join("README")).unwrap(),
        "readme\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(
        !ws.path.join("src/ok.rs").exists(),
        "host workspace untouched"
    );
    assert_gone(&o);
}

#[test]
fn git_stays_read_only_when_the_whole_workspace_is_writable() {
    let ws = Workspace::new("gitro");
    let mut c = Case::sh(
        "echo a >> README && echo WROTE-README; (echo x >> .git/config) 2>/dev/null && echo WROTE-GIT; (echo x > .git/new) 2>/dev/null && echo WROTE-GIT-NEW; (echo x >> .github/ci.yml) 2>/dev/null && echo WROTE-FORBIDDEN; echo done",
    );
    c.writable = vec!["*.rs".into(), "README".into()];
    let o = c.run(&ws);
    let out = text(&o.stdout.bytes);
    assert!(
        out.contains("WROTE-README"),
        "control: root-level writes allowed: {out}"
    );
    assert!(
        !out.contains("WROTE-GIT") && !out.contains("WROTE-FORBIDDEN"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_gone(&o);
}

#[test]
fn host_secrets_and_home_are_invisible() {
    let ws = Workspace::new("secrets");
    let canary = format!("CANARY-{}", std::process::id());
    // Root mode: root's home. Rootless mode: the invoking user's own home, which must stay
    // out of reach exactly as root's does (ADR-0080).
    let home = if rootless() {
        std::env::var("HOME").unwrap()
    } else {
        "/root".to_owned()
    };
    let secret = std::path::PathBuf::from(format!("{home}/.corral-canary-{}", std::process::id()));
    std::fs::write(&secret, &canary).unwrap();
    // Positive control: the canary is readable on the host.
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), canary);
    let o = Case::sh(&format!(
        "cat {} /etc/shadow 2>&1; ls /root /home /run /var /sys /mnt 2>&1; ls /tmp; grep -rs {canary} /etc /tmp /home /workspace; echo end",
        secret.display()
    ))
    .run(&ws);
    std::fs::remove_file(&secret).unwrap();
    let out = text(&o.stdout.bytes);
    assert!(
        !out.contains(&format!("{canary}\n")) && !out.lines().any(|l| l == canary),
        "{out}"
    );
    assert!(out.contains("No such file"), "{out}");
    assert_gone(&o);
}

#[test]
fn host_keyring_listing_is_masked() {
    // The kernel keyring is not namespaced: without the mask, /proc/keys inside lists what
    // uid 65534 can view on the host (CRED-06). Positive control: as root on the host the
    // same file lists at least the session keyring this test process just joined.
    let host = std::process::Command::new("python3")
        .args([
            "-c",
            "import ctypes;l=ctypes.CDLL(None);l.syscall(250,1,None);print(open('/proc/keys').read())",
        ])
        .output()
        .unwrap();
    let host = text(&host.stdout);
    assert!(
        host.contains("keyring"),
        "control: host /proc/keys lists keyrings: {host}"
    );
    let ws = Workspace::new("keys");
    let o =
        Case::sh("for f in keys key-users timer_list; do echo \"$f:$(wc -c < /proc/$f)\"; done")
            .run(&ws);
    let out = text(&o.stdout.bytes);
    for f in ["keys", "key-users", "timer_list"] {
        assert!(
            out.contains(&format!("{f}:0")),
            "/proc/{f} must be empty: {out}"
        );
    }
    assert_gone(&o);
}

#[test]
fn no_file_descriptor_leaks_into_the_worker() {
    let ws = Workspace::new("fds");
    let o = Case::attack(&["fds"]).run(&ws);
    let out = text(&o.stdout.bytes);
    let fds: Vec<&str> = out.lines().collect();
    // 0, 1, 2 plus the descriptor read_dir itself holds on /proc/self/fd.
    assert_eq!(fds.len(), 4, "{out}");
    assert!(
        fds.iter()
            .any(|l| l.contains("/proc/") && l.contains("/fd")),
        "{out}"
    );
    assert!(
        !out.contains("/sys/fs/cgroup") && !out.contains("/root") && !out.contains("/work"),
        "{out}"
    );
    // Positive control: an inherited descriptor is visible to the helper outside.
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("exec 7</etc/hostname; exec {} fds", attack_bin()),
        ])
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains("/etc/hostname"),
        "control: {}",
        text(&out.stdout)
    );
    assert_gone(&o);
}

#[test]
fn environment_is_exactly_the_admitted_one_and_init_is_clean() {
    let ws = Workspace::new("env");
    let mut c = Case::sh("");
    c.executable = "/usr/bin/env".into();
    c.args = vec![];
    c.env_allowlist = vec!["LANG".into()];
    c.env.insert("LANG".into(), "C.UTF-8".into());
    let o = c.run(&ws);
    let mut names: Vec<String> = text(&o.stdout.bytes)
        .lines()
        .map(|l| l.split('=').next().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["HOME", "LANG", "PATH", "TMPDIR"],
        "{}",
        text(&o.stdout.bytes)
    );
    // /proc/1 (init) shows nothing of the caller's environment or command line.
    let o = Case::sh("cat /proc/1/environ /proc/1/cmdline 2>&1 | tr '\\0' '\\n'; echo; cat /proc/self/environ | tr '\\0' '\\n'").run(&ws);
    let out = text(&o.stdout.bytes);
    assert!(!out.contains("CARGO") && !out.contains("RUST"), "{out}");
    assert!(
        std::env::vars().any(|(k, _)| k.starts_with("CARGO")),
        "control: the caller has CARGO* vars"
    );
    assert_gone(&o);
}

#[test]
fn worker_has_no_capabilities_no_new_privs_and_an_unprivileged_uid() {
    let ws = Workspace::new("caps");
    let o = Case::sh("grep -E '^(Uid|Gid|Cap|NoNewPrivs|Seccomp:)' /proc/self/status; (echo -1000 > /proc/self/oom_score_adj) 2>/dev/null && echo OOMADJ; (exec 3<>/dev/tty) 2>/dev/null && echo TTY; echo end").run(&ws);
    let out = text(&o.stdout.bytes);
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            out.contains(&format!("{cap}:\t0000000000000000")),
            "{cap}: {out}"
        );
    }
    assert!(
        out.contains("NoNewPrivs:\t1") && out.contains("Seccomp:\t2"),
        "{out}"
    );
    // A uid of the supervisor's own, shared with no host user (RES-PID-02). Rootless mode:
    // the worker's id in corral's user namespace, from the user's subordinate range when it
    // has one (ADR-0080; the guests' users do).
    let id = match corral_linux::rootless::active() {
        Some(r) => r.worker_ids().0,
        None => corral_linux::WORKER_ID_BASE + std::process::id(),
    };
    assert!(
        out.contains(&format!("Uid:\t{id}\t{id}\t{id}\t{id}"))
            && out.contains(&format!("Gid:\t{id}\t{id}\t{id}\t{id}")),
        "{out}"
    );
    assert!(!out.contains("OOMADJ") && !out.contains("TTY"), "{out}");
    // Positive control: this test process itself has capabilities.
    let me = std::fs::read_to_string("/proc/self/status").unwrap();
    assert!(!me.contains("CapEff:\t0000000000000000"));
    assert_gone(&o);
}

#[test]
fn seccomp_denies_with_eperm_or_enosys_and_the_control_reaches_the_kernel() {
    let ws = Workspace::new("seccomp");
    let o = Case::attack(&["syscalls"]).run(&ws);
    let out = text(&o.stdout.bytes);
    for line in out.lines() {
        let res = line.rsplit(' ').next().unwrap();
        let want = if line.starts_with("clone3") {
            "ENOSYS"
        } else {
            "EPERM"
        };
        assert_eq!(res, want, "{line}\n{out}");
    }
    assert_eq!(out.lines().count(), 27, "{out}");
    assert_eq!(o.exit_code, Some(0), "{out}");
    // Positive control: outside the filter the same calls reach the kernel.
    let ctl = std::process::Command::new(attack_bin())
        .arg("syscalls")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let ctl = text(&ctl.stdout);
    let reached = ctl
        .lines()
        .filter(|l| !l.ends_with(" EPERM") && !l.ends_with(" ENOSYS"))
        .count();
    assert!(reached >= 20, "control: {ctl}");
    assert_gone(&o);
}

#[test]
fn network_none_cannot_reach_a_host_loopback_listener() {
    let ws = Workspace::new("net");
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let o = Case::attack(&["connect", "127.0.0.1", &port]).run(&ws);
    let out = text(&o.stdout.bytes);
    assert!(
        out.contains("FAILED") && out.contains("ECONNREFUSED"),
        "{out}"
    );
    assert!(l.accept().is_err(), "the host listener saw a connection");
    let o2 = Case::sh("cat /proc/net/route; cat /proc/net/dev | tail -n +3 | cut -d: -f1").run(&ws);
    let routes = text(&o2.stdout.bytes);
    assert_eq!(
        routes.lines().count(),
        2,
        "only the route header and lo: {routes}"
    );
    assert!(routes.contains("lo"), "{routes}");
    // Positive control: the same helper outside connects and the listener accepts.
    let ctl = std::process::Command::new(attack_bin())
        .args(["connect", "127.0.0.1", &port])
        .output()
        .unwrap();
    assert!(text(&ctl.stdout).contains("CONNECTED"));
    std::thread::sleep(Duration::from_millis(50));
    assert!(l.accept().is_ok(), "control accept");
    assert_gone(&o);
    assert_gone(&o2);
}

#[test]
fn host_abstract_unix_socket_is_unreachable() {
    use std::os::linux::net::SocketAddrExt as _;
    let ws = Workspace::new("abstract");
    let name = format!("corral-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let l = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    l.set_nonblocking(true).unwrap();
    let o = Case::attack(&["abstract", &name]).run(&ws);
    let out = text(&o.stdout.bytes);
    assert!(out.contains("FAILED"), "{out}");
    assert!(l.accept().is_err());
    let ctl = std::process::Command::new(attack_bin())
        .args(["abstract", &name])
        .output()
        .unwrap();
    assert!(
        text(&ctl.stdout).contains("CONNECTED"),
        "control: {}",
        text(&ctl.stdout)
    );
    assert_gone(&o);
}

#[test]
fn host_socket_file_under_a_read_only_folder_is_unreachable() {
    // NET-05: a read-only bind does not stop connect(2) on a socket file, so the filter
    // refuses socket(AF_UNIX) (socketpair stays allowed). The socket sits under /usr/lib,
    // which the sandbox sees read-only.
    use std::os::unix::fs::PermissionsExt as _;
    let ws = Workspace::new("unixpath");
    // Rootless mode: the user may not write /usr/lib; the workspace's read-only part (the
    // lower layer, `.github/` here) is a folder the sandbox shows read-only too.
    let (path, inside) = if rootless() {
        let name = format!("corral-test-{}.sock", std::process::id());
        let p = ws.path.join(".github").join(&name);
        (
            p.display().to_string(),
            format!("/workspace/.github/{name}"),
        )
    } else {
        let p = format!("/usr/lib/corral-test-{}.sock", std::process::id());
        (p.clone(), p)
    };
    let _ = std::fs::remove_file(&path);
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    l.set_nonblocking(true).unwrap();
    let o = Case::sh(&format!(
        "ls -l {inside}; /usr/bin/python3 -c \"import socket,os\na,b=socket.socketpair();a.send(b'p');print('PAIR',b.recv(1))\ntry:\n s=socket.socket(socket.AF_UNIX);s.connect('{inside}');print('CONNECTED')\nexcept OSError as e: print('FAILED',e.errno)\""
    ))
    .run(&ws);
    let out = text(&o.stdout.bytes);
    let inside = l.accept().is_ok();
    let ctl = std::process::Command::new(attack_bin())
        .args(["unix", &path])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(
        out.contains("corral-test-"),
        "the socket file is visible: {out}"
    );
    assert!(out.contains("PAIR b'p'"), "socketpair works: {out}");
    assert!(out.contains(&format!("FAILED {}", libc::EPERM)), "{out}");
    assert!(
        !inside,
        "the host listener saw a connection from the sandbox"
    );
    assert!(
        text(&ctl.stdout).contains("CONNECTED") && l.accept().is_ok(),
        "control: {}",
        text(&ctl.stdout)
    );
    assert_gone(&o);
}

#[test]
fn stdin_is_exactly_the_objective_then_eof_and_no_tty() {
    let ws = Workspace::new("stdin");
    let mut c = Case::sh("cat; echo; read -r x || echo EOF; ls -l /proc/self/fd/0");
    c.stdin_objective = Some("the objective".into());
    // A stdin that never reached end of file would hold `read` until this budget.
    c.budget.wall = 600;
    let t = Instant::now();
    let o = c.run(&ws);
    let out = text(&o.stdout.bytes);
    assert!(
        out.starts_with("the objective\nEOF"),
        "{out} {} {:?} {:?}",
        text(&o.stderr.bytes),
        o.termination,
        o.exit_code
    );
    assert!(out.contains("pipe:"), "{out}");
    assert!(t.elapsed() < Duration::from_secs(120), "{:?}", t.elapsed());
    assert_gone(&o);
}

#[test]
fn allowlist_policy_fails_closed() {
    let ws = Workspace::new("allowlist");
    let mut c = Case::sh("echo ran > /tmp/x");
    c.network = "allowlist";
    let err = c.run_in(&ws.path).unwrap_err();
    assert!(
        matches!(err, corral_sandbox::SandboxError::Unsupported(_)),
        "{err}"
    );
}

/// A folder of the test's own under /tmp (outside the sandbox's view), removed on drop.
struct HostDir(std::path::PathBuf);
impl HostDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("corral-exe-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
    fn script(&self, rel: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt as _;
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
impl Drop for HostDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_executable_that_runs_is_the_file_that_was_hashed() {
    // An install switched between hashing and start (a `current` link moved to a new
    // version, as version managers do): the file opened and hashed is what runs.
    let ws = Workspace::new("exe-pinned");
    let d = HostDir::new("pinned");
    d.script("v1/agent", "echo v1");
    d.script("v2/agent", "echo v2");
    std::os::unix::fs::symlink("v1", d.0.join("current")).unwrap();
    let mut c = Case::sh("");
    c.executable = d.0.join("current/agent").to_str().unwrap().to_owned();
    c.args = vec![];
    let opened = std::fs::File::open(&c.executable).unwrap();
    std::os::unix::fs::symlink("v2", d.0.join("next")).unwrap();
    std::fs::rename(d.0.join("next"), d.0.join("current")).unwrap();
    let o = c.run_opened(&ws.path, &opened);
    assert_eq!(
        (o.exit_code, text(&o.stdout.bytes).as_str()),
        (Some(0), "v1\n"),
        "{}",
        text(&o.stderr.bytes)
    );
    // Control: opened by its path now, the new version runs.
    let o = c.run(&ws);
    assert_eq!(text(&o.stdout.bytes), "v2\n", "{}", text(&o.stderr.bytes));
}

#[test]
fn an_executable_replaced_after_hashing_is_refused() {
    let ws = Workspace::new("exe-replaced");
    let d = HostDir::new("replaced");
    d.script("agent", "echo hashed");
    let mut c = Case::sh("");
    c.executable = d.0.join("agent").to_str().unwrap().to_owned();
    c.args = vec![];
    let opened = std::fs::File::open(&c.executable).unwrap();
    d.script("agent.new", "echo replaced");
    std::fs::rename(d.0.join("agent.new"), d.0.join("agent")).unwrap();
    let err = corral_sandbox::execute_admitted_with(
        executor(),
        &c.admitted(),
        &ws.path,
        &corral_sandbox::CancelToken::new().unwrap(),
        &corral_sandbox::ExecuteOptions {
            egress: None,
            model: None,
            executable: Some(&opened),
        },
    )
    .unwrap_err();
    assert!(
        matches!(&err, corral_sandbox::SandboxError::InvalidRequest(m) if m.contains("removed or replaced")),
        "{err}"
    );
    // Control: the file now installed runs.
    let o = c.run(&ws);
    assert_eq!(
        text(&o.stdout.bytes),
        "replaced\n",
        "{}",
        text(&o.stderr.bytes)
    );
}

#[test]
fn a_linked_executable_runs_at_its_real_path() {
    // As npm and pip install agents: a link in a bin folder to the file in its package,
    // which finds what it needs beside its own real path.
    let ws = Workspace::new("exe-linked");
    let d = HostDir::new("linked");
    d.script(
        "pkg/bin/agent.sh",
        "echo \"$0\"; cat \"$(dirname \"$0\")/../VERSION\"",
    );
    std::fs::write(d.0.join("pkg/VERSION"), "1.2.3\n").unwrap();
    std::fs::create_dir_all(d.0.join("bin")).unwrap();
    std::os::unix::fs::symlink("../pkg/bin/agent.sh", d.0.join("bin/agent")).unwrap();
    let mut c = Case::sh("");
    c.executable = d.0.join("bin/agent").to_str().unwrap().to_owned();
    c.args = vec![];
    let o = c.run(&ws);
    let real = std::fs::canonicalize(d.0.join("pkg/bin/agent.sh")).unwrap();
    // Only the file itself is shown (read_only_paths would name the package): `$0` is its
    // real path, and its neighbour is not there.
    assert_eq!(
        text(&o.stdout.bytes),
        format!("{}\n", real.display()),
        "{}",
        text(&o.stderr.bytes)
    );
    assert_ne!(o.exit_code, Some(0), "the package beside it is not visible");
    // A link to what the sandbox cannot show is refused, naming it.
    std::os::unix::fs::symlink("/proc/self/status", d.0.join("bin/proc")).unwrap();
    c.executable = d.0.join("bin/proc").to_str().unwrap().to_owned();
    let err = c.run_in(&ws.path).unwrap_err();
    assert!(err.to_string().contains("under /proc"), "{err}");
}
