#!/usr/bin/python3
# NET-15: Hostnames with hidden bytes
# Guarantee: allowlist matching is exact on the canonical name
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlib.py")).read())  # corral: inline netlib.py

# Spellings that hide another name behind the listed allowed.test, or only look like it:
# NUL bytes (raw and percent-encoded), percent-encoding, Unicode lookalikes (Cyrillic a and
# e, fullwidth a, a zero-width space) and their IDNA forms. Every one must be refused.
SPELLINGS = [
    "allowed.test%00.denied.test:8080",
    "allowed.test\x00.denied.test:8080",
    "allowed%2Etest:8080",
    "%61llowed.test:8080",
    "\u0430llowed.test:8080",
    "allowed.t\u0435st:8080",
    "\uff41llowed.test:8080",
    "allowed.test\u200b:8080",
    "xn--llowed-3we.test:8080",
    "allowed.test\x00:8080",
]
proxy_ok("n15")
for i, t in enumerate(SPELLINGS):
    raw = f"CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n".encode("utf-8")
    refused(f"CONNECT {t!r}", *preq(raw, after=f"GET /n15-{i}-{N} HTTP/1.0\r\n\r\n".encode()))
    raw = f"GET http://{t}/n15-g{i}-{N} HTTP/1.1\r\nHost: {t}\r\n\r\n".encode("utf-8")
    refused(f"GET {t!r}", *preq(raw))
# The listed name in the target, another in Host (both forms).
refused("CONNECT with another Host", *preq(
    "CONNECT allowed.test:8080 HTTP/1.1\r\nHost: denied.test:8080\r\n\r\n",
    after=f"GET /n15-host-{N} HTTP/1.0\r\n\r\n".encode()))
refused("GET with another Host", *get("allowed.test:8080", f"/n15-hostg-{N}", host="denied.test:8080"))
# SOCKS5 with a NUL in the name: never spoken.
name = b"allowed.test\x00.denied.test"
try:
    s = socket.create_connection(proxy(), 5)
    s.sendall(b"\x05\x01\x00" + b"\x05\x01\x00\x03" + bytes([len(name)]) + name + b"\x1f\x90")
    s.settimeout(3)
    r = s.recv(64)
    if r[:2] == b"\x05\x00":
        esc(f"SOCKS5 accepted: {r!r}")
    else:
        say(f"socks5: {r[:40]!r}")
except OSError as e:
    say(f"socks5: {e}")
