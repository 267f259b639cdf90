//! The checkout helper: one process per materialization, confined before it reads an object.
//!
//! The runner never parses a base tree itself. It starts the `corral` binary again with
//! [`HELPER_ARG`] (the CLI dispatches it to [`helper_main`] before anything else runs), hands
//! it a [`Request`] on stdin and reads one [`Response`] from stdout. The helper confines
//! itself ([`crate::confine`]), reads the commit through capture's hardened git directory,
//! validates and writes the checkout into `work/checkout`, and exits. The caller verifies the
//! stamp and publishes the directory.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_capture::git::GitSandbox;
use corral_capture::objects::{ObjectFormat, Oid};
use corral_contract::ReasonCode;
use serde::{Deserialize, Serialize};

use crate::confine::{Confinement, confine};
use crate::materialize::{Limits, MaterializeError, materialize_commit};

/// The hidden first argument that makes `corral` act as the checkout helper.
pub const HELPER_ARG: &str = "__corral-checkout-helper";

/// Git may use this much address space while it serves the helper.
const GIT_MEMORY: u64 = 4 << 30;

/// One materialization, as the runner asks for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The git program the helper runs (absolute path).
    pub git: PathBuf,
    /// The canonical repository's object directory.
    pub objects: PathBuf,
    /// The base commit to materialize (40 or 64 lowercase hex digits).
    pub base_sha: String,
    /// The helper's one writable directory; the checkout goes to `work/checkout`.
    pub work: PathBuf,
    /// An empty directory for the helper's own root.
    pub new_root: PathBuf,
    /// [`Limits::max_entries`].
    pub max_entries: u64,
    /// [`Limits::max_bytes`].
    pub max_bytes: u64,
    /// Time the materialization may take, in milliseconds.
    pub timeout_ms: u64,
    /// The uid and gid that own the checkout ([`Confinement::run_as`]); `None`: the
    /// helper's own (uid 0).
    #[serde(default)]
    pub owner: Option<(u32, u32)>,
}

/// What the helper did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum Response {
    /// The checkout is written to `work/checkout`.
    Done {
        /// The base commit's tree id (hex), recomputed from what was written.
        tree: String,
        /// Directory entries written ([`Stats::entries`](crate::materialize::Stats::entries)).
        entries: u64,
        /// Content bytes written ([`Stats::bytes`](crate::materialize::Stats::bytes)).
        bytes: u64,
        /// How far Landlock was enforced (`fully`, `partially`, `not enforced`, or
        /// `in-process` when no helper ran: tests only).
        landlock: String,
    },
    /// The base commit's data is refused ([`Refusal`](crate::Refusal)).
    Refused {
        /// [`Refusal::code`](crate::Refusal::code).
        code: ReasonCode,
        /// [`Refusal::path`](crate::Refusal::path).
        path: String,
        /// [`Refusal::detail`](crate::Refusal::detail).
        detail: String,
    },
    /// The request is wrong: not a base SHA, no such commit, not a commit.
    BadInput {
        /// What is wrong, in words.
        message: String,
    },
    /// corral failed (I/O, git, confinement, the helper process).
    Failed {
        /// What failed, in words.
        message: String,
    },
}

/// The helper's `main`: request on stdin, response on stdout, exit 0 when a response was
/// written.
#[must_use]
pub fn helper_main() -> i32 {
    let mut input = Vec::new();
    let read = std::io::stdin().take(1 << 20).read_to_end(&mut input);
    let response = match read
        .map_err(|e| e.to_string())
        .and_then(|_| serde_json::from_slice::<Request>(&input).map_err(|e| e.to_string()))
    {
        Ok(req) => serve(&req, true),
        Err(e) => Response::Failed {
            message: format!("checkout helper: bad request: {e}"),
        },
    };
    match serde_json::to_string(&response) {
        Ok(s) => {
            println!("{s}");
            0
        }
        Err(_) => 1,
    }
}

/// Object directories `objects` borrows through `info/alternates` (read before confinement,
/// so they can be made visible at the same paths).
pub(crate) fn alternates(objects: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(objects.join("info/alternates")) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .take(16)
        .filter_map(|l| {
            let p = Path::new(l);
            let p = if p.is_absolute() {
                p.to_path_buf()
            } else {
                objects.join(p)
            };
            p.canonicalize().ok().filter(|p| p.is_dir())
        })
        .collect()
}

/// Runs one request; `confined` is false only in this crate's tests and fuzz target, which
/// exercise validation and writing without namespaces.
#[must_use]
pub fn serve(req: &Request, confined: bool) -> Response {
    match serve_inner(req, confined) {
        Ok(r) => r,
        Err(MaterializeError::Refused(r)) => Response::Refused {
            code: r.code,
            path: r.path,
            detail: r.detail,
        },
        Err(MaterializeError::BadInput(message)) => Response::BadInput { message },
        Err(MaterializeError::Internal(message)) => Response::Failed { message },
    }
}

fn serve_inner(req: &Request, confined: bool) -> Result<Response, MaterializeError> {
    let bad = |m: String| MaterializeError::BadInput(m);
    let format = ObjectFormat::from_hex_len(req.base_sha.len()).ok_or_else(|| {
        bad(format!(
            "base_sha {:?} is not 40 or 64 hex digits",
            req.base_sha
        ))
    })?;
    let base = Oid::from_hex(&req.base_sha)
        .ok_or_else(|| bad(format!("base_sha {:?} is not lowercase hex", req.base_sha)))?;
    let deadline = Instant::now() + Duration::from_millis(req.timeout_ms);
    let landlock = if confined {
        let mut read_only = vec![req.objects.clone()];
        read_only.extend(alternates(&req.objects));
        if !req.git.starts_with("/usr") {
            read_only.push(req.git.clone());
        }
        confine(&Confinement {
            new_root: req.new_root.clone(),
            read_only,
            writable: req.work.clone(),
            read_only_fds: Vec::new(),
            run_as: req.owner,
        })
        .map_err(MaterializeError::Internal)?
        .landlock
    } else {
        "in-process"
    };
    let sandbox = GitSandbox::new(
        req.git.clone(),
        &req.objects,
        format,
        Some(&req.work),
        deadline,
        GIT_MEMORY,
    )
    .map_err(|e| MaterializeError::Internal(e.to_string()))?;
    let mut cat = sandbox
        .cat_file(format)
        .map_err(|e| MaterializeError::Internal(e.to_string()))?;
    let target = req.work.join("checkout");
    crate::dir::Dir::open(&req.work)
        .and_then(|w| w.create_dir("checkout"))
        .map_err(|e| MaterializeError::Internal(format!("creating the checkout: {e}")))?;
    let stats = materialize_commit(
        &mut cat,
        format,
        &base,
        &target,
        Limits {
            max_entries: req.max_entries,
            max_bytes: req.max_bytes,
        },
        deadline,
    )?;
    cat.close()
        .map_err(|e| MaterializeError::Internal(e.to_string()))?;
    Ok(Response::Done {
        tree: stats.tree.hex(),
        entries: stats.entries,
        bytes: stats.bytes,
        landlock: landlock.to_owned(),
    })
}

/// Starts `exe` as the helper for `req` and waits for its response (bounded in time and
/// output; its whole process group is killed when it ends).
pub fn spawn(exe: &Path, req: &Request) -> Response {
    let failed = |message: String| Response::Failed { message };
    let Ok(stdin) = serde_json::to_vec(req) else {
        return failed("encoding the checkout request".into());
    };
    let mut cmd = corral_process::BoundedCommand::new(exe);
    cmd.args = vec![HELPER_ARG.into()];
    cmd.env = vec![("PATH".into(), "/usr/bin:/bin".into())];
    cmd.stdin = Some(stdin);
    cmd.wall_timeout = Duration::from_millis(req.timeout_ms.saturating_add(5_000));
    cmd.max_output_bytes = 1 << 20;
    let out = match corral_process::run_bounded_process(&cmd) {
        Ok(o) => o,
        Err(e) => {
            return failed(format!(
                "starting the checkout helper {}: {e}",
                exe.display()
            ));
        }
    };
    match serde_json::from_slice::<Response>(&out.stdout.bytes) {
        Ok(r) if out.exit == corral_process::ProcessExit::Exited(0) => r,
        _ => failed(format!(
            "the checkout helper ended {:?} without a response: {}",
            out.exit,
            String::from_utf8_lossy(&out.stderr.bytes[..out.stderr.bytes.len().min(400)]).trim()
        )),
    }
}
