//! Test helper: attacks the sandbox from inside with raw system calls and prints what
//! happened. The integration tests bind it read-only into the sandbox (and run it outside
//! as the positive control). Not part of the product.
#![allow(unsafe_code, reason = "the attacks are raw system calls")]
#![allow(clippy::print_stdout, reason = "the helper reports on stdout")]

use std::ffi::CString;
use std::io::Write as _;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn ename(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOSYS => "ENOSYS",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        libc::EBADF => "EBADF",
        libc::EFAULT => "EFAULT",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::ENOTTY => "ENOTTY",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ENOSPC => "ENOSPC",
        libc::EAGAIN => "EAGAIN",
        libc::EROFS => "EROFS",
        _ => "OTHER",
    }
}

/// Each denied call: name, result (`OK` or errno name).
fn syscalls() -> i32 {
    let mut buf = [0u8; 256];
    let p = buf.as_mut_ptr();
    let dev = c"/nonexistent-corral".as_ptr();
    // SAFETY: every call gets valid pointers (a zeroed buffer, C string literals) or
    // invalid descriptors/pids that make the kernel fail harmlessly when reached.
    let calls: Vec<(&str, (libc::c_long, i32))> = unsafe {
        let r = |rc: libc::c_long| (rc, errno());
        vec![
            (
                "unshare(NEWUSER|1<<40)",
                r(libc::syscall(
                    libc::SYS_unshare,
                    0x1000_0000u64 | (1u64 << 40),
                )),
            ),
            (
                "unshare(NEWNS)",
                r(libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNS)),
            ),
            ("setns", r(libc::syscall(libc::SYS_setns, -1, 0))),
            (
                "clone(NEWUSER)",
                r(libc::syscall(
                    libc::SYS_clone,
                    0x1000_0000u64 | (1u64 << 40),
                    1usize,
                    0,
                    0,
                    0,
                )),
            ),
            ("clone3", r(libc::syscall(libc::SYS_clone3, 0usize, 0usize))),
            (
                "open_tree",
                r(libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, dev, 0)),
            ),
            (
                "mount",
                r(libc::syscall(
                    libc::SYS_mount,
                    dev,
                    dev,
                    0usize,
                    libc::MS_BIND,
                    0usize,
                )),
            ),
            (
                "umount2",
                r(libc::syscall(libc::SYS_umount2, dev, libc::MNT_DETACH)),
            ),
            (
                "mount_setattr",
                r(libc::syscall(
                    libc::SYS_mount_setattr,
                    -1,
                    c"".as_ptr(),
                    0,
                    0usize,
                    0,
                )),
            ),
            (
                "fsopen",
                r(libc::syscall(
                    libc::SYS_fsopen,
                    c"nonexistent-fs".as_ptr(),
                    0,
                )),
            ),
            (
                "pivot_root",
                r(libc::syscall(libc::SYS_pivot_root, dev, dev)),
            ),
            ("keyctl", r(libc::syscall(libc::SYS_keyctl, 0, -4i64, 0))),
            (
                "add_key",
                r(libc::syscall(
                    libc::SYS_add_key,
                    c"user".as_ptr(),
                    c"corral".as_ptr(),
                    p,
                    1,
                    -3i64,
                )),
            ),
            ("bpf", r(libc::syscall(libc::SYS_bpf, 5, p, 128))),
            (
                "perf_event_open",
                r(libc::syscall(libc::SYS_perf_event_open, p, 0, -1, -1, 0)),
            ),
            (
                "userfaultfd",
                r(libc::syscall(libc::SYS_userfaultfd, 0x80001)),
            ),
            (
                "io_uring_setup",
                r(libc::syscall(libc::SYS_io_uring_setup, 4, p)),
            ),
            (
                "ptrace",
                r(libc::syscall(
                    libc::SYS_ptrace,
                    libc::PTRACE_ATTACH,
                    0x7fff_fff0,
                    0,
                    0,
                )),
            ),
            (
                "process_vm_readv",
                r(libc::syscall(
                    libc::SYS_process_vm_readv,
                    0x7fff_fff0,
                    p,
                    1,
                    p,
                    1,
                    0,
                )),
            ),
            (
                "open_by_handle_at",
                r(libc::syscall(libc::SYS_open_by_handle_at, -100, p, 0)),
            ),
            (
                "socket(AF_VSOCK|1<<32)",
                r(libc::syscall(libc::SYS_socket, 40u64 | (1u64 << 32), 1, 0)),
            ),
            (
                "socket(AF_NETLINK)",
                r(libc::syscall(
                    libc::SYS_socket,
                    libc::AF_NETLINK,
                    libc::SOCK_RAW,
                    0,
                )),
            ),
            (
                "socket(AF_PACKET)",
                r(libc::syscall(
                    libc::SYS_socket,
                    libc::AF_PACKET,
                    libc::SOCK_RAW,
                    0,
                )),
            ),
            (
                "ioctl(TIOCSTI|1<<32)",
                r(libc::syscall(
                    libc::SYS_ioctl,
                    0,
                    0x5412u64 | (1u64 << 32),
                    c"x".as_ptr(),
                )),
            ),
            (
                "ioctl(TIOCLINUX)",
                r(libc::syscall(libc::SYS_ioctl, 0, 0x541Cu64, p)),
            ),
            (
                "kexec_load",
                r(libc::syscall(libc::SYS_kexec_load, 0, 0, 0, 0)),
            ),
            (
                "init_module",
                r(libc::syscall(libc::SYS_init_module, p, 0, c"".as_ptr())),
            ),
        ]
    };
    let mut all_denied = true;
    for (name, (rc, e)) in calls {
        let res = if rc < 0 { ename(e) } else { "OK" };
        let denied = rc < 0 && matches!(e, libc::EPERM | libc::ENOSYS | libc::EACCES);
        all_denied &= denied;
        println!("{name} {res}");
    }
    if all_denied { 0 } else { 1 }
}

fn fds() -> i32 {
    if let Ok(rd) = std::fs::read_dir("/proc/self/fd") {
        for e in rd.flatten() {
            let target = std::fs::read_link(e.path())
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            println!("fd {} {target}", e.file_name().to_string_lossy());
        }
    }
    0
}

fn connect_tcp(addr: &str, port: &str) -> i32 {
    let target = format!("{addr}:{port}");
    match std::net::TcpStream::connect_timeout(
        &target
            .parse()
            .unwrap_or_else(|_| std::net::SocketAddr::from(([127, 0, 0, 1], 9))),
        std::time::Duration::from_secs(2),
    ) {
        Ok(_) => {
            println!("CONNECTED {target}");
            0
        }
        Err(e) => {
            println!("FAILED {target} {}", ename(e.raw_os_error().unwrap_or(0)));
            1
        }
    }
}

fn connect_abstract(name: &str) -> i32 {
    // SAFETY: socket/connect with a properly sized sockaddr_un.
    unsafe {
        let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = name.as_bytes();
        for (i, b) in bytes.iter().enumerate().take(100) {
            addr.sun_path[i + 1] = *b as libc::c_char;
        }
        let len = (std::mem::size_of::<libc::sa_family_t>() + 1 + bytes.len()) as libc::socklen_t;
        let rc = libc::connect(s, std::ptr::from_ref(&addr).cast(), len);
        if rc == 0 {
            println!("CONNECTED @{name}");
            0
        } else {
            println!("FAILED @{name} {}", ename(errno()));
            1
        }
    }
}

/// Connects to a pathname unix socket (stream).
fn connect_unix(path: &str) -> i32 {
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => {
            println!("CONNECTED {path}");
            0
        }
        Err(e) => {
            println!("FAILED {path} {}", ename(e.raw_os_error().unwrap_or(0)));
            1
        }
    }
}

/// Sends one datagram (a DNS-looking query carrying `payload`) to `addr:port`.
fn udp(addr: &str, port: &str, payload: &str) -> i32 {
    let target = format!("{addr}:{port}");
    let sent = std::net::UdpSocket::bind("0.0.0.0:0").and_then(|s| {
        let mut q = vec![0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        q.extend_from_slice(payload.as_bytes());
        s.send_to(&q, target.as_str())
    });
    match sent {
        Ok(_) => {
            println!("SENT {target}");
            0
        }
        Err(e) => {
            println!("FAILED {target} {}", ename(e.raw_os_error().unwrap_or(0)));
            1
        }
    }
}

/// Resolves a name with the C library (getaddrinfo).
fn resolve(name: &str) -> i32 {
    use std::net::ToSocketAddrs as _;
    match (name, 80).to_socket_addrs() {
        Ok(a) => {
            let v: Vec<String> = a.map(|x| x.ip().to_string()).collect();
            println!("RESOLVED {name} {}", v.join(","));
            0
        }
        Err(e) => {
            println!("FAILED {name} {e}");
            1
        }
    }
}

/// The proxy from `HTTP_PROXY` (`http://host:port`), as a socket address string.
fn proxy_addr() -> String {
    std::env::var("HTTP_PROXY")
        .unwrap_or_default()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned()
}

fn read_all(s: &mut std::net::TcpStream) -> String {
    use std::io::Read as _;
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(resp: &str) -> &str {
    resp.split(' ').nth(1).unwrap_or("none")
}

fn one_line(resp: &str) -> String {
    resp.replace(['\r', '\n'], " ")
}

/// `GET <url>` (absolute form) through the proxy of `HTTP_PROXY`; prints the status and the
/// response on one line.
fn proxy_get(url: &str) -> i32 {
    let authority = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or("");
    let proxy = proxy_addr();
    let mut s = match std::net::TcpStream::connect(proxy.as_str()) {
        Ok(s) => s,
        Err(e) => {
            println!(
                "FAILED proxy {proxy} {}",
                ename(e.raw_os_error().unwrap_or(0))
            );
            return 1;
        }
    };
    if write!(s, "GET {url} HTTP/1.1\r\nHost: {authority}\r\n\r\n").is_err() {
        println!("FAILED write");
        return 1;
    }
    let resp = read_all(&mut s);
    println!("STATUS {} {url} {}", status_of(&resp), one_line(&resp));
    0
}

/// `CONNECT <authority>` through the proxy, then `GET /` in the tunnel.
fn proxy_connect(authority: &str) -> i32 {
    use std::io::Read as _;
    let proxy = proxy_addr();
    let mut s = match std::net::TcpStream::connect(proxy.as_str()) {
        Ok(s) => s,
        Err(e) => {
            println!(
                "FAILED proxy {proxy} {}",
                ename(e.raw_os_error().unwrap_or(0))
            );
            return 1;
        }
    };
    let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    if write!(
        s,
        "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n"
    )
    .is_err()
    {
        println!("FAILED write");
        return 1;
    }
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 4096 {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = status_of(&head).to_owned();
    if status != "200" {
        let rest = read_all(&mut s);
        println!(
            "STATUS {status} CONNECT {authority} {}{}",
            one_line(&head),
            one_line(&rest)
        );
        return 0;
    }
    let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
    let body = read_all(&mut s);
    println!("STATUS 200 CONNECT {authority} {}", one_line(&body));
    0
}

/// Double fork + setsid + ignored signals, then live forever with `marker` in argv.
fn daemon(marker: &str) -> i32 {
    // SAFETY: fork/setsid/signal in a single-threaded helper, then exec of ourselves.
    unsafe {
        for s in [libc::SIGHUP, libc::SIGINT, libc::SIGTERM, libc::SIGQUIT] {
            libc::signal(s, libc::SIG_IGN);
        }
        if libc::fork() != 0 {
            return 0;
        }
        libc::setsid();
        if libc::fork() != 0 {
            libc::_exit(0);
        }
        for fd in 0..3 {
            libc::close(fd);
        }
        let me = CString::new("/proc/self/exe").unwrap_or_default();
        let argv = [
            c"corral-attack".as_ptr(),
            c"linger".as_ptr(),
            CString::new(marker)
                .unwrap_or_default()
                .into_raw()
                .cast_const(),
            std::ptr::null(),
        ];
        libc::execv(me.as_ptr(), argv.as_ptr());
        libc::_exit(1);
    }
}

fn linger() -> i32 {
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1000));
    }
}

fn fill(path: &str, mode: &str) -> i32 {
    let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
    else {
        println!("OPEN FAILED {}", ename(errno()));
        return 2;
    };
    if mode == "unlinked" {
        let _ = std::fs::remove_file(path);
    }
    if mode == "sparse" {
        let _ = f.set_len(1 << 40);
    }
    let chunk = vec![1u8; 1 << 20];
    let mut written: u64 = 0;
    loop {
        if mode == "sparse" {
            use std::io::Seek as _;
            let _ = f.seek(std::io::SeekFrom::Start(written * (4 << 20)));
        }
        match f.write_all(&chunk) {
            Ok(()) => written += 1,
            Err(e) => {
                println!(
                    "STOPPED after {written} MiB {}",
                    ename(e.raw_os_error().unwrap_or(0))
                );
                return 0;
            }
        }
        if written > 1 << 16 {
            println!("NO LIMIT after {written} MiB");
            return 1;
        }
    }
}

fn balloon(mib: usize) -> i32 {
    let mut v: Vec<Vec<u8>> = Vec::new();
    for i in 0..mib {
        v.push(vec![1u8; 1 << 20]);
        if i % 64 == 0 {
            let _ = std::io::stdout().flush();
        }
    }
    println!("BALLOON OK {} MiB", v.len());
    0
}

fn forkbomb() -> i32 {
    let mut ok = 0u32;
    let mut eagain = 0u32;
    for _ in 0..2000 {
        // SAFETY: fork in a single-threaded helper; the child only pauses.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: pause until killed.
            unsafe {
                loop {
                    libc::pause();
                }
            }
        }
        if pid > 0 {
            ok += 1;
        } else if errno() == libc::EAGAIN {
            eagain += 1;
            if eagain > 20 {
                break;
            }
        }
    }
    println!("FORKS {ok} EAGAIN {eagain}");
    0
}

fn burn(threads: usize) -> i32 {
    let start = std::time::Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                let mut x = 0u64;
                while start.elapsed().as_secs() < 3600 {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            })
        })
        .collect();
    for h in hs {
        let _ = h.join();
    }
    0
}

/// `sh SCRIPT`: replaces this process with `/bin/sh -c SCRIPT`. Tests run scripts this way so
/// the helper is the sandbox's executable and therefore visible inside at its own path.
fn run_shell(script: &str) -> i32 {
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new("/bin/sh")
        .args(["-c", script])
        .exec();
    println!("exec /bin/sh: {err}");
    127
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let a = |i: usize| args.get(i).map_or("", String::as_str);
    let code = match a(1) {
        "syscalls" => syscalls(),
        "fds" => fds(),
        "connect" => connect_tcp(a(2), a(3)),
        "abstract" => connect_abstract(a(2)),
        "unix" => connect_unix(a(2)),
        "udp" => udp(a(2), a(3), a(4)),
        "resolve" => resolve(a(2)),
        "proxy-get" => proxy_get(a(2)),
        "proxy-connect" => proxy_connect(a(2)),
        "daemon" => daemon(a(2)),
        "linger" => linger(),
        "fill" => fill(a(2), a(3)),
        "balloon" => balloon(a(2).parse().unwrap_or(64)),
        "forkbomb" => forkbomb(),
        "burn" => burn(a(2).parse().unwrap_or(2)),
        "sh" => run_shell(a(2)),
        other => {
            println!("unknown command {other:?}");
            2
        }
    };
    let _ = std::io::stdout().flush();
    std::process::exit(code);
}
