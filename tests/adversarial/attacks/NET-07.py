#!/usr/bin/python3
# NET-07: Unlisted host, unlisted port, other protocols (allowlist)
# Guarantee: only listed host:port destinations
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlib.py")).read())  # corral: inline netlib.py

proxy_ok("n07-ok")
t = f"GET /n07-tunnel-{N} HTTP/1.0\r\n\r\n".encode()
for label, raw in (
        ("GET denied.test:8080", f"GET http://denied.test:8080/n07-{N} HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n"),
        ("GET allowed.test:8081", f"GET http://allowed.test:8081/n07-{N} HTTP/1.1\r\nHost: allowed.test:8081\r\n\r\n"),
        ("GET allowed.test (port 80)", f"GET http://allowed.test/n07-{N} HTTP/1.1\r\nHost: allowed.test\r\n\r\n"),
        ("CONNECT allowed.test:22", "CONNECT allowed.test:22 HTTP/1.1\r\nHost: allowed.test:22\r\n\r\n"),
        ("CONNECT denied.test:443", "CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n"),
        ("CONNECT 198.18.0.11:8080", "CONNECT 198.18.0.11:8080 HTTP/1.1\r\nHost: 198.18.0.11:8080\r\n\r\n"),
        ("CONNECT 198.18.0.10:8080 (listed by name only)", "CONNECT 198.18.0.10:8080 HTTP/1.1\r\nHost: 198.18.0.10:8080\r\n\r\n"),
        ("PUT denied.test", f"PUT http://denied.test:8080/n07-{N} HTTP/1.1\r\nHost: denied.test:8080\r\nContent-Length: 0\r\n\r\n"),
        ("origin-form GET", f"GET /n07-{N} HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n"),
        ("ftp://", "GET ftp://denied.test:8080/ HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n")):
    refused(label, *preq(raw, after=t))
for label, req in (("socks5 connect denied.test:8080", b"\x05\x01\x00\x03\x0bdenied.test\x1f\x90"),
                   ("socks4 connect 198.18.0.11:8080", None)):
    try:
        s = socket.create_connection(proxy(), 5)
        if req is None:
            s.sendall(b"\x04\x01\x1f\x90\xc6\x12\x00\x0bn07\x00")
        else:
            s.sendall(b"\x05\x01\x00")
            s.settimeout(3)
            r = s.recv(64)
            if r[:2] == b"\x05\x00":
                s.sendall(req)
        s.settimeout(3)
        r = s.recv(64)
        if r[:2] in (b"\x05\x00", b"\x00\x5a"):
            esc(f"{label}: accepted {r!r}")
        else:
            say(f"{label}: {r[:60]!r}")
    except OSError as e:
        say(f"{label}: {e}")
