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
pub mod egress;
pub mod executable;

pub use attempt::{RunError, RunInputs, RunReport, exit, run_attempt};
pub use corral_checkout::{BaseCache, BaseCheckout, BaseError, CacheLimits, Isolation};
