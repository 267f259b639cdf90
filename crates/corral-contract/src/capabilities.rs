//! The nine sandbox capabilities and their evidence.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One capability the orchestrator requires before any worker runs (seeds, ADR-0017).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// The policy's network mode holds: no route at all, or only corral's egress proxy.
    NetworkEnforcement,
    /// The worker's processes are one tree of their own, killed together at every ending.
    ProcessTreeIsolation,
    /// `cpu_seconds` (and a CPU bandwidth share) bounds the whole tree.
    CpuLimit,
    /// `memory_bytes` bounds the whole tree, tmpfs, shared memory and memfd included.
    MemoryLimit,
    /// `disk_bytes` bounds every writable place.
    DiskLimit,
    /// `max_processes` bounds the processes and threads alive at once.
    ProcessLimit,
    /// Own mount namespace and root: read-only system folders, no host home, sockets or `/run`.
    FilesystemIsolation,
    /// Only the policy's writable scope can be written; `.git` stays read-only.
    WritablePathEnforcement,
    /// No credential reaches the worker: exact environment, a uid of its own, no capabilities.
    CredentialIsolation,
}

impl Capability {
    /// All nine, in contract order.
    pub const ALL: [Capability; 9] = [
        Capability::NetworkEnforcement,
        Capability::ProcessTreeIsolation,
        Capability::CpuLimit,
        Capability::MemoryLimit,
        Capability::DiskLimit,
        Capability::ProcessLimit,
        Capability::FilesystemIsolation,
        Capability::WritablePathEnforcement,
        Capability::CredentialIsolation,
    ];

    /// The snake_case name used in reports and manifests (`network_enforcement`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Capability::NetworkEnforcement => "network_enforcement",
            Capability::ProcessTreeIsolation => "process_tree_isolation",
            Capability::CpuLimit => "cpu_limit",
            Capability::MemoryLimit => "memory_limit",
            Capability::DiskLimit => "disk_limit",
            Capability::ProcessLimit => "process_limit",
            Capability::FilesystemIsolation => "filesystem_isolation",
            Capability::WritablePathEnforcement => "writable_path_enforcement",
            Capability::CredentialIsolation => "credential_isolation",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether one capability is enforced on this host, and what showed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CapabilityEvidence {
    /// Whether the probe saw the kernel enforce it on this host.
    pub enforced: bool,
    /// What the probe did and saw; never just a configuration flag.
    pub evidence: String,
}

impl CapabilityEvidence {
    /// Not enforced, for this reason.
    #[must_use]
    pub fn missing(reason: impl Into<String>) -> Self {
        Self {
            enforced: false,
            evidence: reason.into(),
        }
    }
}

/// The capability report of one executor on one host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SandboxCapabilities {
    /// The policy's network mode holds: no route at all, or only corral's egress proxy.
    pub network_enforcement: CapabilityEvidence,
    /// The worker's processes are one tree of their own, killed together at every ending.
    pub process_tree_isolation: CapabilityEvidence,
    /// cpu_seconds bounds the whole process tree.
    pub cpu_limit: CapabilityEvidence,
    /// memory_bytes bounds the whole process tree, tmpfs, shared memory and memfd included.
    pub memory_limit: CapabilityEvidence,
    /// disk_bytes bounds every writable place.
    pub disk_limit: CapabilityEvidence,
    /// max_processes bounds the processes and threads alive at once.
    pub process_limit: CapabilityEvidence,
    /// Own mount namespace and root: read-only system folders, no host home, sockets or /run.
    pub filesystem_isolation: CapabilityEvidence,
    /// Only the policy's writable scope can be written; .git stays read-only.
    pub writable_path_enforcement: CapabilityEvidence,
    /// No credential reaches the worker: exact environment, a uid of its own, no capabilities.
    pub credential_isolation: CapabilityEvidence,
}

impl SandboxCapabilities {
    /// A report in which nothing is attested, each with the same reason.
    #[must_use]
    pub fn none(reason: &str) -> Self {
        let m = || CapabilityEvidence::missing(reason);
        Self {
            network_enforcement: m(),
            process_tree_isolation: m(),
            cpu_limit: m(),
            memory_limit: m(),
            disk_limit: m(),
            process_limit: m(),
            filesystem_isolation: m(),
            writable_path_enforcement: m(),
            credential_isolation: m(),
        }
    }

    /// The evidence for one capability.
    #[must_use]
    pub fn get(&self, cap: Capability) -> &CapabilityEvidence {
        match cap {
            Capability::NetworkEnforcement => &self.network_enforcement,
            Capability::ProcessTreeIsolation => &self.process_tree_isolation,
            Capability::CpuLimit => &self.cpu_limit,
            Capability::MemoryLimit => &self.memory_limit,
            Capability::DiskLimit => &self.disk_limit,
            Capability::ProcessLimit => &self.process_limit,
            Capability::FilesystemIsolation => &self.filesystem_isolation,
            Capability::WritablePathEnforcement => &self.writable_path_enforcement,
            Capability::CredentialIsolation => &self.credential_isolation,
        }
    }

    /// The evidence for one capability, to record what a probe saw.
    pub fn get_mut(&mut self, cap: Capability) -> &mut CapabilityEvidence {
        match cap {
            Capability::NetworkEnforcement => &mut self.network_enforcement,
            Capability::ProcessTreeIsolation => &mut self.process_tree_isolation,
            Capability::CpuLimit => &mut self.cpu_limit,
            Capability::MemoryLimit => &mut self.memory_limit,
            Capability::DiskLimit => &mut self.disk_limit,
            Capability::ProcessLimit => &mut self.process_limit,
            Capability::FilesystemIsolation => &mut self.filesystem_isolation,
            Capability::WritablePathEnforcement => &mut self.writable_path_enforcement,
            Capability::CredentialIsolation => &mut self.credential_isolation,
        }
    }

    /// The capabilities not enforced, in contract order.
    #[must_use]
    pub fn missing(&self) -> Vec<Capability> {
        Capability::ALL
            .into_iter()
            .filter(|c| !self.get(*c).enforced)
            .collect()
    }
}
