//! The whole path of one attempt, exactly as the seeds draw it:
//! WorkUnit + AgentPreset -> admission -> LocalSandboxExecutor -> worker -> outside-authority
//! capture -> CandidateReference -> ResultManifest.
//!
//! Architecture Invariant: the runner composes the layers below it and adds no policy of its
//! own: admission decides what may run, the sandbox gate decides whether this host may run
//! it, capture decides what the worker changed, the manifest crate decides the outcome.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod attempt;
pub mod broker;
pub mod egress;
pub mod executable;

pub use attempt::{RunError, RunInputs, RunReport, exit, run_attempt};
pub use corral_checkout::{BaseCache, BaseCheckout, BaseError, CacheLimits, Isolation};

/// Where the base checkouts of a backend that needs them owned by `owner` live under corral's
/// cache `cache`: a cache of their own (`owned-<uid>-<gid>`), so one cache never mixes
/// owners (ADR-0080); `cache` itself for any owner.
#[must_use]
pub fn cache_root_for(cache: &std::path::Path, owner: Option<(u32, u32)>) -> std::path::PathBuf {
    match owner {
        Some((uid, gid)) => cache.join(format!("owned-{uid}-{gid}")),
        None => cache.to_path_buf(),
    }
}
