//! The base checkout: one validated tree from an object database, written into a directory
//! fd, within limits, by a least-privilege helper; and the bounded cache that keeps one
//! checkout per base commit (ADR-0070).
//!
//! The base commit is hostile data: a commit fetched from an untrusted remote is enough, and
//! git does not check incoming objects by default. This crate is the only code that turns
//! its trees into files.
//!
//! Architecture Invariants:
//! - Every tree is validated ([`validate::check_entries`]) before any of its entries is
//!   written: one path component per name, no `.git` under any spelling, no duplicates, git's
//!   order, known modes.
//! - Every write goes beneath an open directory fd ([`dir::Dir`]): `openat2(RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS)`, `O_CREAT | O_EXCL | O_NOFOLLOW`, modes set on the fd. Never a path
//!   join followed by a path-based write.
//! - Code that parses hostile data never runs with host root authority over the host file
//!   system: in production the materialization and the capture of the worker's upper layer
//!   each run in a helper process confined by [`confine`] (own mount namespace with only a
//!   work directory writable and the object database read-only, capabilities dropped but
//!   `CAP_DAC_READ_SEARCH`, `no_new_privs`, Landlock, seccomp). The capture helper's one
//!   request to its parent is the overlay xattr oracle of [`capture`], which answers for fds
//!   on the upper layer's file system only.
//! - One materialization has an entry and byte ceiling; the cache a size budget with
//!   least-recently-used eviction that never evicts an entry in use.
//! - A checkout is visible only after one rename of a fully written directory whose stamp
//!   (written last) names its tree; anything else is torn and rebuilt.
//! - This crate depends on `corral-contract`, `corral-capture` (object parsing, the hardened
//!   git directory) and `corral-process` only, never on a sandbox backend.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod cache;
pub mod capture;
pub mod confine;
pub mod dir;
pub mod helper;
mod index;
pub mod materialize;
pub mod validate;

pub use cache::{BaseCache, BaseCheckout, BaseError, CacheEntry, CacheLimits, GcReport, Isolation};
pub use capture::{CAPTURE_HELPER_ARG, capture_helper_main, capture_isolated};
pub use helper::{HELPER_ARG, helper_main};
pub use materialize::Limits;
pub use validate::Refusal;
