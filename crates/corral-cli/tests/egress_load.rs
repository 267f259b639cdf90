//! Issue 17, item 5: corral's egress proxy under load, from inside one sandbox (a real
//! `corral run` as root, like `run.rs`). A binary of its own: its gigabyte would crowd the
//! runs of `run.rs`, whose tests run beside each other, in an emulated guest.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::process::Stdio;

use serde_json::{Value, json};

mod common;
use common::{fixture, run_command, wait_until, work_unit};

/// What the egress load test's upstream saw of corral at a `MARK`: its peak resident memory
/// (VmHWM, KiB) and how many of its threads serve the egress proxy.
#[derive(Clone, Copy, Debug, Default)]
struct Mark {
    peak_kib: u64,
    egress_threads: usize,
}

/// The egress load test's upstream on the host's loopback: one command line per connection
/// (`PING`, `BIG <n>`, `MARK <name>`, `RESULT <json>`), then it waits for the proxy to close.
#[derive(Default)]
struct Upstream {
    corral: std::sync::atomic::AtomicU32,
    open: std::sync::atomic::AtomicUsize,
    most_open: std::sync::atomic::AtomicUsize,
    marks: std::sync::Mutex<std::collections::BTreeMap<String, Mark>>,
    result: std::sync::Mutex<Option<String>>,
}

impl Upstream {
    fn mark(&self) -> Mark {
        let pid = self.corral.load(std::sync::atomic::Ordering::SeqCst);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let peak_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        let egress_threads = self.threads_named("corral-egress");
        Mark {
            peak_kib,
            egress_threads,
        }
    }

    /// corral's threads serving proxy connections (`corral-egress-conn` and its relays, which
    /// inherit the name).
    fn connection_threads(&self) -> usize {
        self.threads_named("corral-egress-c")
    }

    /// corral's threads whose name starts with `prefix` (`/proc/<pid>/task/*/comm`).
    fn threads_named(&self, prefix: &str) -> usize {
        let pid = self.corral.load(std::sync::atomic::Ordering::SeqCst);
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(prefix))
            })
            .count()
    }

    fn serve(self: &std::sync::Arc<Self>, stream: std::net::TcpStream) {
        use std::io::{BufRead as _, Read as _, Write as _};
        use std::sync::atomic::Ordering::SeqCst;
        let now_open = self.open.fetch_add(1, SeqCst) + 1;
        self.most_open.fetch_max(now_open, SeqCst);
        let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(600)));
        let mut out = stream.try_clone().unwrap();
        let mut lines = std::io::BufReader::new(stream.try_clone().unwrap().take(1 << 20));
        let mut line = String::new();
        if lines.read_line(&mut line).is_ok_and(|n| n > 0) {
            let line = line.trim_end();
            let (cmd, arg) = line.split_once(' ').unwrap_or((line, ""));
            let _ = match cmd {
                "PING" => out.write_all(b"PONG\n"),
                "BIG" => {
                    let chunk = vec![0u8; 1 << 20];
                    let mut left: u64 = arg.parse().unwrap_or(0);
                    let mut sent = Ok(());
                    while left > 0 && sent.is_ok() {
                        let n = usize::try_from(left.min(1 << 20)).unwrap();
                        sent = out.write_all(&chunk[..n]);
                        left -= n as u64;
                    }
                    sent
                }
                // Answers once corral serves no connection but this one (two threads: its
                // own and its relay's): the worker's barrier between its phases.
                "IDLE" => {
                    let mut busy = usize::MAX;
                    let t = std::time::Instant::now();
                    while t.elapsed() < std::time::Duration::from_secs(60) {
                        busy = self.connection_threads();
                        if busy <= 2 {
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(10));
                    }
                    out.write_all(
                        format!("{} {busy}\n", if busy <= 2 { "IDLE" } else { "BUSY" }).as_bytes(),
                    )
                }
                "MARK" => {
                    let m = self.mark();
                    self.marks.lock().unwrap().insert(arg.to_owned(), m);
                    out.write_all(b"OK\n")
                }
                "RESULT" => {
                    *self.result.lock().unwrap() = Some(arg.to_owned());
                    out.write_all(b"OK\n")
                }
                _ => out.write_all(b"?\n"),
            };
        }
        let _ = out.shutdown(std::net::Shutdown::Write);
        // Held until the proxy lets go: what is still open once corral has exited outlived it.
        let _ = std::io::copy(&mut lines, &mut std::io::sink());
        self.open.fetch_sub(1, SeqCst);
    }
}

/// Issue 17, item 5: the egress proxy under load, from inside one sandbox. A burst of 500
/// connections at once (at most 64 are served at a time, the rest get 503
/// `connection_limit`), 16 half-open clients that trickle a request head forever (each cut
/// with 408 `request_head_timeout` at the proxy's 10 s head deadline, not held for the idle
/// timeout per byte), and a 1 GiB download, while ordinary requests keep being served. The
/// proxy's memory stays bounded (corral's peak resident size grows by less than 64 MiB while
/// 1 GiB passes), the manifest records each kind, and no upstream connection outlives the
/// run. Control: the process measured is the one serving the proxy (its threads are named
/// `corral-egress-*`), and its peak grows under the load.
#[test]
fn the_egress_proxy_under_load_stays_bounded_and_keeps_serving() {
    use std::sync::atomic::Ordering::SeqCst;
    const BURST: usize = 500;
    const SLOW: usize = 16;
    const BIG: u64 = 1 << 30;
    const PINGS: usize = 20;
    let f = fixture("egress-load");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream_at = listener.local_addr().unwrap().to_string();
    let upstream = std::sync::Arc::new(Upstream::default());
    {
        let upstream = std::sync::Arc::clone(&upstream);
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let u = std::sync::Arc::clone(&upstream);
                std::thread::spawn(move || u.serve(s));
            }
        });
    }
    let mut wu = work_unit(&f, 300, 200, 512 << 20);
    wu["permissions"]["network"] = json!("allowlist");
    wu["permissions"]["network_allowlist"] = json!([upstream_at]);
    let preset = json!({
        "schema_version": "corral.agent-preset/v1", "id": "load", "executable": "/usr/bin/python3",
        "argv": ["-c", include_str!("egress_load.py"), upstream_at, BURST.to_string(),
                 SLOW.to_string(), BIG.to_string(), PINGS.to_string()],
        "prompt_transport": { "kind": "stdin" }, "model_connection": null,
        "env_allowlist": ["LANG"], "network_policy": "allowlisted", "read_only_paths": [],
        "authority": "candidate_only"
    });
    let wu_path = f.dir.join("wu.json");
    let pr_path = f.dir.join("preset.json");
    std::fs::write(&wu_path, wu.to_string()).unwrap();
    std::fs::write(&pr_path, preset.to_string()).unwrap();
    let child = run_command(&f, &wu_path, &pr_path, &f.repo, &f.dir.join("artifacts"))
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    upstream.corral.store(child.id(), SeqCst);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tally: Value = serde_json::from_str(
        upstream
            .result
            .lock()
            .unwrap()
            .as_deref()
            .expect("the worker sent no result"),
    )
    .unwrap();

    // The burst: some served, never more than the limit, the rest refused with the reason.
    let served = tally["burst"]["statuses"]["200"].as_u64().unwrap_or(0);
    let refused = tally["burst"]["statuses"]["503"].as_u64().unwrap_or(0);
    for phase in ["before_burst", "after_burst"] {
        assert!(
            tally[phase].as_str().unwrap_or("").starts_with("IDLE"),
            "{phase}: {tally}"
        );
    }
    assert!((1..=64).contains(&served), "{tally}");
    assert_eq!(served + refused, BURST as u64, "{tally}");
    assert_eq!(
        tally["burst"]["codes"],
        json!({ "connection_limit": refused })
    );
    // Half-open clients: each cut by the proxy with 408 while it still trickled.
    let slow = tally["slow"].as_array().unwrap();
    assert_eq!(slow.len(), SLOW);
    for s in slow {
        assert!(
            s["status"].as_str().unwrap().starts_with("HTTP/1.1 408"),
            "{s}"
        );
        assert_eq!(s["code"], "request_head_timeout", "{s}");
        assert!(s["after_s"].as_f64().unwrap() >= 0.0, "{s}");
    }
    // Served throughout: every ordinary request, some while the slow heads held their slots.
    let pings = &tally["pings"];
    assert_eq!(pings["pong"], pings["sent"], "{tally}");
    assert!(pings["during"]["slow"].as_u64().unwrap() >= 1, "{tally}");
    assert!(
        tally["big"]["status"]
            .as_str()
            .unwrap()
            .starts_with("HTTP/1.1 200")
    );
    assert_eq!(tally["big"]["bytes"], BIG, "{tally}");

    // Bounded memory, measured on the process that serves the proxy.
    let marks = upstream.marks.lock().unwrap().clone();
    let (start, end) = (marks["start"], marks["end"]);
    assert!(
        start.egress_threads >= 1 && end.egress_threads >= 1,
        "the process measured serves no proxy: {marks:?}"
    );
    let growth = end.peak_kib.saturating_sub(start.peak_kib);
    eprintln!("egress load: {tally}; corral's peak {marks:?}, grew {growth} KiB");
    assert!(growth > 0, "the load left no trace in the peak: {marks:?}");
    assert!(
        growth < 64 << 10,
        "the proxy's peak grew {growth} KiB: {marks:?}"
    );

    // The manifest records each kind.
    let egress = m["network"].as_array().cloned().unwrap_or_default();
    let count = |reason: Option<&str>| -> (u64, u64) {
        egress
            .iter()
            .filter(|e| e["reason"].as_str() == reason)
            .fold((0, 0), |(c, d), e| {
                (
                    c + e["connections"].as_u64().unwrap(),
                    d + e["bytes_down"].as_u64().unwrap(),
                )
            })
    };
    assert_eq!(count(Some("connection_limit")).0, refused, "{egress:?}");
    assert_eq!(
        count(Some("request_head_timeout")).0,
        SLOW as u64,
        "{egress:?}"
    );
    assert!(count(None).1 >= BIG, "{egress:?}");

    // Nothing of the proxy outlives the run. Control: the burst's tunnels were seen open here.
    assert!(
        upstream.most_open.load(SeqCst) >= usize::try_from(served).unwrap(),
        "the upstream never saw the burst's tunnels open at once"
    );
    wait_until("an upstream connection outlived the run", || {
        upstream.open.load(SeqCst) == 0
    });
}
