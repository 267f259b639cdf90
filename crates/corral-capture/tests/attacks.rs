//! Capture attacks CAP-01..CAP-13 (and RES-DISK-04) of the adversarial corpus, variant B:
//! the hostile state is planted through a real overlayfs mount (so it lands in the upper layer
//! exactly as a worker would leave it) and, where it matters, in the base checkout's `.git` and
//! even in the canonical repository's own config. Every case asserts that the canary file
//! never appears and that the out-of-scope change is reported; a positive control proves the
//! canary fires under plain git.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::{Canonical, Node, Overlay, capture_upper, pats};
use corral_capture::{CaptureLimits, CaptureRequest, CaptureResult, UpperLayer, capture};
use corral_contract::codes::ReasonCode;
use corral_contract::manifest::ChangeKind;

static N: AtomicU32 = AtomicU32::new(0);

/// A canary path that no test creates itself.
struct Canary(PathBuf);

impl Canary {
    fn new() -> Self {
        let n = N.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        Self(PathBuf::from(format!(
            "/tmp/PWN-{}-{n}-{nanos}",
            std::process::id()
        )))
    }
    fn fired(&self) -> bool {
        self.0.exists()
    }
    fn s(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

fn f(data: &str) -> Node {
    Node::File {
        data: data.as_bytes().to_vec(),
        exec: false,
    }
}

/// The base every attack starts from.
fn base() -> Canonical {
    Canonical::new(&[
        ("src/app.py", f("print('hi')\n")),
        (".github/workflows/ci.yml", f("on: push\n")),
        (".gitignore", f(".env\n*.log\n")),
        ("README.md", f("readme\n")),
    ])
}

fn codes_for(r: &CaptureResult, path: &str) -> Vec<ReasonCode> {
    r.rejections
        .iter()
        .filter(|x| x.path.as_deref() == Some(path))
        .map(|x| x.code)
        .collect()
}

fn has(r: &CaptureResult, code: ReasonCode, path: &str) -> bool {
    codes_for(r, path).contains(&code)
}

fn changed(r: &CaptureResult, path: &str) -> Option<ChangeKind> {
    r.changed_paths
        .iter()
        .find(|c| c.path == path)
        .map(|c| c.change)
}

fn raw(p: &Path, name: &[u8]) -> PathBuf {
    p.join(OsStr::from_bytes(name))
}

/// Every config key and hook of CAP-01..03 that makes git run a program.
fn plant_hostile_gitdir(gitdir: &Path, canary: &Canary, evil_include: &Path) {
    let c = canary.s();
    let mut cfg = fs::read_to_string(gitdir.join("config")).unwrap_or_default();
    cfg.push_str(&format!(
        "[core]\n\tfsmonitor = \"touch {c}; false\"\n\thooksPath = {hooks}\n\tpager = touch {c}\n\tsshCommand = touch {c}\n\
         [filter \"x\"]\n\tclean = sh -c 'touch {c}; cat'\n\tsmudge = sh -c 'touch {c}; cat'\n\tprocess = touch {c}\n\trequired = false\n\
         [diff \"x\"]\n\ttextconv = sh -c 'touch {c}; cat'\n[diff]\n\texternal = touch {c}\n\
         [gpg]\n\tprogram = touch {c}\n[commit]\n\tgpgsign = true\n[include]\n\tpath = {inc}\n",
        hooks = gitdir.join("hooks").display(),
        inc = evil_include.display()
    ));
    fs::write(gitdir.join("config"), cfg).unwrap();
    fs::write(
        evil_include,
        format!("[core]\n\tfsmonitor = \"touch {c}; false\"\n"),
    )
    .unwrap();
    fs::create_dir_all(gitdir.join("hooks")).unwrap();
    for h in [
        "post-index-change",
        "reference-transaction",
        "pre-commit",
        "post-checkout",
        "pre-auto-gc",
        "fsmonitor-watchman",
    ] {
        let p = gitdir.join("hooks").join(h);
        fs::write(&p, format!("#!/bin/sh\ntouch {c}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs::create_dir_all(gitdir.join("info")).unwrap();
    fs::write(gitdir.join("info/attributes"), "* filter=x diff=x\n").unwrap();
}

#[test]
fn positive_control_plain_git_runs_the_planted_programs() {
    let canon = base();
    let canary = Canary::new();
    let ws = canon.tmp.path().join("control-ws");
    canon.clone_base(&ws);
    plant_hostile_gitdir(
        &ws.join(".git"),
        &canary,
        &canon.tmp.path().join("evil.cfg"),
    );
    fs::write(ws.join("src/app.py"), "changed\n").unwrap();
    let mut c = canon.git_cmd();
    c.args(["status", "--porcelain"]).current_dir(&ws);
    let _ = c.output().unwrap();
    assert!(
        canary.fired(),
        "plain `git status` in the hostile workspace must fire the canary"
    );
    fs::remove_file(&canary.0).unwrap();
    let mut c = canon.git_cmd();
    c.args(["diff"]).current_dir(&ws);
    let _ = c.output().unwrap();
    let mut c = canon.git_cmd();
    c.args(["add", "-A"]).current_dir(&ws);
    let _ = c.output().unwrap();
    assert!(
        canary.fired(),
        "plain `git diff`/`git add` must fire the canary too"
    );
}

/// CAP-01/02/03: hostile config, hooks, filters, drivers and includes everywhere corral's git
/// could look: the canonical repository's own `.git` (defense in depth), the base checkout's
/// `.git` (the workspace gitdir) and the upper layer. `.gitattributes` naming the filter and
/// diff drivers is in the candidate and in scope, so a patch is built through them.
#[test]
fn cap_01_02_03_nothing_runs() {
    let canon = base();
    let canary = Canary::new();
    // Both attempts' overlays are made before the canonical repository turns hostile: the
    // fixtures' own (unhardened) git must not run there afterwards.
    let mut ovl = Overlay::new(&canon);
    let mut ovl2 = Overlay::new(&canon);
    plant_hostile_gitdir(
        &canon.repo.join(".git"),
        &canary,
        &canon.tmp.path().join("evil.cfg"),
    );
    fs::write(ovl.m("src/app.py"), "print('changed')\n").unwrap();
    fs::write(ovl.m(".gitattributes"), "* filter=x diff=x\n").unwrap();
    fs::write(ovl.m("src/new.bin"), b"\0\x01binary").unwrap();
    ovl.unmount();
    // `.gitattributes` changes git's behaviour: it is in scope only when named exactly.
    let r = capture_upper(&canon, &ovl.upper, &["*", ".gitattributes"], &[], 1 << 20);
    assert!(r.rejections.is_empty(), "{:?}", r.rejections);
    let patch = String::from_utf8(r.patch.clone().unwrap()).unwrap();
    assert!(patch.contains("+print('changed')"), "{patch}");
    assert!(patch.contains("GIT binary patch"), "{patch}");
    assert!(
        !canary.fired(),
        "capture ran a program named by repository config"
    );

    // The same hostile gitdir written into the upper layer (variant A would get EROFS).
    fs::create_dir_all(ovl2.m(".git")).unwrap();
    fs::write(ovl2.m(".git/config"), "[core]\n\tbare = false\n").unwrap();
    plant_hostile_gitdir(&ovl2.m(".git"), &canary, &ovl2.m("src/evil.cfg"));
    fs::write(ovl2.m("src/app.py"), "x\n").unwrap();
    ovl2.unmount();
    let r = capture_upper(&canon, &ovl2.upper, &["src/"], &[], 1 << 20);
    assert!(
        has(&r, ReasonCode::GitMetadataChanged, ".git"),
        "{:?}",
        r.rejections
    );
    assert!(r.patch.is_none());
    assert!(!canary.fired());
}

/// CAP-04: hiding out-of-scope changes. The worker's `.gitignore` does not count; index
/// tricks in a workspace `.git` do not count; an mtime-restored same-size edit is found; a
/// base-tree ignore rule keeps a file out of the patch but not out of the scope check.
#[test]
fn cap_04_hidden_changes_are_found() {
    let canon = base();
    let mut ovl = Overlay::new(&canon);
    fs::write(ovl.m(".github/.gitignore"), "*\n").unwrap();
    fs::write(ovl.m(".github/workflows/new.yml"), "evil\n").unwrap();
    // Same size, old mtime restored.
    let ci = ovl.m(".github/workflows/ci.yml");
    let before = fs::metadata(&ci).unwrap().modified().unwrap();
    fs::write(&ci, "on: pwnd\n").unwrap();
    fs::File::options()
        .write(true)
        .open(&ci)
        .unwrap()
        .set_modified(before)
        .unwrap();
    fs::write(ovl.m(".env"), "SECRET=1\n").unwrap();
    fs::write(ovl.m("src/debug.log"), "log\n").unwrap();
    fs::write(ovl.m("src/app.py"), "ok\n").unwrap();
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert_eq!(
        changed(&r, ".github/workflows/ci.yml"),
        Some(ChangeKind::Modified)
    );
    assert_eq!(
        changed(&r, ".github/workflows/new.yml"),
        Some(ChangeKind::Added)
    );
    assert_eq!(changed(&r, ".github/.gitignore"), Some(ChangeKind::Added));
    for p in [
        ".github/workflows/ci.yml",
        ".github/workflows/new.yml",
        ".github/.gitignore",
        ".env",
    ] {
        assert!(
            has(&r, ReasonCode::PathOutOfScope, p),
            "{p}: {:?}",
            r.rejections
        );
    }
    // Ignored by the base tree's rules: listed, scope-checked, not a changed path.
    assert_eq!(
        r.ignored_paths,
        vec![".env".to_owned(), "src/debug.log".to_owned()]
    );
    assert_eq!(changed(&r, ".env"), None);
    assert!(r.patch.is_none());
}

/// CAP-04 (b)-(e), variant B: after the run, the workspace's `.git` (here: a real gitdir
/// planted in the base checkout) stages and commits the change, marks it assume-unchanged and
/// skip-worktree, excludes it and weakens stat checks; the canonical repository's HEAD is even
/// moved to a commit containing the change. Capture reads none of it: it compares the upper
/// layer with the recorded base SHA's tree.
#[test]
fn cap_04_index_tricks_in_the_workspace_gitdir_do_not_matter() {
    let canon = base();
    let canary = Canary::new();
    let mut ovl = Overlay::new(&canon);
    fs::write(ovl.m(".github/workflows/ci.yml"), "run: curl x|sh\n").unwrap();
    ovl.unmount();

    let ws = canon.tmp.path().join("ws-view");
    canon.clone_base(&ws);
    let run = |args: &[&str]| {
        let mut c = canon.git_cmd();
        c.args(args).current_dir(&ws);
        let _ = c.output().unwrap();
    };
    fs::write(ws.join(".github/workflows/ci.yml"), "run: curl x|sh\n").unwrap();
    run(&["add", "-A"]);
    run(&["commit", "-q", "-m", "hide"]);
    run(&[
        "update-index",
        "--assume-unchanged",
        ".github/workflows/ci.yml",
    ]);
    run(&[
        "update-index",
        "--skip-worktree",
        ".github/workflows/ci.yml",
    ]);
    fs::write(ws.join(".git/info/exclude"), ".github/\n").unwrap();
    run(&["config", "status.showUntrackedFiles", "no"]);
    run(&["config", "core.trustctime", "false"]);
    run(&["config", "core.checkStat", "minimal"]);
    plant_hostile_gitdir(
        &ws.join(".git"),
        &canary,
        &canon.tmp.path().join("evil2.cfg"),
    );
    fs::rename(ws.join(".git"), ovl.lower.join(".git")).unwrap();
    // The canonical repository's HEAD moves too (git commit / update-ref in the wrong place).
    fs::write(
        canon.repo.join(".github/workflows/ci.yml"),
        "run: curl x|sh\n",
    )
    .unwrap();
    canon.git(&canon.repo, &["commit", "-q", "-am", "moved"]);

    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert_eq!(
        changed(&r, ".github/workflows/ci.yml"),
        Some(ChangeKind::Modified)
    );
    assert!(has(
        &r,
        ReasonCode::PathOutOfScope,
        ".github/workflows/ci.yml"
    ));
    assert!(!canary.fired());
}

/// CAP-05: `.git` replaced by a gitfile, alternates added, core.worktree set.
#[test]
fn cap_05_git_redirection_is_rejected() {
    let canon = base();
    let mut ovl = Overlay::new(&canon);
    fs::write(ovl.m(".git"), "gitdir: /\n").unwrap();
    fs::write(ovl.m("src/app.py"), "x\n").unwrap();
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert!(
        has(&r, ReasonCode::GitMetadataChanged, ".git"),
        "{:?}",
        r.rejections
    );
    assert!(r.patch.is_none());

    let mut ovl = Overlay::new(&canon);
    fs::create_dir_all(ovl.m(".git/objects/info")).unwrap();
    fs::write(ovl.m(".git/objects/info/alternates"), "/root/.ssh\n").unwrap();
    fs::write(ovl.m(".git/config"), "[core]\n\tworktree = /\n").unwrap();
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert!(has(&r, ReasonCode::GitMetadataChanged, ".git"));
    assert!(
        r.changed_paths.is_empty(),
        "nothing under .git is listed as a change: {:?}",
        r.changed_paths
    );
}

/// CAP-06: nested repositories and submodules.
#[test]
fn cap_06_nested_repositories_and_submodules() {
    let canon = base();
    // A gitlink in the base (vendor/lib).
    let sha = canon.base.clone();
    canon.git(
        &canon.repo,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{sha},vendor/lib"),
        ],
    );
    canon.git(&canon.repo, &["commit", "-q", "-m", "submodule"]);
    let head = String::from_utf8(canon.git(&canon.repo, &["rev-parse", "HEAD"]))
        .unwrap()
        .trim()
        .to_owned();
    let canon = Canonical {
        base: head,
        ..canon
    };
    let canary = Canary::new();
    let mut ovl = Overlay::new(&canon);
    // `git init src/nested` with a hostile fsmonitor, plus a worktree file next to it.
    fs::create_dir_all(ovl.m("src/nested/.git/hooks")).unwrap();
    fs::write(ovl.m("src/nested/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(
        ovl.m("src/nested/.git/config"),
        format!("[core]\n\tfsmonitor = \"touch {}; false\"\n", canary.s()),
    )
    .unwrap();
    fs::write(ovl.m("src/nested/file.txt"), "nested\n").unwrap();
    fs::create_dir_all(ovl.m("vendor/lib")).unwrap();
    fs::write(ovl.m("vendor/lib/evil.sh"), "x\n").unwrap();
    fs::write(
        ovl.m(".gitmodules"),
        "[submodule \"x\"]\n\tpath = \"x\\r\"\n\turl = ../x\n\tupdate = !touch PWN\n",
    )
    .unwrap();
    symlink(".git/modules/x/hooks", raw(&ovl.merged, b"x\r")).unwrap();
    symlink("nested/.git/hooks", ovl.m("src/hooks")).unwrap();
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/", "vendor/"], &[], 1 << 20);
    assert!(
        has(&r, ReasonCode::GitMetadataChanged, "src/nested/.git"),
        "{:?}",
        r.rejections
    );
    assert_eq!(
        changed(&r, "src/nested/file.txt"),
        Some(ChangeKind::Added),
        "nested worktree files are enumerated"
    );
    assert!(
        has(&r, ReasonCode::GitMetadataChanged, "vendor/lib"),
        "{:?}",
        r.rejections
    );
    assert!(has(&r, ReasonCode::PathOutOfScope, ".gitmodules"));
    assert!(
        has(&r, ReasonCode::PathInvalid, "x\\x0d"),
        "{:?}",
        r.rejections
    );
    assert!(
        has(&r, ReasonCode::SymlinkEscape, "src/hooks"),
        "{:?}",
        r.rejections
    );
    assert!(!canary.fired());
}

/// CAP-07: symlinks are recorded as links, checked, never followed.
#[test]
fn cap_07_symlinks() {
    let canon = base();
    let mut ovl = Overlay::new(&canon);
    symlink("/etc/shadow", ovl.m("src/a.txt")).unwrap();
    symlink("../../../../root/.ssh/id_ed25519", ovl.m("src/k")).unwrap();
    symlink("../.github", ovl.m("src/gh")).unwrap();
    fs::write(ovl.m("src/gh/workflows/x.yml"), "evil\n").unwrap();
    symlink("/proc/self/root/etc", ovl.m("src/e")).unwrap();
    symlink("app.py", ovl.m("src/ok")).unwrap();
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    for p in ["src/a.txt", "src/k", "src/gh", "src/e"] {
        assert!(
            has(&r, ReasonCode::SymlinkEscape, p),
            "{p}: {:?}",
            r.rejections
        );
        assert_eq!(changed(&r, p), Some(ChangeKind::Added));
    }
    assert!(codes_for(&r, "src/ok").is_empty());
    assert!(has(
        &r,
        ReasonCode::PathOutOfScope,
        ".github/workflows/x.yml"
    ));
    assert!(r.patch.is_none());

    // An accepted symlink is a link in the patch: its target text, never the target's bytes.
    let mut ovl = Overlay::new(&canon);
    symlink("app.py", ovl.m("src/ok")).unwrap();
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    let patch = String::from_utf8(r.patch.unwrap()).unwrap();
    assert!(
        patch.contains("new file mode 120000") && patch.contains("+app.py"),
        "{patch}"
    );
    assert!(!patch.contains("print('hi')"));
}

/// The old, lexical judgement of a link (one link at a time, `..` applied to the text): the
/// positive controls below show that it accepts what the file system resolves elsewhere.
fn lexical(link: &str, target: &str) -> Option<String> {
    let mut stack: Vec<&str> = link.split('/').collect();
    stack.pop();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                stack.pop()?;
            }
            c => stack.push(c),
        }
    }
    (!stack.is_empty()).then(|| stack.join("/"))
}

/// A base with a document outside the `src/` scope (and, optionally, more entries).
fn base_with_docs(extra: &[(&str, Node)]) -> Canonical {
    let mut files = vec![
        ("src/app.py", f("print('hi')\n")),
        ("docs/guide.md", f("guide\n")),
        ("README.md", f("readme\n")),
    ];
    files.extend(extra.iter().cloned());
    Canonical::new(&files)
}

fn real(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap()
}

/// Item 2 of "hostile data never acts with corral's authority": `..` after a link applies to
/// the link's target. `src/sub/d -> .` and `src/sub/e -> d/../../docs/guide.md` is
/// `src/docs/guide.md` lexically (inside `src/`) but `docs/guide.md` on a file system.
#[test]
fn cap_07_dot_dot_after_a_link_is_resolved_physically() {
    let canon = base_with_docs(&[]);
    let mut ovl = Overlay::new(&canon);
    fs::create_dir_all(ovl.m("src/sub")).unwrap();
    symlink(".", ovl.m("src/sub/d")).unwrap();
    symlink("d/../../docs/guide.md", ovl.m("src/sub/e")).unwrap();
    // Positive control: the lexical rule puts it inside the scope, the kernel outside.
    assert_eq!(
        lexical("src/sub/e", "d/../../docs/guide.md").as_deref(),
        Some("src/docs/guide.md")
    );
    assert_eq!(
        real(&ovl.m("src/sub/e")),
        real(&ovl.m("docs/guide.md")),
        "the kernel resolves the link to docs/guide.md"
    );
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert!(
        has(&r, ReasonCode::SymlinkEscape, "src/sub/e"),
        "{:?}",
        r.rejections
    );
    assert!(
        r.rejections
            .iter()
            .any(|x| x.detail.contains("\"docs/guide.md\", outside the scope")),
        "{:?}",
        r.rejections
    );
    assert!(codes_for(&r, "src/sub/d").is_empty(), "{:?}", r.rejections);
    assert_eq!(changed(&r, "src/sub/e"), Some(ChangeKind::Added));
    assert!(r.patch.is_none());
}

/// Twelve `lN -> .` links and a link through all of them followed by twelve `..`: lexically
/// `src/sub/etc/passwd`, after `git apply` on the applying host `/etc/passwd`.
#[test]
fn cap_07_chained_dot_links_cannot_reach_etc_passwd() {
    let canon = base_with_docs(&[]);
    let through: Vec<String> = (1..=12).map(|i| format!("l{i}")).collect();
    let target = format!("{}/{}etc/passwd", through.join("/"), "../".repeat(12));
    let plant = |root: &Path| {
        fs::create_dir_all(root.join("src/sub")).unwrap();
        for l in &through {
            symlink(".", root.join("src/sub").join(l)).unwrap();
        }
        symlink(&target, root.join("src/sub/e")).unwrap();
    };
    // Positive control in a real temporary checkout of the base.
    let checkout = canon.tmp.path().join("control-checkout");
    canon.export_base(&checkout);
    plant(&checkout);
    assert!(
        checkout.components().count() <= 12,
        "twelve `..` must reach / from the checkout"
    );
    assert_eq!(
        lexical("src/sub/e", &target).as_deref(),
        Some("src/sub/etc/passwd"),
        "the lexical rule keeps it inside src/"
    );
    assert_eq!(
        real(&checkout.join("src/sub/e")),
        real(Path::new("/etc/passwd")),
        "realpath of the link in a checkout is the host's /etc/passwd"
    );

    let mut ovl = Overlay::new(&canon);
    plant(&ovl.merged);
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert!(
        has(&r, ReasonCode::SymlinkEscape, "src/sub/e"),
        "{:?}",
        r.rejections
    );
    assert!(
        r.rejections
            .iter()
            .any(|x| x.path.as_deref() == Some("src/sub/e")
                && x.detail.contains("leaves the repository")),
        "{:?}",
        r.rejections
    );
    assert_eq!(r.rejections.len(), 1, "{:?}", r.rejections);
    assert!(r.patch.is_none());
}

/// A link through an unchanged symlink of the base tree that points outside the scope.
#[test]
fn cap_07_links_through_unchanged_base_links_are_followed() {
    let canon = base_with_docs(&[("src/lnk", Node::Link(b"../docs".to_vec()))]);
    let mut ovl = Overlay::new(&canon);
    symlink("lnk/guide.md", ovl.m("src/e")).unwrap();
    // Lands back inside src/, but only through a hop outside the scope.
    symlink("lnk/../src/app.py", ovl.m("src/back")).unwrap();
    assert_eq!(
        lexical("src/e", "lnk/guide.md").as_deref(),
        Some("src/lnk/guide.md")
    );
    assert_eq!(real(&ovl.m("src/e")), real(&ovl.m("docs/guide.md")));
    assert_eq!(
        lexical("src/back", "lnk/../src/app.py").as_deref(),
        Some("src/src/app.py")
    );
    assert_eq!(real(&ovl.m("src/back")), real(&ovl.m("src/app.py")));
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    for p in ["src/e", "src/back"] {
        assert!(
            has(&r, ReasonCode::SymlinkEscape, p),
            "{p}: {:?}",
            r.rejections
        );
    }
    assert!(
        codes_for(&r, "src/lnk").is_empty(),
        "the unchanged base link is not a change"
    );
    assert_eq!(changed(&r, "src/lnk"), None);
    assert!(r.patch.is_none());
}

/// Loops and chains longer than Linux follows (40 links, ELOOP) are refused; a 39-link chain
/// inside the scope is an ordinary candidate.
#[test]
fn cap_07_symlink_loops_and_chain_length() {
    let canon = base_with_docs(&[]);
    let mut ovl = Overlay::new(&canon);
    symlink("b", ovl.m("src/a")).unwrap();
    symlink("a", ovl.m("src/b")).unwrap();
    for i in 1..=41 {
        symlink(format!("c{}", i + 1), ovl.m(&format!("src/c{i}"))).unwrap();
    }
    fs::write(ovl.m("src/c42"), "end\n").unwrap();
    // Positive control: the kernel refuses the same chains with ELOOP.
    let eloop = |p: &str| fs::metadata(ovl.m(p)).err().and_then(|e| e.raw_os_error());
    assert_eq!(eloop("src/a"), Some(40), "ELOOP");
    assert_eq!(eloop("src/c1"), Some(40), "41 links: ELOOP");
    assert_eq!(eloop("src/c2"), None, "40 links resolve");
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    for p in ["src/a", "src/b", "src/c1"] {
        assert!(
            has(&r, ReasonCode::SymlinkEscape, p),
            "{p}: {:?}",
            r.rejections
        );
    }
    for i in 2..=41 {
        assert!(codes_for(&r, &format!("src/c{i}")).is_empty(), "c{i}");
    }
    assert!(r.patch.is_none());

    let mut ovl = Overlay::new(&canon);
    for i in 1..=39 {
        symlink(format!("k{}", i + 1), ovl.m(&format!("src/k{i}"))).unwrap();
    }
    fs::write(ovl.m("src/k40"), "end\n").unwrap();
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert!(r.accepted(), "{:?}", r.rejections);
    assert_eq!(r.changed_paths.len(), 40);
    let scratch = tempfile::Builder::new()
        .prefix("corral-cap-chain-")
        .tempdir()
        .unwrap();
    let applied = common::apply_on_fresh(&canon, r.patch.as_ref().unwrap(), scratch.path());
    assert_eq!(
        real(&applied.join("src/k1")),
        real(&applied.join("src/k40"))
    );
    assert_eq!(fs::read_to_string(applied.join("src/k1")).unwrap(), "end\n");
}

/// Legitimate links inside the scope are captured exactly as before: the patch is the one
/// git itself makes for the worktree.
#[test]
fn cap_07_in_scope_links_are_still_captured() {
    let canon = base_with_docs(&[("src/lib/mod.py", f("x = 1\n"))]);
    let mut ovl = Overlay::new(&canon);
    fs::write(ovl.m("src/b.txt"), "b\n").unwrap();
    fs::write(ovl.m("src/y"), "y\n").unwrap();
    symlink("b.txt", ovl.m("src/a")).unwrap();
    symlink("../src/y", ovl.m("src/x")).unwrap();
    symlink("../app.py", ovl.m("src/lib/app")).unwrap();
    symlink("lib/", ovl.m("src/libdir")).unwrap();
    symlink("libdir/mod.py", ovl.m("src/via")).unwrap();
    symlink("gen/out.txt", ovl.m("src/dangling")).unwrap();
    let scratch = tempfile::Builder::new()
        .prefix("corral-cap-links-")
        .tempdir()
        .unwrap();
    let expected_dir = scratch.path().join("expected");
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(&ovl.merged)
        .arg(&expected_dir)
        .status()
        .unwrap();
    assert!(st.success());
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert!(r.accepted(), "{:?}", r.rejections);
    let patch = r.patch.clone().unwrap();
    let text = String::from_utf8(patch.clone()).unwrap();
    for t in ["+b.txt", "+../src/y", "+../app.py", "+lib/", "+gen/out.txt"] {
        assert!(text.contains(t), "{t}: {text}");
    }
    let applied = common::apply_on_fresh(&canon, &patch, scratch.path());
    assert_eq!(canon.tree_of(&applied), canon.tree_of(&expected_dir));
    let want = canon.name_status(&canon.base_tree(), &canon.tree_of(&expected_dir));
    assert_eq!(want.len(), r.changed_paths.len());
    assert_eq!(fs::read_to_string(applied.join("src/x")).unwrap(), "y\n");
    assert_eq!(
        fs::read_to_string(applied.join("src/via")).unwrap(),
        "x = 1\n"
    );
}

/// CAP-09: hard links are judged per path and by content.
#[test]
fn cap_09_hard_links() {
    let canon = base();
    let mut ovl = Overlay::new(&canon);
    fs::hard_link(ovl.m("src/app.py"), ovl.m(".github/workflows/ci2.yml")).unwrap();
    fs::hard_link(ovl.m("src/app.py"), ovl.m("src/alias.py")).unwrap();
    assert!(
        fs::hard_link("/etc/hostname", ovl.m("src/h")).is_err(),
        "cross-device link must fail"
    );
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert!(
        has(&r, ReasonCode::PathOutOfScope, ".github/workflows/ci2.yml"),
        "{:?}",
        r.rejections
    );
    assert_eq!(changed(&r, "src/alias.py"), Some(ChangeKind::Added));
    assert_eq!(
        changed(&r, "src/app.py"),
        None,
        "a copied-up, unchanged file is not a change"
    );
}

/// CAP-10: control characters, `..`-looking names, prefix tricks, option-looking names.
#[test]
fn cap_10_names_cannot_fool_the_scope() {
    let canon = base();
    let canary = Canary::new();
    let mut ovl = Overlay::new(&canon);
    let m = ovl.merged.clone();
    fs::create_dir_all(m.join(".github/workflows/x -> src")).unwrap();
    fs::create_dir_all(m.join("src-evil")).unwrap();
    let names: &[&[u8]] = &[
        b"src/a\nb",
        b"src/\x1b[31mred",
        b"src/a -> b",
        b".github/workflows/x -> src/ok.txt",
        b"src/\"q\"",
        b"src/\ttab",
        b"src/ ",
        b"src/..\\..\\.github\\workflows\\x.yml",
        b"src/%2e%2e%2f.github",
        b"src-evil/p.py",
        b"srcX",
        b"-rf",
    ];
    for n in names {
        fs::write(raw(&m, n), b"x\n").unwrap();
    }
    fs::write(
        m.join(format!("--upload-pack=touch {}", canary.s()).replace('/', "_")),
        b"x",
    )
    .unwrap();
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert!(has(&r, ReasonCode::PathInvalid, "src/a\\x0ab"));
    assert!(has(&r, ReasonCode::PathInvalid, "src/\\x1b[31mred"));
    assert!(has(&r, ReasonCode::PathInvalid, "src/\\x09tab"));
    assert!(
        has(
            &r,
            ReasonCode::PathInvalid,
            "src/..\\\\..\\\\.github\\\\workflows\\\\x.yml"
        ),
        "{:?}",
        r.rejections
    );
    assert!(has(
        &r,
        ReasonCode::PathOutOfScope,
        ".github/workflows/x -> src/ok.txt"
    ));
    assert!(has(&r, ReasonCode::PathOutOfScope, "src-evil/p.py"));
    assert!(has(&r, ReasonCode::PathOutOfScope, "srcX"));
    assert!(has(&r, ReasonCode::PathOutOfScope, "-rf"));
    for ok in ["src/a -> b", "src/\"q\"", "src/ ", "src/%2e%2e%2f.github"] {
        assert!(codes_for(&r, ok).is_empty(), "{ok}");
        assert_eq!(changed(&r, ok), Some(ChangeKind::Added), "{ok}");
    }
    assert!(!canary.fired());
}

/// CAP-11: non-UTF-8, Unicode, case tricks and `.git` lookalikes; nothing is dropped.
#[test]
fn cap_11_unicode_and_lookalikes() {
    let canon = base();
    let mut ovl = Overlay::new(&canon);
    let m = ovl.merged.clone();
    for d in ["Src", ".GIT", ".Git", ".git.", ".git ", "git~1"] {
        fs::create_dir_all(m.join(d)).unwrap();
        fs::write(m.join(d).join("config"), "x").unwrap();
    }
    fs::create_dir_all(raw(&m, b".g\xe2\x80\x8cit")).unwrap();
    fs::write(raw(&m, b".g\xe2\x80\x8cit/hooks"), "x").unwrap();
    let files: &[&[u8]] = &[
        b".github/workflows/\xff\xfe.yml",
        b"src/\xc3\x28",
        b"src/e\xcc\x81.txt",
        b"src/\xc3\xa9.txt",
        b"src/evil\xe2\x80\xaegnp.sh",
    ];
    for n in files {
        fs::write(raw(&m, n), b"x\n").unwrap();
    }
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert!(has(
        &r,
        ReasonCode::PathNotUtf8,
        ".github/workflows/\\xff\\xfe.yml"
    ));
    assert!(has(&r, ReasonCode::PathNotUtf8, "src/\\xc3("));
    assert_eq!(changed(&r, "src/e\u{301}.txt"), Some(ChangeKind::Added));
    assert_eq!(changed(&r, "src/\u{e9}.txt"), Some(ChangeKind::Added));
    assert_eq!(
        changed(&r, "src/evil\u{202e}gnp.sh"),
        Some(ChangeKind::Added)
    );
    assert!(
        has(&r, ReasonCode::PathOutOfScope, "Src/x")
            || has(&r, ReasonCode::PathOutOfScope, "Src/config")
    );
    for d in [".GIT", ".Git", ".git.", ".git ", "git~1", ".g\\u{200c}it"] {
        assert!(
            has(&r, ReasonCode::PathProtected, d),
            "{d}: {:?}",
            r.rejections
        );
    }
    // Nothing dropped: every created leaf shows up as a change or a rejection.
    let reported: std::collections::BTreeSet<String> = r
        .changed_paths
        .iter()
        .map(|c| c.path.clone())
        .chain(r.rejections.iter().filter_map(|x| x.path.clone()))
        .collect();
    assert!(reported.len() >= 5 + 7, "{reported:?}");
}

/// CAP-12 and RES-DISK-04: huge, sparse and special files, deep and wide trees. Capture
/// stays bounded, never opens FIFOs or sockets, and rejects instead of skipping.
#[test]
fn cap_12_bounded_and_special_files() {
    let canon = base();
    let mut ovl = Overlay::new(&canon);
    let m = ovl.merged.clone();
    let sparse = fs::File::create(m.join("src/sparse.bin")).unwrap();
    sparse.set_len(1 << 40).unwrap();
    fs::write(m.join("src/big.bin"), vec![7u8; 3 << 20]).unwrap();
    let st = std::process::Command::new("mkfifo")
        .arg(m.join("src/pipe"))
        .status()
        .unwrap();
    assert!(st.success());
    drop(std::os::unix::net::UnixListener::bind(m.join("src/sock")).unwrap());
    let st = std::process::Command::new("mknod")
        .arg(m.join("src/null"))
        .args(["c", "1", "3"])
        .status()
        .unwrap();
    assert!(st.success());
    fs::write(m.join("src/suid"), b"#!/bin/sh\n").unwrap();
    fs::set_permissions(m.join("src/suid"), fs::Permissions::from_mode(0o4755)).unwrap();
    let mut deep = m.join("src/deep");
    for _ in 0..40 {
        deep.push("d");
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("leaf"), b"x").unwrap();
    ovl.unmount();

    let layer = UpperLayer::open(&ovl.upper).unwrap();
    let allowed = pats(&["src/"]);
    let mut req = CaptureRequest::new(&canon.repo, &canon.base, &layer, &allowed, &[], 1 << 20);
    req.limits = CaptureLimits {
        max_file_bytes: 1 << 20,
        max_total_bytes: 8 << 20,
        max_entries: 10_000,
        max_depth: 16,
        timeout: Duration::from_secs(60),
        git_memory_bytes: 2 << 30,
    };
    let t0 = Instant::now();
    let r = capture(&req).unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "capture must stay bounded"
    );
    assert!(
        has(&r, ReasonCode::CaptureLimit, "src/sparse.bin"),
        "{:?}",
        r.rejections
    );
    assert!(has(&r, ReasonCode::CaptureLimit, "src/big.bin"));
    for p in ["src/pipe", "src/sock", "src/null"] {
        assert!(has(&r, ReasonCode::SpecialFile, p), "{p}");
    }
    assert!(has(&r, ReasonCode::SetuidFile, "src/suid"));
    assert!(r.rejections.iter().any(|x| {
        x.code == ReasonCode::CaptureLimit
            && x.path
                .as_deref()
                .is_some_and(|p| p.starts_with("src/deep/"))
    }));
    assert!(r.patch.is_none());
}

#[test]
fn res_disk_04_too_many_entries_is_a_rejection() {
    let canon = base();
    let mut ovl = Overlay::new(&canon);
    fs::create_dir_all(ovl.m("src/many")).unwrap();
    for i in 0..3000 {
        fs::write(ovl.m(&format!("src/many/{i}")), b"").unwrap();
    }
    ovl.unmount();
    let layer = UpperLayer::open(&ovl.upper).unwrap();
    let allowed = pats(&["src/"]);
    let mut req = CaptureRequest::new(&canon.repo, &canon.base, &layer, &allowed, &[], 1 << 20);
    req.limits.max_entries = 1000;
    let r = capture(&req).unwrap();
    assert!(
        r.rejections
            .iter()
            .any(|x| x.code == ReasonCode::CaptureLimit),
        "{:?}",
        r.rejections
    );
    assert!(r.patch.is_none());
}

/// CAP-13: files that execute code later are plain scope checks.
#[test]
fn cap_13_exec_later_files_need_exact_scope() {
    let canon = base();
    let mut ovl = Overlay::new(&canon);
    let root_files = [
        ".envrc",
        ".vscode/tasks.json",
        ".vscode/settings.json",
        ".idea/workspace.xml",
        ".github/workflows/x.yml",
        "Makefile",
        "package.json",
        ".pre-commit-config.yaml",
        ".gitattributes",
        ".gitmodules",
        ".mcp.json",
        ".claude/commands/x.md",
        ".bashrc",
        ".gitconfig",
        ".ripgreprc",
    ];
    for p in root_files {
        if let Some(parent) = Path::new(p).parent() {
            fs::create_dir_all(ovl.m(&parent.display().to_string())).unwrap();
        }
        fs::write(ovl.m(p), "curl x|sh\n").unwrap();
    }
    fs::write(ovl.m("src/.npmrc"), "script-shell=/tmp/x\n").unwrap();
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &["**/.npmrc"], 1 << 20);
    for p in root_files {
        assert!(has(&r, ReasonCode::PathOutOfScope, p), "{p}");
    }
    assert!(has(&r, ReasonCode::PathForbidden, "src/.npmrc"));
    // A glob or a parent folder is not enough for files that run code later ...
    let r = capture_upper(&canon, &ovl.upper, &["*"], &[], 1 << 20);
    for p in [
        ".envrc",
        ".vscode/tasks.json",
        ".idea/workspace.xml",
        ".pre-commit-config.yaml",
        ".gitattributes",
        ".gitmodules",
        ".mcp.json",
        ".claude/commands/x.md",
        ".bashrc",
        ".gitconfig",
        ".ripgreprc",
        "src/.npmrc",
    ] {
        assert!(
            has(&r, ReasonCode::PathProtected, p),
            "{p}: {:?}",
            r.rejections
        );
    }
    assert!(!has(&r, ReasonCode::PathProtected, "Makefile"));
    // ... named exactly by the scope, such a file is accepted.
    let exact = [
        "*",
        ".envrc",
        ".vscode/",
        ".idea",
        ".pre-commit-config.yaml",
        ".gitattributes",
        ".gitmodules",
        ".mcp.json",
        ".claude/",
        ".bashrc",
        ".gitconfig",
        ".ripgreprc",
        "src/.npmrc",
    ];
    let r = capture_upper(&canon, &ovl.upper, &exact, &[], 1 << 20);
    assert!(r.rejections.is_empty(), "{:?}", r.rejections);
}

/// Item 3 of "hostile data never acts with corral's authority": the files that run code when
/// a tool opens the folder are recognised under every spelling some file system or tool takes
/// for them (case, trailing dots and spaces, zero-width code points, NTFS short names), and
/// accepted only when `allowed_paths` names the same path under the same normalization.
#[test]
fn cap_13_exec_later_aliases_need_exact_scope() {
    let canon = base();
    let mut ovl = Overlay::new(&canon);
    // (file written, how its rejection shows the path, the allowed entry that names it)
    let cases: &[(&str, &str, &str)] = &[
        (
            "src/.VSCODE/tasks.json",
            "src/.VSCODE/tasks.json",
            "src/.vscode/",
        ),
        ("src/.NPMRC", "src/.NPMRC", "src/.npmrc"),
        ("src/.Envrc", "src/.Envrc", "src/.envrc"),
        ("src/.npmrc.", "src/.npmrc.", "src/.npmrc"),
        (
            "src/.vscode /tasks.json",
            "src/.vscode /tasks.json",
            "src/.vscode/",
        ),
        (
            "src/.vs\u{200d}code/tasks.json",
            "src/.vs\\u{200d}code/tasks.json",
            "src/.vscode/",
        ),
        (
            "src/.Claude/commands/x.md",
            "src/.Claude/commands/x.md",
            "src/.claude/",
        ),
        ("src/.MCP.json", "src/.MCP.json", "src/.mcp.json"),
        ("src/NPMRC~1", "src/NPMRC~1", "src/npmrc~1"),
    ];
    for (p, _, _) in cases {
        let path = ovl.m(p);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "curl x|sh\n").unwrap();
    }
    for ok in ["src/npmrc.txt", "src/vscode.md", "src/.envrc.example"] {
        fs::write(ovl.m(ok), "ok\n").unwrap();
    }
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    for (_, shown, _) in cases {
        assert!(
            has(&r, ReasonCode::PathProtected, shown),
            "{shown}: {:?}",
            r.rejections
        );
    }
    for ok in ["src/npmrc.txt", "src/vscode.md", "src/.envrc.example"] {
        assert!(codes_for(&r, ok).is_empty(), "{ok}");
        assert_eq!(changed(&r, ok), Some(ChangeKind::Added));
    }
    assert_eq!(r.rejections.len(), cases.len(), "{:?}", r.rejections);
    assert!(r.patch.is_none());

    // Named by the scope under the same normalization, every one is accepted.
    let mut exact = vec!["src/"];
    exact.extend(cases.iter().map(|(_, _, e)| *e));
    let r = capture_upper(&canon, &ovl.upper, &exact, &[], 1 << 20);
    assert!(r.accepted(), "{:?}", r.rejections);
    // ... but an entry for the long name does not name its short-name alias.
    let r = capture_upper(
        &canon,
        &ovl.upper,
        &[
            "src/",
            "src/.vscode/",
            "src/.npmrc",
            "src/.envrc",
            "src/.claude/",
            "src/.mcp.json",
        ],
        &[],
        1 << 20,
    );
    assert_eq!(
        r.rejections
            .iter()
            .map(|x| (x.code, x.path.as_deref()))
            .collect::<Vec<_>>(),
        vec![(ReasonCode::PathProtected, Some("src/NPMRC~1"))]
    );
}

#[test]
fn patch_too_large_is_a_rejection_never_a_truncation() {
    let canon = base();
    let mut ovl = Overlay::new(&canon);
    fs::write(ovl.m("src/app.py"), "line\n".repeat(2000)).unwrap();
    ovl.unmount();
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1000);
    assert_eq!(r.rejections.len(), 1);
    assert_eq!(r.rejections[0].code, ReasonCode::PatchTooLarge);
    assert!(r.patch.is_none());
    let r = capture_upper(&canon, &ovl.upper, &["src/"], &[], 1 << 20);
    assert!(r.accepted());
}

/// CAP-08 (defense in depth; the runner captures only after the process tree is gone): a
/// leftover process keeps swapping `src/x` between a file and a symlink to /etc/passwd in the
/// upper layer while capture runs. Capture either fails closed (`LayerChanged`) or sees one
/// consistent state; it never follows the link, so no host file content reaches a patch.
#[test]
fn cap_08_race_with_a_leftover_process_never_leaks() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let canon = base();
    let tmp = tempfile::Builder::new()
        .prefix("corral-cap-race-")
        .tempdir()
        .unwrap();
    let upper = tmp.path().join("upper");
    fs::create_dir_all(upper.join("src")).unwrap();
    fs::write(upper.join("src/x"), "ok\n").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let (stop, src) = (Arc::clone(&stop), upper.join("src"));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t = src.join(format!(".t{i}"));
                if i.is_multiple_of(2) {
                    symlink("/etc/passwd", &t).unwrap();
                } else {
                    fs::write(&t, format!("ok {i}\n")).unwrap();
                }
                fs::rename(&t, src.join("x")).unwrap();
                i += 1;
            }
        })
    };
    let allowed = pats(&["src/"]);
    let (mut ok, mut failed_closed) = (0, 0);
    for _ in 0..40 {
        let layer = UpperLayer::open(&upper).unwrap();
        let req = CaptureRequest::new(&canon.repo, &canon.base, &layer, &allowed, &[], 1 << 20);
        match capture(&req) {
            Ok(r) => {
                ok += 1;
                if let Some(p) = &r.patch {
                    assert!(
                        !String::from_utf8_lossy(p).contains("root:"),
                        "host file content in the patch"
                    );
                }
                for rej in &r.rejections {
                    assert!(!rej.detail.contains("root:"));
                }
            }
            Err(corral_capture::CaptureError::LayerChanged(_)) => failed_closed += 1,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    racer.join().unwrap();
    eprintln!("race: {ok} consistent captures, {failed_closed} failed closed");
    assert_eq!(ok + failed_closed, 40);
}

/// CAP-12: the git step runs under a memory limit and fails closed when it is hit.
#[test]
fn git_runs_under_a_memory_limit() {
    let canon = base();
    let mut ovl = Overlay::new(&canon);
    fs::write(ovl.m("src/app.py"), "x\n").unwrap();
    ovl.unmount();
    let layer = UpperLayer::open(&ovl.upper).unwrap();
    let allowed = pats(&["src/"]);
    let mut req = CaptureRequest::new(&canon.repo, &canon.base, &layer, &allowed, &[], 1 << 20);
    req.limits.git_memory_bytes = 4 << 20;
    assert!(
        capture(&req).is_err(),
        "a 4 MiB address space cannot run git"
    );
    req.limits.git_memory_bytes = 1 << 30;
    assert!(capture(&req).unwrap().accepted());
}
