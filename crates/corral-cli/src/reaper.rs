//! corral's reaper (ADR-0092): nothing left behind, however corral dies.
//!
//! A corral killed with SIGKILL (by a user, the OOM killer, a supervisor of its own) cannot
//! clean up after itself. Its sandbox dies with it (init has `PR_SET_PDEATHSIG`, the whole PID
//! namespace goes with init), and so do its helpers (`run_bounded_process`), its mounts
//! (private mount namespaces, detached mounts), the attempt's tmpfs and network namespace
//! (held only by those processes) and its sockets. What stays is what has a name on the host:
//! its cgroups, a base checkout being materialized, a capture helper's scratch folder, an
//! artifact or cache entry being written, the probe's folders.
//!
//! So every command that makes such things first starts this reaper: corral itself, re-run
//! with [`REAPER_ARG`], which leaves corral's session (a terminal's Ctrl-C and hang-up are
//! corral's to handle, not the reaper's), opens a pidfd on corral, reports ready (corral makes
//! nothing before), waits for corral to exit, then
//! removes exactly what corral's pid names, in the places corral told it, and exits. After a
//! clean exit it finds nothing. Everything it removes is named by that pid, in a form only that
//! process creates, and only once that process is gone, so it never touches another run's
//! things (a pid is not reused while the reaper's pidfd or parenthood pins it; when corral
//! was gone before the reaper could pin it, the reaper does nothing, and the next corral
//! collects what is left, as before).
//!
//! The OOM killer never picks the reaper where it may lower its score (`oom_score_adj` -1000
//! needs CAP_SYS_RESOURCE; a root without it, as in some VMs and containers, keeps corral's).
//! SIGTERM, SIGINT and SIGHUP do not end it: they are how a service manager stops a unit (and
//! how systemd stops the rest of a unit whose main process, corral, was killed), and the
//! reaper's work starts exactly then. It ends on its own once it has swept, a bounded time
//! after corral. What it cannot cover: a SIGKILL of the whole unit (`systemctl kill
//! --signal=SIGKILL`) kills the reaper too. Then cgroups in a systemd unit go with the unit,
//! and the rest is collected by the next corral.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether a name in a folder is a temporary of the corral process with this pid.
type Pick = fn(&str, u32) -> bool;

/// The first argument that makes corral its own reaper.
pub const REAPER_ARG: &str = "__corral-reaper";

/// Where corral's things live: the reaper looks only here.
#[derive(Debug, Clone, Default)]
pub struct Places {
    /// The base cache root (`tmp/`, `base/`, `executables/`); also where probes make their
    /// folders.
    pub cache: Option<PathBuf>,
    /// Where the base checkouts (`tmp/`, `base/`) live when not in `cache` itself: rootless
    /// mode with subordinate ids keeps the worker's apart (`corral_runner::cache_root_for`,
    /// ADR-0080). A killed corral's staging there was left behind before (TRUST-07 in
    /// rootless mode, 2026-12-07).
    pub checkouts: Option<PathBuf>,
    /// The artifact store root (`sha256/`).
    pub artifacts: Option<PathBuf>,
}

/// Starts the reaper of this process. It lives until this process exits, then removes what
/// this process left.
pub fn start(places: &Places) -> io::Result<()> {
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("corral")
        .arg(REAPER_ARG)
        .arg(std::process::id().to_string());
    if let Some(c) = &places.cache {
        cmd.arg("--cache").arg(c);
    }
    if let Some(c) = &places.checkouts {
        cmd.arg("--checkouts").arg(c);
    }
    if let Some(a) = &places.artifacts {
        cmd.arg("--artifacts").arg(a);
    }
    cmd.arg("--tmp")
        .arg(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // Not waited for: it outlives this process by design (init, or a subreaper, reaps it).
    let mut child = cmd.spawn()?;
    // Nothing is made before the reaper has pinned this process and left its session (a
    // terminal's Ctrl-C, and its session's end, are corral's to handle, not the reaper's).
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        io::BufRead::read_line(&mut io::BufReader::new(out), &mut line)?;
    }
    if line.trim_end() == READY {
        Ok(())
    } else {
        let _ = child.kill();
        let _ = child.wait();
        Err(io::Error::other("it did not report ready"))
    }
}

/// What the reaper prints once it watches corral.
const READY: &str = "ready";

/// The reaper's main: `corral __corral-reaper <pid> [--cache DIR] [--checkouts DIR]
/// [--artifacts DIR] [--tmp DIR]`.
pub fn main(args: &[OsString]) -> i32 {
    let Some(pid) = args
        .first()
        .and_then(|a| a.to_str())
        .and_then(|a| a.parse::<u32>().ok())
    else {
        eprintln!("corral reaper: expected the pid to watch");
        return 2;
    };
    let mut places = Places::default();
    let mut tmp = None;
    let mut rest = args[1..].iter();
    while let (Some(flag), Some(value)) = (rest.next(), rest.next()) {
        let value = PathBuf::from(value);
        match flag.to_str() {
            Some("--cache") => places.cache = Some(value),
            Some("--checkouts") => places.checkouts = Some(value),
            Some("--artifacts") => places.artifacts = Some(value),
            Some("--tmp") => tmp = Some(value),
            _ => {
                eprintln!("corral reaper: unknown argument {}", flag.to_string_lossy());
                return 2;
            }
        }
    }
    let _ = rustix::thread::set_name(c"corral-reaper");
    // The OOM killer's SIGKILL is one more way corral dies; the reaper, which cleans up after
    // it, must not be its choice. Lowering needs CAP_SYS_RESOURCE (root usually has it);
    // without it the reaper keeps its score (a few MiB, seldom chosen).
    let _ = fs::write("/proc/self/oom_score_adj", "-1000");
    // A unit stopped (or left by its killed main process) gets SIGTERM in every process:
    // corral cancels and tears down; the reaper must outlive it to sweep.
    for signal in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ] {
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        if let Err(e) = signal_hook::flag::register(signal, seen) {
            eprintln!("corral reaper: cannot outlast signal {signal}: {e}");
            return 2;
        }
    }
    if let Err(e) = rustix::process::setsid() {
        eprintln!("corral reaper: cannot leave corral's session: {e}");
        return 2;
    }
    let Some(pidfd) = pin(pid) else {
        // corral is gone already (its pid may name another process by now): nothing of it
        // is touched; the next corral collects what it left.
        return 0;
    };
    {
        use std::io::Write as _;
        let mut out = io::stdout().lock();
        if writeln!(out, "{READY}").and_then(|()| out.flush()).is_err() {
            return 2;
        }
    }
    if !wait_for_exit(&pidfd) {
        return 0;
    }
    let mut failed = 0;
    if let Ok(h) = corral_linux::cgroup::Hierarchy::detect_host_for(pid) {
        // Each group's tasks killed, then the group removed (what cannot be is left for
        // the next corral, which tries again).
        h.collect_dead(pid);
    }
    for (what, result) in sweep(pid, &places, tmp.as_deref()) {
        if let Err(e) = result {
            eprintln!("corral reaper: could not remove {what} left by corral {pid}: {e}");
            failed += 1;
        }
    }
    i32::from(failed > 0)
}

/// A pidfd on corral `pid`, this process's parent; `None` when it is gone already (its pid
/// may name another process by now).
fn pin(pid: u32) -> Option<std::os::fd::OwnedFd> {
    use rustix::process::{Pid, PidfdFlags, getppid, pidfd_open};
    let p = i32::try_from(pid).ok().and_then(Pid::from_raw)?;
    let fd = pidfd_open(p, PidfdFlags::empty()).ok()?;
    // While it is this process's parent, `pid` cannot have been reused: the pidfd is corral's.
    (getppid() == Some(p)).then_some(fd)
}

/// Waits until the pinned process has exited. `false` when the pidfd cannot be read (then
/// nothing is removed: never while it may still run).
fn wait_for_exit(fd: &std::os::fd::OwnedFd) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    loop {
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        match poll(&mut fds, None) {
            Ok(n) if n > 0 => return true,
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

/// Removes the files and folders the exited corral process `pid` left, one result per thing
/// found (its cgroups are `Hierarchy::collect_dead`'s).
pub fn sweep(pid: u32, places: &Places, tmp: Option<&Path>) -> Vec<(String, io::Result<()>)> {
    let mut done = Vec::new();
    let mut places_of: Vec<(PathBuf, Pick)> = Vec::new();
    if let Some(c) = places.checkouts.as_ref().or(places.cache.as_ref()) {
        places_of.push((c.join("tmp"), corral_checkout::cache::is_temporary_of));
        places_of.push((c.join("base"), corral_checkout::cache::is_temporary_of));
    }
    if let Some(c) = &places.cache {
        places_of.push((
            c.join("executables"),
            corral_runner::executable::is_temporary_of,
        ));
        places_of.push((c.clone(), corral_linux::probe::is_temporary_of));
    }
    if let Some(a) = &places.artifacts {
        places_of.push((a.join("sha256"), corral_manifest::store::is_temporary_of));
    }
    if let Some(t) = tmp {
        places_of.push((t.to_path_buf(), corral_checkout::capture::is_scratch_of));
        places_of.push((t.to_path_buf(), corral_linux::probe::is_temporary_of));
        places_of.push((t.to_path_buf(), crate::demo::is_folder_of));
    }
    for (dir, pick) in places_of {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            if name.to_str().is_some_and(|n| pick(n, pid)) {
                let path = e.path();
                done.push((path.display().to_string(), remove(&path)));
            }
        }
    }
    done
}

/// How long the reaper keeps trying to remove a folder that a dying helper of corral (killed
/// with it, `PR_SET_PDEATHSIG`) may still be writing into: a bound on a hang, not a pace.
const DYING_WRITER_WAIT: Duration = Duration::from_secs(10);

/// Removes `path` (a folder with everything in it, never following a link, or a file).
fn remove(path: &Path) -> io::Result<()> {
    let deadline = Instant::now() + DYING_WRITER_WAIT;
    loop {
        let r = match fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => Err(e),
            Ok(m) if m.is_dir() => corral_checkout::cache::remove_staging(path),
            Ok(_) => fs::remove_file(path),
        };
        match r {
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty && Instant::now() < deadline => {
                // A file created after the folder was listed: its writer is dying.
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;

    /// Each form the reaper removes names exactly one pid; another pid's things, published
    /// entries and look-alikes are never picked.
    #[test]
    fn only_the_dead_pids_own_names_are_picked() {
        let sha = "26a53aa9f13e312f8d5496971f187b89469638f6";
        let cases: [(Pick, Vec<String>, Vec<String>); 6] = [
            (
                corral_checkout::cache::is_temporary_of,
                vec![format!("{sha}-42-0"), format!(".{sha}.meta.tmp-42")],
                vec![
                    sha.to_owned(),
                    format!("{sha}.lock"),
                    format!("{sha}.fill"),
                    format!("{sha}.meta"),
                    format!("{sha}-420-0"),
                    format!("{sha}-4-2"),
                    format!("{sha}-42-"),
                    format!(".{sha}.meta.tmp-142"),
                    ".tmp-42".to_owned(),
                    format!("xyz-42-0"),
                ],
            ),
            (
                corral_checkout::capture::is_scratch_of,
                vec!["corral-capture-42-7".to_owned()],
                vec!["corral-capture-421-7".into(), "corral-capture-42-".into()],
            ),
            (
                corral_manifest::store::is_temporary_of,
                vec![".tmp-abc123-42-3".to_owned()],
                vec![
                    ".tmp-abc123-43-3".into(),
                    "abc123".into(),
                    ".tmp-42-3".into(),
                    ".tmp-abc123-42-3-1".into(),
                ],
            ),
            (
                corral_runner::executable::is_temporary_of,
                vec![".65024-247076.42".to_owned()],
                vec![
                    "65024-247076".into(),
                    ".65024-247076.142".into(),
                    "..42".into(),
                ],
            ),
            (
                corral_linux::probe::is_temporary_of,
                vec![
                    "corral-probe-lower-42-1".to_owned(),
                    "corral-probe-ws-42-2".to_owned(),
                ],
                vec!["corral-probe-ws-421-2".into(), "corral-probe-42-1".into()],
            ),
            (
                crate::demo::is_folder_of,
                vec!["corral-demo-42".to_owned()],
                vec!["corral-demo-421".into(), "corral-demo-42-1".into()],
            ),
        ];
        for (pick, yes, no) in cases {
            for n in yes {
                assert!(pick(&n, 42), "{n} not picked");
            }
            for n in no {
                assert!(!pick(&n, 42), "{n} picked");
            }
        }
    }

    /// The sweep removes what the pid left in each place, and nothing else there.
    #[test]
    fn sweep_removes_the_dead_pids_things_only() {
        let d = tempfile::tempdir().unwrap();
        let (cache, art, tmp) = (d.path().join("c"), d.path().join("a"), d.path().join("t"));
        let sha = "26a53aa9f13e312f8d5496971f187b89469638f6";
        let dead = [
            cache.join(format!("tmp/{sha}-42-0/work/checkout/src")),
            tmp.join("corral-capture-42-0/work"),
            cache.join("corral-probe-ws-42-1"),
        ];
        let kept = [
            cache.join(format!("tmp/{sha}-43-0/work")),
            cache.join(format!("base/{sha}/.git")),
            tmp.join("corral-capture-43-0"),
        ];
        for p in dead.iter().chain(&kept) {
            fs::create_dir_all(p).unwrap();
        }
        fs::create_dir_all(art.join("sha256")).unwrap();
        fs::create_dir_all(cache.join("executables")).unwrap();
        for f in [
            art.join("sha256/.tmp-abc-42-0"),
            cache.join("executables/.1-2.42"),
            cache.join(format!("base/.{sha}.meta.tmp-42")),
            art.join("sha256/abc"),
            cache.join(format!("base/{sha}.lock")),
        ] {
            fs::write(f, b"x").unwrap();
        }
        let places = Places {
            cache: Some(cache.clone()),
            checkouts: None,
            artifacts: Some(art.clone()),
        };
        let done = sweep(42, &places, Some(&tmp));
        assert!(done.iter().all(|(_, r)| r.is_ok()), "{done:?}");
        assert_eq!(done.len(), 6, "{done:?}");
        assert!(!cache.join(format!("tmp/{sha}-42-0")).exists());
        assert!(!tmp.join("corral-capture-42-0").exists());
        assert!(!cache.join("corral-probe-ws-42-1").exists());
        assert!(!art.join("sha256/.tmp-abc-42-0").exists());
        for p in &kept {
            assert!(p.exists(), "{} removed", p.display());
        }
        assert!(art.join("sha256/abc").exists());
        assert!(cache.join(format!("base/{sha}.lock")).exists());
    }

    /// Rootless mode with subordinate ids: the checkouts' staging lives in their own root
    /// (`owned-<uid>-<gid>`), the probe's folders and executables in the cache itself; the
    /// sweep finds both. Control: without `checkouts` the staging stays (the defect TRUST-07
    /// found in rootless mode).
    #[test]
    fn sweep_finds_staging_in_the_checkouts_root_of_rootless_mode() {
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("c");
        let owned = cache.join("owned-1000-1000");
        let sha = "26a53aa9f13e312f8d5496971f187b89469638f6";
        let staging = owned.join(format!("tmp/{sha}-42-0/work"));
        let probe = cache.join("corral-probe-ws-42-1");
        let make = || {
            for p in [&staging, &probe] {
                fs::create_dir_all(p).unwrap();
            }
        };
        make();
        let without = Places {
            cache: Some(cache.clone()),
            checkouts: None,
            artifacts: None,
        };
        let done = sweep(42, &without, None);
        assert!(staging.exists(), "{done:?}");
        assert!(!probe.exists(), "{done:?}");
        make();
        let with = Places {
            cache: Some(cache.clone()),
            checkouts: Some(owned.clone()),
            artifacts: None,
        };
        let done = sweep(42, &with, None);
        assert!(!owned.join(format!("tmp/{sha}-42-0")).exists(), "{done:?}");
        assert!(!probe.exists(), "{done:?}");
    }
}
