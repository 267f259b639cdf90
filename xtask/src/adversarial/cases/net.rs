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
            script: Some(attack!("NET-01.py")),
            judge: net_01,
        },
        Case {
            id: "NET-02",
            title: "UDP, ICMP, raw sockets, IPv6 and interfaces (mode none)",
            guarantee: "mode none allows no egress",
            script: Some(attack!("NET-02.py")),
            judge: net_02,
        },
        Case {
            id: "NET-03",
            title: "DNS exfiltration in both modes",
            guarantee: "no egress, and no DNS tricks",
            script: Some(attack!("NET-03.py")),
            judge: net_03,
        },
        Case {
            id: "NET-04",
            title: "Abstract unix sockets across the network-namespace boundary",
            guarantee: "no egress, and no access to host services",
            script: Some(attack!("NET-04.py")),
            judge: net_04,
        },
        Case {
            id: "NET-05",
            title: "Unix socket files visible through read-only mounts",
            guarantee: "no egress, and no access to host services or credentials",
            script: Some(attack!("NET-05.py")),
            judge: net_05,
        },
        Case {
            id: "NET-06",
            title: "Bypassing the proxy with direct connections (allowlist)",
            guarantee: "only listed host:port destinations, and only through the proxy",
            script: Some(attack!("NET-06.py")),
            judge: net_06,
        },
        Case {
            id: "NET-07",
            title: "Unlisted host, unlisted port, other protocols (allowlist)",
            guarantee: "only listed host:port destinations",
            script: Some(attack!("NET-07.py")),
            judge: net_07,
        },
        Case {
            id: "NET-08",
            title: "Host name spelling and canonicalization (allowlist)",
            guarantee: "only listed hosts, and no name tricks",
            script: Some(attack!("NET-08.py")),
            judge: net_08,
        },
        Case {
            id: "NET-09",
            title: "IP literal encodings of loopback, private and metadata addresses",
            guarantee: "no private, link-local or metadata addresses unless listed",
            script: Some(attack!("NET-09.py")),
            judge: net_09,
        },
        Case {
            id: "NET-10",
            title: "Allowlisted names that resolve to private, loopback or metadata IPs",
            guarantee: "a listed name does not open non-public IPs, and no DNS tricks",
            script: Some(attack!("NET-10.py")),
            judge: net_10,
        },
        Case {
            id: "NET-11",
            title: "DNS rebinding and multi-answer TOCTOU",
            guarantee: "no DNS tricks",
            script: Some(attack!("NET-11.py")),
            judge: net_11,
        },
        Case {
            id: "NET-12",
            title: "Proxy protocol abuse (allowlist)",
            guarantee: "only listed destinations",
            script: Some(attack!("NET-12.py")),
            judge: net_12,
        },
        Case {
            id: "NET-13",
            title: "AF_VSOCK and socket-family argument width",
            guarantee: "no egress, including to the hypervisor or host",
            script: Some(attack!("NET-13.py")),
            judge: net_13,
        },
        Case {
            id: "NET-14",
            title: "A refused name never reaches a resolver",
            guarantee: "DNS is not an exfiltration channel",
            script: Some(attack!("NET-14.py")),
            judge: net_14,
        },
        Case {
            id: "NET-15",
            title: "Hostnames with hidden bytes",
            guarantee: "allowlist matching is exact on the canonical name",
            script: Some(attack!("NET-15.py")),
            judge: net_15,
        },
        Case {
            id: "NET-16",
            title: "The allowlisted model destination as an exfiltration channel",
            guarantee: "the model connection is a narrow capability: allowed methods and path prefixes, finite calls and bytes",
            script: Some(attack!("NET-16.py")),
            judge: net_16,
        },
        Case {
            id: "CRED-08",
            title: "The metadata service, reached directly (both modes)",
            guarantee: "no cloud credentials, and no metadata addresses",
            script: Some(attack!("CRED-08.py")),
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

// ---------------------------------------------------------------------------------------
// NET-01

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

const LABD: &str = include_str!("../../../../tests/adversarial/lab/labd.py");

// ---------------------------------------------------------------------------------------
// NET-14

fn net_14(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let hex: String = format!("CANARY-{}", ctx.n)
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    let v = vars([]);
    let mut j = Judge::new();
    let mut spec = lab.spec("NET-14.py");
    spec.net = allowlist(&[]);
    let run = lab_run(ctx, &lab, &spec, &v)?;
    escapes_inside(ctx, &run, &mut j);
    proxy_ok(ctx, &lab, &run, &format!("n14-{}", ctx.n), &mut j);
    let dns = lab.dns();
    let leaked: Vec<Event> = dns
        .iter()
        .filter(|e| e.at.contains(&hex))
        .cloned()
        .collect();
    breach_events(&mut j, &leaked, "the lab DNS saw a refused name");
    // meta.test is listed for :80 only; its :8081 was asked for and must not be looked up.
    let looked_up: Vec<Event> = dns
        .iter()
        .filter(|e| e.at.trim_end_matches('.') == "meta.test")
        .cloned()
        .collect();
    breach_events(
        &mut j,
        &looked_up,
        "the lab DNS saw a listed name asked for on a port it is not listed with",
    );
    breach_events(
        &mut j,
        &lab.carrying(&hex),
        "a lab listener saw a refused name",
    );
    // The DNS log sees what the proxy does resolve: the listed name of the in-run control.
    j.control(
        dns.iter().any(|e| e.at == "allowed.test"),
        "the lab DNS logged the proxy's lookup of the listed allowed.test (the in-run control)",
    );
    // Outside the sandbox the same lookups reach the lab resolver.
    let _ctl = ctx.control(&lab.spec("NET-14.py"), &v, &lab.control(false))?;
    j.control(
        lab.dns().iter().any(|e| e.at.contains(&hex)),
        "the lab DNS logged the control's lookup of a refused name, outside the sandbox",
    );
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-15

fn net_15(ctx: &mut Ctx) -> Result<Verdict> {
    let lab = Lab::start(ctx)?;
    let mut spec = lab.spec("NET-15.py");
    spec.net = allowlist(&[]);
    let v = vars([]);
    let mut j = Judge::new();
    let run = lab_run(ctx, &lab, &spec, &v)?;
    escapes_inside(ctx, &run, &mut j);
    let n = ctx.n.clone();
    proxy_ok(ctx, &lab, &run, &format!("n15-{n}"), &mut j);
    // Every hidden-byte spelling carries an `n15-<i>-<N>` marker; none may arrive anywhere.
    for e in lab.carrying(&format!("-{n}")) {
        j.breach(
            !e.data.contains(&format!("/n15-{n}")),
            format!("a hidden-byte spelling arrived: {}", e.show()),
        );
    }
    breach_events(
        &mut j,
        &lab.tcp("198.18.0.11:8080"),
        "denied.test's listener saw the sandbox",
    );
    lab.poke_control(&["198.18.0.11:8080"], &n, &mut j);
    lab.close();
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------
// NET-16

/// The model upstream's answer to every call it is sent.
fn model_answer(_: usize) -> String {
    r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}]}"#.to_owned()
}

fn net_16(ctx: &mut Ctx) -> Result<Verdict> {
    // The real key: a canary only corral's environment holds.
    let key = format!("sk-{}-real", ctx.canary());
    let (up_port, ca_pem, seen) = ctx.tls_upstream(model_answer)?;
    let (other, other_port) = ctx.tcp_listener("127.0.0.2:0")?;
    let ca_file = ctx.dir.join("model-ca.pem");
    std::fs::write(&ca_file, ca_pem)?;
    let other_dest = format!("127.0.0.2:{other_port}");
    let mut spec = RunSpec::new("NET-16.py").args(["{P}"]);
    spec.net = Net::Allowlist(vec![other_dest.clone()]);
    spec.corral_env = vec![("CORRAL_NET16_KEY".into(), key.clone())];
    spec.connections = Some(serde_json::json!({
        "schema_version": "corral.connections/v1",
        "connections": { "llm": {
            "destinations": [other_dest],
            "upstream": {
                "base_url": format!("https://127.0.0.1:{up_port}/v1"),
                "methods": ["POST"], "path_prefixes": ["/chat/completions"],
                "credential": { "env": "CORRAL_NET16_KEY" },
                "ca_file": ca_file.to_string_lossy(),
                "budgets": { "calls": 3, "request_bytes": 65536, "response_bytes": 1048576,
                             "call_seconds": 30, "total_seconds": 120 }
            }
        } }
    }));
    spec.preset_overrides = vec![
        ("network_policy".into(), serde_json::json!("model_only")),
        ("model_connection".into(), serde_json::json!("llm")),
        (
            "env".into(),
            serde_json::json!({
                "OPENAI_BASE_URL": "{model_base_url}", "OPENAI_API_KEY": "{model_token}"
            }),
        ),
    ];
    let v = vars([("P", other_port.to_string())]);
    let mut j = Judge::new();
    let run = ctx.run(&spec, &v)?;
    escapes_inside(ctx, &run, &mut j);
    let out = run.output();
    j.breach(
        out.contains(&key) || run.corral_stderr.contains(&key),
        "the real key appeared in what the worker received or printed",
    );
    // The upstream saw exactly the three calls of the budget, with the real key, and none of
    // the refused ones (the upload path, the oversized body, call N+1).
    let heads = seen.lock().map(|s| s.clone()).unwrap_or_default();
    for h in &heads {
        j.breach(
            !h.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
            format!(
                "the upstream was sent a refused request: {}",
                h.lines().next().unwrap_or("")
            ),
        );
        j.breach(
            h.contains("corral-"),
            "the placeholder reached the upstream",
        );
    }
    j.control(
        heads.len() == 3
            && heads
                .iter()
                .all(|h| h.contains(&format!("Bearer {key}\r\n"))),
        format!(
            "the budget's three calls reached the upstream with the real key ({} requests)",
            heads.len()
        ),
    );
    // Each refusal is recorded in the manifest.
    let calls = run.manifest["model_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for code in ["path_not_allowed", "request_bytes", "calls"] {
        j.require(
            calls
                .iter()
                .any(|c| c["stopped_by"] == code && c["forwarded"] == false),
            format!("the manifest records a call refused with {code}"),
        );
    }
    j.breach(
        calls.iter().filter(|c| c["forwarded"] == true).count() > 3,
        "more calls were forwarded than the budget allows",
    );
    let network = run.manifest["network"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    j.require(
        network
            .iter()
            .any(|r| r["reason"] == "placeholder_elsewhere"),
        "the manifest records the token refused at the egress proxy",
    );
    // The other destination got the control (no token) and never the token.
    let hits = other.seen();
    j.breach(
        hits.iter().any(|h| h.contains("corral-")),
        "the other allowlisted destination received the token",
    );
    j.control(
        out.contains(&format!("CONTROL-ELSEWHERE-{}", ctx.n)) && other.hits() == 1,
        format!(
            "the same request without the token reached the other destination ({} connections)",
            other.hits()
        ),
    );
    Ok(j.verdict())
}
