//! Test fixtures: a canonical repository, a base checkout, and a real overlayfs mount whose
//! upper layer is what capture reads.
#![allow(
    dead_code,
    reason = "each test binary uses a different part of the fixtures"
)]

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use corral_capture::{CaptureRequest, CaptureResult, UpperLayer, capture};
use corral_contract::path::PathPattern;

/// A test's own git: isolated from the host's config, fixed identity and dates.
pub fn git_cmd(home: &Path) -> Command {
    let mut c = Command::new("git");
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env("GIT_AUTHOR_DATE", "2000-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2000-01-01T00:00:00Z")
        .env("LC_ALL", "C")
        .stdin(Stdio::null());
    c
}

pub fn run_ok(mut c: Command) -> Vec<u8> {
    let out: Output = c.output().expect("spawn");
    assert!(
        out.status.success(),
        "{c:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out.stdout
}

/// One entry of a generated tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File { data: Vec<u8>, exec: bool },
    Link(Vec<u8>),
}

pub fn write_node(root: &Path, rel: &str, node: &Node) {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    match node {
        Node::File { data, exec } => {
            fs::write(&p, data).unwrap();
            let mode = if *exec { 0o755 } else { 0o644 };
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
        }
        Node::Link(target) => {
            use std::os::unix::ffi::OsStrExt;
            symlink(std::ffi::OsStr::from_bytes(target), &p).unwrap();
        }
    }
}

/// A canonical repository with one commit.
pub struct Canonical {
    pub tmp: tempfile::TempDir,
    pub repo: PathBuf,
    pub home: PathBuf,
    pub base: String,
}

impl Canonical {
    pub fn new(files: &[(&str, Node)]) -> Self {
        Self::with_format(files, "sha1")
    }

    /// A repository with the given object format (`sha1` or `sha256`).
    pub fn with_format(files: &[(&str, Node)], format: &str) -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("corral-cap-test-")
            .tempdir()
            .unwrap();
        let repo = tmp.path().join("canonical");
        let home = tmp.path().join("home");
        fs::create_dir_all(&repo).unwrap();
        fs::create_dir_all(&home).unwrap();
        run_ok({
            let mut c = git_cmd(&home);
            c.args([
                "init",
                "-q",
                "-b",
                "main",
                &format!("--object-format={format}"),
            ])
            .current_dir(&repo);
            c
        });
        for (rel, node) in files {
            write_node(&repo, rel, node);
        }
        run_ok({
            let mut c = git_cmd(&home);
            c.args(["add", "-A", "-f"]).current_dir(&repo);
            c
        });
        run_ok({
            let mut c = git_cmd(&home);
            c.args(["commit", "-q", "--allow-empty", "-m", "base"])
                .current_dir(&repo);
            c
        });
        let base = String::from_utf8(run_ok({
            let mut c = git_cmd(&home);
            c.args(["rev-parse", "HEAD"]).current_dir(&repo);
            c
        }))
        .unwrap()
        .trim()
        .to_owned();
        Self {
            tmp,
            repo,
            home,
            base,
        }
    }

    pub fn git(&self, dir: &Path, args: &[&str]) -> Vec<u8> {
        let mut c = self.git_cmd();
        c.args(args).current_dir(dir);
        run_ok(c)
    }

    pub fn git_cmd(&self) -> Command {
        git_cmd(&self.home)
    }

    /// A fresh checkout of the base commit (no `.git`) at `dest`, via `git archive`.
    pub fn export_base(&self, dest: &Path) {
        fs::create_dir_all(dest).unwrap();
        let archive = self.git(&self.repo, &["archive", "--format=tar", &self.base]);
        let mut tar = Command::new("tar")
            .args(["-x", "-p", "-f", "-", "-C"])
            .arg(dest)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        tar.stdin.take().unwrap().write_all(&archive).unwrap();
        assert!(tar.wait().unwrap().success());
    }

    /// A fresh clone checked out at the base commit.
    pub fn clone_base(&self, dest: &Path) {
        let mut c = self.git_cmd();
        c.args(["clone", "-q", "--no-checkout"])
            .arg(&self.repo)
            .arg(dest);
        run_ok(c);
        self.git(dest, &["checkout", "-q", &self.base]);
    }

    /// The tree id of a directory's content as git sees it: the base tree read into a
    /// throwaway index, then `add -A` (so tracked files stay tracked and the directory's own
    /// `.gitignore` files decide about untracked ones, exactly as in a checkout).
    pub fn tree_of(&self, worktree: &Path) -> String {
        let scratch = tempfile::Builder::new()
            .prefix("corral-cap-oracle-")
            .tempdir()
            .unwrap();
        // Objects go into the (test-owned) canonical repository, so later diffs can see them.
        let gd = self.repo.join(".git");
        let index = scratch.path().join("index");
        let with_env = |args: &[&str]| {
            let mut c = self.git_cmd();
            c.env("GIT_DIR", &gd)
                .env("GIT_WORK_TREE", worktree)
                .env("GIT_INDEX_FILE", &index)
                .args(args)
                .current_dir(worktree);
            run_ok(c)
        };
        with_env(&["read-tree", &self.base]);
        with_env(&["add", "-A", "."]);
        String::from_utf8(with_env(&["write-tree"]))
            .unwrap()
            .trim()
            .to_owned()
    }

    /// `git diff-tree -r --name-status` between two trees, as (status letter, path).
    pub fn name_status(&self, a: &str, b: &str) -> Vec<(char, String)> {
        let out = self.git(
            &self.repo,
            &[
                "diff-tree",
                "-r",
                "-z",
                "--no-renames",
                "--name-status",
                a,
                b,
            ],
        );
        let parts: Vec<&[u8]> = out.split(|&b| b == 0).filter(|s| !s.is_empty()).collect();
        parts
            .chunks(2)
            .map(|c| (c[0][0] as char, String::from_utf8(c[1].to_vec()).unwrap()))
            .collect()
    }

    pub fn base_tree(&self) -> String {
        let spec = format!("{}^{{tree}}", self.base);
        String::from_utf8(self.git(&self.repo, &["rev-parse", &spec]))
            .unwrap()
            .trim()
            .to_owned()
    }
}

/// An overlayfs mount over a base checkout, as the sandbox makes it.
pub struct Overlay {
    pub tmp: tempfile::TempDir,
    pub lower: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
    pub merged: PathBuf,
    mounted: bool,
}

impl Overlay {
    pub fn new(canonical: &Canonical) -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("corral-cap-ovl-")
            .tempdir()
            .unwrap();
        let lower = tmp.path().join("lower");
        let upper = tmp.path().join("upper");
        let work = tmp.path().join("work");
        let merged = tmp.path().join("merged");
        canonical.export_base(&lower);
        for d in [&upper, &work, &merged] {
            fs::create_dir_all(d).unwrap();
        }
        let mut o = Self {
            tmp,
            lower,
            upper,
            work,
            merged,
            mounted: false,
        };
        o.mount();
        o
    }

    /// Mounts (again) over the same lower, upper and work directories.
    pub fn mount(&mut self) {
        assert!(!self.mounted);
        let opts = format!(
            "lowerdir={},upperdir={},workdir={},redirect_dir=off,metacopy=off,index=off,xino=off",
            self.lower.display(),
            self.upper.display(),
            self.work.display()
        );
        let st = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &opts])
            .arg(&self.merged)
            .status()
            .unwrap();
        assert!(
            st.success(),
            "mounting overlayfs failed (tests need root and overlayfs)"
        );
        self.mounted = true;
    }

    pub fn unmount(&mut self) {
        if self.mounted {
            // Another test thread's fork may briefly hold an fd below the mount (between fork
            // and exec); retry before falling back to a lazy unmount.
            for _ in 0..50 {
                let st = Command::new("umount")
                    .arg(&self.merged)
                    .stderr(Stdio::null())
                    .status()
                    .unwrap();
                if st.success() {
                    self.mounted = false;
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let _ = Command::new("umount").arg("-l").arg(&self.merged).status();
            self.mounted = false;
        }
    }

    pub fn m(&self, rel: &str) -> PathBuf {
        self.merged.join(rel)
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        self.unmount();
    }
}

pub fn pats(v: &[&str]) -> Vec<PathPattern> {
    v.iter().map(|s| PathPattern::new(s).unwrap()).collect()
}

/// Runs capture over an (unmounted) overlay's upper layer.
pub fn capture_upper(
    canonical: &Canonical,
    upper: &Path,
    allowed: &[&str],
    forbidden: &[&str],
    max_patch: u64,
) -> CaptureResult {
    let layer = UpperLayer::open(upper).unwrap();
    let allowed = pats(allowed);
    let forbidden = pats(forbidden);
    let req = CaptureRequest::new(
        &canonical.repo,
        &canonical.base,
        &layer,
        &allowed,
        &forbidden,
        max_patch,
    );
    capture(&req).unwrap()
}

/// Applies a patch with `git apply --binary` on a fresh clone of the base; returns the
/// clone's path (inside `dir`).
pub fn apply_on_fresh(canonical: &Canonical, patch: &[u8], dir: &Path) -> PathBuf {
    let dest = dir.join("applied");
    canonical.clone_base(&dest);
    let pfile = dir.join("candidate.patch");
    fs::write(&pfile, patch).unwrap();
    if !patch.is_empty() {
        let mut c = canonical.git_cmd();
        c.args(["apply", "--binary", "--whitespace=nowarn"])
            .arg(&pfile)
            .current_dir(&dest);
        run_ok(c);
    }
    fs::remove_dir_all(dest.join(".git")).unwrap();
    dest
}
