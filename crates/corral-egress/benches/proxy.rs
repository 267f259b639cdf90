//! Egress proxy throughput and added latency, side by side with a direct loopback connection.
//!
//! (a) a 100 MB download through a CONNECT tunnel vs. directly; (b) 1,000 small HTTP requests
//! through the proxy (absolute-form) vs. directly. Prints medians and ratios.
//! Goals: at least 1 GB/s relayed; under 0.2 ms added per request.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark code"
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use corral_contract::Destination;
use corral_egress::{ProxyLimits, SystemResolver};

const DOWNLOAD: usize = 100 * 1000 * 1000;

fn server(addr: &str) -> SocketAddr {
    let l = TcpListener::bind(addr).unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let chunk = vec![0x5au8; 1 << 20];
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let chunk = chunk.clone();
            std::thread::spawn(move || {
                let _ = s.set_nodelay(true);
                let mut buf = [0u8; 4096];
                let mut head = Vec::new();
                while !head.ends_with(b"\r\n\r\n") {
                    let Ok(n) = s.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                }
                if head.starts_with(b"GET /big") {
                    let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Length: {DOWNLOAD}\r\n\r\n");
                    let mut left = DOWNLOAD;
                    while left > 0 {
                        let n = left.min(chunk.len());
                        if s.write_all(&chunk[..n]).is_err() {
                            return;
                        }
                        left -= n;
                    }
                } else {
                    let _ = s.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                    );
                }
            });
        }
    });
    a
}

fn drain(s: &mut TcpStream) -> usize {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n,
        }
    }
}

fn download(direct: SocketAddr, proxy: Option<SocketAddr>) -> Duration {
    let t = Instant::now();
    let mut s = match proxy {
        None => TcpStream::connect(direct).unwrap(),
        Some(p) => {
            let mut s = TcpStream::connect(p).unwrap();
            write!(s, "CONNECT {direct} HTTP/1.1\r\nHost: {direct}\r\n\r\n").unwrap();
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut b).unwrap();
                head.push(b[0]);
            }
            assert!(head.starts_with(b"HTTP/1.1 200"));
            s
        }
    };
    s.write_all(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let got = drain(&mut s);
    assert!(got >= DOWNLOAD, "short download: {got}");
    t.elapsed()
}

fn small(direct: SocketAddr, proxy: Option<SocketAddr>) -> Duration {
    let t = Instant::now();
    let (mut s, req) = match proxy {
        None => (
            TcpStream::connect(direct).unwrap(),
            format!("GET /s HTTP/1.1\r\nHost: {direct}\r\n\r\n"),
        ),
        Some(p) => (
            TcpStream::connect(p).unwrap(),
            format!("GET http://{direct}/s HTTP/1.1\r\nHost: {direct}\r\n\r\n"),
        ),
    };
    s.set_nodelay(true).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let got = drain(&mut s);
    assert!(got > 0);
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let direct = server("127.0.0.2:0");
    let listener = TcpListener::bind("127.0.0.3:0").unwrap();
    let proxy = listener.local_addr().unwrap();
    let allow = vec![Destination::parse(&direct.to_string()).unwrap()];
    let handle = corral_egress::start(
        listener,
        allow,
        Box::new(SystemResolver),
        ProxyLimits::for_wall_budget(Duration::from_secs(600)),
    )
    .unwrap();

    let rounds = 5;
    let d: Vec<_> = (0..rounds).map(|_| download(direct, None)).collect();
    let p: Vec<_> = (0..rounds).map(|_| download(direct, Some(proxy))).collect();
    let (d, p) = (median(d), median(p));
    let gbps = |t: Duration| DOWNLOAD as f64 / t.as_secs_f64() / 1e9;
    println!(
        "download 100 MB: direct {:.1} ms ({:.2} GB/s), proxy {:.1} ms ({:.2} GB/s), ratio proxy/direct {:.2}",
        d.as_secs_f64() * 1e3,
        gbps(d),
        p.as_secs_f64() * 1e3,
        gbps(p),
        p.as_secs_f64() / d.as_secs_f64()
    );

    let n = 1000;
    let t = Instant::now();
    for _ in 0..n {
        small(direct, None);
    }
    let direct_total = t.elapsed();
    let t = Instant::now();
    for _ in 0..n {
        small(direct, Some(proxy));
    }
    let proxy_total = t.elapsed();
    let added = (proxy_total.as_secs_f64() - direct_total.as_secs_f64()) / f64::from(n) * 1e3;
    println!(
        "1,000 small requests: direct {:.1} ms, proxy {:.1} ms, ratio {:.2}, added {:.3} ms/request",
        direct_total.as_secs_f64() * 1e3,
        proxy_total.as_secs_f64() * 1e3,
        proxy_total.as_secs_f64() / direct_total.as_secs_f64(),
        added
    );
    let records = handle.shutdown();
    let relayed: u64 = records.iter().map(|r| r.bytes_down).sum();
    println!(
        "recorded {} destination line(s), {relayed} bytes down",
        records.len()
    );
}
