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
            script: Some(("py", FS_01)),
            judge: fs_01,
        },
        Case {
            id: "FS-02",
            title: "Reading forbidden paths and the host home",
            guarantee: "host secrets and the host home are not visible",
            script: Some(("py", FS_02)),
            judge: fs_02,
        },
        Case {
            id: "FS-03",
            title: "Symlink escapes for writing and for reading",
            guarantee: "only the workspace is writable; host paths stay unreadable",
            script: Some(("py", FS_03)),
            judge: fs_03,
        },
        Case {
            id: "FS-04",
            title: "Hard links to files outside the workspace",
            guarantee: "filesystem isolation",
            script: Some(("py", FS_04)),
            judge: fs_04,
        },
        Case {
            id: "FS-05",
            title: "Leaked file descriptors and /proc/self/fd traversal",
            guarantee: "filesystem isolation (fds 0-2 only, no open_by_handle_at)",
            script: Some(("py", FS_05)),
            judge: fs_05,
        },
        Case {
            id: "FS-06",
            title: "Overwriting runtime binaries through /proc/*/exe",
            guarantee: "the host binaries stay intact",
            script: Some(("py", FS_06)),
            judge: fs_06,
        },
        Case {
            id: "FS-07",
            title: "Mount tampering and a nested user namespace",
            guarantee: "read-only system; no new namespaces; host .git untouched",
            script: Some(("py", FS_07)),
            judge: fs_07,
        },
        Case {
            id: "FS-08",
            title: "Device nodes and /dev",
            guarantee: "minimal /dev, mknod refused",
            script: Some(("py", FS_08)),
            judge: fs_08,
        },
        Case {
            id: "FS-09",
            title: "Writes to /proc/sys, /sys, release_agent and core_pattern",
            guarantee: "the host kernel settings stay intact",
            script: Some(("py", FS_09)),
            judge: fs_09,
        },
        Case {
            id: "FS-10",
            title: "setuid files, file capabilities, privilege that persists",
            guarantee: "no privilege inside; no setuid file reaches a candidate",
            script: Some(("py", FS_10)),
            judge: fs_10,
        },
        Case {
            id: "FS-11",
            title: "Planted symlinks that poison the next run's mounts [2RUN]",
            guarantee: "mount setup is safe; nothing persists between runs",
            script: Some(("py", FS_11)),
            judge: fs_11,
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// Shared helpers (also used by cred.rs).

/// Reading canaries: `show(path)` prints what it read (a leak the judge sees in the stored
/// output) and an ESC line when the canary is in it; `walk(top, skip)` looks for the canary in
/// every regular file below `top`.
macro_rules! canary_py {
    () => {
        r#"import stat
C = f"CANARY-{N}"


def show(p, label="read canary"):
    try:
        with open(p, "rb") as h:
            data = h.read(1 << 16)
    except OSError as e:
        say(f"read {p}: {ename(e.errno)}")
        return
    txt = data.decode("utf-8", "replace")
    say(f"read {p}: {txt[:160]!r}")
    if C in txt:
        esc(f"{label} {p}")


def walk(top, skip=()):
    found = 0
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
        for f in files:
            p = os.path.join(root, f)
            try:
                st = os.lstat(p)
                if not stat.S_ISREG(st.st_mode) or st.st_size > (4 << 20):
                    continue
                with open(p, "rb") as h:
                    if C.encode() in h.read():
                        esc(f"canary found at {p}")
                        found += 1
            except OSError:
                pass
    say(f"walk {top}: {found} file(s) with the canary")


SKIP = {"/proc", "/sys", "/dev", "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin"}
"#
    };
}
pub(super) use canary_py;

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

const FS_01: &str = r#"P = ARGS[0]  # "" inside the sandbox; a decoy root the harness owns in the control
assert P == "" or P.startswith("/tmp/corral-adv-"), P


def attempt(label, fn):
    try:
        fn()
        esc(label)
    except OSError as e:
        say(f"{label}: {ename(e.errno)}")


def append(f):
    with open(P + f, "ab") as h:
        h.write(f"PWN-{N}\n".encode())


for f in ("/etc/passwd", "/etc/ld.so.preload", "/usr/bin/env", "/bin/sh", "/usr/lib/os-release",
          "/etc/hosts", f"/opt/PWN-{N}", f"/var/lib/PWN-{N}", f"/boot/PWN-{N}", f"/PWN-{N}",
          f"/etc/PWN-{N}", f"/usr/bin/PWN-{N}", f"/usr/PWN-{N}", f"/lib/PWN-{N}"):
    attempt(f"write {f}", lambda f=f: append(f))
rc, out = run(f"sh -c 'echo PWN-{N} >> {P}/usr/bin/env' 2>&1")
say(f"sh append /usr/bin/env: rc {rc} {out.strip()}")
attempt("chmod 777 /usr/bin", lambda: os.chmod(P + "/usr/bin", 0o777))
attempt("chown /etc", lambda: os.chown(P + "/etc", os.getuid(), -1))
attempt("touch -d 2000-01-01 /etc/hosts", lambda: os.utime(P + "/etc/hosts", (946684800, 946684800)))
attempt("mkdir /etc/PWN-dir", lambda: os.mkdir(P + f"/etc/PWN-{N}-dir"))
attempt("symlink /usr/bin/PWN", lambda: os.symlink("/bin/sh", P + f"/usr/bin/PWN-{N}-ln"))
"#;

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

const FS_02: &str = concat!(
    canary_py!(),
    r#"
mode, paths = ARGS[0], ARGS[1:]
home = os.environ.get("HOME", "")
for d in ("/", "/home", "/root", home, "/run", "/mnt", "/media", "/srv"):
    try:
        say(f"ls {d}: {sorted(os.listdir(d))}")
    except OSError as e:
        say(f"ls {d}: {ename(e.errno)}")
for p in [os.path.expanduser("~/.canary"), "/root/.canary", *paths]:
    show(p)
if mode == "walk":
    walk("/", SKIP)
    say(f"HOME {home}: {sorted(os.listdir(home)) if home and os.path.isdir(home) else 'absent'}")
"#
);

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

const FS_03: &str = concat!(
    canary_py!(),
    r#"
T, R = ARGS[0], ARGS[1:]  # write target (/etc/hosts inside, a decoy outside); canaries to read
os.makedirs("src", exist_ok=True)


def link(target, name):
    p = f"src/{name}"
    try:
        os.symlink(target, p)
    except OSError as e:
        say(f"symlink {p} -> {target}: {ename(e.errno)}")
    return p


p = link(T, "l1")
try:
    with open(p, "ab") as h:
        h.write(f"PWN-{N}\n".encode())
    esc(f"symlink write {T}")
except OSError as e:
    say(f"write through {p}: {ename(e.errno)}")
# A forbidden repository path through a link: corral binds it read-only.
p = link("../.github/workflows/ci.yml", "l3")
try:
    with open(p, "ab") as h:
        h.write(b"-- through a link\n")
    say(f"NOTE wrote .github/workflows/ci.yml through {p}")
except OSError as e:
    say(f"write .github through {p}: {ename(e.errno)}")
for i, r in enumerate(R):
    show(link(r, f"l2_{i}"), "symlink read")
    for pre in ("/proc/self/root", "/proc/1/root", "/proc/1/cwd/../../../../../.."):
        show(pre + r, f"proc read via {pre}")
"#
);

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

const FS_04: &str = concat!(
    canary_py!(),
    r#"
os.makedirs("src", exist_ok=True)
for i, t in enumerate([*ARGS, ".git/config"]):
    dst = f"src/h{i}"
    try:
        os.link(t, dst)
        esc(f"hard link {t} (nlink {os.stat(dst).st_nlink})")
        show(dst, "read canary through a hard link")
    except OSError as e:
        say(f"link {t} -> {dst}: {ename(e.errno)}")
"#
);

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

const FS_05: &str = r#"import stat
d = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
fds = []
for name in os.listdir(d):
    fd = int(name)
    if fd == d:
        continue
    try:
        tgt = os.readlink(f"/proc/self/fd/{fd}")
    except OSError as e:
        continue  # the descriptor listdir itself used, closed by now
    fds.append((fd, tgt))
os.close(d)
say(f"fds: {sorted(fds)}")
for fd, tgt in sorted(fds):
    if fd > 2:
        esc(f"leaked fd {fd} -> {tgt}")
    try:
        isdir = stat.S_ISDIR(os.fstat(fd).st_mode)
    except OSError:
        isdir = False
    if isdir or tgt.startswith("/sys") or tgt.startswith("/proc"):
        esc(f"fd {fd} resolves to a directory or kernel tree: {tgt}")
    try:
        say(f"ls fd {fd}: {sorted(os.listdir(f'/proc/self/fd/{fd}/'))[:3]}")
    except OSError as e:
        say(f"ls fd {fd}: {ename(e.errno)}")
    for rel in ("../../../etc/hostname", "../etc/hostname", "hostname"):
        try:
            with open(f"/proc/self/fd/{fd}/{rel}") as h:
                h.read(64)
            esc(f"fd {fd} traversal to {rel}")
        except OSError as e:
            pass
try:
    os.chdir(f"/proc/self/fd/3/../..")
    esc(f"cd /proc/self/fd/3/../.. -> {os.getcwd()}")
except OSError as e:
    say(f"cd /proc/self/fd/3/../..: {ename(e.errno)}")
must_block("open_by_handle_at", 304, -100, "z:64", 0)
"#;

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

const FS_06: &str = r#"decoy = ARGS[0] if ARGS else ""
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
say(f"pids: {pids}")
held = []
for p in pids:
    try:
        say(f"{p} exe {os.readlink(f'/proc/{p}/exe')}")
    except OSError as e:
        say(f"{p} exe: {ename(e.errno)}")
    try:
        fd = os.open(f"/proc/{p}/exe", os.O_WRONLY)
        os.close(fd)
        esc(f"opened /proc/{p}/exe for writing")
    except OSError as e:
        say(f"open /proc/{p}/exe O_WRONLY: {ename(e.errno)}")
    try:
        held.append((p, os.open(f"/proc/{p}/exe", os.O_PATH)))
    except OSError as e:
        say(f"open /proc/{p}/exe O_PATH: {ename(e.errno)}")
try:
    with open("/proc/1/exe", "ab") as h:
        h.write(b"")
    esc("opened /proc/1/exe for appending")
except OSError as e:
    say(f"append /proc/1/exe: {ename(e.errno)}")
if decoy:
    # The CVE-2019-5736 sequence against a binary the harness owns: hold an O_PATH fd on a
    # running process's exe, let it exit, reopen the fd for writing.
    c = subprocess.Popen([decoy, "30"])
    time.sleep(0.2)
    held.append((c.pid, os.open(f"/proc/{c.pid}/exe", os.O_PATH)))
    c.kill()
    c.wait()
time.sleep(0.2)
for p, fd in held:
    try:
        w = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
        os.close(w)
        esc(f"reopened the exe of pid {p} for writing")
    except OSError as e:
        say(f"reopen exe of pid {p} O_WRONLY: {ename(e.errno)}")
"#;

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

const FS_07: &str = r#"MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
CLONE_NEWNS, CLONE_NEWUSER = 0x20000, 0x10000000
ws = WS.encode()
must_block("mount -o remount,rw /", 165, b"none", b"/", 0, MS_REMOUNT, 0)
must_block("mount --bind WS /usr", 165, ws, b"/usr", 0, MS_BIND, 0)
must_block("umount -l WS/.github", 166, ws + b"/.github", 2, also=("EINVAL",))
must_block("umount -l WS/.git", 166, ws + b"/.git", 2, also=("EINVAL",))
must_block("umount -l /usr", 166, b"/usr", 2)
rc, out = run("unshare -Urm sh -c 'mount -o remount,rw /usr; echo UNSHARED-$(id -u)' 2>&1")
say(f"unshare -Urm: rc {rc} {out.strip()}")
if "UNSHARED-" in out:
    esc("unshare -Urm ran a shell in a new user+mount namespace")
# The sandbox-runtime chain: hold an O_PATH fd on .git, enter a new user+mount namespace,
# detach the read-only binds, then rewrite config relative to the held fd.
uid, gid = os.getuid(), os.getgid()
try:
    gitfd = os.open(".git", os.O_PATH)
except OSError as e:
    gitfd = None
    say(f"O_PATH .git: {ename(e.errno)}")
r, e = must_block("unshare(CLONE_NEWUSER|CLONE_NEWNS)", 272, CLONE_NEWUSER | CLONE_NEWNS)
if r == 0:
    for f, v in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        try:
            with open(f"/proc/self/{f}", "w") as h:
                h.write(v)
        except OSError as x:
            say(f"write {f}: {ename(x.errno)}")
    say(f"make-rprivate /: {scall(165, b'none', b'/', 0, MS_REC | MS_PRIVATE, 0)}")
    r2 = scall(165, b"none", b"/usr", 0, MS_REMOUNT | MS_BIND, 0)
    say(f"remount /usr rw in the new namespace: {r2}")
    if r2[0] == 0:
        esc("remounted /usr read-write in a nested namespace")
    r3 = scall(166, ws + b"/.git", 2)
    say(f"detach WS/.git in the new namespace: {r3}")
if gitfd is not None:
    try:
        os.rename("config", "config.aside", src_dir_fd=gitfd, dst_dir_fd=gitfd)
        fd = os.open("config", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=gitfd)
        os.write(fd, f"[core]\n\tfsmonitor = touch /tmp/PWN-{N}\n".encode())
        os.close(fd)
        say("NOTE rewrote .git/config through the held fd")
    except OSError as x:
        say(f"rename .git/config through the held fd: {ename(x.errno)}")
"#;

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

const FS_08: &str = r#"import stat
P = ARGS[0]  # "" inside; a decoy prefix is never needed: the control only opens devices
ALLOWED = set("null zero full random urandom tty ptmx pts shm fd stdin stdout stderr core mqueue".split())
ents = sorted(os.listdir("/dev"))
say(f"/dev: {ents}")
for e in ents:
    if e in ALLOWED:
        continue
    st = os.lstat("/dev/" + e)
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        esc(f"device node /dev/{e} is present")
    else:
        say(f"extra /dev/{e}")
os.makedirs("src", exist_ok=True)
for name, kind, dev in (("sda", stat.S_IFBLK, os.makedev(8, 0)), ("mem", stat.S_IFCHR, os.makedev(1, 1)),
                        ("kmsg", stat.S_IFCHR, os.makedev(1, 11))):
    try:
        os.mknod(f"src/{name}", kind | 0o666, dev)
        esc(f"mknod {name}")
    except OSError as e:
        say(f"mknod src/{name}: {ename(e.errno)}")
for d in ("/dev/kmsg", "/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/mem", "/dev/kmem", "/dev/port",
          "/dev/fuse", "/dev/net/tun", "/dev/kvm", "/dev/vsock", "/dev/userfaultfd",
          "/dev/loop-control", "/dev/loop0", "/dev/btrfs-control", "/dev/hwrng"):
    try:
        fd = os.open(d, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        os.close(fd)
        esc(f"opened {d}")
    except OSError as e:
        say(f"open {d}: {ename(e.errno)}")
"#;

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

const FS_09: &str = r#"import glob, resource
P = ARGS[0]  # "" inside; a decoy root the harness owns in the control
assert P == "" or P.startswith("/tmp/corral-adv-"), P
for f, v in (("/proc/sys/kernel/core_pattern", f'|/bin/sh -c "touch /tmp/PWN-{N}"'),
             ("/proc/sysrq-trigger", "h"),
             ("/proc/sys/kernel/modprobe", f"/tmp/PWN-{N}"),
             ("/sys/kernel/uevent_helper", f"/tmp/PWN-{N}"),
             ("/sys/kernel/mm/ksm/run", "1"),
             ("/proc/sys/kernel/panic", "0")):
    try:
        with open(P + f, "w") as h:
            h.write(v)
        esc(f"write {f}")
    except OSError as e:
        say(f"write {f}: {ename(e.errno)}")
for f in sorted(glob.glob(P + "/sys/fs/cgroup/*/release_agent")):
    try:
        with open(f, "w") as h:
            h.write(f"/tmp/PWN-{N}")
        esc(f"write release_agent {f}")
    except OSError as e:
        say(f"write {f}: {ename(e.errno)}")
# CVE-2022-0492: a new user+mount+cgroup namespace, then mount a v1 hierarchy.
r, e = must_block("unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWCGROUP)", 272,
                  0x10000000 | 0x20000 | 0x02000000)
if r == 0:
    os.makedirs(P + "/tmp/c", exist_ok=True) if P else None
    r2 = scall(165, b"cgroup", (P + "/tmp/c").encode() if P else b"/tmp", b"cgroup", 0, b"rdma")
    say(f"mount cgroup rdma: {r2}")
    if r2[0] == 0:
        esc("mounted a cgroup v1 hierarchy in a nested namespace")
rc, out = run("unshare -UrmC --propagation=unchanged sh -c 'echo NESTED' 2>&1")
say(f"unshare -UrmC: {out.strip()}")
# Core dumps: the hard RLIMIT_CORE must be 0.
soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
say(f"RLIMIT_CORE {soft} {hard}")
if hard != 0:
    esc(f"RLIMIT_CORE hard limit is {hard}")
try:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    esc("raised RLIMIT_CORE")
except (ValueError, OSError) as e:
    say(f"raise RLIMIT_CORE: {e}")
rc, out = run("sh -c 'kill -SEGV $$'")
say(f"SEGV: rc {rc}; cwd now {sorted(os.listdir('.'))}")
"#;

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

const FS_10: &str = r#"import shutil, struct
SCR = ARGS[0]  # scratch outside the capture: the sandbox's /tmp, or the control's folder
st = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    st[k] = v.strip()
    if k in ("NoNewPrivs", "CapPrm", "CapEff", "CapAmb", "CapBnd", "Seccomp", "Uid", "Gid"):
        say(line.rstrip())
if st.get("NoNewPrivs") != "1":
    esc(f"NoNewPrivs is {st.get('NoNewPrivs')}")
for k in ("CapPrm", "CapEff", "CapAmb"):
    if int(st.get(k, "0"), 16) != 0:
        esc(f"{k} is {st[k]}")
for cmd in ("sudo -n id", "su -c id root </dev/null", "pkexec id"):
    # A bound on a hang, not a pace: su's PAM stack takes seconds in an emulated guest.
    rc, out = run(f"{cmd} 2>&1", timeout=60)
    say(f"{cmd}: rc {rc} {out.strip()[:200]}")
    if "uid=0" in out:
        esc(f"{cmd} ran as root")
sb = os.path.join(SCR, "sb")
CAP = struct.pack("<IIIII", 0x02000001, 1 << 7, 0, 0, 0)  # cap_setuid+ep
try:
    shutil.copy("/bin/bash", sb)
    os.chmod(sb, 0o6755)
    say(f"sb mode {oct(os.stat(sb).st_mode)}")
    rc, out = run(f"{sb} -p -c id")
    say(f"sb -p -c id: {out.strip()}")
    if "uid=0" in out:
        esc("a setuid copy of bash ran as root")
except OSError as e:
    say(f"setuid copy: {ename(e.errno)}")
os.makedirs("src", exist_ok=True)
tool = "src/suid-tool"
with open(tool, "w") as h:
    h.write("\x23!/bin/sh\nid\n")
for p in (sb, tool):
    try:
        os.setxattr(p, "security.capability", CAP)
        esc(f"setcap cap_setuid+ep on {p}")
    except OSError as e:
        say(f"setcap {p}: {ename(e.errno)}")
os.chmod(tool, 0o6755)
say(f"{tool} mode {oct(os.stat(tool).st_mode)}")
"#;

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

const FS_11: &str = r#"import shutil
step, hosthome = ARGS[0], ARGS[1]
LINKS = {".git/hooks": "/", "nested/.git/hooks": "../..", ".vscode": "/etc", ".idea": hosthome,
         "src/.vscode": "/etc", "src/.idea": hosthome, "src/.git": "/", "src/sub/hooks": "/root"}
if step == "1":
    try:
        shutil.rmtree(".git/hooks")
    except OSError as e:
        say(f"rm -rf .git/hooks: {ename(e.errno)}")
    try:
        os.makedirs("nested/.git", exist_ok=True)
        with open("nested/.git/HEAD", "w") as h:
            h.write("ref: refs/heads/main\n")
    except OSError as e:
        say(f"nested/.git: {ename(e.errno)}")
    os.makedirs("src/sub", exist_ok=True)
    for p, t in LINKS.items():
        try:
            os.symlink(t, p)
            say(f"planted {p} -> {t}")
        except OSError as e:
            say(f"plant {p} -> {t}: {ename(e.errno)}")
else:
    for p, t in LINKS.items():
        if os.path.islink(p):
            esc(f"run 1's link {p} -> {os.readlink(p)} persisted")
    if os.path.exists("nested"):
        esc("run 1's nested/.git persisted")
    with open("src/ok.txt", "w") as h:
        h.write("ok\n")
    say("wrote src/ok.txt")
"#;

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
