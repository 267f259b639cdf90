//! The capture helper: the worker's upper layer is read by a confined process, never by
//! corral's root-authority side (ADR-0070, "Capture").
//!
//! The runner keeps the upper layer open as a directory fd from before the worker started.
//! [`capture_isolated`] starts the `corral` binary again with [`CAPTURE_HELPER_ARG`] and hands
//! it that fd (as fd 3), one end of a socket pair (fd 4) and a [`CaptureJob`] on stdin. The
//! helper confines itself like the checkout helper ([`crate::confine`]: own mount namespace
//! with only a scratch directory writable and the object database read-only, Landlock with a
//! read-only rule on the upper fd, capabilities dropped to `CAP_DAC_READ_SEARCH`, seccomp),
//! runs [`corral_capture::capture`] and answers with a [`CaptureReply`]; the patch goes to
//! `work/patch`.
//!
//! One thing the helper cannot do itself: `trusted.overlay.*` xattrs (opaque directories) are
//! readable only with `CAP_SYS_ADMIN`, and without it the kernel answers "no such
//! attribute", which would silently hide a deletion. So the parent serves a narrow oracle on
//! the socket ([`serve_xattrs`]): the helper sends one open fd and one xattr name per
//! message; the parent answers only for names in [`corral_capture::OVERLAY_XATTR_NAMES`],
//! only for a directory or regular file on the upper layer's own file system, with
//! `fgetxattr` on that fd. It never resolves a path, never reads file contents.

use std::io::{IoSlice, IoSliceMut, Read as _};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use corral_capture::{
    CaptureError, CaptureLimits, CaptureRequest, CaptureResult, CaptureStats, DirectXattrs,
    MAX_XATTR_VALUE, OVERLAY_XATTR_NAMES, OverlayXattrs, UpperLayer, XattrReader, XattrValue,
};
use corral_contract::codes::Rejection;
use corral_contract::manifest::ChangedPath;
use corral_contract::path::PathPattern;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use serde::{Deserialize, Serialize};

use crate::Isolation;
use crate::confine::{Confinement, confine};
use crate::dir::Dir;

/// The hidden first argument that makes `corral` act as the capture helper.
pub const CAPTURE_HELPER_ARG: &str = "__corral-capture-helper";

/// The upper layer's fd in the helper.
const UPPER_FD: i32 = 3;
/// The xattr oracle's socket in the helper.
const ORACLE_FD: i32 = 4;
/// The response on stdout is bounded (changed paths are bounded by the entry limit).
const MAX_REPLY_BYTES: u64 = 256 << 20;

/// One capture, as the runner asks for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureJob {
    /// The git program the helper runs (absolute path).
    pub git: PathBuf,
    /// The canonical repository's object directory.
    pub objects: PathBuf,
    /// The base commit (40 or 64 lowercase hex digits).
    pub base_sha: String,
    /// [`CaptureRequest::allowed`](corral_capture::CaptureRequest::allowed).
    pub allowed: Vec<PathPattern>,
    /// [`CaptureRequest::forbidden`](corral_capture::CaptureRequest::forbidden).
    pub forbidden: Vec<PathPattern>,
    /// [`CaptureRequest::max_patch_bytes`](corral_capture::CaptureRequest::max_patch_bytes).
    pub max_patch_bytes: u64,
    /// [`CaptureLimits::max_file_bytes`].
    pub max_file_bytes: u64,
    /// [`CaptureLimits::max_total_bytes`].
    pub max_total_bytes: u64,
    /// [`CaptureLimits::max_entries`].
    pub max_entries: u64,
    /// [`CaptureLimits::max_depth`].
    pub max_depth: u32,
    /// [`CaptureLimits::timeout`], in milliseconds.
    pub timeout_ms: u64,
    /// [`CaptureLimits::git_memory_bytes`].
    pub git_memory_bytes: u64,
    /// `user.overlay.*` instead of `trusted.overlay.*`.
    pub user_xattrs: bool,
    /// The helper's one writable directory.
    pub work: PathBuf,
    /// An empty directory for the helper's own root.
    pub new_root: PathBuf,
}

/// What the capture helper found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum CaptureReply {
    /// The capture ran: the parts of its [`CaptureResult`]; the patch itself is left in
    /// `work/patch`.
    Done {
        /// [`CaptureResult::changed_paths`].
        changed_paths: Vec<ChangedPath>,
        /// [`CaptureResult::ignored_paths`].
        ignored_paths: Vec<String>,
        /// [`CaptureResult::rejections`].
        rejections: Vec<Rejection>,
        /// The patch's length when there is one (its bytes are in `work/patch`).
        patch_bytes: Option<u64>,
        /// [`CaptureStats::entries`].
        entries: u64,
        /// [`CaptureStats::bytes_read`].
        bytes_read: u64,
        /// [`CaptureStats::trees_read`].
        trees_read: u64,
        /// How far the helper's Landlock confinement was enforced.
        landlock: String,
    },
    /// The helper could not set up or the capture failed.
    Failed {
        /// Whether the capture ran out of time ([`CaptureError::Timeout`]).
        timeout: bool,
        /// The error, in words.
        message: String,
    },
}

/// Captures `req` in a confined helper (or in this process for [`Isolation::InProcess`]:
/// tests only). The result is what [`corral_capture::capture`] would return.
pub fn capture_isolated(
    iso: &Isolation,
    req: &CaptureRequest<'_>,
) -> Result<CaptureResult, CaptureError> {
    match iso {
        Isolation::InProcess => corral_capture::capture(req),
        Isolation::Helper { exe } => capture_in_helper(exe, req),
    }
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Whether `name`, in the temporary directory, is a capture helper's scratch directory of the
/// corral process `pid` (`corral-capture-<pid>-<n>`): what its reaper removes once `pid` has
/// exited.
#[must_use]
pub fn is_scratch_of(name: &str, pid: u32) -> bool {
    name.strip_prefix("corral-capture-")
        .and_then(|r| r.split_once('-'))
        .is_some_and(|(p, n)| {
            p == pid.to_string() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        })
}

/// The helper's scratch directory (mode 0700), removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(parent: &Path) -> Result<Self, CaptureError> {
        use std::os::unix::fs::DirBuilderExt as _;
        let path = parent.join(format!(
            "corral-capture-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| CaptureError::io("creating the capture helper's directory", e))?;
        let s = Self(path);
        for sub in ["work", "root"] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(s.0.join(sub))
                .map_err(|e| CaptureError::io("creating the capture helper's directory", e))?;
        }
        Ok(s)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // remove_dir_all works beneath directory fds and never follows a symlink the helper
        // may have left.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn capture_in_helper(exe: &Path, req: &CaptureRequest<'_>) -> Result<CaptureResult, CaptureError> {
    let git = corral_capture::git::find_git(req.git_program)?;
    let objects = match req.objects_dir {
        Some(d) => d.to_path_buf(),
        None => corral_capture::git::canonical_objects_dir(req.canonical_repo)?,
    };
    let tmp = req
        .tmp_dir
        .map_or_else(std::env::temp_dir, Path::to_path_buf);
    let scratch = Scratch::new(&tmp)?;
    let work = scratch.0.join("work");
    let job = CaptureJob {
        git,
        objects,
        base_sha: req.base_sha.to_owned(),
        allowed: req.allowed.to_vec(),
        forbidden: req.forbidden.to_vec(),
        max_patch_bytes: req.max_patch_bytes,
        max_file_bytes: req.limits.max_file_bytes,
        max_total_bytes: req.limits.max_total_bytes,
        max_entries: req.limits.max_entries,
        max_depth: req.limits.max_depth,
        timeout_ms: u64::try_from(req.limits.timeout.as_millis()).unwrap_or(u64::MAX),
        git_memory_bytes: req.limits.git_memory_bytes,
        user_xattrs: req.overlay_xattrs == OverlayXattrs::User,
        work: work.clone(),
        new_root: scratch.0.join("root"),
    };
    let stdin = serde_json::to_vec(&job)
        .map_err(|e| CaptureError::Helper(format!("encoding the capture job: {e}")))?;
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| CaptureError::io("creating the xattr oracle's socket", e.into()))?;
    let upper_dev = rustix::fs::fstat(req.upper)
        .map_err(|e| CaptureError::io("reading the upper layer", e.into()))?
        .st_dev;
    let prefix = req.overlay_xattrs.prefix();
    let ours = Arc::new(ours);
    let max_requests = req.limits.max_entries.saturating_mul(2).saturating_add(64);
    let server = {
        let ours = Arc::clone(&ours);
        std::thread::Builder::new()
            .name("corral-xattr-oracle".into())
            .spawn(move || serve_xattrs(ours.as_fd(), upper_dev, prefix, max_requests))
            .map_err(|e| CaptureError::io("starting the xattr oracle", e))?
    };
    let mut cmd = corral_process::BoundedCommand::new(exe);
    cmd.args = vec![CAPTURE_HELPER_ARG.into()];
    cmd.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    cmd.stdin = Some(stdin);
    cmd.wall_timeout = req.limits.timeout.saturating_add(Duration::from_secs(5));
    cmd.max_output_bytes = MAX_REPLY_BYTES;
    cmd.inherit_fds = vec![req.upper.as_fd().as_raw_fd(), theirs.as_raw_fd()];
    let out = corral_process::run_bounded_process(&cmd);
    // The helper's end closes with it; shutting ours down ends the oracle thread even if a
    // straggler kept a copy.
    drop(theirs);
    let _ = rustix::net::shutdown(ours.as_fd(), rustix::net::Shutdown::Both);
    let _ = server.join();
    let out = out.map_err(|e| {
        CaptureError::Helper(format!(
            "starting the capture helper {}: {e}",
            exe.display()
        ))
    })?;
    if out.exit == corral_process::ProcessExit::TimedOut {
        return Err(CaptureError::Timeout);
    }
    let reply = match serde_json::from_slice::<CaptureReply>(&out.stdout.bytes) {
        Ok(r) if out.exit == corral_process::ProcessExit::Exited(0) && !out.stdout.truncated => r,
        _ => {
            return Err(CaptureError::Helper(format!(
                "the capture helper ended {:?} without a response: {}",
                out.exit,
                String::from_utf8_lossy(&out.stderr.bytes[..out.stderr.bytes.len().min(400)])
                    .trim()
            )));
        }
    };
    match reply {
        CaptureReply::Failed { timeout: true, .. } => Err(CaptureError::Timeout),
        CaptureReply::Failed { message, .. } => Err(CaptureError::Helper(message)),
        CaptureReply::Done {
            changed_paths,
            ignored_paths,
            rejections,
            patch_bytes,
            entries,
            bytes_read,
            trees_read,
            landlock: _,
        } => {
            let patch = match patch_bytes {
                None => None,
                Some(n) => {
                    if n > req.max_patch_bytes {
                        return Err(CaptureError::Helper(format!(
                            "the capture helper reported a {n}-byte patch over max_patch_bytes"
                        )));
                    }
                    let bytes = Dir::open(&work)
                        .and_then(|d| d.read_file("patch", n))
                        .map_err(|e| CaptureError::io("reading the helper's patch", e))?;
                    match bytes {
                        Some(b) if b.len() as u64 == n => Some(b),
                        _ => {
                            return Err(CaptureError::Helper(
                                "the capture helper's patch does not have the length it reported"
                                    .into(),
                            ));
                        }
                    }
                }
            };
            // The helper said "accepted" only with a patch; keep the invariant here too.
            if rejections.is_empty() && patch.is_none() {
                return Err(CaptureError::Helper(
                    "the capture helper accepted a candidate without a patch".into(),
                ));
            }
            Ok(CaptureResult {
                changed_paths,
                ignored_paths,
                rejections,
                patch,
                stats: CaptureStats {
                    entries,
                    bytes_read,
                    trees_read,
                },
            })
        }
    }
}

/// Oracle answers: one status byte, then the value for [`ANSWER_VALUE`].
const ANSWER_ABSENT: u8 = 0;
const ANSWER_VALUE: u8 = 1;
const ANSWER_TOO_LONG: u8 = 2;
const ANSWER_REFUSED: u8 = 3;

/// The parent's side of the xattr oracle: answers until end of file, an error, or
/// `max_requests` answers. Each request is one xattr name and exactly one fd; see the module
/// documentation for what is answered.
pub fn serve_xattrs(sock: BorrowedFd<'_>, upper_dev: u64, prefix: &str, max_requests: u64) {
    let mut answered = 0u64;
    loop {
        let mut name = [0u8; 128];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let Ok(msg) = rustix::net::recvmsg(
            sock,
            &mut [IoSliceMut::new(&mut name)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) else {
            return;
        };
        let mut fds: Vec<OwnedFd> = Vec::new();
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = m {
                fds.extend(rights);
            }
        }
        // End of file (an empty message with an fd is a request, and is refused below).
        if msg.bytes == 0 && fds.is_empty() {
            return;
        }
        let truncated = msg
            .flags
            .intersects(rustix::net::ReturnFlags::TRUNC | rustix::net::ReturnFlags::CTRUNC);
        let answer = if answered >= max_requests || truncated || fds.len() != 1 {
            vec![ANSWER_REFUSED]
        } else {
            answer(&fds[0], &name[..msg.bytes], upper_dev, prefix)
        };
        drop(fds);
        answered += 1;
        if rustix::net::send(sock, &answer, SendFlags::NOSIGNAL).is_err() {
            return;
        }
    }
}

fn answer(fd: &OwnedFd, name: &[u8], upper_dev: u64, prefix: &str) -> Vec<u8> {
    let Ok(name) = std::str::from_utf8(name) else {
        return vec![ANSWER_REFUSED];
    };
    let known = name
        .strip_prefix(prefix)
        .is_some_and(|n| OVERLAY_XATTR_NAMES.contains(&n));
    let Ok(st) = rustix::fs::fstat(fd) else {
        return vec![ANSWER_REFUSED];
    };
    let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
    let on_upper = st.st_dev == upper_dev
        && matches!(
            kind,
            rustix::fs::FileType::Directory | rustix::fs::FileType::RegularFile
        );
    if !known || !on_upper {
        return vec![ANSWER_REFUSED];
    }
    match DirectXattrs.get(fd.as_fd(), name) {
        Ok(XattrValue::Absent) => vec![ANSWER_ABSENT],
        Ok(XattrValue::TooLong) => vec![ANSWER_TOO_LONG],
        Ok(XattrValue::Value(v)) => {
            let mut a = vec![ANSWER_VALUE];
            a.extend_from_slice(&v);
            a
        }
        Err(_) => vec![ANSWER_REFUSED],
    }
}

/// The helper's side of the oracle.
#[derive(Debug)]
pub struct OracleXattrs {
    sock: Mutex<OwnedFd>,
}

impl OracleXattrs {
    /// The oracle's client over `sock`, the helper's end of the socket pair whose other end
    /// [`serve_xattrs`] serves.
    #[must_use]
    pub fn new(sock: OwnedFd) -> Self {
        Self {
            sock: Mutex::new(sock),
        }
    }
}

impl XattrReader for OracleXattrs {
    fn get(&self, fd: BorrowedFd<'_>, name: &str) -> std::io::Result<XattrValue> {
        let sock = self
            .sock
            .lock()
            .map_err(|_| std::io::Error::other("the xattr oracle's lock is poisoned"))?;
        let fds = [fd];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(std::io::Error::other("xattr oracle: control buffer"));
        }
        rustix::net::sendmsg(
            &*sock,
            &[IoSlice::new(name.as_bytes())],
            &mut control,
            SendFlags::NOSIGNAL,
        )?;
        let mut buf = [0u8; 1 + MAX_XATTR_VALUE + 1];
        let n = rustix::net::recv(&*sock, &mut buf[..], RecvFlags::empty())?.0;
        match (n, buf.first()) {
            (1, Some(&ANSWER_ABSENT)) => Ok(XattrValue::Absent),
            (1, Some(&ANSWER_TOO_LONG)) => Ok(XattrValue::TooLong),
            (n, Some(&ANSWER_VALUE)) if n <= 1 + MAX_XATTR_VALUE => {
                Ok(XattrValue::Value(buf[1..n].to_vec()))
            }
            _ => Err(std::io::Error::other(format!(
                "the xattr oracle refused {name}"
            ))),
        }
    }
}

/// The capture helper's `main`: job on stdin, reply on stdout, exit 0 when a reply was
/// written.
#[must_use]
pub fn capture_helper_main() -> i32 {
    let reply = match run_helper() {
        Ok(r) => r,
        Err(message) => CaptureReply::Failed {
            timeout: false,
            message,
        },
    };
    match serde_json::to_string(&reply) {
        Ok(s) => {
            println!("{s}");
            0
        }
        Err(_) => 1,
    }
}

fn run_helper() -> Result<CaptureReply, String> {
    let mut input = Vec::new();
    std::io::stdin()
        .take(16 << 20)
        .read_to_end(&mut input)
        .map_err(|e| format!("capture helper: reading the job: {e}"))?;
    let job: CaptureJob =
        serde_json::from_slice(&input).map_err(|e| format!("capture helper: bad job: {e}"))?;
    let fd = |n, what: &str| {
        corral_process::take_inherited_fd(n).map_err(|e| format!("capture helper: {what}: {e}"))
    };
    let upper = Arc::new(fd(UPPER_FD, "the upper layer")?);
    let oracle = OracleXattrs::new(fd(ORACLE_FD, "the xattr oracle")?);
    let mut read_only = vec![job.objects.clone()];
    read_only.extend(crate::helper::alternates(&job.objects));
    if !job.git.starts_with("/usr") {
        read_only.push(job.git.clone());
    }
    let confined = confine(&Confinement {
        new_root: job.new_root.clone(),
        read_only,
        writable: job.work.clone(),
        read_only_fds: vec![Arc::clone(&upper)],
        run_as: None,
    })?;
    let upper_fd = rustix::io::dup(&*upper).map_err(|e| format!("capture helper: {e}"))?;
    let upper = UpperLayer::from_fd(upper_fd).map_err(|e| format!("capture helper: {e}"))?;
    let mut req = CaptureRequest::new(
        &job.objects,
        &job.base_sha,
        &upper,
        &job.allowed,
        &job.forbidden,
        job.max_patch_bytes,
    );
    req.limits = CaptureLimits {
        max_file_bytes: job.max_file_bytes,
        max_total_bytes: job.max_total_bytes,
        max_entries: job.max_entries,
        max_depth: job.max_depth,
        timeout: Duration::from_millis(job.timeout_ms),
        git_memory_bytes: job.git_memory_bytes,
    };
    req.overlay_xattrs = if job.user_xattrs {
        OverlayXattrs::User
    } else {
        OverlayXattrs::Trusted
    };
    req.xattr_reader = Some(&oracle);
    req.objects_dir = Some(&job.objects);
    req.git_program = Some(&job.git);
    req.tmp_dir = Some(&job.work);
    let result = match corral_capture::capture(&req) {
        Ok(r) => r,
        Err(CaptureError::Timeout) => {
            return Ok(CaptureReply::Failed {
                timeout: true,
                message: CaptureError::Timeout.to_string(),
            });
        }
        Err(e) => return Err(e.to_string()),
    };
    let patch_bytes = match &result.patch {
        None => None,
        Some(p) => {
            Dir::open(&job.work)
                .and_then(|d| d.create_file("patch", p, 0o600))
                .map_err(|e| format!("capture helper: writing the patch: {e}"))?;
            Some(p.len() as u64)
        }
    };
    Ok(CaptureReply::Done {
        changed_paths: result.changed_paths,
        ignored_paths: result.ignored_paths,
        rejections: result.rejections,
        patch_bytes,
        entries: result.stats.entries,
        bytes_read: result.stats.bytes_read,
        trees_read: result.stats.trees_read,
        landlock: confined.landlock.to_owned(),
    })
}
