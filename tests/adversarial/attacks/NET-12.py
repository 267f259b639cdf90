#!/usr/bin/python3
# NET-12: Proxy protocol abuse (allowlist)
# Guarantee: only listed destinations
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlib.py")).read())  # corral: inline netlib.py

import ssl, threading
proxy_ok("n12-ok")
# (a) Host header does not match the request target.
st, code, data = preq(f"GET http://allowed.test:8080/n12a-{N} HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n")
refused("(a) Host mismatch", st, code, data)
st, code, data = preq(f"CONNECT allowed.test:8080 HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n",
                      after=f"GET /n12a-{N} HTTP/1.0\r\n\r\n".encode())
refused("(a) CONNECT Host mismatch", st, code, data)
# (b) A second request pipelined on the same connection.
st, code, data = preq(f"GET http://allowed.test:8080/n12b-first-{N} HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n"
                      f"GET http://denied.test:8080/n12b-second-{N} HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n")
say(f"(b) pipelined: {st} {code}; second answered: {data.count(b'HTTP/')}")
st, code, data = preq(f"POST http://allowed.test:8080/n12b-first-{N} HTTP/1.1\r\nHost: allowed.test:8080\r\nContent-Length: 4\r\n\r\nabcd"
                      f"GET http://denied.test:8080/n12b-second-{N} HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n")
say(f"(b) pipelined after a body: {st} {code}")
# (c) SNI that does not match the tunnel.
try:
    s = socket.create_connection(proxy(), 5)
    s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
    r = s.recv(4096)
    first = r.split(b"\r\n")[0]
    say(f"(c) CONNECT allowed.test:443: {first!r}")
    if r.startswith(b"HTTP/1.1 200"):
        c = ssl.create_default_context()
        c.check_hostname = False
        c.verify_mode = ssl.CERT_NONE
        try:
            t = c.wrap_socket(s, server_hostname=f"n12c-{N}.denied.test")
            esc("(c) TLS handshake with SNI denied.test completed")
        except (ssl.SSLError, OSError) as e:
            say(f"(c) TLS: {e}")
    s.close()
except OSError as e:
    say(f"(c): {e}")
# (d) SOCKS5 BIND and UDP ASSOCIATE.
for label, req in (("BIND", b"\x05\x02\x00\x03\x0bdenied.test\x1f\x90"),
                   ("UDP ASSOCIATE", b"\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00")):
    try:
        s = socket.create_connection(proxy(), 5)
        s.sendall(b"\x05\x01\x00" + req)
        s.settimeout(3)
        r = s.recv(64)
        if r[:1] == b"\x05" and (r[1:2] == b"\x00" or r[3:4] == b"\x00"):
            esc(f"(d) SOCKS5 {label} accepted: {r!r}")
        else:
            say(f"(d) SOCKS5 {label}: {r[:60]!r}")
    except OSError as e:
        say(f"(d) {label}: {e}")
# (e) Upgrade: websocket and h2c.
for host in ("denied.test:8080", "allowed.test:8080"):
    for up in ("websocket", "h2c"):
        extra = (f"Connection: Upgrade\r\nUpgrade: {up}\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "Sec-WebSocket-Version: 13\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n")
        st, code, data = get(host, f"/n12e-{up}-{N}", extra=extra)
        if host.startswith("denied"):
            refused(f"(e) {up} to {host}", st, code, data)
        elif st == 101:
            esc(f"(e) {up} to {host} switched protocols")
        else:
            say(f"(e) {up} to {host}: {st} {code}")
# (f) A 1 MiB header, then more connections than the proxy serves at once.
big = "a" * (1 << 20)
st, code, data = preq(f"GET http://allowed.test:8080/n12f-{N} HTTP/1.1\r\nHost: allowed.test:8080\r\nX-Big: {big}\r\n\r\n")
say(f"(f) 1 MiB header: {st} {code}")
held = []
for i in range(150):
    try:
        held.append(socket.create_connection(proxy(), 2))
    except OSError as e:
        say(f"(f) flood {i}: {e}")
        break
busy = 0
for s in held:
    s.setblocking(False)
    try:
        if s.recv(64).startswith(b"HTTP/1.1 503"):
            busy += 1
    except OSError:
        pass
say(f"(f) held {len(held)} connections, {busy} answered 503 at once")
for s in held:
    s.close()
time.sleep(0.5)
st, code, data = get("allowed.test:8080", f"/n12f-after-{N}")
if st == 200:
    say(f"PROXY-AVAILABLE-{N}")
else:
    esc(f"(f) the proxy is unavailable after the flood: {st} {code}")
