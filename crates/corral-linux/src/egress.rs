//! Allowlist mode (ADR-0030): the egress proxy's listening socket inside the sandbox's
//! network namespace.
//!
//! The sandbox's network namespace is the one init was cloned into: only `lo`, no veth, no
//! route, no DNS. Before init is released, a short-lived supervisor thread `setns()`es into
//! that namespace through init's pidfd, brings `lo` up, creates a TCP socket bound to
//! `127.0.0.1:`[`PROXY_PORT`] and listening, and exits. The socket stays in the sandbox's
//! namespace (a socket belongs to the namespace it was created in), but the descriptor is
//! the supervisor's alone (init is cloned before it exists), and the caller's
//! [`EgressGateway`] serves it from outside the sandbox's PID namespace; the proxy's
//! upstream connections come from the supervisor's network namespace.
//!
//! The namespace is fresh, so the port is always free, and it is fixed so that the worker's
//! environment can be built before init is cloned.

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use corral_contract::Destination;
use corral_contract::manifest::EgressRecord;
use corral_sandbox::{EgressGateway, EgressSession};

/// The proxy's port on the sandbox's loopback (`127.0.0.1`).
pub const PROXY_PORT: u16 = 3128;

/// The proxy variables set in the worker environment (upper and lower case).
pub const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// Removed from the worker environment in allowlist mode: nothing bypasses the proxy.
pub const NO_PROXY_VARS: &[&str] = &["NO_PROXY", "no_proxy"];

/// `http://127.0.0.1:3128`.
#[must_use]
pub fn proxy_url() -> String {
    format!("http://127.0.0.1:{PROXY_PORT}")
}

/// Sets the proxy variables and removes `NO_PROXY`/`no_proxy`.
pub(crate) fn set_proxy_env(env: &mut BTreeMap<String, String>) {
    for k in NO_PROXY_VARS {
        env.remove(*k);
    }
    for k in PROXY_VARS {
        env.insert((*k).to_owned(), proxy_url());
    }
}

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// Runs `f` on a short-lived thread that has joined the network namespace `ns` (a pidfd or
/// an `nsfs` descriptor). The calling thread's namespaces are untouched.
pub(crate) fn in_netns<T: Send>(
    ns: BorrowedFd<'_>,
    f: impl FnOnce() -> io::Result<T> + Send,
) -> io::Result<T> {
    let raw = ns.as_raw_fd();
    std::thread::scope(|s| {
        s.spawn(move || {
            // SAFETY: setns on a descriptor borrowed for the scope; it changes only this
            // thread's network namespace, and the thread ends right after `f`.
            if unsafe { libc::setns(raw, libc::CLONE_NEWNET) } != 0 {
                return Err(last_err());
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("network namespace thread panicked")))
    })
}

/// Creates the proxy's listening socket inside the network namespace of the process behind
/// `init_pidfd` (and brings that namespace's `lo` up).
pub(crate) fn listener_in_netns(init_pidfd: BorrowedFd<'_>) -> io::Result<TcpListener> {
    listener_in_netns_at(init_pidfd, PROXY_PORT)
}

/// A listening socket at `127.0.0.1:port` inside the network namespace of the process
/// behind `init_pidfd` (whose `lo` is brought up): the proxy's, or the model endpoint's
/// ([`corral_sandbox::MODEL_ENDPOINT_PORT`]).
pub(crate) fn listener_in_netns_at(
    init_pidfd: BorrowedFd<'_>,
    port: u16,
) -> io::Result<TcpListener> {
    in_netns(init_pidfd, || {
        if crate::mount::loopback_up() != 0 {
            return Err(last_err());
        }
        TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
    })
}

/// Ends a model session on every path out of the supervisor.
pub(crate) struct ModelSessionGuard(pub Option<Box<dyn corral_sandbox::ModelSession>>);

impl ModelSessionGuard {
    pub fn finish(&mut self) -> corral_sandbox::ModelCalls {
        self.0.take().map(|s| s.finish()).unwrap_or_default()
    }
}

impl Drop for ModelSessionGuard {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            let _ = s.finish();
        }
    }
}

/// The network namespace a socket belongs to, as an `nsfs` descriptor (`SIOCGSKNS`).
pub(crate) fn socket_netns(sock: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    const SIOCGSKNS: libc::c_ulong = 0x894C;
    // SAFETY: SIOCGSKNS takes no argument and returns a new descriptor.
    let fd = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCGSKNS, 0) };
    if fd < 0 {
        return Err(last_err());
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn inode_of(fd: BorrowedFd<'_>) -> io::Result<(u64, u64)> {
    // SAFETY: fstat into a zeroed stat buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd.as_raw_fd(), &raw mut st) } != 0 {
        return Err(last_err());
    }
    Ok((st.st_dev, st.st_ino))
}

/// Interface names of the current thread's network namespace.
pub(crate) fn interfaces() -> io::Result<Vec<String>> {
    // SAFETY: if_nameindex returns a list terminated by a zero entry, freed below.
    let list = unsafe { libc::if_nameindex() };
    if list.is_null() {
        return Err(last_err());
    }
    let mut out = Vec::new();
    let mut p = list;
    // SAFETY: walking the terminated array returned above.
    unsafe {
        while (*p).if_index != 0 && !(*p).if_name.is_null() {
            out.push(
                std::ffi::CStr::from_ptr((*p).if_name)
                    .to_string_lossy()
                    .into_owned(),
            );
            p = p.add(1);
        }
        libc::if_freenameindex(list);
    }
    Ok(out)
}

/// Checks the wiring on a listener handed to a gateway: it is `127.0.0.1:PROXY_PORT` in a
/// network namespace other than the caller's, that namespace has only `lo`, and a
/// connection made from inside that namespace reaches the listener. Used by the probe.
pub(crate) fn verify_listener(listener: &TcpListener) -> io::Result<String> {
    let addr = listener.local_addr()?;
    if addr != SocketAddr::from((Ipv4Addr::LOCALHOST, PROXY_PORT)) {
        return Err(io::Error::other(format!("listener bound to {addr}")));
    }
    let ns = socket_netns(listener.as_fd())?;
    let own = std::fs::File::open("/proc/thread-self/ns/net")?;
    if inode_of(ns.as_fd())? == inode_of(own.as_fd())? {
        return Err(io::Error::other(
            "the listener is in the supervisor's network namespace",
        ));
    }
    let (ifaces, connected) = in_netns(ns.as_fd(), || {
        let ifaces = interfaces()?;
        let c = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        Ok((ifaces, c))
    })?;
    if ifaces != ["lo"] {
        return Err(io::Error::other(format!(
            "sandbox network namespace has interfaces {ifaces:?}"
        )));
    }
    listener.set_nonblocking(true)?;
    let until = Instant::now() + Duration::from_secs(1);
    let accepted = loop {
        match listener.accept() {
            Ok((s, _)) => break Ok(s),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => break Err(e),
        }
    };
    listener.set_nonblocking(false)?;
    drop(accepted?);
    drop(connected);
    Ok(format!(
        "listener {addr} created in the sandbox's own network namespace (interfaces: lo only) by the supervisor, reached from inside that namespace"
    ))
}

/// The probe's gateway: verifies the wiring (see [`verify_listener`]) and serves nothing.
#[derive(Debug, Default)]
pub(crate) struct ProbeGateway {
    pub result: std::sync::Mutex<Option<io::Result<String>>>,
}

struct NoSession;

impl EgressSession for NoSession {
    fn finish(self: Box<Self>) -> Vec<EgressRecord> {
        Vec::new()
    }
}

impl EgressGateway for ProbeGateway {
    fn serve(
        &self,
        listener: TcpListener,
        _allowlist: &[Destination],
        _wall: Duration,
    ) -> io::Result<Box<dyn EgressSession>> {
        let r = verify_listener(&listener);
        if let Ok(mut slot) = self.result.lock() {
            *slot = Some(r);
        }
        Ok(Box::new(NoSession))
    }
}

/// Finishes the session on every ending (errors and panics included: records are dropped).
pub(crate) struct SessionGuard(pub Option<Box<dyn EgressSession>>);

impl SessionGuard {
    pub fn finish(&mut self) -> Vec<EgressRecord> {
        self.0.take().map(EgressSession::finish).unwrap_or_default()
    }
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
