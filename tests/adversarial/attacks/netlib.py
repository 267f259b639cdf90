
def preq(raw, timeout=5, after=None):
    """Sends raw bytes to the proxy and reads the reply until it closes. Returns
    (status, X-Corral-Egress code or error, reply bytes); status 0 when no HTTP reply."""
    p = proxy()
    if p is None:
        return 0, "NOPROXY", b""
    try:
        s = socket.create_connection(p, timeout)
    except OSError as e:
        return 0, ename(e.errno) if e.errno else str(e), b""
    s.settimeout(timeout)
    data = b""
    try:
        s.sendall(raw if isinstance(raw, bytes) else raw.encode("latin1"))
        while b"\r\n\r\n" not in data and len(data) < 65536:
            c = s.recv(4096)
            if not c:
                break
            data += c
        if after is not None and data.startswith(b"HTTP/1.1 200"):
            s.sendall(after)
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
    except OSError:
        pass
    finally:
        s.close()
    head = data.split(b"\r\n\r\n")[0].decode("latin1").split("\r\n")
    status, code = 0, ""
    parts = head[0].split(" ")
    if len(parts) > 1 and parts[0].startswith("HTTP/") and parts[1].isdigit():
        status = int(parts[1])
    for h in head[1:]:
        if h.lower().startswith("x-corral-egress:"):
            code = h.split(":", 1)[1].strip()
    return status, code, data


def get(url_host, path, host=None, extra=""):
    """An absolute-form GET through the proxy."""
    host = host or url_host
    return preq(f"GET http://{url_host}{path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n")


def proxy_ok(tag):
    """The in-run positive control: allowed.test:8080 through the proxy must answer 200."""
    st, code, data = get("allowed.test:8080", f"/{tag}-{N}")
    if st == 200 and b"hello-from-198.18.0.10:8080" in data:
        say(f"PROXY-OK-{N}")
    else:
        say(f"proxy control failed: {st} {code} {data[:200]!r}")


def refused(label, st, code, data):
    """A proxied request must be refused by policy: a 4xx with corral's reason header."""
    if 400 <= st < 500 and code:
        say(f"{label}: {st} {code}")
    elif 200 <= st < 300 or st == 101:
        esc(f"{label}: proxy answered {st} {data[:120]!r}")
    else:
        esc(f"{label}: not refused by policy: {st} {code} {data[:120]!r}")


def direct(host, port, payload, timeout=2):
    """A direct TCP connection (ignoring the proxy); returns 'CONNECTED' or the errno."""
    try:
        s = socket.create_connection((host, port), timeout)
    except OSError as e:
        return ename(e.errno) if e.errno else str(e)
    try:
        s.sendall(payload.encode() if isinstance(payload, str) else payload)
        s.settimeout(timeout)
        s.recv(1024)
    except OSError:
        pass
    s.close()
    return "CONNECTED"
