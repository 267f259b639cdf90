//! The capture helper, run for real as a separate confined process (this test binary
//! re-executes itself as the helper, as `corral` does), and the xattr oracle it asks.
//!
//! - `capture_in_the_helper_equals_capture_in_process`: a real overlay whose upper layer has
//!   an opaque directory (`rm -rf d; mkdir d`), captured both ways. The deletions below the
//!   opaque directory only show if the oracle delivered the `trusted.overlay.opaque` xattr
//!   the capability-less helper cannot read itself.
//! - `the_oracle_answers_only_for_overlay_names_on_the_upper_layer`: names outside the three
//!   overlay names, fds on another file system, two fds, no fd: refused; a positive control
//!   reads the same xattrs directly.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

mod common;

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::Command;

use corral_capture::{
    CaptureRequest, DirectXattrs, OverlayXattrs, UpperLayer, XattrReader as _, XattrValue,
};
use corral_checkout::capture::{OracleXattrs, serve_xattrs};
use corral_checkout::{CAPTURE_HELPER_ARG, Isolation, capture_isolated};
use corral_contract::codes::ReasonCode;
use corral_contract::manifest::ChangeKind;
use corral_contract::path::PathPattern;

/// The overlay's metadata namespace in this process's mode: trusted.overlay.* as root,
/// user.overlay.* (and the `userxattr` mount option) in rootless mode.
fn xattrs() -> OverlayXattrs {
    if corral_linux::rootless::active().is_some() {
        OverlayXattrs::User
    } else {
        OverlayXattrs::Trusted
    }
}

/// `name` under this mode's overlay prefix (`opaque` -> `trusted.overlay.opaque`).
fn ovl(name: &str) -> String {
    format!("{}{name}", xattrs().prefix())
}

fn sh(cmd: &str) {
    let st = Command::new("sh").arg("-c").arg(cmd).status().unwrap();
    assert!(st.success(), "{cmd}");
}

/// A base commit, an overlay over its export, `change` run in the merged view, unmounted:
/// returns (repo, base sha, the scratch dir holding `upper`).
fn changed_upper(change: &str) -> (common::Repo, String, tempfile::TempDir) {
    let repo = common::Repo::new();
    let sha = repo.commit_files(&[
        ("d/a.txt", b"a\n"),
        ("d/b.txt", b"b\n"),
        ("src/keep.py", b"print(1)\n"),
        ("docs/guide.md", b"guide\n"),
    ]);
    let t = tempfile::Builder::new()
        .prefix("corral-caphelper-")
        .tempdir()
        .unwrap();
    let p = t.path();
    sh(&format!(
        "set -e; cd {p}; mkdir lower upper work merged; git -C {r} archive {sha} | tar -x -C lower; \
         mount -t overlay overlay -o lowerdir=lower,upperdir=upper,workdir=work,{opts} merged; \
         cd merged; {change}; cd ..; umount merged",
        p = p.display(),
        r = repo.path().display(),
        // With `userxattr` the kernel accepts only redirect_dir=nofollow (EINVAL otherwise).
        opts = if xattrs() == OverlayXattrs::User {
            "userxattr,redirect_dir=nofollow,metacopy=off,index=off,xino=off"
        } else {
            "redirect_dir=off,metacopy=off,index=off,xino=off"
        },
    ));
    (repo, sha, t)
}

fn pats(v: &[&str]) -> Vec<PathPattern> {
    v.iter().map(|s| PathPattern::new(s).unwrap()).collect()
}

fn capture_in_the_helper_equals_capture_in_process() {
    let (repo, sha, t) = changed_upper(
        "rm -rf d && mkdir d && echo c > d/c.txt && echo 'print(2)' > src/keep.py && \
         chmod 000 src/keep.py",
    );
    let upper = UpperLayer::open(&t.path().join("upper")).unwrap();
    let allowed = pats(&["d/", "src/"]);
    let forbidden = pats(&[]);
    let mut req = CaptureRequest::new(repo.path(), &sha, &upper, &allowed, &forbidden, 1 << 20);
    req.overlay_xattrs = xattrs();
    let exe = Isolation::Helper {
        exe: std::env::current_exe().unwrap(),
    };
    let helper = capture_isolated(&exe, &req).unwrap();
    let direct = capture_isolated(&Isolation::InProcess, &req).unwrap();
    assert_eq!(helper, direct);
    let paths: Vec<(&str, ChangeKind)> = helper
        .changed_paths
        .iter()
        .map(|c| (c.path.as_str(), c.change))
        .collect();
    assert_eq!(
        paths,
        vec![
            ("d/a.txt", ChangeKind::Deleted),
            ("d/b.txt", ChangeKind::Deleted),
            ("d/c.txt", ChangeKind::Added),
            ("src/keep.py", ChangeKind::Modified),
        ],
        "the opaque directory's deletions reached the helper through the oracle"
    );
    assert!(helper.accepted(), "{:?}", helper.rejections);
    let patch = String::from_utf8(helper.patch.clone().unwrap()).unwrap();
    assert!(
        patch.contains("+print(2)"),
        "a mode-000 file was read: {patch}"
    );

    // A scope violation found in the helper comes back as the same rejection.
    let narrow = pats(&["src/"]);
    let mut req = CaptureRequest::new(repo.path(), &sha, &upper, &narrow, &forbidden, 1 << 20);
    req.overlay_xattrs = xattrs();
    let helper = capture_isolated(&exe, &req).unwrap();
    assert_eq!(
        helper,
        capture_isolated(&Isolation::InProcess, &req).unwrap()
    );
    assert!(
        helper
            .rejections
            .iter()
            .any(|r| r.code == ReasonCode::PathOutOfScope),
        "{:?}",
        helper.rejections
    );
    assert!(helper.patch.is_none());

    // Nothing of the helper's is left in the temp directory.
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("corral-capture-{}-", std::process::id()))
        })
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Runs the oracle over a socket pair for `upper` and gives the helper's side to `f`.
fn with_oracle(upper: &Path, f: impl FnOnce(&OwnedFd, &OracleXattrs)) {
    let (ours, theirs) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    let dev = std::fs::metadata(upper).unwrap();
    let dev = std::os::unix::fs::MetadataExt::dev(&dev);
    let server = std::thread::spawn(move || {
        serve_xattrs(ours.as_fd(), dev, xattrs().prefix(), 100);
    });
    let raw = rustix::io::dup(&theirs).unwrap();
    let oracle = OracleXattrs::new(theirs);
    f(&raw, &oracle);
    drop(oracle);
    drop(raw);
    server.join().unwrap();
}

fn the_oracle_answers_only_for_overlay_names_on_the_upper_layer() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("opaque");
    std::fs::create_dir(&dir).unwrap();
    for (name, value) in [
        (ovl("opaque"), b"y"),
        (ovl("other"), b"s"),
        ("user.secret".to_owned(), b"s"),
    ] {
        rustix::fs::setxattr(&dir, &name, value, rustix::fs::XattrFlags::empty()).unwrap();
    }
    let fd = OwnedFd::from(std::fs::File::open(&dir).unwrap());
    let proc_dir = OwnedFd::from(std::fs::File::open("/proc/self").unwrap());
    // Positive control: read directly, every one of these is there.
    for name in [ovl("opaque"), ovl("other"), "user.secret".to_owned()] {
        assert!(
            matches!(
                DirectXattrs.get(fd.as_fd(), &name).unwrap(),
                XattrValue::Value(_)
            ),
            "{name}"
        );
    }
    with_oracle(t.path(), |raw, oracle| {
        assert_eq!(
            oracle.get(fd.as_fd(), &ovl("opaque")).unwrap(),
            XattrValue::Value(b"y".to_vec())
        );
        assert_eq!(
            oracle.get(fd.as_fd(), &ovl("metacopy")).unwrap(),
            XattrValue::Absent
        );
        for name in [
            ovl("other"),
            "user.secret".to_owned(),
            ovl(""),
            String::new(),
        ] {
            assert!(oracle.get(fd.as_fd(), &name).is_err(), "{name:?} answered");
        }
        // Another file system (procfs) is not the upper layer.
        assert!(oracle.get(proc_dir.as_fd(), &ovl("opaque")).is_err());
        // A message without an fd, or with two, is refused.
        let mut buf = [0u8; 80];
        rustix::net::send(
            raw,
            ovl("opaque").as_bytes(),
            rustix::net::SendFlags::empty(),
        )
        .unwrap();
        let n = rustix::net::recv(raw, &mut buf, rustix::net::RecvFlags::empty())
            .unwrap()
            .0;
        assert_eq!(&buf[..n], &[3], "a request without an fd was answered");
        let two = [fd.as_fd(), fd.as_fd()];
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
        let mut control = rustix::net::SendAncillaryBuffer::new(&mut space);
        assert!(control.push(rustix::net::SendAncillaryMessage::ScmRights(&two)));
        rustix::net::sendmsg(
            raw,
            &[std::io::IoSlice::new(ovl("opaque").as_bytes())],
            &mut control,
            rustix::net::SendFlags::empty(),
        )
        .unwrap();
        let n = rustix::net::recv(raw, &mut buf, rustix::net::RecvFlags::empty())
            .unwrap()
            .0;
        assert_eq!(&buf[..n], &[3], "a request with two fds was answered");
    });
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(CAPTURE_HELPER_ARG) {
        std::process::exit(corral_checkout::capture_helper_main());
    }
    // As an ordinary user, rootless mode, as corral enters it (ADR-0080): overlay mounts
    // then need `userxattr`, and their metadata is user.overlay.*.
    corral_linux::rootless::choose_mode();
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "capture_helper: needs root (overlay mounts), or rootless mode: {}",
            corral_linux::rootless::refusal().unwrap_or("not entered")
        );
        std::process::exit(1);
    }
    let tests: [(&str, fn()); 2] = [
        (
            "capture_in_the_helper_equals_capture_in_process",
            capture_in_the_helper_equals_capture_in_process,
        ),
        (
            "the_oracle_answers_only_for_overlay_names_on_the_upper_layer",
            the_oracle_answers_only_for_overlay_names_on_the_upper_layer,
        ),
    ];
    for (name, f) in tests {
        f();
        println!("test {name} ... ok");
    }
    println!("2 passed, 0 failed");
}
