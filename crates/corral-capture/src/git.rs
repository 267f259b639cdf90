//! Running the `git` program in a hardened way.
//!
//! Architecture Invariant: git only ever runs against a git directory that corral created in
//! its own temporary directory, with an empty environment, no system or global configuration
//! and a fixed set of `-c` overrides. The canonical repository contributes its object database
//! (through a read-only `objects/info/alternates` entry) and nothing else: its config, hooks,
//! attributes and refs are never consulted. The workspace's `.git` is never named at all.

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::CaptureError;
use crate::objects::{ObjectFormat, Oid};

/// Where corral looks for git when the caller names none.
pub const DEFAULT_GIT_CANDIDATES: &[&str] = &["/usr/bin/git", "/usr/local/bin/git", "/bin/git"];

/// The fixed `-c` overrides passed before every git subcommand.
const HARDENING: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "core.excludesFile=/dev/null",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.pager=cat",
    "-c",
    "core.quotePath=true",
    "-c",
    "protocol.allow=never",
    "-c",
    "submodule.recurse=false",
    "-c",
    "diff.external=",
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicPrefix=false",
    "-c",
    "diff.relative=false",
    "-c",
    "core.packedGitWindowSize=64m",
    "-c",
    "core.packedGitLimit=1g",
    "-c",
    "core.deltaBaseCacheLimit=64m",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    "-c",
    "core.sshCommand=false",
    "-c",
    "gpg.program=false",
    "-c",
    "uploadpack.packObjectsHook=false",
    "--no-pager",
    "--no-optional-locks",
    "--literal-pathspecs",
];

/// Locates the git program: the caller's choice, or the first of the default candidates.
pub fn find_git(explicit: Option<&Path>) -> Result<PathBuf, CaptureError> {
    if let Some(p) = explicit {
        if !p.is_absolute() {
            return Err(CaptureError::Setup(format!(
                "git program {} is not an absolute path",
                p.display()
            )));
        }
        return Ok(p.to_path_buf());
    }
    DEFAULT_GIT_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            CaptureError::Setup("no git program found in /usr/bin, /usr/local/bin or /bin".into())
        })
}

/// Finds the object directory of a canonical repository (worktree with `.git` directory,
/// bare repository, or linked worktree/gitfile), without reading its config.
pub fn canonical_objects_dir(repo: &Path) -> Result<PathBuf, CaptureError> {
    let dotgit = repo.join(".git");
    // The canonical repository is trusted: its `.git` may be a symlink.
    let gitdir = match fs::metadata(&dotgit) {
        Ok(m) if m.is_dir() => dotgit,
        Ok(m) if m.is_file() => {
            let text = fs::read_to_string(&dotgit)
                .map_err(|e| CaptureError::io("reading the canonical repository's gitfile", e))?;
            let target = text
                .strip_prefix("gitdir: ")
                .map(str::trim_end)
                .ok_or_else(|| {
                    CaptureError::Setup(format!("{} is not a gitfile", dotgit.display()))
                })?;
            let target = Path::new(target);
            if target.is_absolute() {
                target.to_path_buf()
            } else {
                repo.join(target)
            }
        }
        _ if repo.join("objects").is_dir() && repo.join("HEAD").is_file() => repo.to_path_buf(),
        _ => {
            return Err(CaptureError::Setup(
                "not a Git repository (no .git there, and not a bare repository)".to_owned(),
            ));
        }
    };
    let common = match fs::read_to_string(gitdir.join("commondir")) {
        Ok(text) => {
            let c = Path::new(text.trim_end());
            if c.is_absolute() {
                c.to_path_buf()
            } else {
                gitdir.join(c)
            }
        }
        Err(_) => gitdir,
    };
    let objects = common.join("objects");
    if !objects.is_dir() {
        return Err(CaptureError::Setup(format!(
            "{} has no object directory",
            repo.display()
        )));
    }
    objects
        .canonicalize()
        .map_err(|e| CaptureError::io("resolving the canonical object directory", e))
}

/// corral's private git directory in a temporary directory.
#[derive(Debug)]
pub struct GitSandbox {
    program: PathBuf,
    _tmp: tempfile::TempDir,
    root: PathBuf,
    git_dir: PathBuf,
    deadline: Instant,
    memory_bytes: u64,
}

impl GitSandbox {
    /// Creates the temporary git directory, borrowing `canonical_objects` read-only.
    pub fn new(
        program: PathBuf,
        canonical_objects: &Path,
        format: ObjectFormat,
        tmp_parent: Option<&Path>,
        deadline: Instant,
        memory_bytes: u64,
    ) -> Result<Self, CaptureError> {
        let alt = canonical_objects.to_str().ok_or_else(|| {
            CaptureError::Setup("canonical object directory is not valid UTF-8".into())
        })?;
        if alt.contains(['\n', '\r', '"', '\\']) || alt.starts_with('#') {
            return Err(CaptureError::Setup(
                "canonical object directory path has characters alternates cannot hold".into(),
            ));
        }
        let mut builder = tempfile::Builder::new();
        builder.prefix("corral-capture-");
        let tmp = match tmp_parent {
            Some(p) => builder.tempdir_in(p),
            None => builder.tempdir(),
        }
        .map_err(|e| CaptureError::io("creating the capture temporary directory", e))?;
        let root = tmp.path().to_path_buf();
        let git_dir = root.join("git");
        let io = |e| CaptureError::io("creating corral's git directory", e);
        for d in [
            "git",
            "git/objects",
            "git/objects/info",
            "git/objects/pack",
            "git/refs",
            "git/refs/heads",
            "git/refs/tags",
            "home",
        ] {
            fs::create_dir(root.join(d)).map_err(io)?;
        }
        fs::write(git_dir.join("HEAD"), "ref: refs/heads/corral-capture\n").map_err(io)?;
        let config = match format {
            ObjectFormat::Sha1 => {
                "[core]\n\trepositoryformatversion = 0\n\tbare = true\n".to_owned()
            }
            ObjectFormat::Sha256 => format!(
                "[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectformat = {}\n",
                format.git_name()
            ),
        };
        fs::write(git_dir.join("config"), config).map_err(io)?;
        fs::write(git_dir.join("objects/info/alternates"), format!("{alt}\n")).map_err(io)?;
        Ok(Self {
            program,
            _tmp: tmp,
            root,
            git_dir,
            deadline,
            memory_bytes,
        })
    }

    /// The object directory of corral's temporary git directory: the candidate's objects are
    /// written here; the canonical repository's objects are reached through its alternates file.
    pub fn objects_dir(&self) -> PathBuf {
        self.git_dir.join("objects")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.program);
        c.env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.root.join("home"))
            .env("XDG_CONFIG_HOME", self.root.join("home"))
            .env("GIT_DIR", &self.git_dir)
            .env("GIT_OBJECT_DIRECTORY", self.git_dir.join("objects"))
            .env("GIT_INDEX_FILE", self.root.join("index"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_CEILING_DIRECTORIES", "/")
            .env("LC_ALL", "C")
            .current_dir(&self.root)
            .args(HARDENING)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// Caps a freshly started git's address space (`prlimit(RLIMIT_AS)`); git's pack windows
    /// are capped by the `-c` overrides so normal work fits well inside.
    fn limit_memory(&self, child: &mut Child) -> Result<(), CaptureError> {
        let lim = rustix::process::Rlimit {
            current: Some(self.memory_bytes),
            maximum: Some(self.memory_bytes),
        };
        if let Err(e) = rustix::process::prlimit(
            Some(rustix::process::Pid::from_child(child)),
            rustix::process::Resource::As,
            lim,
        ) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(CaptureError::io("limiting git's memory", e.into()));
        }
        Ok(())
    }

    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Runs git to completion; returns stdout, or `Ok(None)` when stdout exceeded `max_out`
    /// bytes (the process is killed then).
    pub fn run(&self, args: &[&str], max_out: u64) -> Result<Option<Vec<u8>>, CaptureError> {
        let err_path = self.root.join("stderr");
        let err_file = fs::File::create(&err_path)
            .map_err(|e| CaptureError::io("creating git's stderr file", e))?;
        let mut cmd = self.command(args);
        cmd.stdout(Stdio::piped()).stderr(err_file);
        let mut child = cmd
            .spawn()
            .map_err(|e| CaptureError::io("starting git", e))?;
        self.limit_memory(&mut child)?;
        let stdout = child.stdout.take();
        let guard = Watchdog::start(child, self.remaining());
        let mut out = Vec::new();
        let mut too_big = false;
        if let Some(mut stdout) = stdout {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = match stdout.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(CaptureError::io("reading git's output", e)),
                };
                if out.len() as u64 + n as u64 > max_out {
                    too_big = true;
                    guard.kill();
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
        }
        let (status, timed_out) = guard.finish()?;
        if timed_out {
            return Err(CaptureError::Timeout);
        }
        if too_big {
            return Ok(None);
        }
        if !status.success() {
            let mut detail = Vec::new();
            if let Ok(f) = fs::File::open(&err_path) {
                let _ = f.take(4096).read_to_end(&mut detail);
            }
            return Err(CaptureError::Git(format!(
                "git {} failed ({status}): {}",
                args.first().copied().unwrap_or(""),
                String::from_utf8_lossy(&detail).trim()
            )));
        }
        Ok(Some(out))
    }

    /// Starts a `git cat-file --batch` session.
    pub fn cat_file(&self, format: ObjectFormat) -> Result<CatFile, CaptureError> {
        // Plain `--batch` (git 1.8+; `--batch-command --buffer` needs 2.36, newer than
        // Ubuntu 22.04's git, and measured no faster with corral's request window).
        let mut cmd = self.command(&["cat-file", "--batch"]);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| CaptureError::io("starting git cat-file", e))?;
        self.limit_memory(&mut child)?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| CaptureError::Git("cat-file has no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| CaptureError::Git("cat-file has no stdout".into()))?;
        Ok(CatFile {
            stdin: Some(stdin),
            pending: Vec::new(),
            stdout: BufReader::with_capacity(64 * 1024, stdout),
            guard: Some(Watchdog::start(child, self.remaining())),
            format,
        })
    }
}

/// Kills a child process when a deadline passes. The child lives behind a mutex so that a
/// kill after it was reaped is a no-op (std's `Child` remembers it was waited for), never a
/// signal to a reused pid.
#[derive(Debug)]
struct Watchdog {
    child: Arc<Mutex<Child>>,
    state: Arc<(Mutex<(bool, bool)>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    fn start(child: Child, timeout: Duration) -> Self {
        let child = Arc::new(Mutex::new(child));
        // (cancelled, timed_out)
        let state = Arc::new((Mutex::new((false, false)), Condvar::new()));
        let (c2, s2) = (Arc::clone(&child), Arc::clone(&state));
        let thread = std::thread::spawn(move || {
            let (lock, cvar) = &*s2;
            let Ok(mut g) = lock.lock() else { return };
            let end = Instant::now() + timeout;
            while !g.0 {
                let now = Instant::now();
                if now >= end {
                    g.1 = true;
                    if let Ok(mut ch) = c2.lock() {
                        let _ = ch.kill();
                    }
                    return;
                }
                match cvar.wait_timeout(g, end - now) {
                    Ok((ng, _)) => g = ng,
                    Err(_) => return,
                }
            }
        });
        Self {
            child,
            state,
            thread: Some(thread),
        }
    }

    fn kill(&self) {
        if let Ok(mut ch) = self.child.lock() {
            let _ = ch.kill();
        }
    }

    /// Waits for the child (polling, so the watchdog can still kill it), then stops the
    /// watchdog. Returns the exit status and whether the deadline killed it.
    fn finish(mut self) -> Result<(std::process::ExitStatus, bool), CaptureError> {
        let status = loop {
            let polled = match self.child.lock() {
                Ok(mut ch) => ch.try_wait(),
                Err(_) => return Err(CaptureError::Git("watchdog lock poisoned".into())),
            };
            match polled {
                Ok(Some(s)) => break s,
                Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => return Err(CaptureError::io("waiting for git", e)),
            }
        };
        let timed_out = self.stop();
        Ok((status, timed_out))
    }

    fn stop(&mut self) -> bool {
        let (lock, cvar) = &*self.state;
        let timed_out = match lock.lock() {
            Ok(mut g) => {
                g.0 = true;
                g.1
            }
            Err(_) => true,
        };
        cvar.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        timed_out
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.kill();
            if let Ok(mut ch) = self.child.lock() {
                let _ = ch.wait();
            }
            self.stop();
        }
    }
}

/// A `git cat-file --batch` session over corral's git directory.
#[derive(Debug)]
pub struct CatFile {
    stdin: Option<ChildStdin>,
    /// Requests queued by `send`, not yet written.
    pending: Vec<u8>,
    stdout: BufReader<ChildStdout>,
    guard: Option<Watchdog>,
    format: ObjectFormat,
}

/// Objects larger than this are not read through cat-file (trees and `.gitignore` files).
pub const MAX_CAT_OBJECT: u64 = 64 * 1024 * 1024;

impl CatFile {
    /// Reads one object: `(type, content)`; `Ok(None)` when it does not exist.
    pub fn read(&mut self, oid: &Oid) -> Result<Option<(String, Vec<u8>)>, CaptureError> {
        self.send(oid)?;
        self.flush()?;
        self.recv(oid)
    }

    /// Queues a request for `oid` (sent by [`Self::flush`]); its answer is read, in order,
    /// by [`Self::recv`]. Keep fewer than about 1,000 requests outstanding (41-65 bytes
    /// each): the queued requests must fit in the pipe so that writing them never waits for
    /// git, which may itself be waiting for its answers to be read.
    pub fn send(&mut self, oid: &Oid) -> Result<(), CaptureError> {
        self.pending.extend_from_slice(oid.hex().as_bytes());
        self.pending.push(b'\n');
        Ok(())
    }

    /// Sends the queued requests.
    pub fn flush(&mut self) -> Result<(), CaptureError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let fail = |what: &str| CaptureError::Git(format!("cat-file: {what}"));
        let stdin = self.stdin.as_mut().ok_or_else(|| fail("closed"))?;
        let pending = std::mem::take(&mut self.pending);
        stdin
            .write_all(&pending)
            .and_then(|()| stdin.flush())
            .map_err(|e| self.io_or_timeout("writing to git cat-file", e))
    }

    /// Reads the answer to the oldest outstanding request, which must be for `oid`.
    pub fn recv(&mut self, oid: &Oid) -> Result<Option<(String, Vec<u8>)>, CaptureError> {
        let fail = |what: &str| CaptureError::Git(format!("cat-file: {what}"));
        let mut header = Vec::new();
        (&mut self.stdout)
            .take(512)
            .read_until(b'\n', &mut header)
            .map_err(|e| self.io_or_timeout("reading from git cat-file", e))?;
        if header.last() != Some(&b'\n') {
            return Err(self.dead_or(fail("truncated header")));
        }
        header.pop();
        let header = String::from_utf8(header).map_err(|_| fail("non-UTF-8 header"))?;
        let mut parts = header.split(' ');
        let (Some(id), Some(kind)) = (parts.next(), parts.next()) else {
            return Err(fail("malformed header"));
        };
        if id != oid.hex() {
            return Err(fail("answer for another object"));
        }
        if kind == "missing" {
            return Ok(None);
        }
        let size: u64 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| fail("malformed size"))?;
        if size > MAX_CAT_OBJECT {
            return Err(fail("object too large"));
        }
        let mut content = vec![0u8; usize::try_from(size).map_err(|_| fail("size"))? + 1];
        self.stdout
            .read_exact(&mut content)
            .map_err(|e| self.io_or_timeout("reading from git cat-file", e))?;
        if content.pop() != Some(b'\n') {
            return Err(fail("missing object terminator"));
        }
        Ok(Some((kind.to_owned(), content)))
    }

    /// Reads a tree object's entries.
    pub fn read_tree(
        &mut self,
        oid: &Oid,
    ) -> Result<Vec<(Vec<u8>, crate::objects::TreeEntry)>, CaptureError> {
        match self.read(oid)? {
            Some((kind, data)) if kind == "tree" => crate::objects::parse_tree(self.format, &data)
                .ok_or_else(|| CaptureError::Git(format!("tree {oid} is malformed"))),
            Some((kind, _)) => Err(CaptureError::Git(format!("{oid} is a {kind}, not a tree"))),
            None => Err(CaptureError::Git(format!("tree {oid} is missing"))),
        }
    }

    fn timed_out(&self) -> bool {
        self.guard
            .as_ref()
            .and_then(|g| g.state.0.lock().ok().map(|s| s.1))
            .unwrap_or(false)
    }

    fn io_or_timeout(&self, what: &str, e: io::Error) -> CaptureError {
        if self.timed_out() {
            CaptureError::Timeout
        } else {
            CaptureError::io(what, e)
        }
    }

    fn dead_or(&self, e: CaptureError) -> CaptureError {
        if self.timed_out() {
            CaptureError::Timeout
        } else {
            e
        }
    }

    /// Ends the session.
    pub fn close(mut self) -> Result<(), CaptureError> {
        drop(self.stdin.take());
        if let Some(g) = self.guard.take() {
            let (_, timed_out) = g.finish()?;
            if timed_out {
                return Err(CaptureError::Timeout);
            }
        }
        Ok(())
    }
}
