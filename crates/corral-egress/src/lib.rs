//! corral's egress proxy: in `allowlist` mode, the sandbox's only way out.
//!
//! The supervisor owns the proxy. It serves a listening socket that lives inside the sandbox's
//! network namespace (created there, served from outside the sandbox's PID namespace and
//! authority), so from inside the sandbox the proxy is on loopback, and nothing else is
//! reachable: tools that ignore the proxy variables simply fail.
//!
//! For each connection it reads one request and decides **before resolving any name**:
//! 1. `CONNECT host:port` or absolute-form `http://host[:port]/...`; anything else is refused.
//! 2. The authority is parsed with `corral_contract::Destination` (one canonical spelling;
//!    `127.1`, `0x7f.0.0.1`, leading-zero ports, userinfo, mapped IPv6 are refused); a `Host`
//!    header must name the same destination.
//! 3. The canonical destination must be on the admitted allowlist (403 otherwise): no DNS
//!    query is ever made for an unlisted name.
//! 4. A listed DNS name is resolved once by the proxy; if *any* answer is loopback, private,
//!    link-local, metadata or otherwise non-public, the whole answer is refused. The proxy
//!    dials exactly an address it vetted (no second lookup, no rebinding window). A listed IP
//!    literal is dialled as listed.
//! 5. Plain HTTP is forwarded as one request with `Connection: close`; a pipelined second
//!    request is never forwarded. `Upgrade` is refused.
//!
//! Every decision and the bytes relayed are recorded per destination for the manifest.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod addr;
pub mod broker;
pub mod http;

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use corral_contract::{Destination, Host};

use crate::http::{HeadError, RequestHead, content_length, read_head};

/// Resolves a DNS name for the proxy. Injected so tests can give names to lab addresses.
pub trait Resolve: Send + Sync {
    /// The addresses `name` resolves to for a connection to `port`.
    fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>>;
}

/// The host's resolver (getaddrinfo), used outside the sandbox only.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        Ok((name, port).to_socket_addrs()?.map(|a| a.ip()).collect())
    }
}

/// Bounds on one sandbox's use of the proxy.
#[derive(Debug, Clone, Copy)]
pub struct ProxyLimits {
    /// Connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// A relay with no traffic in either direction for this long is closed.
    pub idle_timeout: Duration,
    /// The whole request head must arrive within this (answered 408 otherwise): a client
    /// that trickles its head (slowloris) holds a connection slot this long at most, not
    /// `idle_timeout` per byte.
    pub head_timeout: Duration,
    /// Nothing is relayed after this instant (the WorkUnit's wall budget).
    pub deadline: Instant,
    /// Time allowed to connect to an upstream.
    pub connect_timeout: Duration,
}

impl ProxyLimits {
    /// Limits for a sandbox with this wall budget: 64 connections at once, an idle timeout of
    /// 120 s (or `wall`, if shorter), 10 s for a request head, a deadline `wall` from now, 10 s
    /// to connect upstream.
    #[must_use]
    pub fn for_wall_budget(wall: Duration) -> Self {
        Self {
            max_connections: 64,
            idle_timeout: Duration::from_secs(120).min(wall),
            head_timeout: Duration::from_secs(10).min(wall),
            deadline: Instant::now() + wall,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// One line of the egress record (defined in `corral-contract`, re-exported here).
pub use corral_contract::manifest::EgressRecord;

/// `(destination, allowed, reason)`.
type RecordKey = (String, bool, Option<String>);
/// `(connections, bytes up, bytes down)`.
type RecordCounts = (u64, u64, u64);

#[derive(Default)]
struct Recorder {
    entries: BTreeMap<RecordKey, RecordCounts>,
}

impl Recorder {
    fn add(&mut self, destination: String, reason: Option<String>, up: u64, down: u64) {
        let allowed = reason.is_none();
        let e = self
            .entries
            .entry((destination, allowed, reason))
            .or_default();
        e.0 += 1;
        e.1 += up;
        e.2 += down;
    }

    fn records(&self) -> Vec<EgressRecord> {
        self.entries
            .iter()
            .map(
                |((destination, allowed, reason), (c, up, down))| EgressRecord {
                    destination: destination.clone(),
                    allowed: *allowed,
                    reason: reason.clone(),
                    connections: *c,
                    bytes_up: *up,
                    bytes_down: *down,
                },
            )
            .collect()
    }
}

struct Shared {
    allowlist: Vec<Destination>,
    /// Texts no request may carry (the credential broker's per-run placeholder, ADR-0095):
    /// a request whose target or a header holds one is refused, whatever its destination.
    refused_tokens: Vec<String>,
    resolver: Box<dyn Resolve>,
    limits: ProxyLimits,
    stop: AtomicBool,
    active: AtomicUsize,
    recorder: Mutex<Recorder>,
    /// Sockets of live connections, shut down on stop so relays end at once.
    live: Mutex<BTreeMap<u64, Vec<TcpStream>>>,
    next_id: AtomicU64,
}

/// A running proxy. Dropping it without `shutdown` also stops it.
pub struct ProxyHandle {
    shared: Arc<Shared>,
    listener: TcpListener,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ProxyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyHandle").finish_non_exhaustive()
    }
}

/// Starts serving `listener` with the admitted allowlist.
pub fn start(
    listener: TcpListener,
    allowlist: Vec<Destination>,
    resolver: Box<dyn Resolve>,
    limits: ProxyLimits,
) -> io::Result<ProxyHandle> {
    start_refusing(listener, allowlist, resolver, limits, Vec::new())
}

/// [`start`], refusing (403 `placeholder_elsewhere`, recorded) every request whose target or
/// a header holds one of `refused_tokens`: the credential broker's placeholder belongs to the
/// model endpoint only, and a worker sending it anywhere else is recorded doing so.
pub fn start_refusing(
    listener: TcpListener,
    allowlist: Vec<Destination>,
    resolver: Box<dyn Resolve>,
    limits: ProxyLimits,
    refused_tokens: Vec<String>,
) -> io::Result<ProxyHandle> {
    listener.set_nonblocking(false)?;
    let refused_tokens = refused_tokens
        .into_iter()
        .filter(|t| !t.is_empty())
        .collect();
    let shared = Arc::new(Shared {
        refused_tokens,
        allowlist,
        resolver,
        limits,
        stop: AtomicBool::new(false),
        active: AtomicUsize::new(0),
        recorder: Mutex::new(Recorder::default()),
        live: Mutex::new(BTreeMap::new()),
        next_id: AtomicU64::new(0),
    });
    let accept_listener = listener.try_clone()?;
    let s = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("corral-egress-accept".into())
        .spawn(move || accept_loop(&accept_listener, &s))?;
    Ok(ProxyHandle {
        shared,
        listener,
        thread: Some(thread),
    })
}

impl ProxyHandle {
    /// Connections being served right now.
    #[must_use]
    pub fn active_connections(&self) -> usize {
        self.shared.active.load(Ordering::SeqCst)
    }

    /// Stops accepting, closes every relay, and returns the egress record.
    pub fn shutdown(mut self) -> Vec<EgressRecord> {
        self.stop();
        self.shared
            .recorder
            .lock()
            .map(|r| r.records())
            .unwrap_or_default()
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wakes the blocked accept(2): shutdown on a listening socket makes it return EINVAL.
        let _ = rustix::net::shutdown(&self.listener, rustix::net::Shutdown::Both);
        if let Ok(live) = self.shared.live.lock() {
            for stream in live.values().flatten() {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Wait (bounded) for connection threads to record their bytes.
        let until = Instant::now() + Duration::from_secs(2);
        while self.shared.active.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let Ok((stream, _)) = listener.accept() else {
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
        if shared.active.fetch_add(1, Ordering::SeqCst) >= shared.limits.max_connections {
            shared.active.fetch_sub(1, Ordering::SeqCst);
            let mut s = stream;
            let _ = respond(&mut s, 503, "connection_limit", "too many connections");
            record(shared, "-".into(), Some("connection_limit".into()), 0, 0);
            continue;
        }
        let s = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("corral-egress-conn".into())
            .spawn(move || {
                handle(stream, &s);
                s.active.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn record(shared: &Shared, destination: String, reason: Option<String>, up: u64, down: u64) {
    if let Ok(mut r) = shared.recorder.lock() {
        r.add(destination, reason, up, down);
    }
}

fn respond(stream: &mut TcpStream, status: u16, code: &str, text: &str) -> io::Result<()> {
    let phrase = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    };
    let body = format!("corral egress: {text} ({code})\n");
    // One write, so the status line never arrives split from the rest.
    let response = format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain\r\nConnection: close\r\nX-Corral-Egress: {code}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes())?;
    stream.flush()
}

/// A refusal: status, stable code, and the destination it concerns.
struct Refusal {
    status: u16,
    code: String,
    destination: String,
}

fn refuse(status: u16, code: &str, destination: impl Into<String>) -> Refusal {
    Refusal {
        status,
        code: code.into(),
        destination: destination.into(),
    }
}

fn escape(s: &str) -> String {
    s.chars().flat_map(char::escape_default).take(300).collect()
}

/// A client read with one deadline for all of its reads: each waits only for what is left.
struct HeadReader<'a> {
    stream: &'a mut TcpStream,
    until: Instant,
}

impl Read for HeadReader<'_> {
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
    let until = Instant::now() + shared.limits.head_timeout;
    let read = read_head(&mut HeadReader {
        stream: &mut client,
        until,
    });
    let _ = client.set_read_timeout(Some(shared.limits.idle_timeout));
    let (head, early) = match read {
        Ok(x) => x,
        Err(HeadError { status, reason }) => {
            let what = if status == 408 {
                "the request head did not arrive in time"
            } else {
                "malformed request"
            };
            let _ = respond(&mut client, status, reason, what);
            record(shared, "-".into(), Some(reason.into()), 0, 0);
            return;
        }
    };
    if Instant::now() >= shared.limits.deadline {
        let _ = respond(
            &mut client,
            403,
            "deadline_passed",
            "the run's wall budget is spent",
        );
        record(shared, "-".into(), Some("deadline_passed".into()), 0, 0);
        return;
    }
    if shared.refused_tokens.iter().any(|t| {
        head.target.contains(t.as_str()) || head.headers.iter().any(|(_, v)| v.contains(t.as_str()))
    }) {
        let _ = respond(
            &mut client,
            403,
            "placeholder_elsewhere",
            "the model token belongs to the model endpoint only",
        );
        let dest = head
            .target
            .strip_prefix("http://")
            .map_or(head.target.as_str(), |r| {
                r.split(['/', '?', '#']).next().unwrap_or(r)
            });
        record(
            shared,
            escape(dest),
            Some("placeholder_elsewhere".into()),
            0,
            0,
        );
        return;
    }
    let outcome = if head.method == "CONNECT" {
        connect(&mut client, &head, early, shared)
    } else {
        forward(&mut client, &head, early, shared)
    };
    if let Err(r) = outcome {
        let _ = respond(
            &mut client,
            r.status,
            &r.code,
            "refused by corral's egress policy",
        );
        record(shared, r.destination, Some(r.code), 0, 0);
    }
}

/// Checks an authority against the allowlist and vets the addresses to dial.
fn authorize(
    authority: &str,
    host_header: Option<&str>,
    default_port: Option<u16>,
    shared: &Shared,
) -> Result<(Destination, Vec<SocketAddr>), Refusal> {
    let raw = escape(authority);
    let with_port = match default_port {
        Some(p) if !has_port(authority) => format!("{authority}:{p}"),
        _ => authority.to_owned(),
    };
    let dest = Destination::parse(&with_port)
        .map_err(|_| refuse(403, "unparsable_destination", raw.clone()))?;
    let shown = dest.to_string();
    if let Some(h) = host_header {
        let h_with_port = match default_port.or(Some(dest.port)) {
            Some(p) if !has_port(h) => format!("{h}:{p}"),
            _ => h.to_owned(),
        };
        match Destination::parse(&h_with_port) {
            Ok(hd) if hd == dest => {}
            _ => return Err(refuse(403, "host_header_mismatch", shown)),
        }
    }
    if !shared.allowlist.contains(&dest) {
        return Err(refuse(403, "not_on_allowlist", shown));
    }
    let ips = match &dest.host {
        Host::Ip(ip) => vec![*ip],
        Host::Dns(name) => {
            let ips = shared
                .resolver
                .resolve(name, dest.port)
                .map_err(|_| refuse(502, "resolution_failed", shown.clone()))?;
            if ips.is_empty() {
                return Err(refuse(502, "resolution_failed", shown));
            }
            if let Some(reason) = ips.iter().find_map(|ip| addr::refused_reason(*ip)) {
                return Err(refuse(403, reason, shown));
            }
            ips
        }
    };
    Ok((
        dest,
        ips.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect(),
    ))
}

fn has_port(authority: &str) -> bool {
    match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    }
}

fn dial(dest: &Destination, addrs: &[SocketAddr], shared: &Shared) -> Result<TcpStream, Refusal> {
    for a in addrs {
        let target = SocketAddr::new(a.ip(), dest.port);
        if let Ok(s) = TcpStream::connect_timeout(&target, shared.limits.connect_timeout) {
            let _ = s.set_nodelay(true);
            return Ok(s);
        }
    }
    Err(refuse(502, "connect_failed", dest.to_string()))
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

fn connect(
    client: &mut TcpStream,
    head: &RequestHead,
    early: Vec<u8>,
    shared: &Arc<Shared>,
) -> Result<(), Refusal> {
    let (dest, addrs) = authorize(&head.target, head.header("host"), None, shared)?;
    let mut upstream = dial(&dest, &addrs, shared)?;
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .map_err(|_| refuse(502, "client_gone", dest.to_string()))?;
    let mut up = 0u64;
    if !early.is_empty() && upstream.write_all(&early).is_ok() {
        up += early.len() as u64;
    }
    let id = register(shared, &[client, &upstream]);
    let (u, d) = relay(client, &mut upstream, shared);
    unregister(shared, id);
    record(shared, dest.to_string(), None, up + u, d);
    Ok(())
}

/// Hop-by-hop headers the proxy drops (RFC 9110 7.6.1) plus proxy credentials.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

fn forward(
    client: &mut TcpStream,
    head: &RequestHead,
    early: Vec<u8>,
    shared: &Arc<Shared>,
) -> Result<(), Refusal> {
    let raw = escape(&head.target);
    let rest = head
        .target
        .strip_prefix("http://")
        .ok_or_else(|| refuse(403, "not_absolute_http", raw.clone()))?;
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') || path.contains('#') {
        return Err(refuse(400, "userinfo_or_fragment", raw));
    }
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    if head.header("upgrade").is_some() {
        return Err(refuse(403, "upgrade_refused", escape(authority)));
    }
    let host = head
        .header("host")
        .ok_or_else(|| refuse(400, "host_header_missing", escape(authority)))?;
    let body_len =
        content_length(head).map_err(|e| refuse(e.status, e.reason, escape(authority)))?;
    let (dest, addrs) = authorize(authority, Some(host), Some(80), shared)?;
    let mut upstream = dial(&dest, &addrs, shared)?;
    let mut out = format!("{} {} HTTP/1.1\r\n", head.method, path);
    for (name, value) in &head.headers {
        if HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h)) {
            continue;
        }
        out.push_str(name);
        out.push_str(": ");
        out.push_str(value);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    let shown = dest.to_string();
    let id = register(shared, &[client, &upstream]);
    let result = (|| -> io::Result<(u64, u64)> {
        upstream.write_all(out.as_bytes())?;
        let mut up = out.len() as u64;
        // Exactly the declared body: bytes after it (a pipelined request) are never forwarded.
        let take = usize::try_from(body_len)
            .unwrap_or(usize::MAX)
            .min(early.len());
        upstream.write_all(&early[..take])?;
        up += take as u64;
        let remaining = body_len - take as u64;
        if remaining > 0 {
            let copied = io::copy(&mut Read::by_ref(client).take(remaining), &mut upstream)?;
            up += copied;
        }
        let _ = upstream.set_read_timeout(Some(shared.limits.idle_timeout));
        let down = copy_counted(&mut upstream, client, shared)?;
        Ok((up, down))
    })();
    unregister(shared, id);
    let _ = client.shutdown(Shutdown::Both);
    match result {
        Ok((up, down)) => record(shared, shown, None, up, down),
        Err(_) => record(shared, shown, Some("relay_error".into()), 0, 0),
    }
    Ok(())
}

/// Copies until EOF, error, stop or deadline; returns bytes copied.
///
/// Small transfers (an API response) go through one 64 KiB user-space buffer: no extra
/// syscalls. Once a read fills the buffer the transfer is bulk, and the rest moves socket to
/// socket through a pipe with splice(2), never entering user space.
fn copy_counted(from: &mut TcpStream, to: &mut TcpStream, shared: &Shared) -> io::Result<u64> {
    let mut buf = [0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        if shared.stop.load(Ordering::Relaxed) || Instant::now() >= shared.limits.deadline {
            return Ok(total);
        }
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(total);
            }
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        total += n as u64;
        if n == buf.len() {
            return Ok(total + splice_copy(from, to, shared)?);
        }
    }
}

fn splice_copy(from: &TcpStream, to: &TcpStream, shared: &Shared) -> io::Result<u64> {
    use rustix::io::Errno;
    use rustix::pipe::{PipeFlags, SpliceFlags, fcntl_setpipe_size, pipe_with, splice};
    const CHUNK: usize = 256 * 1024;
    let (pipe_r, pipe_w) = pipe_with(PipeFlags::CLOEXEC)?;
    // A larger pipe moves more per call; the default 64 KiB still works if this is refused.
    let _ = fcntl_setpipe_size(&pipe_w, CHUNK);
    let flags = SpliceFlags::MOVE;
    let mut total = 0u64;
    loop {
        if shared.stop.load(Ordering::Relaxed) || Instant::now() >= shared.limits.deadline {
            return Ok(total);
        }
        let n = match splice(from, None, &pipe_w, None, CHUNK, flags) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Ok(total),
            Err(e) => return Err(e.into()),
        };
        let mut left = n;
        while left > 0 {
            match splice(&pipe_r, None, to, None, left, flags) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => left -= m,
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        total += n as u64;
    }
}

/// Relays both directions until both end; returns (bytes up, bytes down).
fn relay(client: &mut TcpStream, upstream: &mut TcpStream, shared: &Arc<Shared>) -> (u64, u64) {
    let idle = Some(shared.limits.idle_timeout);
    let _ = client.set_read_timeout(idle);
    let _ = upstream.set_read_timeout(idle);
    let (Ok(mut c2), Ok(mut u2)) = (client.try_clone(), upstream.try_clone()) else {
        return (0, 0);
    };
    let s = Arc::clone(shared);
    let up_thread = std::thread::spawn(move || {
        let n = copy_counted(&mut c2, &mut u2, &s).unwrap_or(0);
        let _ = u2.shutdown(Shutdown::Write);
        n
    });
    let down = copy_counted(upstream, client, shared).unwrap_or(0);
    let _ = client.shutdown(Shutdown::Write);
    let up = up_thread.join().unwrap_or(0);
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
    (up, down)
}
