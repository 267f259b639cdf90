//! What the whole-attempt benchmarks share (`attempt.rs` here, corral-cli's `parallel.rs`):
//! a shell step and a repository of `files` small files under `src/`.
#![allow(dead_code, reason = "each benchmark uses part of it")]

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn sh(cmd: &str) {
    let st = Command::new("/bin/sh").args(["-c", cmd]).status().unwrap();
    assert!(st.success(), "{cmd}");
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A repository at `repo` with `files` files in folders of 100, committed; returns it and
/// its commit.
pub fn make_repo(repo: &Path, files: usize) -> (PathBuf, String) {
    for i in 0..files {
        let d = repo.join(format!("src/d{}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&d).unwrap();
        }
        std::fs::write(d.join(format!("f{i}.txt")), format!("file {i}\nline two\n")).unwrap();
    }
    git(repo, &["init", "-q", "-b", "main"]);
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "-q", "-m", "base"]);
    let sha = git(repo, &["rev-parse", "HEAD"]);
    (repo.to_path_buf(), sha)
}
