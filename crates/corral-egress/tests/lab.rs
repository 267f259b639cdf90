//! The egress proxy against the corpus' "egress lab" (NET-03, NET-07 to NET-12).
//!
//! Each test runs in a thread that has unshared its network namespace: the lab addresses
//! (198.18.0.10 "allowed.test", 198.18.0.11 "denied.test", 10.77.0.5, 169.254.169.254,
//! fd00:77::10, fd00:ec2::254, and the lab's own 127.0.0.1) exist only on that namespace's `lo`,
//! so no packet can leave the machine even if a guard fails. Listeners log every accepted
//! connection; each refusal test also shows (positive control) that a direct connection is
//! logged, so an empty log means the proxy refused, not that the log is blind.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corral_contract::Destination;
use corral_egress::{EgressRecord, ProxyLimits, Resolve};

type Log = Arc<Mutex<Vec<(SocketAddr, Vec<u8>)>>>;

struct Lab {
    proxy: SocketAddr,
    logs: BTreeMap<String, Log>,
    queries: Arc<Mutex<Vec<String>>>,
    handle: Option<corral_egress::ProxyHandle>,
}

impl Lab {
    fn log(&self, at: &str) -> Vec<(SocketAddr, Vec<u8>)> {
        self.logs[at].lock().unwrap().clone()
    }

    fn hits(&self, at: &str) -> usize {
        self.log(at).len()
    }

    fn records(&mut self) -> Vec<EgressRecord> {
        self.handle.take().unwrap().shutdown()
    }

    /// Sends raw bytes to the proxy and returns the whole response (until close or timeout).
    fn raw(&self, request: &[u8]) -> String {
        let mut s = TcpStream::connect(self.proxy).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        s.write_all(request).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn status(&self, request: &str) -> u16 {
        let resp = self.raw(request.as_bytes());
        resp.split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    /// CONNECT, then an HTTP request through the tunnel; returns (connect status, body).
    fn tunnel_get(&self, authority: &str) -> (u16, String) {
        let mut s = TcpStream::connect(self.proxy).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        write!(
            s,
            "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n"
        )
        .unwrap();
        // Read the response head byte by byte: nothing of the tunnel is consumed.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < 4096 {
            match s.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&head).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        if status != 200 {
            return (status, text);
        }
        s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        (status, String::from_utf8_lossy(&out).into_owned())
    }
}

struct FakeDns {
    table: BTreeMap<String, Vec<IpAddr>>,
    queries: Arc<Mutex<Vec<String>>>,
    rebind: AtomicUsize,
}

impl Resolve for FakeDns {
    fn resolve(&self, name: &str, _port: u16) -> io::Result<Vec<IpAddr>> {
        self.queries.lock().unwrap().push(name.to_owned());
        if name == "rebind.test" {
            let n = self.rebind.fetch_add(1, Ordering::SeqCst);
            let ip = if n.is_multiple_of(2) {
                "198.18.0.10"
            } else {
                "127.0.0.1"
            };
            return Ok(vec![ip.parse().unwrap()]);
        }
        self.table
            .get(name)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "NXDOMAIN"))
    }
}

/// Polls `cond` for up to 20 s (no fixed sleeps: the machine may be loaded).
fn wait_for(cond: impl Fn() -> bool) {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(
            std::time::Instant::now() < until,
            "condition not reached in 20 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sh(args: &[&str]) {
    let st = Command::new("ip")
        .args(args)
        .status()
        .expect("ip (iproute2) is required for the lab");
    assert!(st.success(), "ip {args:?} failed");
}

fn listen(at: &str) -> Log {
    let listener = TcpListener::bind(at).unwrap_or_else(|e| panic!("bind {at}: {e}"));
    let log: Log = Arc::default();
    let l = Arc::clone(&log);
    let tag = at.to_owned();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let peer = s.peer_addr().unwrap();
            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap_or(0);
            l.lock().unwrap().push((peer, buf[..n].to_vec()));
            let body = format!("hello-from-{tag}");
            let _ = write!(
                s,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    log
}

const LISTENERS: &[&str] = &[
    "198.18.0.10:8080",
    "198.18.0.10:8081",
    "198.18.0.10:22",
    "198.18.0.10:80",
    "198.18.0.11:8080",
    "10.77.0.5:80",
    "169.254.169.254:80",
    "127.0.0.1:80",
    "127.0.0.1:8080",
    "[fd00:77::10]:80",
    "[fd00:ec2::254]:80",
];

const ALLOWLIST: &[&str] = &[
    "allowed.test:8080",
    "allowed.test:443",
    "rebind.test:8080",
    "meta.test:80",
    "private.test:80",
    "loop.test:8080",
    "v6meta.test:80",
    "multi.test:8080",
    "metadata.google.internal:80",
];

/// Runs `f` inside a fresh network namespace holding the lab.
fn in_lab(
    allowlist_extra: &[&str],
    max_connections: usize,
    f: impl FnOnce(&mut Lab) + Send + 'static,
) {
    in_lab_with(allowlist_extra, max_connections, None, f);
}

/// [`in_lab`] with another head deadline than the default's.
fn in_lab_with(
    allowlist_extra: &[&str],
    max_connections: usize,
    head_timeout: Option<Duration>,
    f: impl FnOnce(&mut Lab) + Send + 'static,
) {
    let extra: Vec<String> = allowlist_extra.iter().map(|s| (*s).to_owned()).collect();
    std::thread::spawn(move || {
        corral_process::unshare_namespace(corral_process::Namespace::Network)
            .expect("unshare(CLONE_NEWNET): run the tests as root");
        sh(&["link", "set", "lo", "up"]);
        for a in [
            "198.18.0.10/32",
            "198.18.0.11/32",
            "10.77.0.5/32",
            "169.254.169.254/32",
        ] {
            sh(&["addr", "add", a, "dev", "lo"]);
        }
        for a in ["fd00:77::10/128", "fd00:ec2::254/128"] {
            sh(&["-6", "addr", "add", a, "dev", "lo", "nodad"]);
        }
        let logs: BTreeMap<String, Log> = LISTENERS
            .iter()
            .map(|a| ((*a).to_owned(), listen(a)))
            .collect();
        let queries: Arc<Mutex<Vec<String>>> = Arc::default();
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let table: BTreeMap<String, Vec<IpAddr>> = [
            ("allowed.test", vec![ip("198.18.0.10")]),
            ("denied.test", vec![ip("198.18.0.11")]),
            ("private.test", vec![ip("10.77.0.5")]),
            ("meta.test", vec![ip("169.254.169.254")]),
            ("metadata.google.internal", vec![ip("169.254.169.254")]),
            ("loop.test", vec![ip("127.0.0.1")]),
            ("v6meta.test", vec![ip("::ffff:169.254.169.254")]),
            ("multi.test", vec![ip("198.18.0.10"), ip("127.0.0.1")]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let dns = FakeDns {
            table,
            queries: Arc::clone(&queries),
            rebind: AtomicUsize::new(0),
        };
        let allowlist: Vec<Destination> = ALLOWLIST
            .iter()
            .map(|s| (*s).to_owned())
            .chain(extra)
            .map(|s| Destination::parse(&s).unwrap())
            .collect();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy = listener.local_addr().unwrap();
        let mut limits = ProxyLimits::for_wall_budget(Duration::from_secs(60));
        limits.max_connections = max_connections;
        limits.idle_timeout = Duration::from_secs(3);
        if let Some(t) = head_timeout {
            limits.head_timeout = t;
        }
        let handle = corral_egress::start(listener, allowlist, Box::new(dns), limits).unwrap();
        let mut lab = Lab {
            proxy,
            logs,
            queries,
            handle: Some(handle),
        };
        f(&mut lab);
    })
    .join()
    .unwrap();
}

#[test]
fn positive_control_listeners_log_direct_connections() {
    in_lab(&[], 64, |lab| {
        for at in LISTENERS {
            let mut s = TcpStream::connect(*at).unwrap();
            s.write_all(b"probe").unwrap();
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out);
            assert!(String::from_utf8_lossy(&out).contains("hello-from-"));
            assert_eq!(lab.hits(at), 1, "{at} listener is blind");
        }
    });
}

#[test]
fn allowed_destination_is_relayed_and_recorded() {
    in_lab(&[], 64, |lab| {
        let (status, body) = lab.tunnel_get("allowed.test:8080");
        assert_eq!(status, 200);
        assert!(body.contains("hello-from-198.18.0.10:8080"), "{body}");
        let resp =
            lab.raw(b"GET http://allowed.test:8080/x HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n");
        assert!(
            resp.starts_with("HTTP/1.0 200") && resp.contains("hello-from-198.18.0.10:8080"),
            "{resp}"
        );
        assert_eq!(lab.hits("198.18.0.10:8080"), 2);
        let records = lab.records();
        let r = records
            .iter()
            .find(|r| r.destination == "allowed.test:8080" && r.allowed)
            .unwrap();
        assert_eq!(r.connections, 2);
        assert!(r.bytes_down > 40 && r.bytes_up > 10, "{r:?}");
    });
}

#[test]
fn net07_unlisted_host_port_and_protocols() {
    in_lab(&[], 64, |lab| {
        assert_eq!(lab.tunnel_get("denied.test:8080").0, 403);
        assert_eq!(lab.tunnel_get("allowed.test:8081").0, 403);
        assert_eq!(lab.tunnel_get("allowed.test:22").0, 403);
        assert_eq!(
            lab.status("GET http://denied.test:8080/ HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n"),
            403
        );
        for at in ["198.18.0.11:8080", "198.18.0.10:8081", "198.18.0.10:22"] {
            assert_eq!(lab.hits(at), 0, "{at}");
        }
        // An unlisted name is never resolved (no DNS exfiltration through the proxy).
        assert!(
            !lab.queries
                .lock()
                .unwrap()
                .iter()
                .any(|q| q == "denied.test")
        );
    });
}

#[test]
fn net08_spellings_canonicalize_or_refuse() {
    in_lab(&[], 64, |lab| {
        for good in [
            "ALLOWED.TEST.:8080",
            "allowed.test.:8080",
            "Allowed.Test:8080",
        ] {
            assert_eq!(lab.tunnel_get(good).0, 200, "{good}");
        }
        for bad in [
            "allowed.test.denied.test:8080",
            "denied-allowed.test:8080",
            "allowed.test@denied.test:8080",
            "allowed.test%00.denied.test:8080",
            "allowed.test:8080@denied.test:8080",
            "[::ffff:198.18.0.11]:8080",
            "allowed.test:08080",
            "allowed.test :8080",
            "allowed.test:8080:8080",
            "allowed.test:+8080",
        ] {
            let st = lab.status(&format!("CONNECT {bad} HTTP/1.1\r\nHost: {bad}\r\n\r\n"));
            assert!((400..500).contains(&st), "{bad}: {st}");
        }
        assert_eq!(lab.hits("198.18.0.11:8080"), 0);
        assert_eq!(lab.hits("198.18.0.10:8080"), 3);
    });
}

#[test]
fn net09_ip_literal_encodings_refused_by_policy() {
    in_lab(&[], 64, |lab| {
        for h in [
            "127.0.0.1",
            "127.1",
            "0",
            "0.0.0.0",
            "2130706433",
            "0x7f000001",
            "0177.0.0.1",
            "[::1]",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]",
            "10.77.0.5",
            "169.254.169.254",
            "2852039166",
            "0xa9fea9fe",
            "[::ffff:169.254.169.254]",
            "[fd00:77::10]",
            "[fd00:ec2::254]",
            "[fe80::1%25lo]",
            "[64:ff9b::a9fe:a9fe]",
            "[2002:a9fe:a9fe::]",
        ] {
            let resp = lab.raw(
                format!("GET http://{h}:80/latest/meta-data/ HTTP/1.1\r\nHost: {h}:80\r\n\r\n")
                    .as_bytes(),
            );
            assert!(
                resp.starts_with("HTTP/1.1 403") && resp.contains("X-Corral-Egress:"),
                "{h}: {resp}"
            );
        }
        // The proxy itself is not reachable through itself.
        let port = lab.proxy.port();
        assert_eq!(
            lab.status(&format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n")),
            403
        );
        for at in [
            "169.254.169.254:80",
            "10.77.0.5:80",
            "127.0.0.1:80",
            "[fd00:77::10]:80",
            "[fd00:ec2::254]:80",
        ] {
            assert_eq!(lab.hits(at), 0, "{at}");
        }
    });
}

#[test]
fn net09_listed_ip_literal_is_reachable() {
    // The only way to a private address: the allowlist names it as an IP literal.
    in_lab(&["10.77.0.5:80"], 64, |lab| {
        let resp = lab.raw(b"GET http://10.77.0.5/ HTTP/1.1\r\nHost: 10.77.0.5\r\n\r\n");
        assert!(resp.contains("hello-from-10.77.0.5:80"), "{resp}");
        assert_eq!(lab.hits("10.77.0.5:80"), 1);
    });
}

#[test]
fn net10_listed_names_resolving_to_non_public_addresses() {
    in_lab(&[], 64, |lab| {
        for (u, host) in [
            ("http://meta.test/latest/meta-data/", "meta.test"),
            ("http://private.test/", "private.test"),
            ("http://loop.test:8080/", "loop.test:8080"),
            ("http://v6meta.test/", "v6meta.test"),
            (
                "http://metadata.google.internal/computeMetadata/v1/",
                "metadata.google.internal",
            ),
        ] {
            let resp = lab.raw(
                format!("GET {u} HTTP/1.1\r\nHost: {host}\r\nMetadata-Flavor: Google\r\n\r\n")
                    .as_bytes(),
            );
            assert!(resp.starts_with("HTTP/1.1 403"), "{u}: {resp}");
        }
        for at in ["169.254.169.254:80", "10.77.0.5:80", "127.0.0.1:8080"] {
            assert_eq!(lab.hits(at), 0, "{at}");
        }
        let records = lab.records();
        assert!(
            records.iter().any(|r| r.destination == "meta.test:80"
                && r.reason.as_deref() == Some("metadata_address"))
        );
    });
}

#[test]
fn net11_rebinding_and_multi_answer() {
    in_lab(&[], 64, |lab| {
        let mut ok = 0;
        for _ in 0..200 {
            let resp =
                lab.raw(b"GET http://rebind.test:8080/ HTTP/1.1\r\nHost: rebind.test:8080\r\n\r\n");
            if resp.contains("hello-from-198.18.0.10:8080") {
                ok += 1;
            } else {
                assert!(resp.starts_with("HTTP/1.1 403"), "{resp}");
            }
        }
        assert_eq!(ok, 100, "every vetted answer is dialled exactly");
        assert_eq!(lab.hits("127.0.0.1:8080"), 0);
        assert_eq!(lab.hits("198.18.0.10:8080"), 100);
        // One bad address in the answer set refuses the whole set (no fallback).
        assert_eq!(lab.tunnel_get("multi.test:8080").0, 403);
        assert_eq!(lab.hits("198.18.0.10:8080"), 100);
        assert_eq!(lab.hits("127.0.0.1:8080"), 0);
    });
}

#[test]
fn net03_unlisted_names_are_never_resolved() {
    in_lab(&[], 64, |lab| {
        let hex: String = b"CANARY-4242".iter().map(|b| format!("{b:02x}")).collect();
        let name = format!("{hex}.exfil.test");
        assert_eq!(lab.tunnel_get(&format!("{name}:443")).0, 403);
        assert_eq!(
            lab.status(&format!(
                "GET http://{name}/ HTTP/1.1\r\nHost: {name}\r\n\r\n"
            )),
            403
        );
        let queries = lab.queries.lock().unwrap().clone();
        assert!(!queries.iter().any(|q| q.contains(&hex)), "{queries:?}");
        // Positive control: a listed name is resolved, so the query log works.
        assert_eq!(lab.tunnel_get("allowed.test:8080").0, 200);
        assert!(
            lab.queries
                .lock()
                .unwrap()
                .iter()
                .any(|q| q == "allowed.test")
        );
    });
}

#[test]
fn net12_protocol_abuse() {
    in_lab(&[], 8, |lab| {
        // (a) Host header disagrees with the request target.
        assert_eq!(
            lab.status("GET http://allowed.test:8080/ HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n"),
            403
        );
        assert_eq!(
            lab.status("CONNECT allowed.test:8080 HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n"),
            403
        );
        // (b) A pipelined second request is never forwarded.
        let resp = lab.raw(
            b"GET http://allowed.test:8080/ HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\nGET http://denied.test:8080/ HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n",
        );
        assert!(resp.contains("hello-from-198.18.0.10:8080"), "{resp}");
        assert_eq!(lab.hits("198.18.0.10:8080"), 1);
        let first = &lab.log("198.18.0.10:8080")[0].1;
        assert!(
            !String::from_utf8_lossy(first).contains("denied"),
            "second request leaked upstream"
        );
        // (e) Upgrade requests are refused.
        assert_eq!(lab.status("GET http://allowed.test:8080/ HTTP/1.1\r\nHost: allowed.test:8080\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"), 403);
        assert_eq!(lab.status("GET http://denied.test:8080/ HTTP/1.1\r\nHost: denied.test:8080\r\nUpgrade: h2c\r\n\r\n"), 403);
        // Smuggling shapes.
        assert_eq!(lab.status("POST http://allowed.test:8080/ HTTP/1.1\r\nHost: allowed.test:8080\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 501);
        assert_eq!(lab.status("GET http://allowed.test:8080/ HTTP/1.1\r\nHost: allowed.test:8080\r\nHost: denied.test:8080\r\n\r\n"), 400);
        assert_eq!(
            lab.status("GET / HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n"),
            403
        );
        assert_eq!(
            lab.status(
                "GET https://allowed.test:8080/ HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n"
            ),
            403
        );
        // (d) SOCKS5 BIND and UDP ASSOCIATE (and any SOCKS greeting) are refused at once:
        // corral serves no SOCKS front, so no relay of any kind opens.
        for greeting in [
            &b"\x05\x01\x02"[..],
            b"\x05\x02\x00\x03",
            b"\x05\x03\x00\x01",
        ] {
            let resp = lab.raw(greeting);
            assert!(
                resp.starts_with("HTTP/1.1 400") && resp.contains("not_http"),
                "{resp}"
            );
        }
        // (f) A 1 MiB header is refused without harm.
        let big = format!(
            "GET http://allowed.test:8080/ HTTP/1.1\r\nHost: allowed.test:8080\r\nX: {}\r\n\r\n",
            "a".repeat(1 << 20)
        );
        assert_eq!(lab.status(&big), 431);
        // (f) More parallel connections than the limit: the excess gets 503, the proxy stays up.
        // Wait until earlier connections are gone, then hold exactly the limit open.
        let handle = lab.handle.as_ref().unwrap();
        wait_for(|| handle.active_connections() == 0);
        let idle: Vec<TcpStream> = (0..8)
            .map(|_| TcpStream::connect(lab.proxy).unwrap())
            .collect();
        wait_for(|| handle.active_connections() == 8);
        assert_eq!(
            lab.status("CONNECT allowed.test:8080 HTTP/1.1\r\n\r\n"),
            503
        );
        drop(idle);
        wait_for(|| handle.active_connections() == 0);
        assert_eq!(lab.tunnel_get("allowed.test:8080").0, 200);
        assert_eq!(lab.hits("198.18.0.11:8080"), 0);
    });
}

/// A client that trickles its request head (slowloris) is cut with 408 at the head deadline
/// while it is still sending (each byte restarts the idle timeout, never the deadline), and
/// its slot is freed. Control: a head trickled in a few steps that ends before the deadline
/// is served.
#[test]
fn slow_heads_are_cut_at_the_head_deadline() {
    in_lab_with(&[], 4, Some(Duration::from_secs(2)), |lab| {
        let proxy = lab.proxy;
        // Sends `head`, `step` bytes per 100 ms read wait, until the proxy answers and closes
        // or `for_at_most` passes; returns the answer and how many bytes had been sent.
        let trickle = |head: &[u8], step: usize, for_at_most: Duration| -> (String, usize) {
            let mut s = TcpStream::connect(proxy).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let t = std::time::Instant::now();
            let (mut out, mut sent) = (Vec::new(), 0);
            while t.elapsed() < for_at_most {
                let mut buf = [0u8; 4096];
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => out.extend_from_slice(&buf[..n]),
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
                let next = (sent + step).min(head.len());
                if next > sent && s.write_all(&head[sent..next]).is_ok() {
                    sent = next;
                }
            }
            (String::from_utf8_lossy(&out).into_owned(), sent)
        };
        // 300 bytes, one per step (about 30 s): never a whole head within the 2 s deadline.
        let endless = format!(
            "CONNECT allowed.test:8080 HTTP/1.1\r\nX-Slow: {}",
            "a".repeat(265)
        );
        let (resp, sent) = trickle(endless.as_bytes(), 1, Duration::from_secs(60));
        assert!(
            resp.starts_with("HTTP/1.1 408") && resp.contains("request_head_timeout"),
            "{resp}"
        );
        assert!(
            sent < endless.len(),
            "cut only after the whole trickle ({sent} bytes), not at the deadline"
        );
        let handle = lab.handle.as_ref().unwrap();
        wait_for(|| handle.active_connections() == 0);
        // Control: the same pace for a head sent in four steps is served.
        let head = b"CONNECT allowed.test:8080 HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n";
        let (resp, sent) = trickle(head, head.len().div_ceil(4), Duration::from_secs(1));
        assert_eq!(sent, head.len());
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        let records = lab.records();
        assert!(
            records
                .iter()
                .any(|r| r.reason.as_deref() == Some("request_head_timeout") && r.connections == 1),
            "{records:?}"
        );
    });
}
