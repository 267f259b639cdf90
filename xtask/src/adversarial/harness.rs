//! The black-box harness: runs an attack through the real `corral run`, runs its positive
//! control, and observes the host (listeners, canaries, markers, processes, cgroups, mounts,
//! hashes). Everything it creates lives under one scratch folder, one nonce per case, and is
//! removed when the case ends.

// The harness API is shared by every case module; not every case uses every part.
#![allow(dead_code, reason = "the harness API is shared by every case module")]

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

/// Where the committed fixtures live, relative to the workspace root.
pub const FIXTURES: &str = "tests/adversarial";

/// Suite-wide state: the `corral` binary under test and the scratch folder.
pub struct Harness {
    pub root: PathBuf,
    pub corral: PathBuf,
    pub scratch: PathBuf,
    /// The attacks as the sandbox runs them (each a single file, its inlined code in place:
    /// `fixtures::runnable`), readable by the sandbox user.
    pub attacks: PathBuf,
    pub verbose: bool,
    /// TRUST-07's seeded kill points (`--crash-points`).
    pub crash_points: usize,
    /// `--as-user`: the ordinary user every corral runs as (rootless mode) and its uid.
    pub as_user: Option<(String, u32)>,
    /// `--as-user`: the user's gid.
    pub as_gid: u32,
    /// Where corral keeps its base cache under `$XDG_CACHE_HOME/corral` in this mode: itself,
    /// or with subordinate ids in rootless mode `owned-<uid>-<gid>` (the worker's checkouts).
    pub cache_sub: PathBuf,
}

impl Harness {
    pub fn new(root: &Path, corral: PathBuf, verbose: bool) -> Result<Self> {
        let scratch = PathBuf::from(format!("/tmp/corral-adv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch)?;
        set_mode(&scratch, 0o755)?;
        let attacks = scratch.join("attacks");
        std::fs::create_dir_all(&attacks)?;
        for case in super::cases::all() {
            if let Some((file, source)) = case.script {
                let to = attacks.join(file);
                std::fs::write(&to, super::fixtures::runnable(source)?)?;
                set_mode(&to, 0o755)?;
            }
        }
        for d in ["home", "cache", "data"] {
            std::fs::create_dir_all(scratch.join(d))?;
        }
        Ok(Self {
            root: root.to_path_buf(),
            corral,
            scratch,
            attacks,
            verbose,
            crash_points: super::cases::CRASH_POINTS,
            as_user: None,
            as_gid: 0,
            cache_sub: PathBuf::new(),
        })
    }

    /// The base cache a corral run with `XDG_CACHE_HOME=xdg_cache_home` uses in this mode.
    pub fn cache_in(&self, xdg_cache_home: &Path) -> PathBuf {
        xdg_cache_home.join("corral").join(&self.cache_sub)
    }

    /// `--as-user NAME`: from here on `corral` is a wrapper that runs the binary under test as
    /// that ordinary user with its systemd manager's bus (rootless mode, ADR-0080), after
    /// giving the user what a user running corral owns: HOME, the cache and data folders, the
    /// repository and the artifact store's folder named on the command line. The harness
    /// stays root, so canaries it plants where the user cannot read are still planted, and a
    /// user's own files (the `.canary` in HOME) are what the sandbox's view must hide.
    pub fn run_as_user(&mut self, user: &str) -> Result<()> {
        let id = |flag: &str| -> Result<u32> {
            let out = Command::new("id").arg(flag).arg(user).output()?;
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .with_context(|| format!("--as-user {user}: no such user (id {flag})"))
        };
        let (uid, gid) = (id("-u")?, id("-g")?);
        let bus = format!("/run/user/{uid}/bus");
        if !Path::new(&bus).exists() {
            bail!(
                "--as-user {user}: {bus} is missing: the user's systemd manager must run \
                 (systemctl start user@{uid}.service, or loginctl enable-linger {user})"
            );
        }
        let wrapper = self.scratch.join("corral-as-user");
        let script = format!(
            "#!/bin/sh\n\
             # corral as {user} (rootless mode), written by the qualification harness.\n\
             for d in \"$HOME\" \"$XDG_CACHE_HOME\" \"$XDG_DATA_HOME\"; do\n\
             \x20 [ -n \"$d\" ] && mkdir -p \"$d\" && chown {uid}:{gid} \"$d\"\n\
             done\n\
             prev=\n\
             for a in \"$@\"; do\n\
             \x20 case $prev in\n\
             \x20   --repo) chown -R {uid}:{gid} \"$a\" ;;\n\
             \x20   --artifacts) d=$(dirname \"$a\"); chown {uid}:{gid} \"$d\"; [ -e \"$a\" ] && chown -R {uid}:{gid} \"$a\" ;;\n\
             \x20 esac\n\
             \x20 prev=$a\n\
             done\n\
             exec setpriv --reuid={uid} --regid={gid} --init-groups -- env \
             XDG_RUNTIME_DIR=/run/user/{uid} DBUS_SESSION_BUS_ADDRESS=unix:path={bus} \
             USER={user} {} \"$@\"\n",
            self.corral.display()
        );
        std::fs::write(&wrapper, script)?;
        set_mode(&wrapper, 0o755)?;
        self.corral = wrapper;
        self.as_user = Some((user.to_owned(), uid));
        self.as_gid = gid;
        // Where the user's corral keeps its checkouts: asked of corral itself.
        let xdg = self.scratch.join("cache-probe");
        let out = Command::new(&self.corral)
            .args(["cache", "ls", "--json"])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.scratch.join("home"))
            .env("XDG_CACHE_HOME", &xdg)
            .env("XDG_DATA_HOME", self.scratch.join("data"))
            .output()
            .context("corral cache ls as the user")?;
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "corral cache ls --json as {user}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        let cache = PathBuf::from(v["cache"].as_str().context("cache ls: no \"cache\"")?);
        self.cache_sub = cache
            .strip_prefix(xdg.join("corral"))
            .with_context(|| {
                format!(
                    "{user}'s cache {} is not under {}",
                    cache.display(),
                    xdg.display()
                )
            })?
            .to_path_buf();
        let _ = std::fs::remove_dir_all(&xdg);
        Ok(())
    }

    pub fn fixture(&self, rel: &str) -> PathBuf {
        self.root.join(FIXTURES).join(rel)
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        remove_tree(&self.scratch);
    }
}

/// Removes a tree even when corral made its artifacts read-only.
pub fn remove_tree(p: &Path) {
    if p.exists() {
        let _ = Command::new("chmod").arg("-R").arg("u+w").arg(p).status();
        let _ = std::fs::remove_dir_all(p);
    }
}

pub fn set_mode(p: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", p.display()))
}

/// A random lowercase hex nonce (`{N}` in the corpus).
pub fn nonce() -> String {
    let mut b = [0u8; 5];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = f.read_exact(&mut b);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The AgentPreset that runs one attack: the committed fixture `presets/<id>.json`. The
/// harness fills `{ATTACKS}` (its copy of the scripts), the argv placeholders, and the
/// network policy and env allowlist the run's WorkUnit needs.
pub fn preset_template(id: &str, script: &str) -> Value {
    json!({
        "schema_version": "corral.agent-preset/v1",
        "id": format!("adv-{}", id.to_lowercase()),
        "executable": format!("{{ATTACKS}}/{script}"),
        "argv": ["{N}"],
        "prompt_transport": { "kind": "stdin" },
        "model_connection": null,
        "env_allowlist": ["LANG"],
        "network_policy": "disabled",
        "read_only_paths": [],
        "authority": "candidate_only",
    })
}

/// Network permission of a run.
#[derive(Clone, Debug, Default)]
pub enum Net {
    #[default]
    None,
    /// `allowlist` with these `host:port` destinations (preset `allowlisted`).
    Allowlist(Vec<String>),
}

/// One `corral run` of an attack. Every field has a small default so a case names only
/// what it changes.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The attack script (fixture file name under `attacks/`), run as the preset's
    /// executable with argv `[N, args...]`.
    pub script: String,
    pub args: Vec<String>,
    pub net: Net,
    pub wall_seconds: u64,
    pub cpu_seconds: u64,
    pub memory_bytes: u64,
    pub disk_bytes: u64,
    pub max_processes: u64,
    pub max_output_bytes: u64,
    pub max_patch_bytes: u64,
    pub allowed_paths: Vec<String>,
    pub forbidden_paths: Vec<String>,
    /// `--env NAME=VALUE` values (their names go on the preset's env allowlist).
    pub env: Vec<(String, String)>,
    /// Extra environment of the `corral` process itself (secrets the worker must not see).
    pub corral_env: Vec<(String, String)>,
    /// Run `corral` inside this network namespace (`ip netns exec`), with this resolv.conf
    /// bound over `/etc/resolv.conf` in a private mount namespace.
    pub netns: Option<(String, Option<PathBuf>)>,
    /// Repository builder: a name under `repos/` (`standard`) or an absolute script path.
    pub repo: String,
    /// Send SIGTERM to corral this long after [`RunSpec::ready`] first holds (or after its
    /// start, without one): cancellation.
    pub cancel_after: Option<Duration>,
    /// Send SIGKILL to corral this long after [`RunSpec::ready`] first holds (or after its
    /// start): the supervisor killed.
    pub kill_after: Option<Duration>,
    /// What the host must see before the signal clock starts (e.g. the attack's processes
    /// alive). A clock from corral's start assumes how fast the host sets a sandbox up: on a
    /// slow host the signal came before the attack had started (PROC-04 in a TCG guest,
    /// ADR-0060).
    pub ready: Option<Ready>,
    /// Overrides merged into the preset template (e.g. `prompt_transport`).
    pub preset_overrides: Vec<(String, Value)>,
    /// Overrides merged into the WorkUnit (dotted paths not supported: top-level keys only).
    pub work_unit_overrides: Vec<(String, Value)>,
    /// A trusted connections document, passed with `--connections`.
    pub connections: Option<Value>,
}

impl RunSpec {
    pub fn new(script: &str) -> Self {
        Self {
            script: script.to_owned(),
            args: Vec::new(),
            net: Net::None,
            wall_seconds: 30,
            cpu_seconds: 30,
            memory_bytes: 256 << 20,
            disk_bytes: 64 << 20,
            max_processes: 64,
            max_output_bytes: 256 << 10,
            max_patch_bytes: 1 << 20,
            allowed_paths: vec!["src/".into()],
            forbidden_paths: vec![".github/".into(), "**/*.pem".into()],
            env: Vec::new(),
            corral_env: Vec::new(),
            netns: None,
            repo: "standard".into(),
            cancel_after: None,
            kill_after: None,
            ready: None,
            preset_overrides: Vec::new(),
            connections: None,
            work_unit_overrides: Vec::new(),
        }
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }
}

/// A condition the harness polls while corral runs (see [`RunSpec::ready`]).
#[derive(Clone)]
pub struct Ready(pub std::sync::Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ready(..)")
    }
}

/// What one sandboxed run left for the outside to see.
/// The request heads a test upstream received, in order.
pub type Heads = Arc<Mutex<Vec<String>>>;

#[derive(Debug)]
pub struct RunObs {
    /// corral's exit code (-1 when it died by a signal).
    pub exit: i32,
    pub manifest: Value,
    /// The worker's stdout and stderr as corral stored them in the artifact store.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// corral's own stderr.
    pub corral_stderr: String,
    pub elapsed: Duration,
    pub supervisor_pid: u32,
    /// Peak resident memory of the corral process (VmHWM, KiB), sampled while it ran.
    pub peak_rss_kib: u64,
    /// The host repository the run started from.
    pub repo: PathBuf,
    pub artifacts: PathBuf,
    /// When [`RunSpec::ready`] first held, and when the harness signalled corral (time since
    /// corral's start).
    pub ready_at: Option<Duration>,
    pub signalled_at: Option<Duration>,
}

impl RunObs {
    pub fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn err(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    /// Worker stdout + stderr, lossy.
    pub fn output(&self) -> String {
        format!("{}{}", self.out(), self.err())
    }
    pub fn outcome(&self) -> &str {
        self.manifest["outcome"].as_str().unwrap_or("")
    }
    pub fn termination(&self) -> &str {
        self.manifest["execution"]["termination"]
            .as_str()
            .unwrap_or("")
    }
    pub fn exit_code(&self) -> Option<i64> {
        self.manifest["execution"]["exit_code"].as_i64()
    }
    /// `path change` pairs of the candidate, if any.
    pub fn changed_paths(&self) -> Vec<(String, String)> {
        self.manifest["candidate"]["changed_paths"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|c| {
                        (
                            c["path"].as_str().unwrap_or("").to_owned(),
                            c["change"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    /// Reason codes of the rejections.
    pub fn rejection_codes(&self) -> Vec<String> {
        self.manifest["rejections"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|r| r["code"].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
    /// The stored patch (empty when there is none).
    pub fn patch(&self) -> Vec<u8> {
        self.manifest["candidate"]["patch"]["digest"]
            .as_str()
            .map(|d| read_artifact(&self.artifacts, d))
            .unwrap_or_default()
    }
    /// Did the run produce a manifest at all (the supervisor returned a verdict)?
    pub fn has_manifest(&self) -> bool {
        self.manifest.is_object()
    }
}

/// A run made ready by `Ctx::prepare`: its folder, repository, artifact store, the
/// `corral run` arguments (without `--json`) and corral's environment.
#[derive(Debug)]
pub struct Prepared {
    pub dir: PathBuf,
    pub repo: PathBuf,
    pub artifacts: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// What a positive-control run outside the sandbox printed.
#[derive(Debug)]
pub struct CtlObs {
    pub exit: i32,
    pub stdout: String,
    pub stderr: String,
    /// The workspace copy it ran in.
    pub ws: PathBuf,
}

impl CtlObs {
    pub fn output(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// The `setpriv` prefix that runs a command as uid/gid 65534 with no groups and no
/// capabilities: the unprivileged host user positive controls act as.
pub const AS_NOBODY: [&str; 6] = [
    "setpriv",
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "--inh-caps=-all",
    "--bounding-set=-all",
];

/// How a positive control runs the attack outside the sandbox.
#[derive(Clone, Debug)]
pub struct Control {
    /// Run as host root (true) or as uid/gid 65534 with no capabilities (false).
    pub as_root: bool,
    pub timeout: Duration,
    pub env: Vec<(String, String)>,
    /// Run inside this network namespace.
    pub netns: Option<String>,
    /// Run in fresh pid+mount namespaces (`unshare -pfm --mount-proc`), so an attack that
    /// signals every process can only reach the control's own tree.
    pub own_pidns: bool,
    /// Run as this uid and gid instead of 65534 (without capabilities either way): the
    /// invoking user's, where a case's control is about that user's own counters.
    pub as_ids: Option<(u32, u32)>,
}

impl Default for Control {
    fn default() -> Self {
        Self {
            as_root: false,
            timeout: Duration::from_secs(30),
            env: Vec::new(),
            netns: None,
            own_pidns: false,
            as_ids: None,
        }
    }
}

/// The `setpriv` prefix for these ids, without groups or capabilities (as `AS_NOBODY`).
#[must_use]
pub fn as_ids((uid, gid): (u32, u32)) -> Vec<String> {
    vec![
        "setpriv".to_owned(),
        format!("--reuid={uid}"),
        format!("--regid={gid}"),
        "--clear-groups".to_owned(),
        "--inh-caps=-all".to_owned(),
        "--bounding-set=-all".to_owned(),
    ]
}

fn read_artifact(artifacts: &Path, digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    std::fs::read(artifacts.join("sha256").join(hex)).unwrap_or_default()
}

/// A listener's tally, shared with its accept thread.
#[derive(Clone, Default)]
pub struct Tally {
    hits: Arc<AtomicUsize>,
    first: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Tally {
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
    /// Waits (up to one second) until more than `n` contacts were counted: the accept
    /// thread counts asynchronously, so a control's connection may land just after the
    /// control returned. Returns whether it happened.
    pub fn above(&self, n: usize) -> bool {
        let until = Instant::now() + Duration::from_secs(1);
        while self.hits() <= n {
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }
    /// The first bytes of each contact (lossy), for reports.
    pub fn seen(&self) -> Vec<String> {
        self.first.lock().map(|v| v.clone()).unwrap_or_default()
    }
    fn hit(&self, what: String) {
        self.hits.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut v) = self.first.lock() {
            v.push(what);
        }
    }
}

/// One case's context: its nonce, scratch folder, listeners and cleanups.
pub struct Ctx<'h> {
    pub h: &'h Harness,
    pub id: String,
    /// `{N}`.
    pub n: String,
    pub dir: PathBuf,
    runs: usize,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    cleanups: Vec<Box<dyn FnOnce()>>,
    /// Files the case planted on the host: removed (or restored) at the end.
    planted: Vec<(PathBuf, Option<Vec<u8>>)>,
    /// Supervisor pids of this case's runs (for the leftover checks).
    pub supervisors: Vec<u32>,
}

impl<'h> Ctx<'h> {
    pub fn new(h: &'h Harness, id: &str) -> Result<Self> {
        let n = nonce();
        let dir = h.scratch.join(format!("{id}-{n}"));
        std::fs::create_dir_all(&dir)?;
        set_mode(&dir, 0o755)?;
        Ok(Self {
            h,
            id: id.to_owned(),
            n,
            dir,
            runs: 0,
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            cleanups: Vec::new(),
            planted: Vec::new(),
            supervisors: Vec::new(),
        })
    }

    /// `CANARY-{N}`.
    pub fn canary(&self) -> String {
        format!("CANARY-{}", self.n)
    }

    /// Registers work to do when the case ends (after the leftover checks' snapshot).
    pub fn on_cleanup(&mut self, f: impl FnOnce() + 'static) {
        self.cleanups.push(Box::new(f));
    }

    /// Writes `content` to a host file for the case and removes it (or restores the old
    /// content) when the case ends. Missing parent directories are created and removed.
    pub fn plant(&mut self, path: impl AsRef<Path>, content: &[u8]) -> Result<()> {
        let path = path.as_ref().to_path_buf();
        let old = std::fs::read(&path).ok();
        // Remember the highest directory we create so it goes away too.
        let mut created: Option<PathBuf> = None;
        let mut p = path.parent();
        while let Some(d) = p {
            if d.exists() {
                break;
            }
            created = Some(d.to_path_buf());
            p = d.parent();
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, content).with_context(|| format!("planting {}", path.display()))?;
        self.planted.push((path, old));
        if let Some(dir) = created {
            self.on_cleanup(move || {
                let _ = std::fs::remove_dir_all(dir);
            });
        }
        Ok(())
    }

    /// A TCP listener on the host (`127.0.0.2:0` style); counts accepted connections.
    pub fn tcp_listener(&mut self, addr: &str) -> Result<(Tally, u16)> {
        let l = TcpListener::bind(addr).with_context(|| format!("bind tcp {addr}"))?;
        let port = l.local_addr()?.port();
        l.set_nonblocking(true)?;
        let tally = Tally::default();
        let (t, stop) = (tally.clone(), self.stop.clone());
        self.threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((mut s, peer)) => {
                        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                        let mut b = [0u8; 64];
                        let n = s.read(&mut b).unwrap_or(0);
                        t.hit(format!("{peer} {}", String::from_utf8_lossy(&b[..n])));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }));
        Ok((tally, port))
    }

    /// A TLS model upstream on `127.0.0.1` with a fresh test CA (NET-16): `answer(n)` is the
    /// JSON body of the n-th request (from 1). Returns the port, the CA's PEM and each
    /// request's head as it arrived.
    pub fn tls_upstream(&mut self, answer: fn(usize) -> String) -> Result<(u16, String, Heads)> {
        let (listener, ca_pem, config) = super::tls::server()?;
        let port = listener.local_addr()?.port();
        listener.set_nonblocking(true)?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (s2, stop) = (Arc::clone(&seen), self.stop.clone());
        self.threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => super::tls::serve_one(stream, &config, &s2, answer),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }));
        Ok((port, ca_pem, seen))
    }

    /// A UDP socket on the host; counts datagrams.
    pub fn udp_listener(&mut self, addr: &str) -> Result<(Tally, u16)> {
        let s = UdpSocket::bind(addr).with_context(|| format!("bind udp {addr}"))?;
        let port = s.local_addr()?.port();
        s.set_read_timeout(Some(Duration::from_millis(50)))?;
        let tally = Tally::default();
        let (t, stop) = (tally.clone(), self.stop.clone());
        self.threads.push(std::thread::spawn(move || {
            let mut b = [0u8; 512];
            while !stop.load(Ordering::SeqCst) {
                if let Ok((n, peer)) = s.recv_from(&mut b) {
                    t.hit(format!("{peer} {}", String::from_utf8_lossy(&b[..n])));
                }
            }
        }));
        Ok((tally, port))
    }

    /// A unix stream listener at a path (or an abstract name when `path` starts with `@`).
    pub fn unix_listener(&mut self, path: &str) -> Result<Tally> {
        let l = if let Some(name) = path.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt as _;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
            UnixListener::bind_addr(&addr)?
        } else {
            let _ = std::fs::remove_file(path);
            let l = UnixListener::bind(path).with_context(|| format!("bind unix {path}"))?;
            set_mode(Path::new(path), 0o777)?;
            let p = path.to_owned();
            self.on_cleanup(move || {
                let _ = std::fs::remove_file(p);
            });
            l
        };
        l.set_nonblocking(true)?;
        let tally = Tally::default();
        let (t, stop) = (tally.clone(), self.stop.clone());
        self.threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok(_) => t.hit("accept".into()),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }));
        Ok(tally)
    }

    /// A unix datagram socket at a path; counts datagrams.
    pub fn unix_dgram(&mut self, path: &str) -> Result<Tally> {
        let _ = std::fs::remove_file(path);
        let s = UnixDatagram::bind(path).with_context(|| format!("bind unix dgram {path}"))?;
        set_mode(Path::new(path), 0o777)?;
        let p = path.to_owned();
        self.on_cleanup(move || {
            let _ = std::fs::remove_file(p);
        });
        s.set_read_timeout(Some(Duration::from_millis(50)))?;
        let tally = Tally::default();
        let (t, stop) = (tally.clone(), self.stop.clone());
        self.threads.push(std::thread::spawn(move || {
            let mut b = [0u8; 512];
            while !stop.load(Ordering::SeqCst) {
                if let Ok(n) = s.recv(&mut b) {
                    t.hit(String::from_utf8_lossy(&b[..n]).into_owned());
                }
            }
        }));
        Ok(tally)
    }

    /// Builds a fresh copy of a fixture repository (`repos/<name>.sh DEST N`); returns its
    /// path and base commit.
    pub fn repo(&mut self, name: &str, dest: &Path) -> Result<(PathBuf, String)> {
        // A fixture name, or the absolute path of a builder a case wrote (hostile variants
        // built on top of `repos/standard.sh`).
        let script = if name.starts_with('/') {
            PathBuf::from(name)
        } else {
            self.h.fixture(&format!("repos/{name}.sh"))
        };
        let out = Command::new("bash")
            .arg(&script)
            .arg(dest)
            .arg(&self.n)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.h.scratch.join("home"))
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        if !out.status.success() {
            bail!(
                "{} failed: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let base = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or("")
            .trim()
            .to_owned();
        if base.len() != 40 {
            bail!("{} printed no base commit (got {base:?})", script.display());
        }
        Ok((dest.to_path_buf(), base))
    }

    /// Substitutes `{N}`, `{WS}` and the case's own `{NAME}` values.
    pub fn subst(&self, s: &str, ws: &str, vars: &BTreeMap<String, String>) -> String {
        let mut s = s.replace("{N}", &self.n).replace("{WS}", ws);
        for (k, v) in vars {
            s = s.replace(&format!("{{{k}}}"), v);
        }
        s
    }

    /// The WorkUnit and preset documents for a run (also written as fixtures' templates).
    pub fn documents(&self, spec: &RunSpec, base: &str) -> (Value, Value) {
        let (network, allowlist, policy) = match &spec.net {
            Net::None => ("none", Vec::new(), "disabled"),
            Net::Allowlist(list) => ("allowlist", list.clone(), "allowlisted"),
        };
        let mut wu = json!({
            "schema_version": "corral.work-unit/v1",
            "id": format!("adv-{}", self.id.to_lowercase()),
            "objective": format!("adversarial case {}", self.id),
            "repository": { "base_sha": base },
            "security": { "sandbox_required": true },
            "permissions": {
                "process_execution": true, "secrets": [], "network": network,
                "network_allowlist": allowlist, "filesystem_write": spec.allowed_paths,
            },
            "budget": {
                "wall_seconds": spec.wall_seconds, "cpu_seconds": spec.cpu_seconds,
                "memory_bytes": spec.memory_bytes, "disk_bytes": spec.disk_bytes,
                "max_processes": spec.max_processes, "max_output_bytes": spec.max_output_bytes,
                "max_patch_bytes": spec.max_patch_bytes,
            },
            "constraints": {
                "allowed_paths": spec.allowed_paths, "forbidden_paths": spec.forbidden_paths,
            },
        });
        for (k, v) in &spec.work_unit_overrides {
            wu[k] = v.clone();
        }
        let mut env_names: Vec<String> = spec.env.iter().map(|(k, _)| k.clone()).collect();
        env_names.push("LANG".into());
        env_names.sort();
        env_names.dedup();
        let mut preset = preset_template(&self.id, &spec.script);
        preset["executable"] = json!(self.h.attacks.join(&spec.script).to_string_lossy());
        preset["env_allowlist"] = json!(env_names);
        preset["network_policy"] = json!(policy);
        for (k, v) in &spec.preset_overrides {
            preset[k] = v.clone();
        }
        (wu, preset)
    }

    /// Runs the attack through the whole `corral run` path and collects what is visible
    /// from outside. `vars` fills the case's own placeholders in `args`.
    pub fn run(&mut self, spec: &RunSpec, vars: &BTreeMap<String, String>) -> Result<RunObs> {
        self.runs += 1;
        let p = self.prepare(spec, vars, &format!("run{}", self.runs))?;
        let mut cmd = match &spec.netns {
            None => Command::new(&self.h.corral),
            Some((ns, resolv)) => {
                // nsenter, not `ip netns exec`: the latter remounts /sys in a new mount
                // namespace, which hides the cgroup v1 hierarchies corral needs.
                let mut c = Command::new("nsenter");
                c.arg(format!("--net=/run/netns/{ns}"));
                match resolv {
                    Some(r) => {
                        // A private mount namespace so the bind never touches the host's.
                        c.args(["unshare", "-m", "--propagation", "private", "sh", "-c"]);
                        c.arg("mount --bind \"$1\" /etc/resolv.conf && shift && exec \"$@\"");
                        c.arg("sh").arg(r).arg(&self.h.corral);
                    }
                    None => {
                        c.arg(&self.h.corral);
                    }
                }
                c
            }
        };
        cmd.args(&p.args)
            .arg("--json")
            .env_clear()
            .envs(p.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let start = Instant::now();
        let mut child = cmd.spawn().context("starting corral")?;
        let pid = child.id();
        self.supervisors.push(pid);
        let (out_t, err_t) = drain(&mut child);
        let deadline = start + Duration::from_secs(spec.wall_seconds + 60);
        let mut peak = 0u64;
        let mut signalled = (false, false);
        let mut ready_at: Option<Duration> = None;
        let mut signalled_at: Option<Duration> = None;
        let status = loop {
            if let Some(s) = child.try_wait()? {
                break s;
            }
            peak = peak.max(vm_hwm(pid));
            let t = start.elapsed();
            if ready_at.is_none() && spec.ready.as_ref().is_none_or(|r| (r.0)()) {
                ready_at = Some(if spec.ready.is_some() {
                    t
                } else {
                    Duration::ZERO
                });
            }
            let since_ready = ready_at.map(|r| t.saturating_sub(r));
            if let Some(after) = spec.cancel_after
                && since_ready.is_some_and(|d| d >= after)
                && !signalled.0
            {
                signalled.0 = true;
                signalled_at = Some(start.elapsed());
                let _ = Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status();
            }
            if let Some(after) = spec.kill_after
                && since_ready.is_some_and(|d| d >= after)
                && !signalled.1
            {
                signalled.1 = true;
                signalled_at = Some(start.elapsed());
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("corral did not return within wall + 60 s (killed it)");
            }
            std::thread::sleep(Duration::from_millis(15));
        };
        let elapsed = start.elapsed();
        if !self.threads.is_empty() {
            // Listener threads poll every 10 ms: let a contact made during the run be counted
            // before the judge reads the tallies (and before a control adds its own).
            std::thread::sleep(Duration::from_millis(60));
        }
        let stdout = out_t.join().unwrap_or_default();
        let corral_stderr = String::from_utf8_lossy(&err_t.join().unwrap_or_default()).into_owned();
        let mut obs = self.observe(
            p,
            status.code().unwrap_or(-1),
            &stdout,
            corral_stderr,
            elapsed,
            pid,
            peak,
        );
        obs.ready_at = ready_at.filter(|_| spec.ready.is_some());
        obs.signalled_at = signalled_at;
        Ok(obs)
    }

    /// Makes a run ready without starting it (for cases that start corral their own way,
    /// e.g. under a pseudo-terminal): builds the repository and writes the documents in
    /// `<case dir>/<name>`, and returns the `corral run` arguments (without `--json`) and the
    /// environment `Ctx::run` uses.
    pub fn prepare(
        &mut self,
        spec: &RunSpec,
        vars: &BTreeMap<String, String>,
        name: &str,
    ) -> Result<Prepared> {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir)?;
        let (repo, base) = self.repo(&spec.repo, &dir.join("repo"))?;
        self.prepare_on(spec, vars, name, &repo, &base, &dir.join("artifacts"))
    }

    /// `prepare` on a repository and artifact store the case already made (runs that must
    /// share them, e.g. concurrent attempts on one base commit): `spec.repo` is not built.
    pub fn prepare_on(
        &self,
        spec: &RunSpec,
        vars: &BTreeMap<String, String>,
        name: &str,
        repo: &Path,
        base: &str,
        artifacts: &Path,
    ) -> Result<Prepared> {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir)?;
        let (repo, artifacts) = (repo.to_path_buf(), artifacts.to_path_buf());
        let (wu, mut preset) = self.documents(spec, base);
        let mut argv = vec![self.n.clone()];
        argv.extend(spec.args.iter().map(|a| self.subst(a, "/workspace", vars)));
        preset["argv"] = json!(argv);
        let wu_path = dir.join("work-unit.json");
        let preset_path = dir.join("preset.json");
        std::fs::write(&wu_path, serde_json::to_vec_pretty(&wu)?)?;
        std::fs::write(&preset_path, serde_json::to_vec_pretty(&preset)?)?;
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let mut args = vec![
            "run".to_owned(),
            "--work-unit".to_owned(),
            s(&wu_path),
            "--preset".to_owned(),
            s(&preset_path),
            "--repo".to_owned(),
            s(&repo),
            "--artifacts".to_owned(),
            s(&artifacts),
        ];
        if let Some(c) = &spec.connections {
            let path = dir.join("connections.json");
            std::fs::write(&path, serde_json::to_vec_pretty(c)?)?;
            args.push("--connections".to_owned());
            args.push(s(&path));
        }
        for (k, v) in &spec.env {
            args.push("--env".to_owned());
            args.push(format!("{k}={}", self.subst(v, "/workspace", vars)));
        }
        let scratch = &self.h.scratch;
        let mut env = vec![
            (
                "PATH".to_owned(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
            ),
            ("HOME".to_owned(), s(&scratch.join("home"))),
            ("XDG_CACHE_HOME".to_owned(), s(&scratch.join("cache"))),
            ("XDG_DATA_HOME".to_owned(), s(&scratch.join("data"))),
        ];
        for (k, v) in &spec.corral_env {
            env.push((k.clone(), self.subst(v, "/workspace", vars)));
        }
        Ok(Prepared {
            dir,
            repo,
            artifacts,
            args,
            env,
        })
    }

    /// What a finished run left for the outside to see: the manifest corral printed
    /// (`--json`) and the logs it names in the artifact store.
    #[allow(clippy::too_many_arguments, reason = "one field of RunObs each")]
    pub fn observe(
        &self,
        p: Prepared,
        exit: i32,
        stdout: &[u8],
        corral_stderr: String,
        elapsed: Duration,
        pid: u32,
        peak_rss_kib: u64,
    ) -> RunObs {
        let manifest: Value = serde_json::from_slice(stdout).unwrap_or(Value::Null);
        let log = |k: &str| {
            manifest["logs"][k]["digest"]
                .as_str()
                .map(|d| read_artifact(&p.artifacts, d))
                .unwrap_or_default()
        };
        let obs = RunObs {
            exit,
            stdout: log("stdout"),
            stderr: log("stderr"),
            manifest,
            corral_stderr,
            elapsed,
            supervisor_pid: pid,
            peak_rss_kib,
            repo: p.repo,
            artifacts: p.artifacts,
            ready_at: None,
            signalled_at: None,
        };
        if self.h.verbose {
            eprintln!(
                "[{}] run: exit {} {} {} in {:?}\n--- worker output ---\n{}\n--- corral stderr ---\n{}",
                self.id,
                obs.exit,
                obs.outcome(),
                obs.termination(),
                obs.elapsed,
                truncate(&obs.output(), 4000),
                truncate(&obs.corral_stderr, 2000)
            );
        }
        obs
    }

    /// Runs the same attack outside the sandbox (the positive control), in a fresh copy of
    /// the case's repository, with `{WS}` set to that copy.
    pub fn control(
        &mut self,
        spec: &RunSpec,
        vars: &BTreeMap<String, String>,
        how: &Control,
    ) -> Result<CtlObs> {
        crate::adversarial::host::outside_sandbox(|| self.control_outside(spec, vars, how))
    }

    fn control_outside(
        &mut self,
        spec: &RunSpec,
        vars: &BTreeMap<String, String>,
        how: &Control,
    ) -> Result<CtlObs> {
        self.runs += 1;
        let dir = self.dir.join(format!("control{}", self.runs));
        std::fs::create_dir_all(&dir)?;
        let (ws, _) = self.repo(&spec.repo, &dir.join("repo"))?;
        let ids = how.as_ids.unwrap_or((65534, 65534));
        if !how.as_root {
            let _ = Command::new("chown")
                .args(["-R", &format!("{}:{}", ids.0, ids.1)])
                .arg(&dir)
                .status();
        }
        let ws_s = ws.to_string_lossy().into_owned();
        let mut argv: Vec<String> = Vec::new();
        if let Some(ns) = &how.netns {
            argv.extend(["ip", "netns", "exec", ns].map(String::from));
        }
        if how.own_pidns {
            argv.extend(["unshare", "-pfm", "--mount-proc"].map(String::from));
        }
        argv.extend(["timeout", "-s", "KILL"].map(String::from));
        argv.push(format!("{}", how.timeout.as_secs().max(1)));
        if !how.as_root {
            argv.extend(as_ids(ids));
        }
        argv.push(
            self.h
                .attacks
                .join(&spec.script)
                .to_string_lossy()
                .into_owned(),
        );
        argv.push(self.n.clone());
        argv.extend(spec.args.iter().map(|a| self.subst(a, &ws_s, vars)));
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(&ws)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &dir)
            .env("LANG", "C.UTF-8");
        for (k, v) in &how.env {
            cmd.env(k, self.subst(v, &ws_s, vars));
        }
        for (k, v) in &spec.env {
            cmd.env(k, self.subst(v, &ws_s, vars));
        }
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .context("running the control")?;
        let obs = CtlObs {
            exit: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            ws,
        };
        if self.h.verbose {
            eprintln!(
                "[{}] control: exit {}\n{}",
                self.id,
                obs.exit,
                truncate(&obs.output(), 4000)
            );
        }
        Ok(obs)
    }

    /// `ESC-{N} <what>` lines: the attack's report that a call it expected to be refused got
    /// through (read from the output corral stored, or from a control's output).
    pub fn escapes(&self, output: &str) -> Vec<String> {
        let tag = format!("ESC-{}", self.n);
        output
            .lines()
            .filter(|l| l.contains(&tag))
            .map(|l| truncate(l, 200))
            .collect()
    }

    /// Marker files (`PWN-{N}`, `ESC-{N}`) anywhere the generic checks look on the host:
    /// `/tmp`, `/var/tmp`, `/root`, `/dev/shm`, the scratch home (depth-limited).
    pub fn markers(&self) -> Vec<PathBuf> {
        let names = [format!("PWN-{}", self.n), format!("ESC-{}", self.n)];
        let mut found = Vec::new();
        for top in ["/tmp", "/var/tmp", "/root", "/dev/shm", "/"] {
            let depth = if top == "/" { 1 } else { 3 };
            walk(Path::new(top), depth, &mut |p| {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                if let Some(n) = name
                    && names.iter().any(|m| n.contains(m.as_str()))
                {
                    found.push(p.to_path_buf());
                }
            });
        }
        found.sort();
        found.dedup();
        found
    }

    /// Host processes whose command line contains the nonce (other than the harness).
    pub fn processes_with_nonce(&self) -> Vec<String> {
        let me = std::process::id().to_string();
        let mut found = Vec::new();
        if let Ok(rd) = std::fs::read_dir("/proc") {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !name.bytes().all(|b| b.is_ascii_digit()) || name == me {
                    continue;
                }
                let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                if cmd.contains(&self.n) {
                    found.push(format!("pid {name}: {}", truncate(&cmd, 120)));
                }
            }
        }
        found
    }

    /// Cgroups left by this case's supervisors (`corral-<pid>-*` in any hierarchy).
    pub fn leftover_cgroups(&self) -> Vec<String> {
        let mut found = Vec::new();
        let prefixes: Vec<String> = self
            .supervisors
            .iter()
            .flat_map(|p| [format!("corral-{p}-"), format!("corral-supervisor-{p}")])
            .collect();
        walk(Path::new("/sys/fs/cgroup"), 6, &mut |p| {
            if let Some(n) = p.file_name().map(|n| n.to_string_lossy().into_owned())
                && prefixes.iter().any(|pre| n.starts_with(pre.as_str()))
                && p.is_dir()
            {
                found.push(p.display().to_string());
            }
        });
        found
    }

    /// Removes planted files, stops listeners, runs cleanups.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for (path, old) in self.planted.drain(..).rev() {
            match old {
                Some(bytes) => {
                    let _ = std::fs::write(&path, bytes);
                }
                None => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        for c in self.cleanups.drain(..).rev() {
            c();
        }
        remove_tree(&self.dir);
    }
}

impl Drop for Ctx<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Reads a child's stdout and stderr to their ends on two threads (so neither pipe fills).
pub fn drain(child: &mut Child) -> (JoinHandle<Vec<u8>>, JoinHandle<Vec<u8>>) {
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let a = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut b);
        }
        b
    });
    let b = std::thread::spawn(move || {
        let mut b = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_end(&mut b);
        }
        b
    });
    (a, b)
}

fn vm_hwm(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Visits entries up to `depth` levels below `dir` without following symlinks.
pub fn walk(dir: &Path, depth: usize, f: &mut dyn FnMut(&Path)) {
    if depth == 0 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.starts_with("/proc") || p.starts_with("/sys/kernel") {
            continue;
        }
        f(&p);
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            walk(&p, depth - 1, f);
        }
    }
}

pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// Runs a host command and returns (success, stdout+stderr). For harness-side setup.
/// Environment that makes the git the harness runs trust every repository whoever owns it
/// (`safe.directory=*`, command-line level, the only level git honours it at besides the
/// system and global files). The harness is root and judges repositories it built; with
/// `--as-user` they belong to the user corral ran as, and git would otherwise refuse to read
/// them ("dubious ownership"), which a case would take for a changed repository.
pub const GIT_TRUST_ALL: [(&str, &str); 3] = [
    ("GIT_CONFIG_COUNT", "1"),
    ("GIT_CONFIG_KEY_0", "safe.directory"),
    ("GIT_CONFIG_VALUE_0", "*"),
];

pub fn sh(cmd: &str) -> (bool, String) {
    match Command::new("sh")
        .args(["-c", cmd])
        .envs(GIT_TRUST_ALL)
        .output()
    {
        Ok(o) => (
            o.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        ),
        Err(e) => (false, e.to_string()),
    }
}

/// Writes `line` to the terminal's status line (only when stderr is a terminal).
pub fn progress(line: &str) {
    use std::io::IsTerminal as _;
    let mut e = std::io::stderr();
    if e.is_terminal() {
        let _ = write!(e, "\r\x1b[2K{}", truncate(line, 110));
        let _ = e.flush();
    }
}
