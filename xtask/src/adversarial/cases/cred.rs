//! CRED: credential isolation (corpus §5). CRED-08 (the metadata service) lives elsewhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use super::fs::canary_leaks;
use super::{control_escapes, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{AS_NOBODY, Control, Ctx, RunObs, RunSpec, set_mode};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "CRED-01",
            title: "Environment scrubbing, including /proc/*/environ",
            guarantee: "the worker's environment is an allowlist",
            script: Some(attack!("CRED-01.py")),
            judge: cred_01,
        },
        Case {
            id: "CRED-02",
            title: "docker, containerd and podman sockets",
            guarantee: "no container engine socket",
            script: Some(attack!("CRED-02.py")),
            judge: cred_02,
        },
        Case {
            id: "CRED-03",
            title: "ssh-agent, gpg-agent and keyring daemons",
            guarantee: "no agent socket",
            script: Some(attack!("CRED-03.py")),
            judge: cred_03,
        },
        Case {
            id: "CRED-04",
            title: "Cloud and tool credential files",
            guarantee: "no credential file of the host user",
            script: Some(attack!("CRED-04.py")),
            judge: cred_04,
        },
        Case {
            id: "CRED-05",
            title: "Credentials inside the workspace's own .git",
            guarantee: "the repository's credentials never reach the sandbox",
            script: Some(attack!("CRED-05.py")),
            judge: cred_05,
        },
        Case {
            id: "CRED-06",
            title: "Kernel keyring",
            guarantee: "no access to the kernel keyring",
            script: Some(attack!("CRED-06.py")),
            judge: cred_06,
        },
        Case {
            id: "CRED-07",
            title: "Other processes through /proc, ptrace and process_vm_readv",
            guarantee: "no view of other processes",
            script: Some(attack!("CRED-07.py")),
            judge: cred_07,
        },
    ]
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `escapes_inside`, and a canary in the output or the candidate is a breach too.
fn inside_escapes(ctx: &Ctx, run: &RunObs, j: &mut Judge) {
    super::escapes_inside(ctx, run, j);
    for l in canary_leaks(ctx, run) {
        j.breach(true, l);
    }
}

fn root() -> Control {
    Control {
        as_root: true,
        ..Control::default()
    }
}

/// A host folder under `/run` for the case's fake sockets (never a real one), removed at the
/// end; `/run` is a host-only tree the sandbox must not see.
fn run_dir(ctx: &mut Ctx) -> Result<PathBuf> {
    let d = PathBuf::from(format!("/run/corral-adv-{}", ctx.n));
    std::fs::create_dir_all(&d)?;
    set_mode(&d, 0o755)?;
    let c = d.clone();
    ctx.on_cleanup(move || {
        let _ = std::fs::remove_dir_all(c);
    });
    Ok(d)
}

// ---------------------------------------------------------------------------------------------
// CRED-01

const ALLOWED_ENV: &str = "PATH,HOME,TMPDIR,LANG,LC_CTYPE,PWD,SHLVL,_";

fn cred_01(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.canary();
    let secrets: Vec<(String, String)> = [
        ("AWS_SECRET_ACCESS_KEY", format!("{c}-aws")),
        ("AWS_ACCESS_KEY_ID", format!("{c}-awsid")),
        ("GITHUB_TOKEN", format!("{c}-gh")),
        ("OPENAI_API_KEY", format!("{c}-openai")),
        ("ANTHROPIC_API_KEY", format!("{c}-anthropic")),
        ("SSH_AUTH_SOCK", format!("/nonexistent/{c}-agent")),
        (
            "DOCKER_HOST",
            format!("unix:///nonexistent/{c}-docker.sock"),
        ),
        ("KUBECONFIG", format!("/nonexistent/{c}-kubeconfig")),
        (
            "GOOGLE_APPLICATION_CREDENTIALS",
            format!("/nonexistent/{c}-gcloud.json"),
        ),
        ("LD_PRELOAD", format!("/nonexistent/{c}-preload.so")),
        ("BASH_ENV", format!("/nonexistent/{c}-bashenv")),
        ("PROMPT_COMMAND", format!("echo {c}")),
        ("LANG", format!("C.UTF-8-{c}")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut spec = RunSpec::new("CRED-01.py").args([ALLOWED_ENV]);
    spec.corral_env = secrets.clone();
    let run = ctx.run(&spec, &BTreeMap::new())?;
    let ctl = ctx.control(
        &spec,
        &BTreeMap::new(),
        &Control {
            env: secrets,
            ..Control::default()
        },
    )?;
    let mut j = Judge::new();
    inside_escapes(ctx, &run, &mut j);
    j.require(
        run.output().contains("canary count 0"),
        "the worker scanned /proc",
    );
    control_escapes(
        ctx,
        &ctl,
        &[
            "/environ holds the canary",
            "env name AWS_SECRET_ACCESS_KEY",
            "env name LD_PRELOAD",
            "env value of GITHUB_TOKEN",
        ],
        &mut j,
    );
    j.note("LANG in corral's own environment carries the canary too: only --env values reach the worker");
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CRED-02

fn cred_02(ctx: &mut Ctx) -> Result<Verdict> {
    let rd = run_dir(ctx)?;
    let xdg = ctx.dir.join("xdg");
    std::fs::create_dir_all(xdg.join("podman"))?;
    std::fs::create_dir_all(rd.join("podman"))?;
    let paths = [
        rd.join("docker.sock"),
        rd.join("podman/podman.sock"),
        xdg.join("docker.sock"),
        xdg.join("podman/podman.sock"),
    ];
    let mut tallies = Vec::new();
    for p in &paths {
        tallies.push(ctx.unix_listener(&s(p))?);
    }
    let (tcp, port) = ctx.tcp_listener("127.0.0.2:0")?;
    let mut spec = RunSpec::new("CRED-02.py").args(
        ["{MODE}".to_owned()]
            .into_iter()
            .chain(paths.iter().map(|p| s(p)))
            .chain([format!("127.0.0.2:{port}")]),
    );
    spec.corral_env = vec![
        ("DOCKER_HOST".into(), format!("unix://{}", s(&paths[0]))),
        ("CONTAINER_HOST".into(), format!("unix://{}", s(&paths[1]))),
        ("XDG_RUNTIME_DIR".into(), s(&xdg)),
    ];
    let run = ctx.run(&spec, &vars([("MODE", "std".into())]))?;
    let inside: Vec<usize> = tallies.iter().map(|t| t.hits()).collect();
    let inside_tcp = tcp.hits();
    let ctl = ctx.control(
        &spec,
        &vars([("MODE", "nostd".into())]),
        &Control::default(),
    )?;
    let mut j = Judge::new();
    inside_escapes(ctx, &run, &mut j);
    for ((p, t), n) in paths.iter().zip(&tallies).zip(&inside) {
        j.breach(
            *n > 0,
            format!(
                "the fake engine socket {} saw {n} connection(s)",
                p.display()
            ),
        );
        j.control(
            t.above(*n),
            format!("the control reached the fake socket {}", p.display()),
        );
    }
    j.breach(
        inside_tcp > 0,
        format!("the fake engine TCP port saw {inside_tcp} connection(s)"),
    );
    j.control(
        tcp.above(inside_tcp),
        "the control reached the fake engine TCP port",
    );
    control_escapes(ctx, &ctl, &["connected to the engine socket"], &mut j);
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CRED-03

fn cred_03(ctx: &mut Ctx) -> Result<Verdict> {
    let rd = run_dir(ctx)?;
    std::fs::create_dir_all(rd.join("ssh"))?;
    std::fs::create_dir_all(rd.join("gnupg"))?;
    set_mode(&rd.join("gnupg"), 0o755)?;
    let c = ctx.canary();
    // A real ssh-agent of the host user holding a key whose comment is the canary.
    let key = ctx.dir.join("canary_key");
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", &c, "-f"])
        .arg(&key)
        .stdin(Stdio::null())
        .output()
        .context("ssh-keygen")?;
    if !ok.status.success() {
        bail!("ssh-keygen: {}", String::from_utf8_lossy(&ok.stderr));
    }
    let agent_sock = rd.join(format!("ssh/sbx-{}.agent", ctx.n));
    let out = Command::new("ssh-agent")
        .arg("-s")
        .arg("-a")
        .arg(&agent_sock)
        .stdin(Stdio::null())
        .output()
        .context("ssh-agent")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let agent_pid: Option<u32> = text
        .split(';')
        .find_map(|p| p.trim().strip_prefix("SSH_AGENT_PID="))
        .and_then(|p| p.parse().ok());
    let Some(agent_pid) = agent_pid else {
        bail!("ssh-agent printed no pid: {text}");
    };
    let kill_agent = move || {
        let _ = Command::new("kill").arg(agent_pid.to_string()).status();
    };
    ctx.on_cleanup(kill_agent);
    let added = Command::new("ssh-add")
        .arg(&key)
        .env("SSH_AUTH_SOCK", &agent_sock)
        .stdin(Stdio::null())
        .output()
        .context("ssh-add")?;
    let gpg = rd.join("gnupg/S.gpg-agent");
    let bus = rd.join("bus");
    let gpg_t = ctx.unix_listener(&s(&gpg))?;
    let bus_t = ctx.unix_listener(&s(&bus))?;
    let mut spec =
        RunSpec::new("CRED-03.py").args(["{MODE}".to_owned(), s(&agent_sock), s(&gpg), s(&bus)]);
    spec.corral_env = vec![
        ("SSH_AUTH_SOCK".into(), s(&agent_sock)),
        ("GNUPGHOME".into(), s(&rd.join("gnupg"))),
        (
            "DBUS_SESSION_BUS_ADDRESS".into(),
            format!("unix:path={}", s(&bus)),
        ),
        ("XDG_RUNTIME_DIR".into(), s(&rd)),
    ];
    let run = ctx.run(&spec, &vars([("MODE", "walk".into())]))?;
    let (gpg_in, bus_in) = (gpg_t.hits(), bus_t.hits());
    let ctl = ctx.control(&spec, &vars([("MODE", "nowalk".into())]), &root())?;
    // The agent's command line holds the nonce: stop it before the generic checks.
    let _ = Command::new("kill").arg(agent_pid.to_string()).status();
    let mut j = Judge::new();
    inside_escapes(ctx, &run, &mut j);
    j.breach(
        gpg_in > 0,
        format!("the fake gpg-agent saw {gpg_in} connection(s)"),
    );
    j.breach(
        bus_in > 0,
        format!("the fake session bus saw {bus_in} connection(s)"),
    );
    j.require(
        added.status.success(),
        format!(
            "ssh-add loaded the canary key ({})",
            String::from_utf8_lossy(&added.stderr).trim()
        ),
    );
    control_escapes(ctx, &ctl, &["ssh-add -L listed keys via"], &mut j);
    j.control(
        ctl.output().contains(&c),
        "the control printed the canary key's comment",
    );
    j.control(
        gpg_t.above(gpg_in),
        "the control reached the fake gpg-agent",
    );
    j.control(
        bus_t.above(bus_in),
        "the control reached the fake session bus",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CRED-04

const CRED_FILES: &[&str] = &[
    ".aws/credentials",
    ".config/gcloud/application_default_credentials.json",
    ".azure/accessTokens.json",
    ".kube/config",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".gitconfig",
    ".npmrc",
    ".pypirc",
    ".config/gh/hosts.yml",
];

fn cred_04(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.canary();
    let home = ctx.h.scratch.join("home");
    let mut planted = Vec::new();
    for rel in CRED_FILES {
        let p = home.join(rel);
        let body = if *rel == ".gitconfig" {
            format!("[credential]\n\thelper = store\n[user]\n\tname = {c}\n")
        } else {
            format!("secret = {c}\n")
        };
        ctx.plant(&p, body.as_bytes())?;
        set_mode(&p, 0o644)?;
        planted.push(p);
    }
    let root_file = PathBuf::from(format!("/root/.aws/credentials-corral-adv-{}", ctx.n));
    ctx.plant(
        &root_file,
        format!("aws_secret_access_key = {c}\n").as_bytes(),
    )?;
    planted.push(root_file);
    let spec = RunSpec::new("CRED-04.py").args(
        ["{MODE}".to_owned()]
            .into_iter()
            .chain(planted.iter().map(|p| s(p))),
    );
    let run = ctx.run(&spec, &vars([("MODE", "walk".into())]))?;
    let ctl = ctx.control(&spec, &vars([("MODE", "nowalk".into())]), &root())?;
    let mut j = Judge::new();
    inside_escapes(ctx, &run, &mut j);
    j.require(
        run.output().contains("walk /:"),
        "the worker searched its whole file system",
    );
    for p in &planted {
        control_escapes(ctx, &ctl, &[&format!("read canary {}", s(p))], &mut j);
    }
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CRED-05

fn cred_05(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = RunSpec::new("CRED-05.py");
    let run = ctx.run(&spec, &BTreeMap::new())?;
    let host_cfg = std::fs::read_to_string(run.repo.join(".git/config")).unwrap_or_default();
    let ctl = ctx.control(&spec, &BTreeMap::new(), &Control::default())?;
    let mut j = Judge::new();
    inside_escapes(ctx, &run, &mut j);
    j.require(
        host_cfg.contains(&ctx.canary()),
        "the host repository's .git/config holds the seeded credentials",
    );
    j.require(
        run.output().contains("git config -l:"),
        "the worker listed its git config",
    );
    control_escapes(ctx, &ctl, &["canary in", "base64 token in"], &mut j);
    j.note("corral checks out the base commit from its own cache: the host .git/config never enters the sandbox");
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CRED-06

/// Runs a tiny python program as 65534 (the sandbox uid) on the host.
fn as_nobody(code: &str) -> Result<String> {
    let out = Command::new(AS_NOBODY[0])
        .args(&AS_NOBODY[1..])
        .args(["python3", "-c", code])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .context("setpriv python3")?;
    Ok(format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

const KEY_PY: &str = r#"import ctypes, sys
l = ctypes.CDLL(None, use_errno=True); l.syscall.restype = ctypes.c_long
op = sys.argv[1] if len(sys.argv) > 1 else ""
"#;

fn cred_06(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.canary();
    // The host user the sandbox maps to (65534) holds a canary key in its user keyring.
    let add = format!(
        "{KEY_PY}r = l.syscall(248, b'user', b'sbx_{n}', b'{c}', {len}, ctypes.c_long(-4)); print('KEY', r, ctypes.get_errno())",
        n = ctx.n,
        len = c.len()
    );
    let out = as_nobody(&add)?;
    let key_id: Option<i64> = out
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .filter(|v| *v > 0);
    if let Some(id) = key_id {
        ctx.on_cleanup(move || {
            // KEYCTL_INVALIDATE (21) the canary key.
            let _ = as_nobody(&format!("{KEY_PY}l.syscall(250, 21, {id})"));
        });
    }
    let spec = RunSpec::new("CRED-06.py").args(["{MODE}"]);
    let run = ctx.run(&spec, &vars([("MODE", "flood".into())]))?;
    let ctl = ctx.control(&spec, &vars([("MODE", "once".into())]), &Control::default())?;
    // Afterwards the host user can still add keys (quota not used up).
    let again = as_nobody(&format!(
        "{KEY_PY}l.syscall(250, 1, 0); r = l.syscall(248, b'user', b'after', b'x', 1, ctypes.c_long(-3)); print('AFTER', r)"
    ))?;
    let mut j = Judge::new();
    inside_escapes(ctx, &run, &mut j);
    j.require(
        key_id.is_some(),
        format!(
            "the canary key was added to 65534's user keyring ({})",
            out.trim()
        ),
    );
    control_escapes(
        ctx,
        &ctl,
        &[
            "keyctl(JOIN_SESSION_KEYRING)",
            "add_key(user, @s)",
            "request_key",
            "/proc/keys shows",
        ],
        &mut j,
    );
    j.breach(
        again
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<i64>().ok())
            .is_none_or(|v| v <= 0),
        format!(
            "the host user could not add a key after the run ({})",
            again.trim()
        ),
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// CRED-07

fn cred_07(ctx: &mut Ctx) -> Result<Verdict> {
    let c = ctx.canary();
    // The canary process: the sandbox's uid, the nonce in its argv and environment.
    let mut child = Command::new(AS_NOBODY[0])
        .args(&AS_NOBODY[1..])
        .args([
            "bash",
            "-c",
            &format!("exec -a sbx-canary-{} sleep 99999", ctx.n),
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("CANARY", &c)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the canary process")?;
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(100));
    let spec = RunSpec::new("CRED-07.py").args(["{PID}"]);
    let v = vars([("PID", pid.to_string())]);
    let run = ctx.run(&spec, &v);
    let ctl = ctx.control(&spec, &v, &Control::default());
    let _ = child.kill();
    let _ = child.wait();
    let (run, ctl) = (run?, ctl?);
    let mut j = Judge::new();
    inside_escapes(ctx, &run, &mut j);
    control_escapes(
        ctx,
        &ctl,
        &[
            "processes visible in /proc",
            "/cmdline shows the canary process",
            "/environ shows the canary process",
        ],
        &mut j,
    );
    Ok(j.verdict())
}
