//! The checkout helper, run for real as a separate confined process (this test binary
//! re-executes itself as the helper, as `corral` does).
//!
//! - `probe`: the helper's confinement, then attempts on host paths outside its target, on a
//!   directory held open read-only (as the capture helper holds the upper layer), mounts and
//!   namespaces. A positive control makes the same attempts unconfined and succeeds.
//! - `helper`: a real materialization through `Isolation::Helper`, also of a hostile tree.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use corral_checkout::confine::{Confinement, confine};
use corral_checkout::{BaseCache, BaseError, CacheLimits, HELPER_ARG, Isolation};
use corral_contract::ReasonCode;

const PROBE_ARG: &str = "__probe";

/// A file outside the helper's target that this process may write unconfined: under /usr as
/// root; in rootless mode (ADR-0080), where /usr is not the user's, in the user's own HOME,
/// which the confined helper must not reach either.
/// (The probe child gets it from its parent: it does not choose a mode itself.)
fn outside_target() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("CORRAL_TEST_OUTSIDE") {
        return p.into();
    }
    if corral_linux::rootless::active().is_some() {
        Path::new(&std::env::var_os("HOME").unwrap()).join("corral-pwn")
    } else {
        std::path::PathBuf::from("/usr/corral-pwn")
    }
}

/// Attempts, in this process, on what a compromised helper would go for; one line each.
fn attempts(host_file: &Path, host_dir: &Path, work: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut note = |what: &str, r: std::io::Result<()>| {
        out.push(format!(
            "{what}: {}",
            if r.is_ok() { "ok" } else { "denied" }
        ));
    };
    note("read host file", std::fs::read(host_file).map(drop));
    note(
        "write host file",
        std::fs::write(host_file, b"pwned").map(drop),
    );
    note(
        "create in host dir",
        std::fs::write(host_dir.join("new"), b"x").map(drop),
    );
    note("read /etc/shadow", std::fs::read("/etc/shadow").map(drop));
    note(
        "write outside",
        std::fs::write(outside_target(), b"x").map(drop),
    );
    note(
        "write work",
        std::fs::write(work.join("ok"), b"x").map(drop),
    );
    let mnt = work.join("mnt");
    let _ = std::fs::create_dir(&mnt);
    let mounted = rustix::mount::mount(
        "tmpfs",
        &mnt,
        "tmpfs",
        rustix::mount::MountFlags::empty(),
        None::<&std::ffi::CStr>,
    );
    if mounted.is_ok() {
        let _ = rustix::mount::unmount(&mnt, rustix::mount::UnmountFlags::DETACH);
    }
    note("mount", mounted.map_err(std::io::Error::from));
    // Last: on success it leaves this process in a new (unmapped) user namespace.
    note(
        "new user namespace",
        corral_process::unshare_namespace(corral_process::Namespace::User),
    );
    out
}

/// Attempts through a directory held open (as the capture helper holds the upper layer).
fn fd_attempts(dir: &std::os::fd::OwnedFd) -> Vec<String> {
    use rustix::fs::{Mode, OFlags, openat};
    let show =
        |r: rustix::io::Result<std::os::fd::OwnedFd>| if r.is_ok() { "ok" } else { "denied" };
    vec![
        format!(
            "read through fd: {}",
            show(openat(dir, "inside", OFlags::RDONLY, Mode::empty()))
        ),
        format!(
            "create through fd: {}",
            show(openat(
                dir,
                "new",
                OFlags::WRONLY | OFlags::CREATE,
                Mode::from_raw_mode(0o644)
            ))
        ),
    ]
}

fn probe(args: &[String]) {
    let [host_file, host_dir, work, root, fd_dir, confined] = args else {
        panic!("probe args");
    };
    let (host_file, host_dir, work) = (Path::new(host_file), Path::new(host_dir), Path::new(work));
    let held = std::sync::Arc::new(std::os::fd::OwnedFd::from(
        std::fs::File::open(fd_dir).unwrap(),
    ));
    if confined == "1" {
        let c = confine(&Confinement {
            new_root: PathBuf::from(root),
            read_only: vec![],
            writable: work.to_path_buf(),
            read_only_fds: vec![std::sync::Arc::clone(&held)],
            run_as: None,
        })
        .unwrap();
        println!("landlock: {}", c.landlock);
    }
    for line in fd_attempts(&held) {
        println!("{line}");
    }
    for line in attempts(host_file, host_dir, work) {
        println!("{line}");
    }
}

fn run_probe(confined: bool) -> String {
    let host = tempfile::tempdir().unwrap();
    let file = host.path().join("secret");
    std::fs::write(&file, b"host").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let (work, root) = (scratch.path().join("work"), scratch.path().join("root"));
    std::fs::create_dir(&work).unwrap();
    std::fs::create_dir(&root).unwrap();
    let fd_dir = scratch.path().join("held");
    std::fs::create_dir(&fd_dir).unwrap();
    std::fs::write(fd_dir.join("inside"), b"upper").unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .arg(PROBE_ARG)
        .args([&file, &host.path().to_path_buf(), &work, &root, &fd_dir])
        .arg(if confined { "1" } else { "0" })
        .env("CORRAL_TEST_OUTSIDE", outside_target())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    if confined {
        assert!(
            !fd_dir.join("new").exists(),
            "created through the read-only fd"
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"host", "host file written");
        assert!(!host.path().join("new").exists(), "host file created");
    } else {
        // Positive control restores what it changed.
        let _ = std::fs::remove_file(host.path().join("new"));
    }
    let _ = std::fs::remove_file(outside_target());
    text
}

fn confined_probe_sees_only_its_target() {
    let control = run_probe(false);
    for want in [
        "read host file: ok",
        "write host file: ok",
        "create in host dir: ok",
        "write outside: ok",
        "write work: ok",
        "mount: ok",
        "new user namespace: ok",
        "read through fd: ok",
        "create through fd: ok",
    ] {
        assert!(
            control.contains(want),
            "control: {want} missing in\n{control}"
        );
    }
    let confined = run_probe(true);
    for want in [
        "read host file: denied",
        "write host file: denied",
        "create in host dir: denied",
        "read /etc/shadow: denied",
        "write outside: denied",
        "write work: ok",
        "mount: denied",
        "new user namespace: denied",
        "read through fd: ok",
        "create through fd: denied",
    ] {
        assert!(confined.contains(want), "{want} missing in\n{confined}");
    }
    assert!(confined.contains("landlock: fully"), "{confined}");
}

fn helper_materializes_and_refuses_for_real() {
    let repo = common::Repo::new();
    let sha = repo.commit_files(&[("src/a.py", b"print(1)\n")]);
    let t = tempfile::tempdir().unwrap();
    let cache = BaseCache::open(&t.path().join("cache"), CacheLimits::default()).unwrap();
    let exe = Isolation::Helper {
        exe: std::env::current_exe().unwrap(),
    };
    let co = cache.checkout(repo.path(), &sha, &exe).unwrap();
    assert!(co.created);
    assert_eq!(co.landlock.as_deref(), Some("fully"));
    assert_eq!(
        std::fs::read(co.dir.join("src/a.py")).unwrap(),
        b"print(1)\n"
    );
    drop(co);
    // A hostile tree through the real helper: refused, host file untouched.
    let victim = common::Victim::plant();
    let link = repo.blob(victim.file.to_str().unwrap().as_bytes());
    let blob = repo.blob(b"pwned");
    let tree = repo.raw_tree(&[("120000", b"evil", &link), ("100755", b"evil", &blob)]);
    let bad = repo.commit(&tree);
    match cache.checkout(repo.path(), &bad, &exe) {
        Err(BaseError::Refused(r)) => assert_eq!(r.code, ReasonCode::BaseTreeInvalid),
        other => panic!("{other:?}"),
    }
    victim.assert_untouched();
    let tmp: Vec<_> = std::fs::read_dir(t.path().join("cache/tmp"))
        .unwrap()
        .collect();
    assert!(tmp.is_empty(), "{tmp:?}");
}

/// Rootless mode with subordinate ids (ADR-0080): the helper becomes the checkout's owner
/// before it writes, and still reads a private object database (the one capability it keeps
/// reaches the git it starts through the ambient set). Control: without an owner the checkout
/// is the helper's own uid 0's.
fn helper_writes_as_the_owner_it_is_given() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let repo = common::Repo::new();
    let sha = repo.commit_files(&[("src/a.py", b"print(1)\n")]);
    // A private object database: only its owner (root) may enter it.
    let objects = repo.path().join(".git/objects");
    std::fs::set_permissions(&objects, std::fs::Permissions::from_mode(0o700)).unwrap();
    let owner = (54_321, 54_322);
    let exe = Isolation::Helper {
        exe: std::env::current_exe().unwrap(),
    };
    for (given, want) in [(Some(owner), owner), (None, (0, 0))] {
        let t = tempfile::tempdir().unwrap();
        let cache = BaseCache::open(&t.path().join("cache"), CacheLimits::default())
            .unwrap()
            .with_owner(given);
        let co = cache.checkout(repo.path(), &sha, &exe).unwrap();
        for rel in ["", "src", "src/a.py"] {
            let m = std::fs::symlink_metadata(co.dir.join(rel)).unwrap();
            assert_eq!((m.uid(), m.gid()), want, "{rel:?} with owner {given:?}");
        }
        assert_eq!(
            std::fs::read(co.dir.join("src/a.py")).unwrap(),
            b"print(1)\n"
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(HELPER_ARG) => std::process::exit(corral_checkout::helper_main()),
        Some(PROBE_ARG) => return probe(&args[1..]),
        _ => {}
    }
    // As an ordinary user, rootless mode, as corral enters it (ADR-0080): the helper then
    // runs as root in corral's user namespace, and a checkout's owner is one of its ids.
    corral_linux::rootless::choose_mode();
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "confinement: needs root, or rootless mode: {}",
            corral_linux::rootless::refusal().unwrap_or("not entered")
        );
        std::process::exit(1);
    }
    let tests: [(&str, fn()); 3] = [
        (
            "confined_probe_sees_only_its_target",
            confined_probe_sees_only_its_target,
        ),
        (
            "helper_materializes_and_refuses_for_real",
            helper_materializes_and_refuses_for_real,
        ),
        (
            "helper_writes_as_the_owner_it_is_given",
            helper_writes_as_the_owner_it_is_given,
        ),
    ];
    for (name, f) in tests {
        f();
        println!("test {name} ... ok");
    }
    println!("3 passed, 0 failed");
}
