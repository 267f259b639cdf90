//! Generic host-side checks (corpus §0.3, check 4): a snapshot of what an escape could change
//! on the host, taken before and after every case and compared.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use sha2::{Digest as _, Sha256};

/// Files whose bytes, mode, owner and mtime must not change.
const FILES: &[&str] = &[
    "/etc/passwd",
    "/etc/shadow",
    "/etc/group",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/etc/ld.so.preload",
    "/etc/ld.so.cache",
    "/bin/sh",
    "/bin/bash",
    "/usr/bin/env",
    "/usr/bin/python3",
    "/usr/bin/git",
    "/usr/bin/passwd",
    "/usr/lib/os-release",
];

/// Directories whose mode, owner and entries must not change.
const DIRS: &[&str] = &[
    "/", "/etc", "/usr/bin", "/opt", "/var/lib", "/boot", "/dev/shm",
];

/// Kernel settings an escape would aim at.
const SETTINGS: &[&str] = &[
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/kernel/modprobe",
    "/proc/sys/kernel/hostname",
    "/proc/sys/kernel/domainname",
    "/proc/sys/kernel/io_uring_disabled",
    "/proc/sys/kernel/unprivileged_bpf_disabled",
    "/proc/sys/kernel/yama/ptrace_scope",
    "/proc/sys/vm/overcommit_memory",
    "/proc/sys/net/ipv4/ip_forward",
    "/sys/kernel/mm/ksm/run",
    "/sys/kernel/uevent_helper",
];

pub type Snapshot = BTreeMap<String, String>;

/// Takes the snapshot. `extra` adds files to hash (the corral binary under test).
pub fn snapshot(extra: &[&Path]) -> Snapshot {
    let mut s = Snapshot::new();
    for f in FILES.iter().map(Path::new).chain(extra.iter().copied()) {
        s.insert(format!("file {}", f.display()), describe_file(f));
    }
    // corral's default store and cache of the invoking user: the suite must never write
    // there (every run gets its own HOME, XDG dirs and --artifacts under the scratch folder).
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let own = [
        format!("{home}/.cache/corral/base"),
        format!("{home}/.local/share/corral/artifacts/sha256"),
        "/var/cache/corral/base".to_owned(),
        "/var/lib/corral/artifacts/sha256".to_owned(),
    ];
    for d in DIRS.iter().copied().chain(own.iter().map(String::as_str)) {
        let mut names: Vec<String> = std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        let meta = std::fs::symlink_metadata(d)
            .map(|m| format!("mode {:o} owner {}:{}", m.mode(), m.uid(), m.gid()))
            .unwrap_or_else(|e| e.to_string());
        s.insert(
            format!("dir {d}"),
            format!("{meta}; entries {}", names.join(" ")),
        );
    }
    for k in SETTINGS {
        let v = std::fs::read_to_string(k).unwrap_or_else(|_| "<absent>".into());
        s.insert(format!("setting {k}"), v.trim().to_owned());
    }
    let by_controls = CONTROL_MODULES
        .lock()
        .map(|m| m.clone())
        .unwrap_or_default();
    let modules: Vec<String> = loaded_modules()
        .into_iter()
        .filter(|m| !by_controls.contains(m))
        .collect();
    s.insert("kernel modules".into(), modules.join(" "));
    for ipc in ["shm", "msg", "sem"] {
        let ids: Vec<String> = std::fs::read_to_string(format!("/proc/sysvipc/{ipc}"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_owned))
            .collect();
        s.insert(format!("sysv ipc {ipc}"), ids.join(" "));
    }
    let mut netns: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    netns.sort();
    s.insert("network namespaces".into(), netns.join(" "));
    let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let sep = f.iter().position(|x| *x == "-")?;
            // systemd-logind's per-user runtime folders come and go with logins (a control's
            // `su` opens a PAM session, and the folder is unmounted when the user's last
            // session has ended, some seconds later): not the sandbox's doing.
            if f.get(4)?.starts_with("/run/user/") {
                return None;
            }
            Some(format!("{} {} {}", f.get(4)?, f.get(sep + 1)?, f.get(5)?))
        })
        .collect();
    mounts.sort();
    s.insert("host mounts".into(), mounts.join("\n"));
    s
}

/// Kernel modules the harness's own work outside the sandbox made the kernel load on demand
/// (a control's `socket(AF_VSOCK)`, a veth pair for a control's namespace). Modules cannot
/// be unloaded safely, so they are not held against the case; a module the sandbox made the
/// kernel load before any control did still is.
static CONTROL_MODULES: std::sync::Mutex<std::collections::BTreeSet<String>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

fn loaded_modules() -> std::collections::BTreeSet<String> {
    std::fs::read_to_string("/proc/modules")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// Runs `f`, work of the harness outside the sandbox, and attributes the kernel modules
/// loaded meanwhile to it (see [`CONTROL_MODULES`]).
pub fn outside_sandbox<T>(f: impl FnOnce() -> T) -> T {
    let before = loaded_modules();
    let out = f();
    let new: Vec<String> = loaded_modules().difference(&before).cloned().collect();
    if let Ok(mut m) = CONTROL_MODULES.lock() {
        m.extend(new);
    }
    out
}

fn describe_file(p: &Path) -> String {
    match std::fs::symlink_metadata(p) {
        Err(_) => "<absent>".into(),
        Ok(m) => {
            let digest = if m.is_file() {
                std::fs::read(p)
                    .map(|b| format!("{:x}", Sha256::digest(&b)))
                    .unwrap_or_else(|e| e.to_string())
            } else {
                std::fs::read_link(p)
                    .map(|t| format!("-> {}", t.display()))
                    .unwrap_or_default()
            };
            format!(
                "{digest} mode {:o} owner {}:{} mtime {}.{}",
                m.mode(),
                m.uid(),
                m.gid(),
                m.mtime(),
                m.mtime_nsec()
            )
        }
    }
}

/// What changed between two snapshots, one line per key.
pub fn diff(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for (k, a) in before {
        let b = after.get(k).map(String::as_str).unwrap_or("<missing>");
        if a != b {
            out.push(format!(
                "host changed: {k}: {} -> {}",
                super::harness::truncate(&first_diff(a, b).0, 200),
                super::harness::truncate(&first_diff(a, b).1, 200)
            ));
        }
    }
    out
}

/// The lines that differ (for multi-line values such as the mount table).
fn first_diff(a: &str, b: &str) -> (String, String) {
    if !a.contains('\n') && !b.contains('\n') {
        return (a.to_owned(), b.to_owned());
    }
    let la: std::collections::BTreeSet<&str> = a.lines().collect();
    let lb: std::collections::BTreeSet<&str> = b.lines().collect();
    let gone: Vec<&str> = la.difference(&lb).copied().collect();
    let new: Vec<&str> = lb.difference(&la).copied().collect();
    (
        format!("gone [{}]", gone.join("; ")),
        format!("new [{}]", new.join("; ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_file_is_a_difference() {
        let dir = std::env::temp_dir().join(format!("corral-adv-host-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x");
        std::fs::write(&f, "a").unwrap();
        let a = snapshot(&[&f]);
        std::fs::write(&f, "b").unwrap();
        let b = snapshot(&[&f]);
        let d = diff(&a, &b);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(d.iter().any(|l| l.contains("/x")), "{d:?}");
    }
}
