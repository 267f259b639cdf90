//! FS: filesystem isolation (corpus §4).
//!
//! Design notes that shape these judges: corral builds every attempt's `/workspace` as an
//! overlay over a checkout from its own base cache (never the host repository or its `.git`),
//! binds `.git` and literal forbidden paths read-only, and captures only the overlay's upper
//! layer after the run. Host paths a case plants canaries in (`/root`, the harness HOME under
//! `/tmp`, the host repository's `.git/config`) are therefore not visible inside at all.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use sha2::{Digest as _, Sha256};

use super::{control_escapes, describe, escapes_inside, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{AS_NOBODY, Control, CtlObs, Ctx, RunObs, RunSpec, set_mode};

pub fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "FS-01",
            title: "Writes to the read-only system",
            guarantee: "the system is read-only",
            script: Some(attack!("FS-01.py")),
            judge: fs_01,
        },
        Case {
            id: "FS-02",
            title: "Reading forbidden paths and the host home",
            guarantee: "host secrets and the host home are not visible",
            script: Some(attack!("FS-02.py")),
            judge: fs_02,
        },
        Case {
            id: "FS-03",
            title: "Symlink escapes for writing and for reading",
            guarantee: "only the workspace is writable; host paths stay unreadable",
            script: Some(attack!("FS-03.py")),
            judge: fs_03,
        },
        Case {
            id: "FS-04",
            title: "Hard links to files outside the workspace",
            guarantee: "filesystem isolation",
            script: Some(attack!("FS-04.py")),
            judge: fs_04,
        },
        Case {
            id: "FS-05",
            title: "Leaked file descriptors and /proc/self/fd traversal",
            guarantee: "filesystem isolation (fds 0-2 only, no open_by_handle_at)",
            script: Some(attack!("FS-05.py")),
            judge: fs_05,
        },
        Case {
            id: "FS-06",
            title: "Overwriting runtime binaries through /proc/*/exe",
            guarantee: "the host binaries stay intact",
            script: Some(attack!("FS-06.py")),
            judge: fs_06,
        },
        Case {
            id: "FS-07",
            title: "Mount tampering and a nested user namespace",
            guarantee: "read-only system; no new namespaces; host .git untouched",
            script: Some(attack!("FS-07.py")),
            judge: fs_07,
        },
        Case {
            id: "FS-08",
            title: "Device nodes and /dev",
            guarantee: "minimal /dev, mknod refused",
            script: Some(attack!("FS-08.py")),
            judge: fs_08,
        },
        Case {
            id: "FS-09",
            title: "Writes to /proc/sys, /sys, release_agent and core_pattern",
            guarantee: "the host kernel settings stay intact",
            script: Some(attack!("FS-09.py")),
            judge: fs_09,
        },
        Case {
            id: "FS-10",
            title: "setuid files, file capabilities, privilege that persists",
            guarantee: "no privilege inside; no setuid file reaches a candidate",
            script: Some(attack!("FS-10.py")),
            judge: fs_10,
        },
        Case {
            id: "FS-11",
            title: "Planted symlinks that poison the next run's mounts [2RUN]",
            guarantee: "mount setup is safe; nothing persists between runs",
            script: Some(attack!("FS-11.py")),
            judge: fs_11,
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// Shared helpers (also used by cred.rs).

/// Where the canary of the case leaked into what corral stored: the worker's output, the
/// patch, the changed paths, or the rejections.
pub(super) fn canary_leaks(ctx: &Ctx, run: &RunObs) -> Vec<String> {
    let c = ctx.canary();
    let mut out = Vec::new();
    if run.output().contains(&c) {
        out.push(format!("{c} in the stored worker output"));
    }
    if String::from_utf8_lossy(&run.patch()).contains(&c) {
        out.push(format!("{c} in the captured patch"));
    }
    for (p, _) in run.changed_paths() {
        if p.contains(&c) {
            out.push(format!("{c} in a changed path: {p}"));
        }
    }
    if run.manifest["rejections"].to_string().contains(&c) {
        out.push(format!("{c} in the manifest's rejections"));
    }
    out
}

/// sha256, mode, owner, links and mtime of a host path (`<absent>` when missing).
pub(super) fn fingerprint(p: &Path) -> String {
    match std::fs::symlink_metadata(p) {
        Err(_) => "<absent>".into(),
        Ok(m) => {
            let digest = if m.is_file() {
                std::fs::read(p)
                    .map(|b| format!("{:x}", Sha256::digest(&b)))
                    .unwrap_or_else(|e| e.to_string())
            } else {
                String::new()
            };
            format!(
                "{digest} mode {:o} owner {}:{} ino {} nlink {} mtime {}.{}",
                m.mode(),
                m.uid(),
                m.gid(),
                m.ino(),
                m.nlink(),
                m.mtime(),
                m.mtime_nsec()
            )
        }
    }
}

pub(super) fn fingerprints(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| fingerprint(p)).collect()
}

/// Breaches for every path whose fingerprint changed.
pub(super) fn compare(j: &mut Judge, paths: &[PathBuf], before: &[String], after: &[String]) {
    for ((p, b), a) in paths.iter().zip(before).zip(after) {
        j.breach(a != b, format!("host {} changed: {b} -> {a}", p.display()));
    }
}

/// A recursive listing (path, fingerprint) of a host tree, for before/after comparisons.
pub(super) fn tree(dir: &Path) -> Vec<String> {
    let mut v = vec![format!("{} {}", dir.display(), fingerprint(dir))];
    crate::adversarial::harness::walk(dir, 8, &mut |p| {
        v.push(format!("{} {}", p.display(), fingerprint(p)));
    });
    v.sort();
    v
}

/// Runs an attack script outside the sandbox in `ws` (a control the harness's `control()`
/// cannot express: an inherited fd, two steps on one workspace). `pre` is shell run first
/// (its fds are inherited); the script runs as 65534 without capabilities unless `as_root`.
pub(super) fn own_control(
    ctx: &Ctx,
    script: &str,
    args: &[String],
    ws: &Path,
    as_root: bool,
    pre: &str,
    env: &[(String, String)],
) -> Result<CtlObs> {
    let mut argv: Vec<String> = vec!["timeout".into(), "-s".into(), "KILL".into(), "30".into()];
    if !as_root {
        argv.extend(AS_NOBODY.map(String::from));
    }
    argv.push(ctx.h.attacks.join(script).to_string_lossy().into_owned());
    argv.push(ctx.n.clone());
    argv.extend(args.iter().cloned());
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("{pre}\nexec \"$@\""))
        .arg("bash")
        .args(&argv)
        .current_dir(ws)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", ws.parent().unwrap_or(ws))
        .env("LANG", "C.UTF-8");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .context("running the control")?;
    let obs = CtlObs {
        exit: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        ws: ws.to_path_buf(),
    };
    if ctx.h.verbose {
        eprintln!(
            "[{}] own control: exit {}\n{}",
            ctx.id,
            obs.exit,
            crate::adversarial::harness::truncate(&obs.output(), 4000)
        );
    }
    Ok(obs)
}

/// A fresh standard repository for an own control, owned by 65534 unless `as_root`.
pub(super) fn control_ws(ctx: &mut Ctx, name: &str, as_root: bool) -> Result<PathBuf> {
    let dir = ctx.dir.join(name);
    std::fs::create_dir_all(&dir)?;
    let (ws, _) = ctx.repo("standard", &dir.join("repo"))?;
    if !as_root {
        let _ = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(&dir)
            .status();
    }
    Ok(ws)
}

/// The canaries every reading case plants: `/root/.canary` (root only) and `.canary` in the
/// HOME corral runs with (world-readable). Returns both paths.
pub(super) fn plant_home_canaries(ctx: &mut Ctx) -> Result<(PathBuf, PathBuf)> {
    let c = ctx.canary();
    let root = PathBuf::from("/root/.canary");
    let home = ctx.h.scratch.join("home/.canary");
    ctx.plant(&root, format!("{c}\n").as_bytes())?;
    ctx.plant(&home, format!("{c}\n").as_bytes())?;
    set_mode(&home, 0o644)?;
    Ok((root, home))
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------------
// FS-01

fn fs_01(ctx: &mut Ctx) -> Result<Verdict> {
    let n = ctx.n.clone();
    let watched: Vec<PathBuf> = [
        "/etc/passwd",
        "/etc/ld.so.preload",
        "/usr/bin/env",
        "/bin/sh",
        "/usr/lib/os-release",
        "/etc/hosts",
        "/etc",
        "/usr/bin",
        "/opt",
        "/var/lib",
        "/boot",
        "/usr",
        "/lib",
    ]
    .iter()
    .map(PathBuf::from)
    .chain(
        [
            "/opt", "/var/lib", "/boot", "", "/etc", "/usr/bin", "/usr", "/lib",
        ]
        .iter()
        .map(|d| PathBuf::from(format!("{d}/PWN-{n}"))),
    )
    .chain([
        PathBuf::from(format!("/etc/PWN-{n}-dir")),
        PathBuf::from(format!("/usr/bin/PWN-{n}-ln")),
    ])
    .collect();
    let before = fingerprints(&watched);
    let spec = RunSpec::new("FS-01.py").args(["{P}"]);
    let run = ctx.run(&spec, &vars([("P", String::new())]))?;
    let after = fingerprints(&watched);
    // The decoy root the control writes into (as root, so every write would succeed).
    let decoy = ctx.dir.join("decoy");
    for d in [
        "etc", "usr/bin", "usr/lib", "bin", "opt", "var/lib", "boot", "lib",
    ] {
        std::fs::create_dir_all(decoy.join(d))?;
    }
    for f in [
        "etc/passwd",
        "usr/bin/env",
        "bin/sh",
        "usr/lib/os-release",
        "etc/hosts",
    ] {
        std::fs::write(decoy.join(f), "decoy\n")?;
    }
    if !s(&decoy).starts_with("/tmp/corral-adv-") {
        bail!(
            "the decoy root {} is not under the scratch",
            decoy.display()
        );
    }
    let how = Control {
        as_root: true,
        ..Control::default()
    };
    let ctl = ctx.control(&spec, &vars([("P", s(&decoy))]), &how)?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run, &mut j);
    compare(&mut j, &watched, &before, &after);
    control_escapes(
        ctx,
        &ctl,
        &[
            "write /etc/passwd",
            "write /usr/bin/env",
            "write /PWN-",
            "chmod 777 /usr/bin",
            "chown /etc",
            "touch -d",
        ],
        &mut j,
    );
    j.control(
        std::fs::read_to_string(decoy.join("etc/passwd"))
            .unwrap_or_default()
            .contains(&format!("PWN-{n}")),
        "the control's write landed in the decoy /etc/passwd",
    );
    for p in watched
        .iter()
        .filter(|p| p.to_string_lossy().contains("PWN-"))
    {
        let p = p.clone();
        ctx.on_cleanup(move || {
            let _ = std::fs::remove_file(&p);
            let _ = std::fs::remove_dir(&p);
        });
    }
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// FS-02

fn fs_02(ctx: &mut Ctx) -> Result<Verdict> {
    let (root_c, home_c) = plant_home_canaries(ctx)?;
    let spec = RunSpec::new("FS-02.py").args(["{MODE}", &s(&root_c), &s(&home_c)]);
    let run = ctx.run(&spec, &vars([("MODE", "walk".into())]))?;
    let nowalk = vars([("MODE", "nowalk".into())]);
    let root_ctl = ctx.control(
        &spec,
        &nowalk,
        &Control {
            as_root: true,
            ..Control::default()
        },
    )?;
    let user_ctl = ctx.control(&spec, &nowalk, &Control::default())?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run, &mut j);
    for l in canary_leaks(ctx, &run) {
        j.breach(true, l);
    }
    control_escapes(ctx, &root_ctl, &["read canary /root/.canary"], &mut j);
    control_escapes(
        ctx,
        &user_ctl,
        &[&format!("read canary {}", s(&home_c))],
        &mut j,
    );
    j.control(
        root_ctl.output().contains(&ctx.canary()),
        "the root control printed the canary (the output check would see it)",
    );
    j.note(
        "corral's forbidden paths are repository paths bound read-only (their base content is \
         part of the checkout, not a secret); the secrets here are /root/.canary, the harness \
         HOME and the host repo's .git/config (CRED-05)",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// FS-03

fn fs_03(ctx: &mut Ctx) -> Result<Verdict> {
    let (root_c, home_c) = plant_home_canaries(ctx)?;
    let watched = vec![PathBuf::from("/etc/hosts")];
    let before = fingerprints(&watched);
    let spec = RunSpec::new("FS-03.py").args(["{T}", &s(&root_c), &s(&home_c)]);
    let run = ctx.run(&spec, &vars([("T", "/etc/hosts".into())]))?;
    let after = fingerprints(&watched);
    let decoy = ctx.dir.join("decoy-hosts");
    std::fs::write(&decoy, "decoy\n")?;
    // As root in its own pid namespace: there /proc/1 is the control's own tree, as inside.
    let ctl = ctx.control(
        &spec,
        &vars([("T", s(&decoy))]),
        &Control {
            as_root: true,
            own_pidns: true,
            ..Control::default()
        },
    )?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run, &mut j);
    compare(&mut j, &watched, &before, &after);
    for l in canary_leaks(ctx, &run) {
        j.breach(true, l);
    }
    let pwn = format!("PWN-{}", ctx.n);
    j.breach(
        String::from_utf8_lossy(&run.patch()).contains(&pwn),
        "a write through a link landed in the captured patch",
    );
    let github = run
        .changed_paths()
        .iter()
        .any(|(p, _)| p.starts_with(".github/"));
    j.breach(
        github && run.outcome() == "candidate_captured",
        "a change under the forbidden .github/ was captured",
    );
    control_escapes(
        ctx,
        &ctl,
        &[
            "symlink write",
            "symlink read",
            "proc read via /proc/self/root",
            "proc read via /proc/1/root",
        ],
        &mut j,
    );
    j.control(
        std::fs::read_to_string(&decoy)
            .unwrap_or_default()
            .contains(&pwn),
        "the control's write through the link landed in the decoy",
    );
    if run.output().contains("NOTE wrote .github") {
        j.note("the worker wrote .github/ through a link in its private overlay (not captured)");
    }
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// FS-04

fn fs_04(ctx: &mut Ctx) -> Result<Verdict> {
    let (root_c, home_c) = plant_home_canaries(ctx)?;
    let watched: Vec<PathBuf> = [
        "/etc/hostname",
        "/usr/bin/passwd",
        "/etc/passwd",
        "/etc/shadow",
    ]
    .iter()
    .map(PathBuf::from)
    .chain([root_c.clone(), home_c.clone()])
    .collect();
    let before = fingerprints(&watched);
    let spec = RunSpec::new("FS-04.py").args(["{A}", "{B}", "{C}", "{D}"]);
    let run = ctx.run(
        &spec,
        &vars([
            ("A", "/etc/hostname".into()),
            ("B", "/usr/bin/passwd".into()),
            ("C", s(&home_c)),
            ("D", s(&root_c)),
        ]),
    )?;
    let after = fingerprints(&watched);
    // Control: as root, the same links to decoys on the control's file system (hard links
    // cannot cross file systems, so the decoys sit next to the control's workspace).
    let decoys: Vec<PathBuf> = ["hostname", "passwd", "canary-home", "canary-root"]
        .iter()
        .map(|f| ctx.dir.join(format!("decoy-{f}")))
        .collect();
    for d in &decoys {
        std::fs::write(d, format!("{}\n", ctx.canary()))?;
    }
    let ctl = ctx.control(
        &spec,
        &vars([
            ("A", s(&decoys[0])),
            ("B", s(&decoys[1])),
            ("C", s(&decoys[2])),
            ("D", s(&decoys[3])),
        ]),
        &Control {
            as_root: true,
            ..Control::default()
        },
    )?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run, &mut j);
    compare(&mut j, &watched, &before, &after);
    for l in canary_leaks(ctx, &run) {
        j.breach(true, l);
    }
    control_escapes(
        ctx,
        &ctl,
        &[
            "hard link /tmp/",
            "hard link .git/config",
            "read canary through",
        ],
        &mut j,
    );
    j.control(
        std::fs::metadata(&decoys[0])
            .map(|m| m.nlink())
            .unwrap_or(0)
            > 1,
        "the decoy gained a second link (the nlink check would see it)",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// FS-05

fn fs_05(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = RunSpec::new("FS-05.py");
    let run = ctx.run(&spec, &BTreeMap::new())?;
    // Control 1: the same scan as 65534 with a deliberately leaked fd to a host directory.
    let ws = control_ws(ctx, "ctl-leak", false)?;
    let leak = own_control(ctx, "FS-05.py", &[], &ws, false, "exec 7</etc", &[])?;
    // Control 2: open_by_handle_at as root reaches the kernel (EINVAL on a zero handle).
    let root = ctx.control(
        &spec,
        &BTreeMap::new(),
        &Control {
            as_root: true,
            ..Control::default()
        },
    )?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run, &mut j);
    control_escapes(
        ctx,
        &leak,
        &[
            "leaked fd 7 -> /etc",
            "fd 7 resolves to a directory",
            "fd 7 traversal",
        ],
        &mut j,
    );
    control_escapes(ctx, &root, &["open_by_handle_at"], &mut j);
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// FS-06

fn fs_06(ctx: &mut Ctx) -> Result<Verdict> {
    let corral = ctx.h.corral.clone();
    let watched = vec![
        corral.clone(),
        PathBuf::from("/usr/bin/python3"),
        PathBuf::from("/usr/bin/git"),
        PathBuf::from("/usr/bin/timeout"),
    ];
    let before = fingerprints(&watched);
    let spec = RunSpec::new("FS-06.py");
    let run = ctx.run(&spec, &BTreeMap::new())?;
    let after = fingerprints(&watched);
    let decoy = ctx.dir.join("decoy-sleep");
    std::fs::copy("/bin/sleep", &decoy)?;
    let _ = Command::new("chown")
        .args(["65534:65534"])
        .arg(&decoy)
        .status();
    let ctl = ctx.control(
        &RunSpec::new("FS-06.py").args([s(&decoy)]),
        &BTreeMap::new(),
        &Control {
            own_pidns: true,
            ..Control::default()
        },
    )?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run, &mut j);
    compare(&mut j, &watched, &before, &after);
    control_escapes(ctx, &ctl, &["reopened the exe of pid"], &mut j);
    j.require(
        run.output().contains("1 exe"),
        "the worker looked at /proc/1/exe",
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// FS-07

fn fs_07(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = RunSpec::new("FS-07.py");
    let run = ctx.run(&spec, &BTreeMap::new())?;
    // The host repository's .git must be byte-identical to a fresh build of the same fixture
    // (standard.sh is deterministic for a nonce).
    let reference = ctx.dir.join("reference");
    let (reference, _) = ctx.repo("standard", &reference)?;
    let ctl = ctx.control(&spec, &BTreeMap::new(), &Control::default())?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run, &mut j);
    for f in [".git/config", ".git/HEAD", ".git/refs/heads/main"] {
        let host = std::fs::read(run.repo.join(f)).unwrap_or_default();
        let want = std::fs::read(reference.join(f)).unwrap_or_default();
        j.breach(
            host != want,
            format!("the host repository's {f} changed during the run"),
        );
    }
    j.breach(
        run.repo.join(".git/config.aside").exists(),
        "the host repository has .git/config.aside",
    );
    control_escapes(
        ctx,
        &ctl,
        &["unshare(CLONE_NEWUSER|CLONE_NEWNS)", "unshare -Urm"],
        &mut j,
    );
    j.control(
        ctl.ws.join(".git/config.aside").exists(),
        "outside, the held-fd rename of .git/config worked (the chain is real)",
    );
    j.note("corral never exposes the host repository's .git: the sandbox's .git is corral's checkout from its base cache, bound read-only");
    if run.output().contains("NOTE rewrote") {
        j.note("the worker rewrote its own .git/config (private overlay; never read by capture)");
    }
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// FS-08

fn fs_08(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = RunSpec::new("FS-08.py").args([""]);
    let run = ctx.run(&spec, &BTreeMap::new())?;
    let ctl = ctx.control(
        &spec,
        &BTreeMap::new(),
        &Control {
            as_root: true,
            ..Control::default()
        },
    )?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run, &mut j);
    for (p, c) in run.changed_paths() {
        j.note(format!("candidate path {p} ({c})"));
    }
    control_escapes(
        ctx,
        &ctl,
        &[
            "mknod sda",
            "mknod mem",
            "opened /dev/kmsg",
            "device node /dev/kmsg",
        ],
        &mut j,
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// FS-09

const SETTINGS: &[&str] = &[
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/kernel/modprobe",
    "/sys/kernel/uevent_helper",
    "/sys/kernel/mm/ksm/run",
    "/proc/sys/kernel/panic",
    "/proc/sys/kernel/sysrq",
];

fn fs_09(ctx: &mut Ctx) -> Result<Verdict> {
    let mut keys: Vec<PathBuf> = SETTINGS.iter().map(PathBuf::from).collect();
    if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
        for e in rd.flatten() {
            let ra = e.path().join("release_agent");
            if ra.exists() {
                keys.push(ra);
            }
        }
    }
    let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap_or_else(|_| "<absent>".into());
    let before: Vec<String> = keys.iter().map(read).collect();
    let spec = RunSpec::new("FS-09.py").args(["{P}"]);
    let run = ctx.run(&spec, &vars([("P", String::new())]))?;
    let after: Vec<String> = keys.iter().map(read).collect();
    // Restore anything an escape changed, whatever the verdict.
    for ((k, b), a) in keys.iter().zip(&before).zip(&after) {
        if a != b && b != "<absent>" {
            let _ = std::fs::write(k, b.trim_end());
        }
    }
    let decoy = ctx.dir.join("decoy");
    for f in SETTINGS
        .iter()
        .copied()
        .chain(["/proc/sysrq-trigger", "/sys/fs/cgroup/rdma/release_agent"])
    {
        let p = decoy.join(f.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap_or(&decoy))?;
        std::fs::write(&p, "decoy\n")?;
    }
    let ctl = ctx.control(
        &spec,
        &vars([("P", s(&decoy))]),
        &Control {
            as_root: true,
            ..Control::default()
        },
    )?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run, &mut j);
    for ((k, b), a) in keys.iter().zip(&before).zip(&after) {
        j.breach(
            a != b,
            format!("host {} changed: {b:?} -> {a:?}", k.display()),
        );
    }
    j.breach(
        Path::new(&format!("/tmp/PWN-{}", ctx.n)).exists(),
        "core_pattern payload ran on the host",
    );
    control_escapes(
        ctx,
        &ctl,
        &[
            "write /proc/sys/kernel/core_pattern",
            "write /proc/sysrq-trigger",
            "write /sys/kernel/uevent_helper",
            "write release_agent",
            "RLIMIT_CORE hard limit",
        ],
        &mut j,
    );
    for (p, c) in run.changed_paths() {
        j.note(format!("candidate path {p} ({c})"));
    }
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// FS-10

fn fs_10(ctx: &mut Ctx) -> Result<Verdict> {
    let spec = RunSpec::new("FS-10.py").args(["{SCR}"]);
    let run = ctx.run(&spec, &vars([("SCR", "/tmp".into())]))?;
    let scr = ctx.dir.join("ctl-scratch");
    std::fs::create_dir_all(&scr)?;
    let ctl = ctx.control(
        &spec,
        &vars([("SCR", s(&scr))]),
        &Control {
            as_root: true,
            ..Control::default()
        },
    )?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run, &mut j);
    // The setuid file left in src/: it must be rejected, or captured without the bits.
    let patch = String::from_utf8_lossy(&run.patch()).into_owned();
    let in_candidate = run
        .changed_paths()
        .iter()
        .any(|(p, _)| p == "src/suid-tool");
    let rejections = run.manifest["rejections"].to_string();
    let rejected = rejections.contains("suid-tool");
    j.require(
        in_candidate || rejected,
        format!(
            "the capture saw src/suid-tool (outcome {}, rejections {})",
            run.outcome(),
            crate::adversarial::harness::truncate(&rejections, 300)
        ),
    );
    j.breach(
        ["6755", "4755", "2755", "106755", "104755"]
            .iter()
            .any(|m| {
                patch.contains(&format!("mode {m}")) || patch.contains(&format!("mode 10{m}"))
            }),
        "the patch carries a setuid/setgid mode",
    );
    j.breach(
        in_candidate && run.outcome() == "candidate_captured" && !rejected,
        format!(
            "a setuid file was captured as a candidate (patch modes: {})",
            patch
                .lines()
                .filter(|l| l.contains("mode"))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    );
    j.note(format!(
        "capture: outcome {}, rejection codes {:?}",
        run.outcome(),
        run.rejection_codes()
    ));
    control_escapes(
        ctx,
        &ctl,
        &[
            "NoNewPrivs is 0",
            "CapEff is",
            "setcap cap_setuid+ep",
            "su -c id root",
        ],
        &mut j,
    );
    Ok(j.verdict())
}

// ---------------------------------------------------------------------------------------------
// FS-11

fn fs_11(ctx: &mut Ctx) -> Result<Verdict> {
    let home = ctx.h.scratch.join("home");
    let home_before = tree(&home);
    let etc_before = tree(Path::new("/etc"));
    let spec = RunSpec::new("FS-11.py").args(["{STEP}", &s(&home)]);
    let run1 = ctx.run(&spec, &vars([("STEP", "1".into())]))?;
    let run2 = ctx.run(&spec, &vars([("STEP", "2".into())]))?;
    let home_after = tree(&home);
    let etc_after = tree(Path::new("/etc"));
    // Control: both steps outside, on one persistent workspace, as 65534.
    let ws = control_ws(ctx, "ctl-2run", false)?;
    let args1 = vec!["1".to_owned(), s(&home)];
    let args2 = vec!["2".to_owned(), s(&home)];
    let _ = own_control(ctx, "FS-11.py", &args1, &ws, false, "", &[])?;
    std::thread::sleep(Duration::from_millis(10));
    let ctl2 = own_control(ctx, "FS-11.py", &args2, &ws, false, "", &[])?;
    let mut j = Judge::new();
    escapes_inside(ctx, &run1, &mut j);
    escapes_inside(ctx, &run2, &mut j);
    j.require(
        run1.output().contains("planted src/.vscode"),
        "run 1 planted its links",
    );
    j.breach(home_before != home_after, "the harness HOME changed");
    j.breach(etc_before != etc_after, "the host /etc changed");
    let paths = run2.changed_paths();
    j.breach(
        run2.outcome() != "candidate_captured"
            || paths != vec![("src/ok.txt".to_owned(), "added".to_owned())],
        format!(
            "run 2 did not capture exactly src/ok.txt ({}; changed {paths:?}; rejections {:?})",
            describe(&run2),
            run2.rejection_codes()
        ),
    );
    control_escapes(ctx, &ctl2, &["run 1's link src/.vscode"], &mut j);
    j.note(format!(
        "run 1: outcome {}, changed {:?}, rejections {:?}",
        run1.outcome(),
        run1.changed_paths(),
        run1.rejection_codes()
    ));
    Ok(j.verdict())
}
