//! The backend's tunables ([`LinuxConfig`]) and the fixed names of the sandbox's world:
//! the worker's `PATH`, `HOME`, `TMPDIR`, its id range and the masked `/proc` files.

use std::path::Path;
use std::time::Duration;

/// Tunables of the backend. Defaults are what `corral` uses.
#[derive(Debug, Clone)]
pub struct LinuxConfig {
    /// The worker's uid and gid. The workspace owner is idmapped to it. Default:
    /// `WORKER_ID_BASE + pid of this process`, an id no host user and no other live
    /// supervisor has, so the kernel's per-user counters (inotify instances, keyring quota,
    /// pipe pages, message-queue bytes, RLIMIT_NPROC) are never shared with a host user or
    /// another corral (RES-PID-02; ADR-0010).
    pub worker_uid: u32,
    /// The worker's gid. Default: the same id as `worker_uid`.
    pub worker_gid: u32,
    /// The most CPU bandwidth a run gets, in thousandths of a CPU (default: all of the CPUs
    /// this process may use). A budget's `cpu_millicores` lowers it, never raises it.
    pub cpu_bandwidth_millicores: u64,
    /// The period of the CPU bandwidth cap, in microseconds (default 100 ms).
    pub cpu_period_us: u64,
    /// How often the supervisor checks the cgroup's CPU usage against `cpu_seconds`.
    pub cpu_check_interval: Duration,
    /// How long output readers wait for end of file after the sandbox is gone.
    pub drain_grace: Duration,
    /// Where the probe makes its throwaway workspace and idmapped lower: the file system the
    /// base checkouts live on (corral's cache), so idmapped mounts are tested where runs need
    /// them. `None`: the system temp folder.
    pub probe_dir: Option<std::path::PathBuf>,
}

/// The one-line refusal when the workspace's file system cannot be idmapped (`dir` is on it).
pub(crate) fn no_idmap_message(dir: &Path) -> String {
    format!(
        "the file system of {} has no idmapped mounts (tmpfs gained them in Linux 6.3; ext4, \
         xfs and btrfs have them since 5.12 to 5.19): put corral's cache on one that has them \
         (XDG_CACHE_HOME), or use Linux 6.3 or later",
        dir.display()
    )
}

/// First id of the range the worker's uid/gid come from (`+ pid`, pid_max <= 2^22): above
/// every regular, system, systemd dynamic (61184-65519) and nspawn dynamic
/// (0x00080000-0x6FFFFFFF) range, below systemd's container base (0x7FFF0000).
pub const WORKER_ID_BASE: u32 = 2_000_000_000;

impl Default for LinuxConfig {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get) as u64;
        // Rootless mode: the user's one mapped id (0), or with subordinate ids one of those
        // (ADR-0080). Root mode gives the worker an id of its own per supervisor.
        let (uid, gid) = crate::rootless::active().map_or_else(
            || {
                let id = WORKER_ID_BASE + std::process::id();
                (id, id)
            },
            |r| r.worker_ids(),
        );
        Self {
            worker_uid: uid,
            worker_gid: gid,
            cpu_bandwidth_millicores: cpus * 1000,
            cpu_period_us: 100_000,
            cpu_check_interval: Duration::from_millis(20),
            drain_grace: Duration::from_millis(100),
            probe_dir: None,
        }
    }
}

/// The worker's `PATH`.
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
/// The worker's `HOME`, private to the sandbox.
pub const SANDBOX_HOME: &str = "/home/corral";

/// `/proc` files masked with `/dev/null` in the sandbox: the kernel keyring is not namespaced
/// (`keys`, `key-users` list what the sandbox uid can view on the host), and the rest expose
/// host-wide timers, scheduler and kernel memory state (adversarial case CRED-06).
pub const PROC_MASKED: &[&str] = &[
    "keys",
    "key-users",
    "timer_list",
    "sched_debug",
    "kcore",
    "latency_stats",
];
/// The worker's `TMPDIR`, private to the sandbox.
pub const SANDBOX_TMP: &str = "/tmp";
