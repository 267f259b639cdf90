//! Hostile repositories built with git's own plumbing: `hash-object --literally` writes any
//! bytes as a tree, `commit-tree` commits it, exactly as a fetched hostile commit arrives.
#![allow(dead_code, reason = "each test binary uses a part")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers"
)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let r = Self { dir };
        r.git(&["init", "-q", "-b", "main"]);
        r
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn git(&self, args: &[&str]) -> String {
        self.git_in(args, None)
    }

    fn git_in(&self, args: &[&str], stdin: Option<&[u8]>) -> String {
        let mut c = Command::new("git");
        c.current_dir(self.path())
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.unwrap_or_default())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    pub fn blob(&self, data: &[u8]) -> String {
        self.git_in(&["hash-object", "-w", "--stdin"], Some(data))
    }

    /// A tree object of exactly these entries, in this order (`mode`, raw name, hex id).
    pub fn raw_tree(&self, entries: &[(&str, &[u8], &str)]) -> String {
        let mut bytes = Vec::new();
        for (mode, name, hex) in entries {
            bytes.extend_from_slice(mode.as_bytes());
            bytes.push(b' ');
            bytes.extend_from_slice(name);
            bytes.push(0);
            bytes.extend_from_slice(&hex_decode(hex));
        }
        self.git_in(
            &["hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
            Some(&bytes),
        )
    }

    pub fn commit(&self, tree: &str) -> String {
        self.git_in(&["commit-tree", tree, "-m", "hostile"], Some(b""))
    }

    /// A normal commit of files written into the worktree.
    pub fn commit_files(&self, files: &[(&str, &[u8])]) -> String {
        for (p, data) in files {
            let path = self.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, data).unwrap();
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", "c", "--allow-empty"]);
        self.git(&["rev-parse", "HEAD"])
    }
}

fn hex_decode(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// A host file the attacks aim at, with its bytes and mode to compare afterwards.
pub struct Victim {
    pub dir: tempfile::TempDir,
    pub file: PathBuf,
}

impl Victim {
    pub fn plant() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("victim");
        std::fs::write(&file, b"host bytes\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        Self { dir, file }
    }

    /// Bytes, mode and the directory's entries, unchanged.
    pub fn assert_untouched(&self) {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::read(&self.file).unwrap(), b"host bytes\n");
        let mode = std::fs::metadata(&self.file).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600, "the host file's mode changed");
        let names: Vec<_> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("victim")],
            "new host files"
        );
    }
}

/// A cache in a fresh temporary folder (kept alive by the returned guard).
pub fn cache(
    limits: corral_checkout::CacheLimits,
) -> (tempfile::TempDir, corral_checkout::BaseCache) {
    let t = tempfile::tempdir().unwrap();
    let c = corral_checkout::BaseCache::open(&t.path().join("cache"), limits).unwrap();
    (t, c)
}
