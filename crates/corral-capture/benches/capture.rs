//! Benchmark (a) of issue 5: capture on a generated repository against the peer pipeline
//! `git status --porcelain -uall` + `git diff --binary`, side by side, on tmpfs.
//!
//! `cargo bench -p corral-capture` prints the sizes used, both timings, their ratio (goal
//! <= 1.0) and the peak memory of the capture (goal < 100 MiB): the capturing process's own
//! peak RSS and the largest git child's, measured in a separate process with getrusage.
//!
//! Sizes: CORRAL_BENCH_FILES (default 100000), CORRAL_BENCH_CHANGED (1000),
//! CORRAL_BENCH_UNTRACKED (200), CORRAL_BENCH_RUNS (3). Needs root (tmpfs and overlayfs
//! mounts); without root it falls back to /dev/shm and a constructed upper layer is not
//! attempted (the bench then stops with a message).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark code"
)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corral_capture::{CaptureRequest, UpperLayer, capture};
use corral_contract::path::PathPattern;

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@example.invalid")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@example.invalid")
        .env("LC_ALL", "C")
        .current_dir(dir)
        .stdin(Stdio::null());
    c
}

fn ok(mut c: Command) -> Vec<u8> {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        for _ in 0..50 {
            if Command::new("umount")
                .arg(&self.0)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn mount(args: &[&str], target: &Path) -> Option<Mount> {
    let st = Command::new("mount")
        .args(args)
        .arg(target)
        .stderr(Stdio::null())
        .status()
        .ok()?;
    st.success().then(|| Mount(target.to_path_buf()))
}

fn file_path(i: usize) -> String {
    format!("d{:03}/s{:02}/f{i:06}.txt", i / 1000, (i / 100) % 10)
}

fn file_body(i: usize) -> String {
    let mut s = String::with_capacity(400);
    for l in 0..8 {
        s.push_str(&format!("file {i} line {l} lorem ipsum dolor sit amet\n"));
    }
    s
}

fn child_mode(args: &[String]) {
    // args: repo base upper runs
    let (repo, base, upper) = (Path::new(&args[0]), &args[1], Path::new(&args[2]));
    let runs: usize = args[3].parse().unwrap();
    let allowed = vec![PathPattern::new("*").unwrap()];
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let layer = UpperLayer::open(upper).unwrap();
        let mut req = CaptureRequest::new(repo, base, &layer, &allowed, &[], 1 << 30);
        let tmp = std::env::var_os("CORRAL_BENCH_TMP").map(PathBuf::from);
        req.tmp_dir = tmp.as_deref();
        let t0 = Instant::now();
        let r = capture(&req).unwrap();
        times.push(t0.elapsed());
        last = Some(r);
        if std::env::var_os("CORRAL_BENCH_DEBUG").is_some() {
            let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
            let hwm = status
                .lines()
                .filter(|l| {
                    l.starts_with("VmHWM")
                        || l.starts_with("VmRSS")
                        || l.starts_with("RssFile")
                        || l.starts_with("RssShmem")
                        || l.starts_with("RssAnon")
                })
                .collect::<Vec<_>>()
                .join(" ");
            eprintln!("after capture: {hwm}");
        }
    }
    let r = last.unwrap();
    assert!(r.rejections.is_empty(), "{:?}", r.rejections);
    // VmHWM, not getrusage(RUSAGE_SELF): Linux carries ru_maxrss across execve, so the
    // latter would report the (large) bench parent this process was forked from.
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let hwm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let kids_kib = corral_process::children_peak_rss_kib().unwrap();
    times.sort();
    println!(
        "{} {} {} {} {}",
        times[times.len() / 2].as_micros(),
        r.changed_paths.len(),
        r.patch.as_ref().map_or(0, Vec::len),
        hwm_kib,
        kids_kib
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if std::env::var_os("CORRAL_BENCH_CHILD").is_some() {
        child_mode(&args);
        return;
    }
    let files = env_num("CORRAL_BENCH_FILES", 100_000);
    let changed = env_num("CORRAL_BENCH_CHANGED", 1_000).min(files);
    let untracked = env_num("CORRAL_BENCH_UNTRACKED", 200);
    let runs = env_num("CORRAL_BENCH_RUNS", 3).max(1);

    let root = tempfile::Builder::new()
        .prefix("corral-bench-")
        .tempdir_in("/tmp")
        .unwrap();
    let tmpfs = mount(
        &["-t", "tmpfs", "-o", "size=8g,mode=0700", "tmpfs"],
        root.path(),
    );
    if tmpfs.is_none() {
        eprintln!("capture bench: needs root for tmpfs and overlayfs mounts; skipped");
        return;
    }
    let r = root.path();
    println!(
        "capture bench: {files} files, {changed} modified, {untracked} untracked, on tmpfs at {}",
        r.display()
    );

    // Canonical repository.
    let t0 = Instant::now();
    let repo = r.join("repo");
    fs::create_dir_all(&repo).unwrap();
    ok({
        let mut c = git(&repo);
        c.args(["init", "-q", "-b", "main"]);
        c
    });
    for i in 0..files {
        let p = repo.join(file_path(i));
        if i % 100 == 0 {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
        }
        fs::write(p, file_body(i)).unwrap();
    }
    ok({
        let mut c = git(&repo);
        c.args(["add", "-A"]);
        c
    });
    ok({
        let mut c = git(&repo);
        c.args(["commit", "-q", "-m", "base"]);
        c
    });
    let base = String::from_utf8(ok({
        let mut c = git(&repo);
        c.args(["rev-parse", "HEAD"]);
        c
    }))
    .unwrap()
    .trim()
    .to_owned();
    // Base checkout (the cached, read-only lower layer).
    let lower = r.join("lower");
    fs::create_dir_all(&lower).unwrap();
    let archive = ok({
        let mut c = git(&repo);
        c.args(["archive", "--format=tar", &base]);
        c
    });
    let mut tar = Command::new("tar")
        .args(["-x", "-f", "-", "-C"])
        .arg(&lower)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    tar.stdin.take().unwrap().write_all(&archive).unwrap();
    assert!(tar.wait().unwrap().success());
    println!(
        "setup: repository and base checkout in {:.1?}",
        t0.elapsed()
    );

    // The attempt: overlay, the same edits in the overlay and in the peer's worktree.
    let (upper, work, merged) = (r.join("upper"), r.join("work"), r.join("merged"));
    for d in [&upper, &work, &merged] {
        fs::create_dir_all(d).unwrap();
    }
    let opts = format!(
        "lowerdir={},upperdir={},workdir={},redirect_dir=off,metacopy=off,index=off,xino=off",
        lower.display(),
        upper.display(),
        work.display()
    );
    {
        let Some(_ovl) = mount(&["-t", "overlay", "overlay", "-o", &opts], &merged) else {
            eprintln!("capture bench: overlayfs mount failed; skipped");
            return;
        };
        for tree in [&merged, &repo] {
            let step = (files / changed.max(1)).max(1);
            for k in 0..changed {
                let i = k * step;
                let mut f = fs::OpenOptions::new()
                    .append(true)
                    .open(tree.join(file_path(i)))
                    .unwrap();
                writeln!(f, "changed {k}").unwrap();
            }
            for k in 0..untracked {
                let p = tree.join(format!("d{:03}/new{k:04}.txt", k % (files / 1000).max(1)));
                fs::create_dir_all(p.parent().unwrap()).unwrap();
                fs::write(p, format!("untracked {k}\n")).unwrap();
            }
        }
    }

    // Peer pipeline: git status --porcelain -uall + git diff --binary, in the worktree.
    let peer = || {
        let t = Instant::now();
        let st = ok({
            let mut c = git(&repo);
            c.args(["status", "--porcelain", "-uall"]);
            c
        });
        let diff = ok({
            let mut c = git(&repo);
            c.args(["diff", "--binary"]);
            c
        });
        (
            t.elapsed(),
            st.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count(),
            diff.len(),
        )
    };
    let _ = peer();
    let mut peer_times: Vec<Duration> = Vec::new();
    let mut peer_lines = 0;
    let mut peer_bytes = 0;
    for _ in 0..runs {
        let (t, l, b) = peer();
        peer_times.push(t);
        peer_lines = l;
        peer_bytes = b;
    }
    peer_times.sort();
    let peer_med = peer_times[peer_times.len() / 2];

    // Capture, in a child process so its peak memory is its own.
    let exe = std::env::current_exe().unwrap();
    // CORRAL_BENCH_WRAP="strace -f -c -o FILE" (or any command prefix) profiles the capture.
    let wrap: Vec<String> = std::env::var("CORRAL_BENCH_WRAP")
        .map(|w| w.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let mut cmd = match wrap.split_first() {
        Some((prog, rest)) => {
            let mut c = Command::new(prog);
            c.args(rest).arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    // Capture's scratch git directory goes on the same tmpfs as everything else, unless
    // CORRAL_BENCH_TMP names another place.
    let scratch = r.join("scratch");
    fs::create_dir_all(&scratch).unwrap();
    if std::env::var_os("CORRAL_BENCH_TMP").is_none() {
        cmd.env("CORRAL_BENCH_TMP", &scratch);
    }
    let out = cmd
        .env("CORRAL_BENCH_CHILD", "1")
        .arg(&repo)
        .arg(&base)
        .arg(&upper)
        .arg((runs + 1).to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "capture child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if std::env::var_os("CORRAL_BENCH_DEBUG").is_some() {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let (cap_us, cap_paths, cap_bytes, self_kib, child_kib) = (v[0], v[1], v[2], v[3], v[4]);
    let cap = Duration::from_micros(cap_us);
    println!(
        "peer   git status --porcelain -uall + git diff --binary: {:>8.1} ms  ({peer_lines} status lines, {peer_bytes} diff bytes)",
        peer_med.as_secs_f64() * 1e3
    );
    println!(
        "corral capture (upper layer vs base tree, patch):        {:>8.1} ms  ({cap_paths} changed paths, {cap_bytes} patch bytes)",
        cap.as_secs_f64() * 1e3
    );
    println!(
        "ratio capture / peer: {:.3} (goal <= 1.0)",
        cap.as_secs_f64() / peer_med.as_secs_f64()
    );
    println!(
        "peak memory: capture process {:.1} MiB, largest git child {:.1} MiB (goal < 100 MiB)",
        self_kib as f64 / 1024.0,
        child_kib as f64 / 1024.0
    );
    drop(tmpfs);
}
