//! The model credential broker (ADR-0095; the seeds' ADR-057): the model credential stays
//! with corral, the worker gets a per-run placeholder.
//!
//! Inside the sandbox the worker sees a plain-HTTP model endpoint on loopback (a listener the
//! supervisor made in the sandbox's network namespace and serves from outside, as the egress
//! proxy's). For each connection the broker reads one request head (the proxy's strict parser)
//! and checks, before anything leaves:
//! 1. an origin-form target (`/path?query`) whose path is one of the connection's prefixes,
//!    spelled plainly (no `%`, `\`, `//`, `.` or `..` segment: nothing an upstream could read
//!    as another path);
//! 2. an allowed method, no `Upgrade`;
//! 3. the credential header present once, holding exactly the run's placeholder;
//! 4. the budgets: calls, request bytes, response bytes, the total time.
//!
//! Then it dials the one upstream of the connection over TLS (rustls, the connection's CA or
//! the system's roots), sends the request with the placeholder replaced by the real credential,
//! `Connection: close` and exactly `Content-Length` body bytes, and streams the response back
//! as it arrives (SSE and chunked bodies pass through unbuffered). Redirects are passed to the
//! worker, never followed. Each call is recorded: when, method, path, status, bytes, duration,
//! and which budget or rule stopped it; never a header value.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use corral_contract::Host;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use crate::Resolve;
use crate::http::{HeadError, RequestHead, content_length, read_head};

/// A credential's text: never printed, never recorded.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential. Surrounding blanks and line ends (a key file's last newline) are
    /// dropped; a credential with a line break or control character inside is refused, since
    /// it would end the header it goes in (`None`).
    #[must_use]
    pub fn new(text: &str) -> Option<Self> {
        let t = text.trim_matches([' ', '\t', '\r', '\n']);
        if t.is_empty() || t.chars().any(char::is_control) {
            return None;
        }
        Some(Self(t.to_owned()))
    }
}

impl Secret {
    /// The credential's text, for the one header it goes in.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Which budget stopped a call (recorded), or refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// The number of calls.
    Calls,
    /// Bytes sent upstream (heads and bodies, all calls together).
    RequestBytes,
    /// Bytes received from upstream (all calls together).
    ResponseBytes,
    /// The time of one call.
    CallTime,
    /// The time of all calls: from the broker's start.
    TotalTime,
}

impl Budget {
    /// The stable name recorded and sent in `X-Corral-Broker`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Calls => "calls",
            Self::RequestBytes => "request_bytes",
            Self::ResponseBytes => "response_bytes",
            Self::CallTime => "call_time",
            Self::TotalTime => "total_time",
        }
    }
}

/// The finite budgets of one run's model calls.
#[derive(Debug, Clone, Copy)]
pub struct BrokerBudgets {
    /// Calls forwarded; call N+1 is refused.
    pub calls: u64,
    /// Bytes sent upstream, all calls together.
    pub request_bytes: u64,
    /// Bytes received from upstream, all calls together.
    pub response_bytes: u64,
    /// One call's time, from its head to the response's last byte.
    pub call_time: Duration,
    /// All calls' time, from the broker's start.
    pub total_time: Duration,
}

/// Where the broker forwards to: one TLS upstream.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The upstream's name (also the TLS server name) or address.
    pub host: Host,
    /// The upstream's port.
    pub port: u16,
    /// Prepended to every forwarded path: `""` or `/v1` (no trailing `/`).
    pub base_path: String,
}

/// What one broker serves.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// The one upstream.
    pub upstream: Upstream,
    /// Methods forwarded (exact, upper case).
    pub methods: Vec<String>,
    /// Paths forwarded: a path equal to a prefix or below it (`/chat` admits `/chat/x`, not
    /// `/chatter`).
    pub path_prefixes: Vec<String>,
    /// The header that carries the credential (`Authorization`, `x-api-key`).
    pub credential_header: String,
    /// What the worker must send in that header: the scheme and the run's placeholder
    /// (`Bearer corral-...`).
    pub placeholder_value: String,
    /// What the broker sends instead: the scheme and the real credential. `None`: the header
    /// is removed and nothing is added (an upstream without a key).
    pub credential_value: Option<Secret>,
    /// TLS to the upstream ([`tls_config`]).
    pub tls: Arc<rustls::ClientConfig>,
    /// The budgets.
    pub budgets: BrokerBudgets,
    /// Connections served at once; more are answered 503.
    pub max_connections: usize,
    /// The whole request head must arrive within this (408).
    pub head_timeout: Duration,
    /// Time allowed to connect to the upstream and finish the TLS handshake.
    pub connect_timeout: Duration,
}

/// Why a TLS configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// The CA file held no certificate, or one rustls refused.
    #[error("no usable CA certificate in {0}")]
    NoRoots(String),
    /// No CA bundle of the system's was found.
    #[error(
        "no system CA bundle found (looked for {}); name a CA file in the connection",
        SYSTEM_BUNDLES.join(", ")
    )]
    NoSystemRoots,
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Where Debian/Ubuntu, Fedora/RHEL and Alpine/Arch keep the system's CA bundle.
pub const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// The TLS client configuration for an upstream: trusting exactly the certificates of
/// `ca_pem` (`(name, PEM text)`, the connection's CA file), or else the system's bundle.
/// HTTP/1.1 only (ALPN), TLS 1.2 and 1.3, ring's safe defaults.
pub fn tls_config(
    ca_pem: Option<(&str, &[u8])>,
) -> Result<Arc<rustls::ClientConfig>, TlsConfigError> {
    let mut roots = rustls::RootCertStore::empty();
    let (name, pem): (String, Vec<u8>) = match ca_pem {
        Some((name, pem)) => (name.to_owned(), pem.to_vec()),
        None => SYSTEM_BUNDLES
            .iter()
            .find_map(|p| std::fs::read(p).ok().map(|b| ((*p).to_owned(), b)))
            .ok_or(TlsConfigError::NoSystemRoots)?,
    };
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let Ok(cert) = cert else {
            return Err(TlsConfigError::NoRoots(name));
        };
        // A bundle may hold a certificate webpki cannot use as an anchor; the others still do.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(TlsConfigError::NoRoots(name));
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A fresh per-run placeholder: `corral-` and 32 random hex digits. Worth nothing outside the
/// run: the broker accepts it only on its own loopback endpoint.
pub fn placeholder_token() -> Result<String, rustls::Error> {
    let mut bytes = [0u8; 16];
    rustls::crypto::aws_lc_rs::default_provider()
        .secure_random
        .fill(&mut bytes)
        .map_err(|_| rustls::Error::FailedToGetRandomBytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("corral-{hex}"))
}

/// One call as recorded (the manifest's `model_calls` entry): never a header value or a body.
pub use corral_contract::manifest::ModelCallRecord as BrokerCall;

#[derive(Default)]
struct Used {
    calls: u64,
    request_bytes: u64,
    response_bytes: u64,
}

struct Shared {
    config: BrokerConfig,
    resolver: Box<dyn Resolve>,
    started: Instant,
    deadline: Instant,
    stop: AtomicBool,
    active: AtomicUsize,
    used: Mutex<Used>,
    calls: Mutex<Vec<BrokerCall>>,
    /// Calls past [`MAX_RECORDS`]: counted, not recorded one by one.
    unrecorded: AtomicU64,
    live: Mutex<std::collections::BTreeMap<u64, Vec<TcpStream>>>,
    next_id: AtomicU64,
}

/// The most calls recorded one by one: a worker that keeps calling after its budget is spent
/// (clients retry) cannot grow the supervisor's memory or the manifest without bound; later
/// calls are refused all the same and counted.
pub const MAX_RECORDS: usize = 4096;

/// A running broker. Dropping it without `shutdown` also stops it.
pub struct BrokerHandle {
    shared: Arc<Shared>,
    listener: TcpListener,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for BrokerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerHandle").finish_non_exhaustive()
    }
}

/// Starts serving `listener` (the worker's model endpoint) for one run.
pub fn start(
    listener: TcpListener,
    config: BrokerConfig,
    resolver: Box<dyn Resolve>,
) -> io::Result<BrokerHandle> {
    listener.set_nonblocking(false)?;
    let started = Instant::now();
    let shared = Arc::new(Shared {
        deadline: started + config.budgets.total_time,
        config,
        resolver,
        started,
        stop: AtomicBool::new(false),
        active: AtomicUsize::new(0),
        used: Mutex::new(Used::default()),
        calls: Mutex::new(Vec::new()),
        unrecorded: AtomicU64::new(0),
        live: Mutex::new(std::collections::BTreeMap::new()),
        next_id: AtomicU64::new(0),
    });
    let accept_listener = listener.try_clone()?;
    let s = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("corral-broker-accept".into())
        .spawn(move || accept_loop(&accept_listener, &s))?;
    Ok(BrokerHandle {
        shared,
        listener,
        thread: Some(thread),
    })
}

impl BrokerHandle {
    /// Connections being served right now.
    #[must_use]
    pub fn active_connections(&self) -> usize {
        self.shared.active.load(Ordering::SeqCst)
    }

    /// The calls recorded so far, in the order they ended.
    #[must_use]
    pub fn calls(&self) -> Vec<BrokerCall> {
        self.shared
            .calls
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    /// Calls past [`MAX_RECORDS`], counted but not recorded one by one.
    #[must_use]
    pub fn unrecorded(&self) -> u64 {
        self.shared.unrecorded.load(Ordering::Relaxed)
    }

    /// Stops accepting, cuts every call in flight, and returns the record.
    pub fn shutdown(mut self) -> Vec<BrokerCall> {
        self.stop();
        self.calls()
    }

    /// [`BrokerHandle::shutdown`], with the count of calls past [`MAX_RECORDS`].
    pub fn shutdown_counted(mut self) -> (Vec<BrokerCall>, u64) {
        self.stop();
        (self.calls(), self.unrecorded())
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = rustix::net::shutdown(&self.listener, rustix::net::Shutdown::Both);
        if let Ok(live) = self.shared.live.lock() {
            for s in live.values().flatten() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Connection threads record their call as they end; wait for them (bounded: every
        // socket they use was just shut down).
        let until = Instant::now() + Duration::from_secs(2);
        while self.shared.active.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for BrokerHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let Ok((mut stream, _)) = listener.accept() else {
            if shared.stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let _ = stream.set_nodelay(true);
        if shared.active.fetch_add(1, Ordering::SeqCst) >= shared.config.max_connections {
            shared.active.fetch_sub(1, Ordering::SeqCst);
            let _ = respond(
                &mut stream,
                503,
                "connection_limit",
                "too many model calls at once",
            );
            continue;
        }
        let s = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("corral-broker-conn".into())
            .spawn(move || {
                handle(stream, &s);
                s.active.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// An error the worker can show: the status, a JSON body in the shape OpenAI-compatible
/// clients print (`error.message`), and `X-Corral-Broker: <code>`.
fn respond(stream: &mut TcpStream, status: u16, code: &str, text: &str) -> io::Result<()> {
    let phrase = match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let message = format!("corral model broker: {text} ({code})");
    let body = format!(
        "{{\"error\":{{\"message\":{},\"type\":\"corral_broker\",\"code\":\"{code}\"}}}}\n",
        json_string(&message)
    );
    let response = format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: application/json\r\nConnection: close\r\nX-Corral-Broker: {code}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes())?;
    stream.flush()
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn escape(s: &str, max: usize) -> String {
    s.chars().flat_map(char::escape_default).take(max).collect()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A refusal before anything was forwarded.
struct Refusal {
    status: u16,
    code: &'static str,
    text: String,
}

fn refusal(status: u16, code: &'static str, text: impl Into<String>) -> Refusal {
    Refusal {
        status,
        code,
        text: text.into(),
    }
}

fn budget_refusal(b: Budget) -> Refusal {
    let text = match b {
        Budget::Calls => "the run's model call budget is spent",
        Budget::RequestBytes => "the run's request byte budget would be exceeded",
        Budget::ResponseBytes => "the run's response byte budget is spent",
        Budget::CallTime => "the call took longer than its time budget",
        Budget::TotalTime => "the run's model time budget is spent",
    };
    let status = if b == Budget::RequestBytes { 413 } else { 403 };
    refusal(status, b.as_str(), text)
}

/// A read with one deadline for all of a head's reads.
struct DeadlineReader<'a> {
    stream: &'a mut TcpStream,
    until: Instant,
}

impl Read for DeadlineReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

fn handle(mut client: TcpStream, shared: &Arc<Shared>) {
    let begun = Instant::now();
    let until = begun + shared.config.head_timeout;
    let mut call = BrokerCall {
        started_ms: millis(begun - shared.started),
        method: String::new(),
        path: String::new(),
        status: 0,
        bytes_up: 0,
        bytes_down: 0,
        duration_ms: 0,
        stopped_by: None,
        forwarded: false,
    };
    let read = read_head(&mut DeadlineReader {
        stream: &mut client,
        until,
    });
    let outcome = match read {
        Err(HeadError { status, reason }) => Err(refusal(status, reason, "malformed request")),
        Ok((head, early)) => {
            call.method = escape(&head.method, 32);
            call.path = escape(head.target.split('?').next().unwrap_or(""), 300);
            check(&head, shared).and_then(|(body_len, upstream_target)| {
                forward(
                    &mut client,
                    &head,
                    early,
                    body_len,
                    &upstream_target,
                    shared,
                    &mut call,
                )
            })
        }
    };
    if let Err(r) = outcome {
        let _ = respond(&mut client, r.status, r.code, &r.text);
        call.status = r.status;
        call.stopped_by = Some(r.code.to_owned());
    }
    let _ = client.shutdown(Shutdown::Both);
    call.duration_ms = millis(begun.elapsed());
    if let Ok(mut c) = shared.calls.lock() {
        if c.len() < MAX_RECORDS {
            c.push(call);
        } else {
            shared.unrecorded.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The checks made before anything leaves; returns the body's length and the upstream's
/// request target.
fn check(head: &RequestHead, shared: &Shared) -> Result<(u64, String), Refusal> {
    let cfg = &shared.config;
    if head.header("upgrade").is_some() {
        return Err(refusal(
            403,
            "upgrade_refused",
            "protocol upgrades are not forwarded",
        ));
    }
    if !head.target.starts_with('/') {
        return Err(refusal(
            403,
            "not_origin_form",
            "the model endpoint is not a proxy: send /path requests",
        ));
    }
    let (path, query) = match head.target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (head.target.as_str(), None),
    };
    if !plain_path(path) || head.target.contains('#') {
        return Err(refusal(
            403,
            "path_invalid",
            "the path must be plain: no %, \\, //, . or .. segment",
        ));
    }
    if !cfg.path_prefixes.iter().any(|p| under_prefix(path, p)) {
        return Err(refusal(
            403,
            "path_not_allowed",
            format!(
                "{} is not a path this connection forwards",
                escape(path, 200)
            ),
        ));
    }
    if !cfg.methods.contains(&head.method) {
        return Err(refusal(
            405,
            "method_not_allowed",
            format!(
                "{} is not a method this connection forwards",
                escape(&head.method, 32)
            ),
        ));
    }
    let mut sent = head
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(&cfg.credential_header));
    match (sent.next(), sent.next()) {
        (Some((_, v)), None)
            if constant_time_eq(v.as_bytes(), cfg.placeholder_value.as_bytes()) => {}
        _ => {
            return Err(refusal(
                401,
                "placeholder_mismatch",
                format!(
                    "send the run's placeholder token in {} (it is in the agent's settings)",
                    cfg.credential_header
                ),
            ));
        }
    }
    let body_len =
        content_length(head).map_err(|e| refusal(e.status, e.reason, "bad Content-Length"))?;
    // The budgets, last: a malformed or misdirected request costs none of them.
    if Instant::now() >= shared.deadline {
        return Err(budget_refusal(Budget::TotalTime));
    }
    let mut used = shared
        .used
        .lock()
        .map_err(|_| refusal(503, "broker_failed", "internal error"))?;
    if used.calls >= cfg.budgets.calls {
        return Err(budget_refusal(Budget::Calls));
    }
    if used.response_bytes >= cfg.budgets.response_bytes {
        return Err(budget_refusal(Budget::ResponseBytes));
    }
    let left = cfg.budgets.request_bytes.saturating_sub(used.request_bytes);
    // The head is at most 32 KiB: reserve that with the body, so a call admitted here never
    // needs more than what is left.
    if body_len.saturating_add(crate::http::MAX_HEAD_BYTES as u64 + 1024) > left {
        return Err(budget_refusal(Budget::RequestBytes));
    }
    used.calls += 1;
    let target = match query {
        Some(q) => format!("{}{path}?{q}", cfg.upstream.base_path),
        None => format!("{}{path}", cfg.upstream.base_path),
    };
    Ok((body_len, target))
}

fn plain_path(path: &str) -> bool {
    corral_contract::rules::is_plain_url_path(path)
}

fn under_prefix(path: &str, prefix: &str) -> bool {
    path == prefix
        || (path.starts_with(prefix)
            && (prefix.ends_with('/') || path.as_bytes().get(prefix.len()) == Some(&b'/')))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Hop-by-hop headers (RFC 9110 7.6.1), proxy credentials, and what the broker sets itself.
const DROPPED: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
    "expect",
    "content-length",
];

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn forward(
    client: &mut TcpStream,
    head: &RequestHead,
    early: Vec<u8>,
    body_len: u64,
    target: &str,
    shared: &Arc<Shared>,
    call: &mut BrokerCall,
) -> Result<(), Refusal> {
    let cfg = &shared.config;
    let begun = Instant::now();
    let (until, limit) = {
        let call_end = begun + cfg.budgets.call_time;
        if call_end <= shared.deadline {
            (call_end, Budget::CallTime)
        } else {
            (shared.deadline, Budget::TotalTime)
        }
    };
    let mut tls = dial(shared, until)?;
    let id = register(shared, &[client, &tls.sock]);
    let result = exchange(
        client, head, &early, body_len, target, &mut tls, shared, call, until, limit,
    );
    unregister(shared, id);
    let _ = tls.sock.shutdown(Shutdown::Both);
    result
}

#[allow(clippy::too_many_arguments, reason = "one call's state, passed once")]
fn exchange(
    client: &mut TcpStream,
    head: &RequestHead,
    early: &[u8],
    body_len: u64,
    target: &str,
    tls: &mut Tls,
    shared: &Shared,
    call: &mut BrokerCall,
    until: Instant,
    limit: Budget,
) -> Result<(), Refusal> {
    let cfg = &shared.config;
    let mut out = format!(
        "{} {target} HTTP/1.1\r\nHost: {}\r\n",
        head.method,
        authority(&cfg.upstream)
    );
    for (name, value) in &head.headers {
        if DROPPED.iter().any(|h| name.eq_ignore_ascii_case(h))
            || name.eq_ignore_ascii_case(&cfg.credential_header)
        {
            continue;
        }
        out.push_str(name);
        out.push_str(": ");
        out.push_str(value);
        out.push_str("\r\n");
    }
    if let Some(secret) = &cfg.credential_value {
        out.push_str(&cfg.credential_header);
        out.push_str(": ");
        out.push_str(&secret.0);
        out.push_str("\r\n");
    }
    if head.header("content-length").is_some() {
        out.push_str(&format!("Content-Length: {body_len}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    let cut = |c: &mut BrokerCall, b: Budget| {
        c.stopped_by = Some(b.as_str().to_owned());
    };
    let timed = |stream: &TcpStream| -> io::Result<()> {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        stream.set_write_timeout(Some(left))
    };
    call.forwarded = true;
    // The request: the head, then exactly the declared body (a pipelined second request is
    // never forwarded).
    let sent = (|| -> io::Result<u64> {
        timed(&tls.sock)?;
        tls.write_all(out.as_bytes())?;
        let mut up = out.len() as u64;
        let take = usize::try_from(body_len)
            .unwrap_or(usize::MAX)
            .min(early.len());
        tls.write_all(&early[..take])?;
        up += take as u64;
        let mut remaining = body_len - take as u64;
        let mut buf = vec![0u8; 64 * 1024];
        while remaining > 0 {
            timed(client)?;
            let want = usize::try_from(remaining)
                .unwrap_or(usize::MAX)
                .min(buf.len());
            let n = client.read(&mut buf[..want])?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            timed(&tls.sock)?;
            tls.write_all(&buf[..n])?;
            up += n as u64;
            remaining -= n as u64;
        }
        tls.flush()?;
        Ok(up)
    })();
    let up = match sent {
        Ok(up) => up,
        Err(e) => {
            let timed_out = matches!(
                e.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            );
            charge(shared, out.len() as u64, 0);
            return Err(if timed_out {
                refusal(
                    504,
                    limit.as_str(),
                    "the request did not reach the model in time",
                )
            } else {
                refusal(
                    502,
                    "upstream_failed",
                    "the model upstream did not take the request",
                )
            });
        }
    };
    call.bytes_up = up;
    charge(shared, up, 0);
    // The response head: read (bounded), checked, passed on with `Connection: close`.
    let mut buf = Vec::with_capacity(8192);
    let mut chunk = vec![0u8; 64 * 1024];
    let (head_out, mut rest) = loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            match response_head(&buf) {
                // An interim response (100 Continue, 103 Early Hints) is dropped: the worker
                // gets the final one.
                Ok((status, _)) if (100..200).contains(&status) && status != 101 => {
                    buf = rest;
                    continue;
                }
                Ok((status, text)) if status != 101 => {
                    call.status = status;
                    break (text, rest);
                }
                _ => {
                    call.bytes_down = buf.len() as u64;
                    charge(shared, 0, buf.len() as u64);
                    return Err(refusal(
                        502,
                        "upstream_response_invalid",
                        "the model upstream's response could not be read",
                    ));
                }
            }
        }
        if buf.len() > crate::http::MAX_HEAD_BYTES {
            return Err(refusal(
                502,
                "upstream_response_invalid",
                "the model upstream's response head is too large",
            ));
        }
        if timed(&tls.sock).is_err() {
            cut(call, limit);
            return Err(refusal(
                504,
                limit.as_str(),
                "the model did not answer in time",
            ));
        }
        match tls.read(&mut chunk) {
            Ok(0) => {
                return Err(refusal(
                    502,
                    "upstream_failed",
                    "the model upstream closed without answering",
                ));
            }
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                call.bytes_down += n as u64;
                if !charge_down(shared, n as u64) {
                    return Err(budget_refusal(Budget::ResponseBytes));
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                cut(call, limit);
                return Err(refusal(
                    504,
                    limit.as_str(),
                    "the model did not answer in time",
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                let code = if e
                    .get_ref()
                    .is_some_and(|i| i.downcast_ref::<rustls::Error>().is_some())
                {
                    "upstream_tls"
                } else {
                    "upstream_failed"
                };
                return Err(refusal(
                    502,
                    code,
                    "the model upstream could not be reached over TLS",
                ));
            }
        }
    };
    // An upstream that echoes the request's headers (a debugging endpoint, a misconfigured
    // gateway) would hand the worker the key: the head and every piece of the body are
    // searched for it (with the previous piece's tail, so a key split across two reads is
    // found), and the answer is cut where it appears.
    let secret = cfg.credential_value.as_ref().map(|c| c.0.as_bytes());
    if secret.is_some_and(|k| contains(head_out.as_bytes(), k)) {
        return Err(refusal(
            502,
            "credential_in_response",
            "the model upstream's answer held the credential; it was not passed on",
        ));
    }
    let mut tail: Vec<u8> = Vec::new();
    // From here the worker has its status: problems cut the stream, recorded.
    if client.write_all(head_out.as_bytes()).is_err() {
        return Ok(());
    }
    loop {
        if !rest.is_empty() {
            if let Some(k) = secret {
                let mut window = std::mem::take(&mut tail);
                window.extend_from_slice(&rest);
                if contains(&window, k) {
                    call.stopped_by = Some("credential_in_response".into());
                    return Ok(());
                }
                let keep = window.len().min(k.len().saturating_sub(1));
                tail = window[window.len() - keep..].to_vec();
            }
            if client.write_all(&rest).is_err() {
                return Ok(());
            }
            rest.clear();
        }
        if shared.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        if timed(&tls.sock).is_err() || timed(client).is_err() {
            cut(call, limit);
            return Ok(());
        }
        match tls.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                call.bytes_down += n as u64;
                let allowed = take_down(shared, n as u64);
                rest.extend_from_slice(&chunk[..usize::try_from(allowed).unwrap_or(n)]);
                if allowed < n as u64 {
                    let mut window = std::mem::take(&mut tail);
                    window.extend_from_slice(&rest);
                    if secret.is_none_or(|k| !contains(&window, k)) {
                        let _ = client.write_all(&rest);
                    }
                    cut(call, Budget::ResponseBytes);
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
                ) =>
            {
                cut(call, limit);
                return Ok(());
            }
            // An upstream that closes without TLS's close_notify has ended its response as
            // far as HTTP/1.1 with `Connection: close` is concerned; the worker's client
            // checks the framing.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(_) => {
                call.stopped_by = Some("upstream_failed".into());
                return Ok(());
            }
        }
    }
}

/// The status and the head to send on: the status line as the upstream sent it, its
/// headers but the hop-by-hop ones, then `Connection: close`.
fn response_head(raw: &[u8]) -> Result<(u16, String), ()> {
    let mut slots = [httparse::EMPTY_HEADER; crate::http::MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut slots);
    let mut full = raw.to_vec();
    full.extend_from_slice(b"\r\n\r\n");
    match resp.parse(&full) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(()),
    }
    let status = resp.code.ok_or(())?;
    let reason = resp.reason.unwrap_or("");
    let mut out = format!("HTTP/1.1 {status} {reason}\r\n");
    for h in resp.headers.iter() {
        if [
            "connection",
            "keep-alive",
            "proxy-connection",
            "upgrade",
            "trailer",
        ]
        .iter()
        .any(|d| h.name.eq_ignore_ascii_case(d))
        {
            continue;
        }
        let value = std::str::from_utf8(h.value).map_err(|_| ())?;
        if value.contains(['\r', '\n']) {
            return Err(());
        }
        out.push_str(h.name);
        out.push_str(": ");
        out.push_str(value);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok((status, out))
}

fn charge(shared: &Shared, up: u64, down: u64) {
    if let Ok(mut u) = shared.used.lock() {
        u.request_bytes = u.request_bytes.saturating_add(up);
        u.response_bytes = u.response_bytes.saturating_add(down);
    }
}

/// Counts response bytes of a head; false when the budget is spent.
fn charge_down(shared: &Shared, n: u64) -> bool {
    take_down(shared, n) == n
}

/// Takes up to `n` bytes of the response budget; returns how many were left to take.
fn take_down(shared: &Shared, n: u64) -> u64 {
    let Ok(mut u) = shared.used.lock() else {
        return 0;
    };
    let left = shared
        .config
        .budgets
        .response_bytes
        .saturating_sub(u.response_bytes);
    let take = n.min(left);
    u.response_bytes += take;
    take
}

fn authority(u: &Upstream) -> String {
    let host = match &u.host {
        Host::Ip(IpAddr::V6(ip)) => format!("[{ip}]"),
        Host::Ip(ip) => ip.to_string(),
        Host::Dns(name) => name.clone(),
    };
    if u.port == 443 {
        host
    } else {
        format!("{host}:{}", u.port)
    }
}

fn dial(shared: &Shared, until: Instant) -> Result<Tls, Refusal> {
    let cfg = &shared.config;
    let u = &cfg.upstream;
    let (ips, name) = match &u.host {
        Host::Ip(ip) => (vec![*ip], ServerName::IpAddress((*ip).into())),
        Host::Dns(n) => {
            let ips = shared.resolver.resolve(n, u.port).map_err(|_| {
                refusal(
                    502,
                    "resolution_failed",
                    "the model upstream's name did not resolve",
                )
            })?;
            let name = ServerName::try_from(n.clone()).map_err(|_| {
                refusal(
                    502,
                    "upstream_tls",
                    "the upstream's name is not a TLS server name",
                )
            })?;
            (ips, name)
        }
    };
    let connect_until = until.min(Instant::now() + cfg.connect_timeout);
    let mut sock = None;
    for ip in ips {
        let left = connect_until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if let Ok(s) = TcpStream::connect_timeout(&SocketAddr::new(ip, u.port), left) {
            sock = Some(s);
            break;
        }
    }
    let sock = sock.ok_or_else(|| {
        refusal(
            502,
            "connect_failed",
            "the model upstream could not be reached",
        )
    })?;
    let _ = sock.set_nodelay(true);
    let conn = rustls::ClientConnection::new(Arc::clone(&cfg.tls), name)
        .map_err(|_| refusal(502, "upstream_tls", "TLS could not start"))?;
    let mut tls = rustls::StreamOwned::new(conn, sock);
    // The handshake now, bounded, so a bad certificate is told apart from a bad request.
    while tls.conn.is_handshaking() {
        let left = connect_until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(refusal(
                504,
                "connect_failed",
                "the TLS handshake did not finish in time",
            ));
        }
        let _ = tls.sock.set_read_timeout(Some(left));
        let _ = tls.sock.set_write_timeout(Some(left));
        if let Err(e) = tls.conn.complete_io(&mut tls.sock) {
            let tls_error = e
                .get_ref()
                .is_some_and(|i| i.downcast_ref::<rustls::Error>().is_some());
            return Err(if tls_error {
                refusal(
                    502,
                    "upstream_tls",
                    "the model upstream's TLS certificate was refused",
                )
            } else {
                refusal(502, "connect_failed", "the TLS handshake failed")
            });
        }
    }
    Ok(tls)
}

fn register(shared: &Shared, streams: &[&TcpStream]) -> u64 {
    let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
    let clones: Vec<TcpStream> = streams.iter().filter_map(|s| s.try_clone().ok()).collect();
    if let Ok(mut live) = shared.live.lock() {
        live.insert(id, clones);
    }
    id
}

fn unregister(shared: &Shared, id: u64) {
    if let Ok(mut live) = shared.live.lock() {
        live.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_plain_or_refused() {
        for ok in ["/v1/chat/completions", "/", "/models/", "/a-b_c.d~e:f@g"] {
            assert!(plain_path(ok), "{ok}");
        }
        for bad in [
            "/v1/../admin",
            "/v1/./x",
            "//evil.test/x",
            "/v1//x",
            "/v1/%2e%2e/admin",
            "/v1/%2fadmin",
            "/v1\\admin",
            "/v1/ x",
            "/v1/\u{e9}",
            "v1",
            "/..",
        ] {
            assert!(!plain_path(bad), "{bad}");
        }
    }

    #[test]
    fn prefixes_end_at_a_segment() {
        assert!(under_prefix("/chat", "/chat"));
        assert!(under_prefix("/chat/x", "/chat"));
        assert!(!under_prefix("/chatter", "/chat"));
        assert!(under_prefix("/models/x", "/models/"));
        assert!(!under_prefix("/models", "/models/"));
    }

    #[test]
    fn secrets_are_never_printed_and_never_hold_a_line_break() {
        let s = Secret::new("sk-live-123\n").unwrap();
        assert_eq!(format!("{s:?}"), "Secret(..)");
        assert_eq!(s.0, "sk-live-123");
        assert!(Secret::new("a\r\nX-Injected: 1").is_none());
        assert!(Secret::new(" \n").is_none());
    }

    #[test]
    fn placeholders_differ_per_run() {
        let a = placeholder_token().unwrap();
        let b = placeholder_token().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), "corral-".len() + 32);
    }
}
