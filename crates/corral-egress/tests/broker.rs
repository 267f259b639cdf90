//! The credential broker against scripted TLS upstreams on loopback, with a test CA
//! (ADR-0095). Each attack has its control: the same request done right is forwarded.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corral_contract::Host;
use corral_egress::SystemResolver;
use corral_egress::broker::{
    self, BrokerBudgets, BrokerCall, BrokerConfig, BrokerHandle, Secret, Upstream,
};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

const REAL_KEY: &str = "sk-canary-5f1d2c3b4a";
const PLACEHOLDER: &str = "corral-0123456789abcdef0123456789abcdef";

/// A test CA and a server certificate it signed for 127.0.0.1.
struct Pki {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

fn pki(names: &[&str]) -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
    let cert = CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        server: Arc::new(server),
    }
}

/// How the scripted upstream answers.
#[derive(Clone, Copy)]
enum Script {
    /// 200 with a small JSON body.
    Json,
    /// Chunked SSE events every 50 ms, forever.
    StreamForever,
    /// 302 to another server.
    Redirect(u16),
    /// 200 with a 1 MiB body.
    Big,
    /// Echoes one header line of the request: in its own head (`in_head`) or split across
    /// two pieces of its body.
    Echo { in_head: bool, header: &'static str },
}

/// A TLS upstream on loopback: each connection's request head (and body) is kept.
struct Upstream_ {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

fn upstream(pki: &Pki, script: Script) -> Upstream_ {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (config, s2) = (Arc::clone(&pki.server), Arc::clone(&seen));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (config, seen) = (Arc::clone(&config), Arc::clone(&s2));
            std::thread::spawn(move || serve(stream, &config, &seen, script));
        }
    });
    Upstream_ { port, seen }
}

fn serve(
    stream: TcpStream,
    config: &Arc<rustls::ServerConfig>,
    seen: &Mutex<Vec<String>>,
    script: Script,
) {
    let conn = rustls::ServerConnection::new(Arc::clone(config)).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, stream);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    while buf.len() < end + len {
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    seen.lock()
        .unwrap()
        .push(String::from_utf8_lossy(&buf).into_owned());
    let _ = match script {
        Script::Json => tls.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\nContent-Length: 15\r\n\r\n{\"answer\":\"42\"}",
        ),
        Script::Redirect(port) => tls.write_all(
            format!("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{port}/steal\r\nContent-Length: 0\r\n\r\n")
                .as_bytes(),
        ),
        Script::Echo { in_head, header } => {
            let line = head
                .lines()
                .find(|l| l.starts_with(header))
                .unwrap_or("")
                .to_owned();
            if in_head {
                tls.write_all(
                    format!("HTTP/1.1 200 OK\r\nX-Echo: {line}\r\nContent-Length: 2\r\n\r\nok")
                        .as_bytes(),
                )
            } else {
                let (a, b) = line.split_at(line.len() / 2);
                let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nfirst ");
                let _ = tls.write_all(a.as_bytes()).and_then(|()| tls.flush());
                std::thread::sleep(Duration::from_millis(100));
                tls.write_all(b.as_bytes())
            }
        }
        Script::Big => {
            let body = vec![b'x'; 1 << 20];
            let _ = tls.write_all(
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes(),
            );
            tls.write_all(&body)
        }
        Script::StreamForever => {
            let _ = tls.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
            );
            loop {
                let event = b"data: {\"delta\":\"x\"}\n\n";
                let framed = [
                    format!("{:x}\r\n", event.len()).as_bytes(),
                    event,
                    b"\r\n",
                ]
                .concat();
                if tls.write_all(&framed).and_then(|()| tls.flush()).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    let _ = tls.flush();
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

fn budgets() -> BrokerBudgets {
    BrokerBudgets {
        calls: 10,
        request_bytes: 1 << 20,
        response_bytes: 4 << 20,
        call_time: Duration::from_secs(20),
        total_time: Duration::from_secs(120),
    }
}

fn start_broker(ca_pem: &str, port: u16, b: BrokerBudgets) -> (BrokerHandle, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let inner = listener.local_addr().unwrap().port();
    let config = BrokerConfig {
        upstream: Upstream {
            host: Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            port,
            base_path: "/v1".into(),
        },
        methods: vec!["POST".into(), "GET".into()],
        path_prefixes: vec!["/chat/completions".into(), "/models".into()],
        credential_header: "Authorization".into(),
        placeholder_value: format!("Bearer {PLACEHOLDER}"),
        credential_value: Secret::new(&format!("Bearer {REAL_KEY}")),
        tls: broker::tls_config(Some(("test CA", ca_pem.as_bytes()))).unwrap(),
        budgets: b,
        max_connections: 16,
        head_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(10),
    };
    let handle = broker::start(listener, config, Box::new(SystemResolver)).unwrap();
    (handle, inner)
}

/// One raw request to the broker; the whole response.
fn call(port: u16, request: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn post(path: &str, token: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn status(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn broker_code(response: &str) -> Option<String> {
    response
        .lines()
        .find_map(|l| l.strip_prefix("X-Corral-Broker: "))
        .map(str::to_owned)
}

#[test]
fn a_call_is_forwarded_with_the_real_credential_and_recorded_without_it() {
    let p = pki(&["127.0.0.1"]);
    let up = upstream(&p, Script::Json);
    let (b, port) = start_broker(&p.ca_pem, up.port, budgets());
    let r = call(port, &post("/chat/completions", PLACEHOLDER, "{\"q\":1}"));
    assert_eq!(status(&r), 200, "{r}");
    assert!(r.ends_with("{\"answer\":\"42\"}"), "{r}");
    assert!(
        r.contains("Connection: close\r\n") && !r.contains("keep-alive"),
        "{r}"
    );
    let seen = up.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let req = &seen[0];
    assert!(
        req.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
        "{req}"
    );
    assert!(
        req.contains(&format!("Authorization: Bearer {REAL_KEY}\r\n")),
        "{req}"
    );
    assert!(!req.contains(PLACEHOLDER), "{req}");
    assert!(req.ends_with("{\"q\":1}"), "{req}");
    let calls = b.shutdown();
    assert_eq!(calls.len(), 1);
    let c = &calls[0];
    assert_eq!(
        (
            c.method.as_str(),
            c.path.as_str(),
            c.status,
            c.forwarded,
            c.stopped_by.as_deref()
        ),
        ("POST", "/chat/completions", 200, true, None)
    );
    assert!(c.bytes_up > 0 && c.bytes_down > 0);
    assert!(!format!("{calls:?}").contains(REAL_KEY));
    // Nothing the worker received holds the key.
    assert!(!r.contains(REAL_KEY));
}

#[test]
fn a_wrong_or_missing_placeholder_is_refused_and_nothing_leaves() {
    let p = pki(&["127.0.0.1"]);
    let up = upstream(&p, Script::Json);
    let (b, port) = start_broker(&p.ca_pem, up.port, budgets());
    let wrong = call(port, &post("/chat/completions", "corral-guess", "{}"));
    assert_eq!(
        (status(&wrong), broker_code(&wrong).as_deref()),
        (401, Some("placeholder_mismatch"))
    );
    assert!(
        wrong.contains("\"message\":\"corral model broker: "),
        "{wrong}"
    );
    let none = call(
        port,
        "POST /chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(status(&none), 401);
    let twice = call(
        port,
        &format!(
            "POST /chat/completions HTTP/1.1\r\nAuthorization: Bearer {PLACEHOLDER}\r\nAuthorization: Bearer x\r\nContent-Length: 0\r\n\r\n"
        ),
    );
    assert_eq!(status(&twice), 401);
    assert!(up.seen.lock().unwrap().is_empty());
    // Control.
    assert_eq!(
        status(&call(port, &post("/chat/completions", PLACEHOLDER, "{}"))),
        200
    );
    assert_eq!(up.seen.lock().unwrap().len(), 1);
    let calls = b.shutdown();
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.stopped_by.as_deref() == Some("placeholder_mismatch"))
            .count(),
        3
    );
    assert!(calls.iter().filter(|c| !c.forwarded).count() == 3);
}

#[test]
fn paths_methods_and_forms_outside_the_connection_are_refused() {
    let p = pki(&["127.0.0.1"]);
    let up = upstream(&p, Script::Json);
    let (b, port) = start_broker(&p.ca_pem, up.port, budgets());
    for (req, want, code) in [
        (post("/admin", PLACEHOLDER, "{}"), 403, "path_not_allowed"),
        (
            post("/chat/completionsX", PLACEHOLDER, "{}"),
            403,
            "path_not_allowed",
        ),
        (
            post("/chat/completions/../../admin", PLACEHOLDER, "{}"),
            403,
            "path_invalid",
        ),
        (
            post("/chat/completions/%2e%2e/admin", PLACEHOLDER, "{}"),
            403,
            "path_invalid",
        ),
        (
            post("//evil.test/chat/completions", PLACEHOLDER, "{}"),
            403,
            "path_invalid",
        ),
        (
            post("http://evil.test/chat/completions", PLACEHOLDER, "{}"),
            403,
            "not_origin_form",
        ),
        (
            format!("DELETE /models/x HTTP/1.1\r\nAuthorization: Bearer {PLACEHOLDER}\r\n\r\n"),
            405,
            "method_not_allowed",
        ),
        (
            format!(
                "CONNECT 127.0.0.1:{} HTTP/1.1\r\nAuthorization: Bearer {PLACEHOLDER}\r\n\r\n",
                up.port
            ),
            403,
            "not_origin_form",
        ),
        (
            format!(
                "GET /models HTTP/1.1\r\nUpgrade: websocket\r\nAuthorization: Bearer {PLACEHOLDER}\r\n\r\n"
            ),
            403,
            "upgrade_refused",
        ),
        (
            format!(
                "POST /chat/completions HTTP/1.1\r\nAuthorization: Bearer {PLACEHOLDER}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            ),
            501,
            "transfer_encoding_not_supported",
        ),
    ] {
        let r = call(port, &req);
        assert_eq!(
            (status(&r), broker_code(&r).as_deref()),
            (want, Some(code)),
            "{req:?}: {r}"
        );
    }
    assert!(up.seen.lock().unwrap().is_empty());
    // Control: an allowed path with a query, and a GET below a prefix.
    assert_eq!(
        status(&call(
            port,
            &post("/chat/completions?stream=true", PLACEHOLDER, "{}")
        )),
        200
    );
    let get = format!("GET /models/gpt HTTP/1.1\r\nAuthorization: Bearer {PLACEHOLDER}\r\n\r\n");
    assert_eq!(status(&call(port, &get)), 200);
    let seen = up.seen.lock().unwrap().clone();
    assert!(
        seen.iter()
            .any(|s| s.starts_with("POST /v1/chat/completions?stream=true HTTP/1.1\r\n"))
    );
    assert!(
        seen.iter()
            .any(|s| s.starts_with("GET /v1/models/gpt HTTP/1.1\r\n"))
    );
    assert!(b.shutdown().iter().all(|c| !c.forwarded || c.status == 200));
}

#[test]
fn an_oversized_request_is_refused_before_it_leaves() {
    let p = pki(&["127.0.0.1"]);
    let up = upstream(&p, Script::Json);
    let mut bud = budgets();
    bud.request_bytes = 64 * 1024;
    let (b, port) = start_broker(&p.ca_pem, up.port, bud);
    let big = "x".repeat(40 * 1024);
    let r = call(port, &post("/chat/completions", PLACEHOLDER, &big));
    assert_eq!(
        (status(&r), broker_code(&r).as_deref()),
        (413, Some("request_bytes"))
    );
    assert!(up.seen.lock().unwrap().is_empty());
    // Control: a small one fits.
    assert_eq!(
        status(&call(port, &post("/chat/completions", PLACEHOLDER, "{}"))),
        200
    );
    b.shutdown();
}

#[test]
fn the_call_budget_refuses_call_n_plus_one() {
    let p = pki(&["127.0.0.1"]);
    let up = upstream(&p, Script::Json);
    let mut bud = budgets();
    bud.calls = 3;
    let (b, port) = start_broker(&p.ca_pem, up.port, bud);
    for _ in 0..3 {
        assert_eq!(
            status(&call(port, &post("/chat/completions", PLACEHOLDER, "{}"))),
            200
        );
    }
    let r = call(port, &post("/chat/completions", PLACEHOLDER, "{}"));
    assert_eq!(
        (status(&r), broker_code(&r).as_deref()),
        (403, Some("calls"))
    );
    assert!(r.contains("model call budget is spent"), "{r}");
    assert_eq!(up.seen.lock().unwrap().len(), 3);
    let calls = b.shutdown();
    assert_eq!(calls.last().unwrap().stopped_by.as_deref(), Some("calls"));
}

#[test]
fn a_stream_that_never_ends_is_passed_through_then_cut_at_the_call_time() {
    let p = pki(&["127.0.0.1"]);
    let up = upstream(&p, Script::StreamForever);
    let mut bud = budgets();
    bud.call_time = Duration::from_secs(2);
    let (b, port) = start_broker(&p.ca_pem, up.port, bud);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(post("/chat/completions", PLACEHOLDER, "{}").as_bytes())
        .unwrap();
    // Streaming: the first event arrives while the upstream is still sending (unbuffered).
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("data: ") {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "ended before the first event");
        got.extend_from_slice(&chunk[..n]);
    }
    assert!(
        b.calls().is_empty(),
        "the call is still open while events arrive"
    );
    // Then the broker cuts it: the read ends (a 60 s read timeout fails the test instead).
    let _ = s.read_to_end(&mut got);
    let calls = b.shutdown();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].stopped_by.as_deref(), Some("call_time"));
    assert_eq!(calls[0].status, 200);
    assert!(String::from_utf8_lossy(&got).matches("data: ").count() >= 2);
}

#[test]
fn a_redirect_is_passed_to_the_worker_and_never_followed() {
    let evil = TcpListener::bind("127.0.0.1:0").unwrap();
    let evil_port = evil.local_addr().unwrap().port();
    evil.set_nonblocking(true).unwrap();
    let p = pki(&["127.0.0.1"]);
    let up = upstream(&p, Script::Redirect(evil_port));
    let (b, port) = start_broker(&p.ca_pem, up.port, budgets());
    let r = call(port, &post("/chat/completions", PLACEHOLDER, "{}"));
    assert_eq!(status(&r), 302, "{r}");
    assert!(r.contains(&format!("Location: http://127.0.0.1:{evil_port}/steal")));
    b.shutdown();
    assert_eq!(up.seen.lock().unwrap().len(), 1);
    assert!(evil.accept().is_err(), "the broker followed the redirect");
}

#[test]
fn an_upstream_with_a_certificate_the_connection_does_not_trust_is_refused() {
    let trusted = pki(&["127.0.0.1"]);
    let other = pki(&["127.0.0.1"]);
    let wrong_name = pki(&["model.test"]);
    for (server, why) in [(&other, "another CA"), (&wrong_name, "another name")] {
        let up = upstream(server, Script::Json);
        let (b, port) = start_broker(&trusted.ca_pem, up.port, budgets());
        let r = call(port, &post("/chat/completions", PLACEHOLDER, "{}"));
        assert_eq!(
            (status(&r), broker_code(&r).as_deref()),
            (502, Some("upstream_tls")),
            "{why}: {r}"
        );
        assert!(
            up.seen.lock().unwrap().is_empty(),
            "{why}: the request was sent"
        );
        b.shutdown();
    }
    // Control: the trusted CA's server.
    let up = upstream(&trusted, Script::Json);
    let (b, port) = start_broker(&trusted.ca_pem, up.port, budgets());
    assert_eq!(
        status(&call(port, &post("/chat/completions", PLACEHOLDER, "{}"))),
        200
    );
    b.shutdown();
}

#[test]
fn the_response_budget_cuts_a_response_and_refuses_the_next_call() {
    let p = pki(&["127.0.0.1"]);
    let up = upstream(&p, Script::Big);
    let mut bud = budgets();
    bud.response_bytes = 256 * 1024;
    let (b, port) = start_broker(&p.ca_pem, up.port, bud);
    let r = call(port, &post("/chat/completions", PLACEHOLDER, "{}"));
    assert_eq!(status(&r), 200);
    assert!(r.len() <= 256 * 1024 + 1024, "{} bytes passed", r.len());
    assert!(r.len() >= 64 * 1024, "{} bytes passed", r.len());
    let next = call(port, &post("/chat/completions", PLACEHOLDER, "{}"));
    assert_eq!(
        (status(&next), broker_code(&next).as_deref()),
        (403, Some("response_bytes"))
    );
    let calls: Vec<BrokerCall> = b.shutdown();
    assert_eq!(calls[0].stopped_by.as_deref(), Some("response_bytes"));
    assert_eq!(up.seen.lock().unwrap().len(), 1);
}

#[test]
fn the_total_time_budget_refuses_calls_after_it() {
    let p = pki(&["127.0.0.1"]);
    let up = upstream(&p, Script::Json);
    let mut bud = budgets();
    bud.total_time = Duration::from_millis(300);
    let (b, port) = start_broker(&p.ca_pem, up.port, bud);
    let started = Instant::now();
    // Control first: inside the budget.
    assert_eq!(
        status(&call(port, &post("/chat/completions", PLACEHOLDER, "{}"))),
        200
    );
    while started.elapsed() < Duration::from_millis(400) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = call(port, &post("/chat/completions", PLACEHOLDER, "{}"));
    assert_eq!(
        (status(&r), broker_code(&r).as_deref()),
        (403, Some("total_time"))
    );
    assert_eq!(up.seen.lock().unwrap().len(), 1);
    b.shutdown();
}

/// The connection-count limit answers 503 past it (a worker cannot pin the broker's threads).
#[test]
fn connections_past_the_limit_are_answered_503() {
    let p = pki(&["127.0.0.1"]);
    let up = upstream(&p, Script::Json);
    let (b, port) = start_broker(&p.ca_pem, up.port, budgets());
    // 16 idle connections hold every slot (their heads never come).
    let held: Vec<TcpStream> = (0..16)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    // Accepting is asynchronous: wait until the broker holds all 16.
    for _ in 0..2000 {
        if b.active_connections() == 16 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(b.active_connections(), 16);
    let r = call(port, &post("/chat/completions", PLACEHOLDER, "{}"));
    assert_eq!(
        (status(&r), broker_code(&r).as_deref()),
        (503, Some("connection_limit"))
    );
    drop(held);
    b.shutdown();
}

/// A worker that keeps calling (clients retry) cannot grow the record without bound: past
/// `MAX_RECORDS` calls are counted, not recorded one by one, and still refused.
#[test]
fn the_record_is_bounded_and_later_calls_are_counted() {
    let p = pki(&["127.0.0.1"]);
    let up = upstream(&p, Script::Json);
    let (b, port) = start_broker(&p.ca_pem, up.port, budgets());
    let extra = 25;
    for _ in 0..broker::MAX_RECORDS + extra {
        let r = call(port, &post("/chat/completions", "corral-guess", "{}"));
        assert_eq!(status(&r), 401);
    }
    let (calls, unrecorded) = b.shutdown_counted();
    assert_eq!(calls.len(), broker::MAX_RECORDS);
    assert_eq!(unrecorded, extra as u64);
    assert!(up.seen.lock().unwrap().is_empty());
}

/// An upstream that echoes the request's headers never hands the worker the key: refused in
/// the head, cut in the body even when the key arrives split across two reads.
#[test]
fn an_upstream_echoing_the_credential_is_cut() {
    let p = pki(&["127.0.0.1"]);
    for in_head in [true, false] {
        let up = upstream(
            &p,
            Script::Echo {
                in_head,
                header: "Authorization:",
            },
        );
        let (b, port) = start_broker(&p.ca_pem, up.port, budgets());
        let r = call(port, &post("/chat/completions", PLACEHOLDER, "{}"));
        assert!(!r.contains(REAL_KEY), "in_head {in_head}: {r}");
        let calls = b.shutdown();
        assert_eq!(
            calls[0].stopped_by.as_deref(),
            Some("credential_in_response"),
            "in_head {in_head}: {calls:?}"
        );
        assert_eq!(up.seen.lock().unwrap().len(), 1);
    }
    // Control: the same upstream echoing another header, split the same way, is passed on.
    let up = upstream(
        &p,
        Script::Echo {
            in_head: false,
            header: "Content-Type:",
        },
    );
    let (b, port) = start_broker(&p.ca_pem, up.port, budgets());
    let r = call(port, &post("/chat/completions", PLACEHOLDER, "{}"));
    assert!(r.contains("first Content-Type: application/json"), "{r}");
    assert_eq!(b.shutdown()[0].stopped_by, None);
}
