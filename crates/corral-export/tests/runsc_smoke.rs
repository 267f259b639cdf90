//! Smoke test: the exported OCI `config.json`, unchanged, runs under gVisor (`runsc`, Debian
//! package, installed by `scripts/setup.sh`) and its policy holds: the worker is uid 65534
//! with no capabilities and a seccomp filter, only the writable prefix is writable, and the
//! network is denied, while the same connections succeed from outside (positive control).
//!
//! The bundle is built from a test preset whose fixed argv is a busybox script, so nothing in
//! the exported config is edited; `root.path` is the default `rootfs` beside it. Needs root
//! (CI runs as root); a missing `runsc` or busybox fails the test, it never skips.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

mod common;

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corral_contract::{AgentPreset, WorkUnit};
use corral_export::Admitted;
use corral_export::oci::{OciOptions, config};

const RUNSC: &str = "runsc";
const BUSYBOX: &str = "/bin/busybox";

/// Removes the container (however the test ends) before the temporary folder goes.
struct Container<'a> {
    state: &'a Path,
    id: String,
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = Command::new(RUNSC)
            .arg("--root")
            .arg(self.state)
            .args(["delete", "-force", &self.id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The host's address on its default route, if it has one (no packet is sent).
fn primary_ip() -> Option<IpAddr> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

fn listen(ip: IpAddr) -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind((ip, 0)).unwrap();
    l.set_nonblocking(true).unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

fn accepted(l: &TcpListener) -> bool {
    l.accept().is_ok()
}

fn wait_with_timeout(mut child: std::process::Child, limit: Duration) -> (bool, String, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            let mut err = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.success(), out, err);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("runsc did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn exported_bundle_runs_under_gvisor_and_denies_network() {
    assert!(
        Command::new(RUNSC)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "runsc (gVisor) is required: apt-get install runsc (done by scripts/setup.sh)"
    );
    assert!(
        Path::new(BUSYBOX).is_file(),
        "{BUSYBOX} is required: apt-get install busybox-static (done by scripts/setup.sh)"
    );

    // Listeners the worker must not reach, with a positive control from outside.
    let (lo, lo_addr) = listen(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
    let host = primary_ip().map(listen);
    let mut targets = vec![("LO", lo_addr)];
    if let Some((_, a)) = &host {
        targets.push(("HOST", *a));
    }
    for (name, addr) in &targets {
        let s = TcpStream::connect_timeout(addr, Duration::from_secs(2));
        assert!(
            s.is_ok(),
            "positive control: {name} {addr} unreachable from outside"
        );
    }
    std::thread::sleep(Duration::from_millis(50));
    assert!(accepted(&lo), "positive control connection not seen");
    if let Some((l, _)) = &host {
        assert!(accepted(l), "positive control connection not seen");
    }

    // The documents: the README's WorkUnit, a preset whose fixed argv is the probe script.
    let mut script = String::from(
        "echo started; busybox id; busybox grep -E '^(CapEff|CapBnd|Seccomp):' /proc/self/status; \
         echo hi > /workspace/src/ok && echo src-writable; \
         (echo x > /workspace/README) 2>/dev/null && echo root-writable || echo root-readonly; \
         (echo x > /workspace/.git/config) 2>/dev/null && echo git-writable || echo git-readonly; ",
    );
    for (name, addr) in &targets {
        script.push_str(&format!(
            "busybox nc -w 2 {} {} </dev/null && echo NET-OPEN-{name} || echo NET-DENIED-{name}; ",
            addr.ip(),
            addr.port()
        ));
    }
    let wu: WorkUnit = common::doc("work-units/fix-off-by-one.json");
    let mut preset: AgentPreset = common::doc("presets/offline-agent.json");
    preset.executable = BUSYBOX.to_owned();
    preset.argv = vec!["sh".into(), "-c".into(), script];
    preset.read_only_paths = vec![];
    let batch = Admitted::admit(vec![wu], preset, None).unwrap();
    let spec = config(&batch, &OciOptions::default()).unwrap();
    let text = corral_export::to_json_pretty(&spec, "config").unwrap();

    // The bundle: config.json, rootfs (static busybox + mount points), workspace.
    let tmp = tempfile::Builder::new()
        .prefix("corral-runsc-")
        .tempdir()
        .unwrap();
    let bundle: PathBuf = tmp.path().join("bundle");
    let rootfs = bundle.join("rootfs");
    for d in [
        "bin",
        "proc",
        "dev",
        "tmp",
        "home/corral",
        "workspace",
        "etc",
    ] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    std::fs::copy(BUSYBOX, rootfs.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", rootfs.join("bin/sh")).unwrap();
    let ws = bundle.join("workspace");
    for d in ["src", "tests", ".git"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    std::fs::write(ws.join("README"), "base\n").unwrap();
    std::fs::write(ws.join(".git/config"), "").unwrap();
    // corral idmaps the checkout to the worker; a plain bundle needs the writable
    // directories owned by uid 65534 (ADR-0050).
    for d in ["src", "tests"] {
        std::os::unix::fs::chown(ws.join(d), Some(65534), Some(65534)).unwrap();
    }
    std::fs::write(bundle.join("config.json"), &text).unwrap();

    let state = tmp.path().join("state");
    let id = format!("corral-smoke-{}", std::process::id());
    let _guard = Container {
        state: &state,
        id: id.clone(),
    };
    let child = Command::new(RUNSC)
        .arg("--root")
        .arg(&state)
        .args(["--network=none", "--oci-seccomp", "run", "--bundle"])
        .arg(&bundle)
        .arg(&id)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (ok, out, err) = wait_with_timeout(child, Duration::from_secs(120));
    println!("runsc stdout:\n{out}\nrunsc stderr:\n{err}");
    assert!(ok, "runsc failed:\n{out}\n{err}");
    for want in [
        "started",
        "uid=65534",
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "Seccomp:\t2",
        "src-writable",
        "root-readonly",
        "git-readonly",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}\n{err}");
    }
    for (name, _) in &targets {
        assert!(
            out.contains(&format!("NET-DENIED-{name}")),
            "network to {name} was not denied:\n{out}\n{err}"
        );
    }
    assert_eq!(std::fs::read_to_string(ws.join("src/ok")).unwrap(), "hi\n");
    assert_eq!(
        std::fs::read_to_string(ws.join("README")).unwrap(),
        "base\n"
    );
    // Nothing got through to the host's listeners.
    assert!(!accepted(&lo), "the sandbox reached 127.0.0.2");
    if let Some((l, _)) = &host {
        assert!(!accepted(l), "the sandbox reached the host address");
    }
}
