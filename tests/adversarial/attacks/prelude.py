import ctypes, errno, os, socket, subprocess, sys, time

N = sys.argv[1]
ARGS = sys.argv[2:]
# `--trivial`: exit at once, so the harness can time corral's own start-up and collection.
if ARGS[:1] == ["--trivial"]:
    print("trivial", flush=True)
    sys.exit(0)
WS = os.getcwd()
# Results that mean the kernel (or the filter) refused a call.
BLOCKED = {"EPERM", "ENOSYS", "EACCES"}
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def say(*a):
    print(*a, flush=True)


def esc(what):
    """Reports a breach: the harness counts every ESC-<N> line in the stored output."""
    say(f"ESC-{N} {what}")


def ename(e):
    return errno.errorcode.get(e, str(e))


def tryconnect(fam, addr, port=None, timeout=3):
    """fam: 4 | 6 | u (unix stream) | ud (unix dgram) | v (vsock); '@name' is abstract.
    Returns 'CONNECTED' or the errno name."""
    f = {"4": socket.AF_INET, "6": socket.AF_INET6, "u": socket.AF_UNIX,
         "ud": socket.AF_UNIX, "v": getattr(socket, "AF_VSOCK", 40)}[fam]
    try:
        s = socket.socket(f, socket.SOCK_DGRAM if fam == "ud" else socket.SOCK_STREAM)
    except OSError as e:
        return ename(e.errno)
    s.settimeout(timeout)
    if f == socket.AF_UNIX:
        a = "\0" + addr[1:] if addr.startswith("@") else addr
    elif fam == "v":
        a = (int(addr), int(port))
    else:
        a = (addr, int(port))
    try:
        s.connect(a)
        if fam == "ud":
            s.send(b"x")
        return "CONNECTED"
    except socket.timeout:
        return "ETIMEDOUT"
    except OSError as e:
        return ename(e.errno)
    finally:
        s.close()


def _arg(a):
    if isinstance(a, bytes):
        return ctypes.c_char_p(a)
    if isinstance(a, str) and a.startswith("z:"):
        return ctypes.create_string_buffer(int(a[2:]))
    if isinstance(a, str) and a.startswith("b:"):
        return ctypes.c_char_p(a[2:].encode())
    return ctypes.c_long(int(a, 0) if isinstance(a, str) else a)


def scall(nr, *args):
    """Raw syscall (x86_64 numbers). Returns (ret, 'OK' or errno name)."""
    r = _libc.syscall(ctypes.c_long(nr), *[_arg(a) for a in args])
    return r, ("OK" if r >= 0 else ename(ctypes.get_errno()))


def must_block(label, nr, *args, also=()):
    """The call must fail with EPERM/ENOSYS/EACCES (or one of `also`); anything else,
    including EINVAL/EFAULT/EBADF, reached the kernel: a breach."""
    r, e = scall(nr, *args)
    if r >= 0 or (e not in BLOCKED and e not in also):
        esc(f"{label} returned {r} {e}")
    else:
        say(f"{label}: {e}")
    return r, e


def run(cmd, timeout=20):
    """Runs a shell command; returns (exit code, stdout+stderr)."""
    try:
        p = subprocess.run(cmd, shell=True, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout)
        return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return -1, "timeout"


def proxy():
    """(host, port) of the egress proxy from HTTP_PROXY, or None."""
    import urllib.parse
    p = os.environ.get("HTTP_PROXY") or os.environ.get("http_proxy")
    if not p:
        return None
    u = urllib.parse.urlsplit(p)
    return u.hostname, u.port


def rawproxy(raw, timeout=5):
    """Sends raw bytes to the proxy; returns the first response line (or an errno name)."""
    p = proxy()
    if p is None:
        return "NOPROXY"
    try:
        s = socket.create_connection(p, timeout)
        s.sendall(raw if isinstance(raw, bytes) else raw.encode("latin1"))
        data = s.recv(4096)
        s.close()
        return (data.split(b"\r\n")[0] or b"<closed>").decode("latin1")
    except OSError as e:
        return ename(e.errno) if e.errno else str(e)


def wide_base(files, nonce=None):
    """repos/wide.sh's FILES files under lib/, each naming its index and the nonce (the
    case's N unless given): returns (the files that are wrong, the files under lib/ that are
    not the commit's)."""
    nonce = N if nonce is None else nonce
    want = {f"lib/d{i // 50:03d}/f{i:05d}.txt": f"wide base file {i} of {files}, TRUST-{nonce}\n"
            for i in range(files)}
    wrong = []
    for p, body in want.items():
        try:
            with open(p) as f:
                got = f.read()
        except OSError as e:
            got = ename(e.errno)
        if got != body:
            wrong.append(f"{p}: {got[:40]!r}")
    extra = [os.path.join(d, f) for d, _, fs in os.walk("lib") for f in fs
             if os.path.join(d, f) not in want]
    return wrong, extra
