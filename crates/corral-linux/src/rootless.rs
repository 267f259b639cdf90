//! Rootless mode (ADR-0080): what it needs of the host (read without privilege), choosing
//! it, and entering it.
//!
//! corral run by an ordinary user enters rootless mode ([`choose_mode`]) only when the host
//! has everything the mode needs; otherwise every run is refused, and the refusal says what
//! the host lacks ("this host cannot" kept apart from "the request is wrong", as
//! rust-landlock does). Each check is one line a user can act on: the sysctl and its value,
//! the controllers and where, the file and the user.
//!
//! The file checks take the host's root as a parameter (a fake tree in tests); the user
//! namespace check is a real attempt in a throwaway child.

use std::fs;
use std::path::Path;

/// One thing rootless mode needs, and whether this host has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// Whether this host has it.
    pub ok: bool,
    /// Whether rootless mode cannot run without it (subordinate ids only improve it).
    pub required: bool,
    /// One line: what was seen, and when missing, how to fix it.
    pub what: String,
}

impl Need {
    fn ok(what: impl Into<String>) -> Self {
        Self {
            ok: true,
            required: true,
            what: what.into(),
        }
    }
    fn missing(what: impl Into<String>) -> Self {
        Self {
            ok: false,
            required: true,
            what: what.into(),
        }
    }
    fn optional(mut self) -> Self {
        self.required = false;
        self
    }
}

use crate::cgroup::{V2_CONTROLLERS as CONTROLLERS, missing_controllers};

/// Reads a file under `root`, trimmed; `None` when it is absent or unreadable.
fn read(root: &Path, rel: &str) -> Option<String> {
    fs::read_to_string(root.join(rel))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The sysctls that decide whether an ordinary user may make a user namespace and use it.
#[must_use]
pub fn userns_sysctls(root: &Path) -> Vec<Need> {
    let mut v = Vec::new();
    match read(root, "proc/sys/user/max_user_namespaces").as_deref() {
        Some("0") => v.push(Need::missing(
            "user namespaces are disabled (user.max_user_namespaces = 0): set it above 0",
        )),
        Some(n) => v.push(Need::ok(format!("user.max_user_namespaces = {n}"))),
        None => v.push(Need::missing(
            "the kernel has no user namespaces (no /proc/sys/user/max_user_namespaces)",
        )),
    }
    // Debian's patch before 11: off by default on older kernels.
    if read(root, "proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        v.push(Need::missing(
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0): \
             set it to 1",
        ));
    }
    // Ubuntu 23.10+: creating one is allowed, but it holds no capabilities unless an
    // AppArmor profile allows them for the binary (bubblewrap ships bwrap-userns-restrict;
    // `corral setup apparmor` installs corral's). Unconfined, corral is restricted; under a
    // profile (its own, or one an administrator wrote) the real attempt that follows decides.
    if read(
        root,
        "proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    )
    .as_deref()
        == Some("1")
    {
        let label = apparmor_label(root);
        match label.as_deref() {
            None | Some("unconfined") => v.push(Need::missing(
                "AppArmor restricts unprivileged user namespaces \
                 (kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu 23.10 and later) and \
                 corral runs unconfined: run `sudo corral setup apparmor` once (a profile that \
                 allows `userns` for this binary), or set the sysctl to 0",
            )),
            Some(l) => v.push(Need::ok(format!(
                "AppArmor restricts unprivileged user namespaces \
                 (kernel.apparmor_restrict_unprivileged_userns = 1) and corral runs under the \
                 AppArmor profile {l:?} (`corral setup apparmor` installs one allowing `userns`)"
            ))),
        }
    }
    v
}

/// Where Ubuntu's restriction is on, the mode line says which profile let corral through.
fn apparmor_clause(root: &Path) -> Option<String> {
    (read(
        root,
        "proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    )
    .as_deref()
        == Some("1"))
    .then(|| {
        format!(
            "; AppArmor restricts unprivileged user namespaces here and corral runs under the \
             profile {:?}",
            apparmor_label(root).unwrap_or_default()
        )
    })
}

/// corral's own AppArmor label ("unconfined", or "corral (unconfined)" under the profile
/// `corral setup apparmor` installs): the LSM-specific file first (5.x kernels with LSM
/// stacking), else the shared one.
fn apparmor_label(root: &Path) -> Option<String> {
    read(root, "proc/self/attr/apparmor/current")
        .or_else(|| read(root, "proc/self/attr/current"))
        .filter(|l| !l.is_empty())
}

/// Overlay inside a user namespace: Linux 5.11.
#[must_use]
pub fn kernel_release(release: &str) -> Need {
    let mut parts = release.split(['.', '-']).map(|p| p.parse::<u32>().ok());
    let (major, minor) = (parts.next().flatten(), parts.next().flatten());
    match (major, minor) {
        (Some(a), Some(b)) if (a, b) >= (5, 11) => Need::ok(format!("Linux {release}")),
        (Some(_), Some(_)) => Need::missing(format!(
            "overlay in a user namespace needs Linux >= 5.11; this kernel is {release}"
        )),
        _ => Need::missing(format!("unreadable kernel release {release:?}")),
    }
}

/// cgroup v2 delegated to `uid`: corral's own cgroup (from `/proc/self/cgroup`) on a pure v2
/// hierarchy, owned by the user, with the controllers available. rlimits are no substitute.
#[must_use]
pub fn cgroup_delegation(root: &Path, self_cgroup: &str, uid: u32) -> Need {
    use std::os::unix::fs::MetadataExt as _;
    let lines: Vec<&str> = self_cgroup.lines().filter(|l| !l.is_empty()).collect();
    let v1: Vec<&str> = lines
        .iter()
        .filter(|l| !l.starts_with("0::"))
        .filter_map(|l| l.split(':').nth(1))
        .filter(|c| !c.is_empty() && !c.starts_with("name="))
        .collect();
    if !v1.is_empty() {
        return Need::missing(format!(
            "cgroup v2 with {} delegated to uid {uid}: this host mounts cgroup v1 controllers \
             ({}); rootless mode needs a pure cgroup v2 host (systemd.unified_cgroup_hierarchy=1)",
            CONTROLLERS.join(", "),
            v1.join(", ")
        ));
    }
    let Some(path) = lines.iter().find_map(|l| l.strip_prefix("0::")) else {
        return Need::missing("no cgroup v2 line in /proc/self/cgroup");
    };
    let dir = root
        .join("sys/fs/cgroup")
        .join(path.trim_start_matches('/'));
    let owner = fs::metadata(&dir).map(|m| m.uid());
    let have = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    let missing = missing_controllers(&have);
    let fix = "run corral under systemd's user manager, for example \
               `systemd-run --user --scope -p Delegate=yes corral ...`";
    match owner {
        Ok(o) if o != uid => Need::missing(format!(
            "corral's cgroup {path} belongs to uid {o}, not to uid {uid} (not delegated): {fix}"
        )),
        Err(e) => Need::missing(format!("corral's cgroup {path}: {e}")),
        Ok(_) if !missing.is_empty() => Need::missing(format!(
            "controller(s) {} not delegated to corral's cgroup {path}: {fix}",
            missing.join(", ")
        )),
        Ok(_) => Need::ok(format!(
            "cgroup v2 {path} delegated to uid {uid} with {}",
            CONTROLLERS.join(", ")
        )),
    }
}

/// The worker's uid and gid inside corral's user namespace when a subordinate range is
/// mapped there (inside ids `1..=count` are the range): an id of its own, distinct from the
/// user's on the host (the range's `SUBID_WORKER`th id). Fixed, so that the base checkouts
/// it owns (the workspace's lower layer cannot be idmapped in rootless mode) serve every run.
pub const SUBID_WORKER: u32 = 1000;

/// The user's subordinate ranges (`/etc/subuid`, `/etc/subgid`), mapped into corral's user
/// namespace after the user's own id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubIds {
    /// First subordinate uid on the host, and how many (at most 65536 are mapped).
    pub uids: (u64, u64),
    /// First subordinate gid on the host, and how many (at most 65536 are mapped).
    pub gids: (u64, u64),
}

impl SubIds {
    /// The worker's uid on the host.
    #[must_use]
    pub fn worker_host_uid(&self) -> u64 {
        self.uids.0 + u64::from(SUBID_WORKER) - 1
    }
}

/// A subordinate range: its first id on the host, and how many.
type Range = (u64, u64);

/// The user's ranges in `/etc/subuid` and `/etc/subgid` (by name or uid) under `root`, and
/// whether `newuidmap`/`newgidmap` are installed; ranges too small for [`SUBID_WORKER`] are
/// none.
fn subordinate_ranges(
    root: &Path,
    uid: u32,
    user: Option<&str>,
) -> (Option<Range>, Option<Range>, bool) {
    let range = |file: &str| -> Option<Range> {
        read(root, file)?.lines().find_map(|l| {
            let mut f = l.split(':');
            let who = f.next()?;
            if who != uid.to_string() && Some(who) != user {
                return None;
            }
            let (start, count): (u64, u64) = (f.next()?.parse().ok()?, f.next()?.parse().ok()?);
            (count >= u64::from(SUBID_WORKER)).then_some((start, count.min(65536)))
        })
    };
    let tools = ["usr/bin/newuidmap", "usr/bin/newgidmap"]
        .iter()
        .all(|t| root.join(t).exists());
    (range("etc/subuid"), range("etc/subgid"), tools)
}

/// The user's name for `/etc/subuid` and `/etc/subgid`: from `/etc/passwd` under `root` by
/// uid, not from `USER`, which a service may not set and a caller may set to anything.
fn user_name(root: &Path, uid: u32) -> Option<String> {
    read(root, "etc/passwd")?.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        (f.nth(1)? == uid.to_string()).then(|| name.to_owned())
    })
}

/// A subordinate id range (`/etc/subuid`, `/etc/subgid`) for the user and `newuidmap`: then
/// the worker gets ids of its own, distinct from the user's. Not required: without them the
/// worker is the user's own uid inside the namespace (ADR-0080).
#[must_use]
pub fn subordinate_ids(root: &Path, uid: u32, user: Option<&str>) -> Need {
    let found = match subordinate_ranges(root, uid, user) {
        (Some((u, n)), Some(_), true) => Need::ok(format!(
            "subordinate ids {u}..{} for uid {uid} (the worker gets ids of its own)",
            u + n
        )),
        (Some(_), Some(_), false) => Need::missing(
            "newuidmap/newgidmap are not installed (Debian: the uidmap package): the worker would \
             run as your own uid",
        ),
        _ => Need::missing(format!(
            "no /etc/subuid and /etc/subgid range of {SUBID_WORKER} or more ids for uid {uid}: \
             the worker would run as your own uid (add one with `usermod --add-subuids`/\
             `--add-subgids`)"
        )),
    };
    found.optional()
}

/// A real attempt: a throwaway child in a new user and mount namespace maps the caller's uid
/// and gid to 0 and mounts a tmpfs, which is what rootless mode does first. Refused where
/// user namespaces are off, or where (Ubuntu's AppArmor restriction) the namespace holds no
/// capabilities.
#[must_use]
pub fn userns_attempt() -> Need {
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // Everything the child needs is built before the clone: it may not allocate.
    let uid_map = format!("0 {uid} 1");
    let gid_map = format!("0 {gid} 1");
    let paths = [
        c"/proc/self/setgroups",
        c"/proc/self/uid_map",
        c"/proc/self/gid_map",
    ];
    let data: [&[u8]; 3] = [b"deny", uid_map.as_bytes(), gid_map.as_bytes()];
    // SAFETY: fork-like clone into new user and mount namespaces; the child makes only raw
    // system calls on data built before the clone and exits with a code naming the step that
    // failed.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        return Need::missing(format!("the kernel refused a new user namespace: {e}"));
    }
    if pid == 0 {
        // SAFETY: raw system calls in the child on memory of this copy of the address space.
        unsafe {
            for (i, (p, d)) in paths.iter().zip(data).enumerate() {
                let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 || libc::write(fd, d.as_ptr().cast(), d.len()) != d.len() as isize {
                    libc::_exit(10 + i as i32);
                }
                libc::close(fd);
            }
            if libc::mount(
                c"none".as_ptr(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                libc::_exit(13);
            }
            if libc::mount(
                c"corral-probe".as_ptr(),
                c"/tmp".as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                c"size=64k".as_ptr().cast(),
            ) != 0
            {
                libc::_exit(14);
            }
            libc::_exit(0);
        }
    }
    let pid = libc::pid_t::try_from(pid).unwrap_or(-1);
    match crate::sys::waitpid(pid) {
        Ok(st) if !libc::WIFEXITED(st) => Need::missing(format!(
            "the user namespace child ended by signal (status {st})"
        )),
        Ok(st) if libc::WEXITSTATUS(st) == 0 => {
            Need::ok("a user namespace where corral is root and may mount a tmpfs")
        }
        Ok(st) => {
            let code = libc::WEXITSTATUS(st);
            let step = match code {
                10 => "writing /proc/self/setgroups",
                11 => "mapping the uid (/proc/self/uid_map)",
                12 => "mapping the gid (/proc/self/gid_map)",
                13 => "making its mounts private",
                14 => "mounting a tmpfs",
                _ => "an unknown step",
            };
            Need::missing(format!(
                "a new user namespace was made, but {step} failed inside it (exit {code}): the \
                 namespace holds no capabilities here"
            ))
        }
        Err(e) => Need::missing(format!("waiting for the user namespace child: {e}")),
    }
}

/// The host's ids of the user corral runs as, once corral has entered a user namespace of
/// its own ([`choose_mode`]): rootless mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rootless {
    /// The invoking user's uid on the host (0 inside corral's user namespace).
    pub host_uid: u32,
    /// The invoking user's gid on the host (0 inside).
    pub host_gid: u32,
    /// The subordinate ranges mapped after the user's id, when the host has them: the worker
    /// is then [`SUBID_WORKER`] inside, an id of its own on the host.
    pub subids: Option<SubIds>,
}

impl Rootless {
    /// The worker's uid and gid inside corral's user namespace.
    #[must_use]
    pub fn worker_ids(&self) -> (u32, u32) {
        if self.subids.is_some() {
            (SUBID_WORKER, SUBID_WORKER)
        } else {
            (0, 0)
        }
    }
}

static ENTERED: std::sync::OnceLock<Rootless> = std::sync::OnceLock::new();
static REFUSED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Whether this process runs in rootless mode, and as whom on the host.
#[must_use]
pub fn active() -> Option<Rootless> {
    ENTERED.get().copied()
}

/// The uid and gid the base checkouts must belong to in this process's mode: the worker's,
/// in rootless mode with subordinate ids (its lower layer cannot be idmapped there); `None`
/// otherwise.
#[must_use]
pub fn workspace_owner() -> Option<(u32, u32)> {
    active()
        .filter(|r| r.subids.is_some())
        .map(|r| r.worker_ids())
}

/// Why rootless mode could not start in this process (`None`: it started, or was never tried
/// because corral runs as root).
#[must_use]
pub fn refusal() -> Option<&'static str> {
    REFUSED.get().map(String::as_str)
}

/// Whether `uid_map` (the text of /proc/self/uid_map) is the initial user namespace's: every
/// id mapped to itself.
#[must_use]
pub fn is_initial_uid_map(uid_map: &str) -> bool {
    let lines: Vec<Vec<&str>> = uid_map
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|f: &Vec<&str>| !f.is_empty())
        .collect();
    lines.len() == 1 && lines[0] == ["0", "0", "4294967295"]
}

/// When corral runs as uid 0 of a user namespace it did not make (`unshare -r`, a rootless
/// container): the reason root mode cannot run there, naming the mapping and the fix. Root
/// mode needs the host's root (idmapped mounts, the host's cgroups); `None` in the initial
/// namespace and in corral's own rootless one.
#[must_use]
pub fn foreign_user_namespace() -> Option<String> {
    if active().is_some() {
        return None;
    }
    let map = fs::read_to_string("/proc/self/uid_map").ok()?;
    (!is_initial_uid_map(&map)).then(|| {
        format!(
            "corral runs as uid 0 of a user namespace it did not make (uid_map {:?}), where \
             root mode cannot work (it needs the host's root): run corral outside that \
             namespace, as root or as an ordinary user (rootless mode)",
            map.split_whitespace().collect::<Vec<_>>().join(" ")
        )
    })
}

/// Chooses the mode for this process (ADR-0080). As root: root mode, nothing to do. As an
/// ordinary user: the preflight first; when the host has every required thing, corral
/// enters a user namespace of its own (the invoking uid and gid mapped to 0, nothing else)
/// and a mount namespace owned by it, and everything it does afterwards (the probe, the
/// sandbox, the helpers it starts) happens there with no authority on the host beyond the
/// user's. When anything is missing, or entering fails, the reason is kept for the probe,
/// which then attests nothing: never a weaker sandbox.
///
/// Must be called while the process has one thread (`unshare(CLONE_NEWUSER)` refuses a
/// multi-threaded caller); `corral`'s `main` calls it before anything else.
pub fn choose_mode() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 || ENTERED.get().is_some() {
        return;
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    // A cgroup of corral's own first, while the user's bus still knows corral as the user
    // (inside the user namespace its credentials would claim uid 0).
    let mut asked = String::new();
    if crate::systemd::is_init() && wants_own_scope(uid) {
        match ask_user_manager_for_scope() {
            Ok(unit) => {
                let _ = crate::cgroup::SYSTEMD_SCOPE.set(Ok(unit));
            }
            Err(e) => {
                asked = format!(
                    " (corral asked the user's systemd manager for a delegated scope: {e})"
                );
                let _ = crate::cgroup::SYSTEMD_SCOPE.set(Err(e));
            }
        }
    }
    let needs = preflight();
    let missing: Vec<&str> = needs
        .iter()
        .filter(|n| !n.ok && n.required)
        .map(|n| n.what.as_str())
        .collect();
    let outcome = if missing.is_empty() {
        // USER only for a name passwd does not list (NSS): newuidmap checks the ranges again.
        let user = user_name(Path::new("/"), uid).or_else(|| std::env::var("USER").ok());
        let subids = match subordinate_ranges(Path::new("/"), uid, user.as_deref()) {
            (Some(uids), Some(gids), true) => Some(SubIds { uids, gids }),
            _ => None,
        };
        enter(subids)
    } else {
        Err(format!("this host lacks: {}{asked}", missing.join("; ")))
    };
    match outcome {
        Ok(r) => {
            let _ = ENTERED.set(r);
        }
        Err(e) => {
            let _ = REFUSED.set(e);
        }
    }
}

/// Whether corral, as `uid`, should ask the user's manager for a scope of its own: its cgroup
/// is on a pure v2 hierarchy but not delegated to the user (a login session's scope is
/// root's), lacks a controller, or holds processes that are not corral's (a shell, a test
/// harness), where "no internal processes" would forbid enabling controllers.
fn wants_own_scope(uid: u32) -> bool {
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let v1 = own.lines().any(|l| {
        !l.is_empty()
            && !l.starts_with("0::")
            && l.split(':')
                .nth(1)
                .is_some_and(|c| !c.is_empty() && !c.starts_with("name="))
    });
    if v1 || !own.lines().any(|l| l.starts_with("0::")) {
        return false;
    }
    !cgroup_delegation(Path::new("/"), &own, uid).ok || crate::cgroup::self_needs_own_scope()
}

/// A close-on-exec pipe (read end, write end) for talking to a forked child.
fn cloexec_pipe() -> Result<(fs::File, fs::File), String> {
    use std::os::fd::FromRawFd as _;
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out-array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just made and are owned here only.
    Ok(unsafe { (fs::File::from_raw_fd(fds[0]), fs::File::from_raw_fd(fds[1])) })
}

/// Asks the user's systemd manager, over the user's bus, for a transient scope with
/// `Delegate=yes` holding corral itself (`systemd-run --user --scope -p Delegate=yes` done
/// for the user); systemd removes it when corral's last process has gone. The conversation
/// runs in a forked child: the D-Bus library starts threads, and corral must stay
/// single-threaded to enter its user namespace afterwards. Returns the unit name.
fn ask_user_manager_for_scope() -> Result<String, String> {
    use std::io::{Read as _, Write as _};
    let me = std::process::id();
    let (mut rx, tx) = cloexec_pipe()?;
    // SAFETY: corral has one thread here (see `choose_mode`), so the child is a whole copy
    // of it and may allocate and start threads; it leaves only through `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(rx);
        let mut tx = tx;
        let answer = match crate::systemd::start_delegated_scope_on(crate::systemd::Bus::User, me) {
            Ok(unit) => format!("ok {unit}"),
            Err(e) => format!("err {e}"),
        };
        let _ = tx.write_all(answer.as_bytes());
        // SAFETY: ends the child without running the parent's exit handlers twice.
        unsafe { libc::_exit(0) };
    }
    drop(tx);
    let mut answer = String::new();
    let read = rx.read_to_string(&mut answer);
    let _ = crate::sys::waitpid(pid);
    read.map_err(|e| format!("reading the answer: {e}"))?;
    let unit = match answer.split_once(' ') {
        Some(("ok", unit)) => unit.to_owned(),
        Some(("err", e)) => return Err(e.to_owned()),
        _ => return Err("the asking process ended without an answer".to_owned()),
    };
    // systemd moved corral: check that it is where the unit is.
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if own
        .lines()
        .any(|l| l.starts_with("0::") && l.trim_end().ends_with(&format!("/{unit}")))
    {
        Ok(unit)
    } else {
        Err(format!(
            "systemd started {unit}, but corral is not in it ({})",
            own.trim()
        ))
    }
}

/// Enters a new user namespace and a new mount namespace it owns, with every mount private.
/// Without subordinate ids the caller's uid and gid are mapped to 0 and nothing else
/// (`setgroups` denied, as an unprivileged map must). With them, a child left outside runs
/// `newuidmap`/`newgidmap` (setuid helpers that check `/etc/subuid`) on corral once it is in
/// the namespace: 0 is the user, `1..=count` the range. Their failure is a refusal, never a
/// quiet fall back to the one id.
fn enter(subids: Option<SubIds>) -> Result<Rootless, String> {
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let rootless = Rootless {
        host_uid: uid,
        host_gid: gid,
        subids,
    };
    let Some(sub) = subids else {
        crate::sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)
            .map_err(|e| format!("entering a user namespace of corral's own: {e}"))?;
        for (file, data) in [
            ("/proc/self/setgroups", "deny".to_owned()),
            ("/proc/self/uid_map", format!("0 {uid} 1")),
            ("/proc/self/gid_map", format!("0 {gid} 1")),
        ] {
            fs::write(file, data).map_err(|e| format!("writing {file}: {e}"))?;
        }
        crate::sys::make_mounts_private()
            .map_err(|e| format!("making corral's mounts private in its namespace: {e}"))?;
        cap_user_counters(Path::new("/"))?;
        return Ok(rootless);
    };
    map_by_helpers(uid, gid, sub)?;
    crate::sys::make_mounts_private()
        .map_err(|e| format!("making corral's mounts private in its namespace: {e}"))?;
    cap_user_counters(Path::new("/"))?;
    Ok(rootless)
}

/// The per-user kernel counters a worker could exhaust for the whole user (corpus RES-PID-02,
/// `[U]`): each is charged to the worker's id in corral's namespace *and* up the hierarchy to
/// the user who made it, whose host limit the user's own programs share. The host's limit
/// (`fs.*`, the initial namespace's), and the namespace's own (`user.*`, `INT_MAX` in a new
/// namespace until set).
const USER_COUNTERS: &[(&str, &str, &str)] = &[
    (
        "inotify instances",
        "proc/sys/fs/inotify/max_user_instances",
        "proc/sys/user/max_inotify_instances",
    ),
    (
        "inotify watches",
        "proc/sys/fs/inotify/max_user_watches",
        "proc/sys/user/max_inotify_watches",
    ),
    (
        "fanotify groups",
        "proc/sys/fs/fanotify/max_user_groups",
        "proc/sys/user/max_fanotify_groups",
    ),
    (
        "fanotify marks",
        "proc/sys/fs/fanotify/max_user_marks",
        "proc/sys/user/max_fanotify_marks",
    ),
];

/// What corral's namespace holds a run to: a quarter of the user's host limit for each
/// counter, so a run (or three) exhausting its own leaves the user's own programs room.
static COUNTERS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The counters' caps, for the probe's evidence (rootless mode only).
#[must_use]
pub fn counters_evidence() -> Option<&'static str> {
    COUNTERS.get().map(String::as_str)
}

/// A quarter of the host's limit, at least 1.
#[must_use]
pub fn counter_cap(host_limit: u64) -> u64 {
    (host_limit / 4).max(1)
}

/// Sets each counter of `USER_COUNTERS` the kernel has in corral's new namespace (`root` is
/// `/` but for tests) to `counter_cap` of the host's limit. A counter the kernel lacks (the
/// fanotify ones before 5.13) is left; one it has but refuses is a refusal of the mode.
fn cap_user_counters(root: &Path) -> Result<(), String> {
    let mut done = Vec::new();
    for (what, host, ns) in USER_COUNTERS {
        let (Some(limit), true) = (
            read(root, host).and_then(|v| v.parse::<u64>().ok()),
            root.join(ns).exists(),
        ) else {
            continue;
        };
        let cap = counter_cap(limit);
        fs::write(root.join(ns), cap.to_string()).map_err(|e| {
            format!(
                "capping the {what} a run may take of the user's ({}): {e}",
                root.join(ns).display()
            )
        })?;
        done.push(format!("{what} {cap} of the user's {limit}"));
    }
    let _ = COUNTERS.set(format!(
        "per-user counters capped in corral's namespace (each run's share of the user's host \
         limit): {}",
        if done.is_empty() {
            "none this kernel has".to_owned()
        } else {
            done.join(", ")
        }
    ));
    Ok(())
}

/// `unshare(CLONE_NEWUSER | CLONE_NEWNS)`, then a child forked before it maps corral's ids
/// with `newuidmap`/`newgidmap`; returns once the maps are written, or why they are not.
fn map_by_helpers(uid: u32, gid: u32, sub: SubIds) -> Result<(), String> {
    use std::io::{Read as _, Write as _};
    let me = std::process::id();
    let (mut go_rx, mut go_tx) = cloexec_pipe()?;
    let (mut answer_rx, answer_tx) = cloexec_pipe()?;
    // `newuidmap PID 0 <own id> 1 1 <range start> <count>`, and the same for gids.
    let map_args = |own: u32, (start, count): Range| -> Vec<String> {
        [me, 0, own]
            .iter()
            .map(u32::to_string)
            .chain([
                "1".to_owned(),
                "1".to_owned(),
                start.to_string(),
                count.to_string(),
            ])
            .collect()
    };
    let (uid_args, gid_args) = (map_args(uid, sub.uids), map_args(gid, sub.gids));
    // SAFETY: corral has one thread here (see `choose_mode`), so the child is a whole copy
    // of it and may allocate and start processes; it leaves only through `_exit`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(go_tx);
        drop(answer_rx);
        let mut answer_tx = answer_tx;
        let mut b = [0u8; 1];
        let answer = if go_rx.read_exact(&mut b).is_err() {
            "corral ended before it entered its namespace".to_owned()
        } else {
            let run = |tool: &str, args: &[String]| -> Result<(), String> {
                let out = std::process::Command::new(tool)
                    .args(args)
                    .output()
                    .map_err(|e| format!("{tool}: {e}"))?;
                if out.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "{tool} {}: {} ({})",
                        args.join(" "),
                        String::from_utf8_lossy(&out.stderr).trim(),
                        out.status
                    ))
                }
            };
            match run("/usr/bin/newuidmap", &uid_args)
                .and_then(|()| run("/usr/bin/newgidmap", &gid_args))
            {
                Ok(()) => "ok".to_owned(),
                Err(e) => e,
            }
        };
        let _ = answer_tx.write_all(answer.as_bytes());
        // SAFETY: ends the child without running the parent's exit handlers twice.
        unsafe { libc::_exit(0) };
    }
    drop(go_rx);
    drop(answer_tx);
    let entered = crate::sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS)
        .map_err(|e| format!("entering a user namespace of corral's own: {e}"));
    if entered.is_ok() {
        let _ = go_tx.write_all(b"g");
    }
    drop(go_tx);
    let mut answer = String::new();
    let _ = answer_rx.read_to_string(&mut answer);
    let _ = crate::sys::waitpid(pid);
    entered?;
    if answer == "ok" {
        Ok(())
    } else {
        Err(format!(
            "mapping the subordinate ids of /etc/subuid and /etc/subgid: {answer} (fix the \
             range or newuidmap, or remove the range to run the worker as your own uid)"
        ))
    }
}

/// The mode corral uses as the user running it now, and why: `corral probe`'s first words
/// after the backend. Root mode only for euid 0 outside any namespace of corral's; rootless
/// mode for anyone else whose host has what it needs; never a fallback (ADR-0080).
#[must_use]
pub fn mode() -> String {
    if let Some(r) = active() {
        let worker = match r.subids {
            Some(s) => format!(
                "the worker is uid {SUBID_WORKER} there, {} on the host, from the user's \
                 subordinate ids",
                s.worker_host_uid()
            ),
            None => "the worker is that one id without capabilities: no subordinate ids are \
                     used"
                .to_owned(),
        };
        return format!(
            "rootless (corral runs as uid {} gid {}, mapped to 0 in a user namespace of its \
             own; {worker}{})",
            r.host_uid,
            r.host_gid,
            apparmor_clause(Path::new("/")).unwrap_or_default()
        );
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 {
        match foreign_user_namespace() {
            Some(why) => format!("none: {why}"),
            None => "root (corral runs as uid 0)".to_owned(),
        }
    } else {
        format!(
            "none: corral runs as uid {euid}, and rootless mode cannot start: {}",
            refusal().unwrap_or("it was not tried (corral's main did not choose a mode)")
        )
    }
}

/// Every check, for the user running corral now.
#[must_use]
pub fn preflight() -> Vec<Need> {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let root = Path::new("/");
    let user = user_name(root, uid).or_else(|| std::env::var("USER").ok());
    let release = read(root, "proc/sys/kernel/osrelease").unwrap_or_default();
    let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut v = userns_sysctls(root);
    v.push(userns_attempt());
    v.push(kernel_release(&release));
    v.push(cgroup_delegation(root, &own, uid));
    v.push(subordinate_ids(root, uid, user.as_deref()));
    v
}

/// One clause for the refusal: what is missing of what is required, or that the host has it.
#[must_use]
pub fn summary(needs: &[Need]) -> String {
    let missing: Vec<&str> = needs
        .iter()
        .filter(|n| !n.ok && n.required)
        .map(|n| n.what.as_str())
        .collect();
    if missing.is_empty() {
        "this host has what it would need (user namespaces with mounts, delegated cgroup v2)"
            .to_owned()
    } else {
        format!("this host would also need: {}", missing.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake host root under the temp folder, removed when dropped (nothing left behind).
    struct Tree(std::path::PathBuf);

    impl std::ops::Deref for Tree {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn tree(files: &[(&str, &str)]) -> Tree {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("corral-rootless-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for (p, c) in files {
            let f = root.join(p);
            fs::create_dir_all(f.parent().unwrap()).unwrap();
            fs::write(f, c).unwrap();
        }
        fs::create_dir_all(&root).unwrap();
        Tree(root)
    }

    #[test]
    fn ubuntus_apparmor_restriction_is_named_with_the_sysctl() {
        let r = tree(&[
            ("proc/sys/user/max_user_namespaces", "63000\n"),
            (
                "proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1\n",
            ),
        ]);
        let v = userns_sysctls(&r);
        let bad: Vec<_> = v.iter().filter(|n| !n.ok).collect();
        assert_eq!(bad.len(), 1, "{v:?}");
        assert!(
            bad[0]
                .what
                .contains("kernel.apparmor_restrict_unprivileged_userns = 1")
                && bad[0].what.contains("sudo corral setup apparmor"),
            "{bad:?}"
        );
        // Under the profile `corral setup apparmor` installs, the real attempt decides.
        let r = tree(&[
            ("proc/sys/user/max_user_namespaces", "63000\n"),
            (
                "proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1\n",
            ),
            ("proc/self/attr/apparmor/current", "corral (unconfined)\n"),
        ]);
        let v = userns_sysctls(&r);
        assert!(v.iter().all(|n| n.ok), "{v:?}");
        assert!(v[1].what.contains("\"corral (unconfined)\""), "{v:?}");
        // Unconfined by the older interface's file is still restricted.
        let r = tree(&[
            ("proc/sys/user/max_user_namespaces", "63000\n"),
            (
                "proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1\n",
            ),
            ("proc/self/attr/current", "unconfined\n"),
        ]);
        assert!(!userns_sysctls(&r)[1].ok);
        // Control: the same host with the restriction off has nothing missing.
        let r = tree(&[
            ("proc/sys/user/max_user_namespaces", "63000\n"),
            (
                "proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "0\n",
            ),
        ]);
        assert!(userns_sysctls(&r).iter().all(|n| n.ok));
    }

    #[test]
    fn the_mode_line_names_the_profile_only_where_the_restriction_is_on() {
        let on = tree(&[
            (
                "proc/sys/kernel/apparmor_restrict_unprivileged_userns",
                "1\n",
            ),
            ("proc/self/attr/apparmor/current", "corral (unconfined)\n"),
        ]);
        assert!(
            apparmor_clause(&on)
                .unwrap()
                .ends_with("runs under the profile \"corral (unconfined)\"")
        );
        let off = tree(&[(
            "proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            "0\n",
        )]);
        assert_eq!(apparmor_clause(&off), None);
    }

    #[test]
    fn only_the_identity_map_of_every_id_is_the_initial_user_namespace() {
        assert!(is_initial_uid_map("         0          0 4294967295\n"));
        for other in [
            "         0       1000          1\n",
            "0 0 4294967295\n1 1 1\n",
            "0 0 65536\n",
            "",
        ] {
            assert!(!is_initial_uid_map(other), "{other:?}");
        }
    }

    #[test]
    fn each_counter_the_kernel_has_is_capped_at_a_quarter_of_the_users() {
        let r = tree(&[
            ("proc/sys/fs/inotify/max_user_instances", "128\n"),
            ("proc/sys/fs/inotify/max_user_watches", "1048576\n"),
            ("proc/sys/user/max_inotify_instances", "2147483647\n"),
            ("proc/sys/user/max_inotify_watches", "2147483647\n"),
            // No fanotify counters in this kernel's namespace: left alone.
            ("proc/sys/fs/fanotify/max_user_groups", "128\n"),
        ]);
        cap_user_counters(&r).unwrap();
        let get = |rel: &str| fs::read_to_string(r.join(rel)).unwrap();
        assert_eq!(get("proc/sys/user/max_inotify_instances"), "32");
        assert_eq!(get("proc/sys/user/max_inotify_watches"), "262144");
        assert!(!r.join("proc/sys/user/max_fanotify_groups").exists());
        assert_eq!(counter_cap(1), 1);
        assert_eq!(counter_cap(3), 1);
    }

    #[test]
    fn disabled_user_namespaces_are_named() {
        let r = tree(&[
            ("proc/sys/user/max_user_namespaces", "0\n"),
            ("proc/sys/kernel/unprivileged_userns_clone", "0\n"),
        ]);
        let v = userns_sysctls(&r);
        assert!(v[0].what.contains("user.max_user_namespaces = 0") && !v[0].ok);
        assert!(v[1].what.contains("kernel.unprivileged_userns_clone = 0") && !v[1].ok);
        assert!(!userns_sysctls(&tree(&[]))[0].ok);
    }

    #[test]
    fn overlay_in_a_user_namespace_needs_5_11() {
        assert!(!kernel_release("5.10.0-32-amd64").ok);
        assert!(kernel_release("5.10.0-32-amd64").what.contains(">= 5.11"));
        assert!(kernel_release("5.11.0").ok);
        assert!(kernel_release("6.1.0-57-amd64").ok);
        assert!(!kernel_release("garbage").ok);
    }

    #[test]
    fn cgroup_v1_controllers_are_named() {
        let r = tree(&[]);
        let own = "12:pids:/user.slice\n4:memory:/user.slice\n1:name=systemd:/user.slice\n0::/user.slice\n";
        let n = cgroup_delegation(&r, own, 1000);
        assert!(!n.ok);
        assert!(
            n.what.contains("cgroup v1 controllers (pids, memory)"),
            "{n:?}"
        );
    }

    #[test]
    fn cgroup_v2_delegation_needs_ownership_and_the_controllers() {
        use std::os::unix::fs::MetadataExt as _;
        let path = "user.slice/user-1000.slice/user@1000.service/app.slice/x.scope";
        let r = tree(&[(
            &format!("sys/fs/cgroup/{path}/cgroup.controllers"),
            "cpu memory pids\n",
        )]);
        let owner = fs::metadata(r.join("sys/fs/cgroup").join(path))
            .unwrap()
            .uid();
        let own = format!("0::/{path}\n");
        assert!(cgroup_delegation(&r, &own, owner).ok);
        // Someone else's group: not delegated.
        let n = cgroup_delegation(&r, &own, owner + 1);
        assert!(!n.ok && n.what.contains("not delegated"), "{n:?}");
        assert!(
            n.what
                .contains("systemd-run --user --scope -p Delegate=yes")
        );
        // A controller missing is named.
        fs::write(
            r.join("sys/fs/cgroup")
                .join(path)
                .join("cgroup.controllers"),
            "memory pids\n",
        )
        .unwrap();
        let n = cgroup_delegation(&r, &own, owner);
        assert!(
            !n.ok && n.what.contains("controller(s) cpu not delegated"),
            "{n:?}"
        );
    }

    #[test]
    fn subordinate_ids_by_name_or_uid_with_the_tools() {
        let r = tree(&[
            ("etc/subuid", "alice:100000:65536\n"),
            ("etc/subgid", "1000:100000:65536\n"),
            ("usr/bin/newuidmap", ""),
            ("usr/bin/newgidmap", ""),
        ]);
        let n = subordinate_ids(&r, 1000, Some("alice"));
        assert!(n.ok && n.what.contains("100000..165536"), "{n:?}");
        assert!(!subordinate_ids(&r, 1001, Some("bob")).ok);
        let r = tree(&[
            ("etc/subuid", "alice:100000:65536\n"),
            ("etc/subgid", "alice:100000:65536\n"),
        ]);
        assert!(
            subordinate_ids(&r, 1000, Some("alice"))
                .what
                .contains("uidmap package")
        );
    }

    #[test]
    fn the_user_is_named_by_passwd_not_by_the_environment() {
        let r = tree(&[(
            "etc/passwd",
            "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\n",
        )]);
        assert_eq!(user_name(&r, 1000).as_deref(), Some("alice"));
        assert_eq!(user_name(&r, 0).as_deref(), Some("root"));
        assert_eq!(user_name(&r, 1001), None);
    }

    #[test]
    fn the_summary_lists_what_is_missing_and_not_the_optional_ids() {
        let needs = [
            Need::ok("a"),
            Need::missing("cgroup missing"),
            Need::missing("no /etc/subuid range").optional(),
        ];
        assert_eq!(summary(&needs), "this host would also need: cgroup missing");
        assert!(summary(&needs[..1]).starts_with("this host has what it would need"));
    }
}
