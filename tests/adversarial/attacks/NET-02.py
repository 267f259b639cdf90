#!/usr/bin/python3
# NET-02: UDP, ICMP, raw sockets, IPv6 and interfaces (mode none)
# Guarantee: mode none allows no egress
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import struct
mode = ARGS[0]  # in | lab (control in the lab) | host (control in the host's namespace: no traffic)
rc, out = run("ip -o link")
links = [l.split(":")[1].strip().split("@")[0] for l in out.splitlines() if l.count(":") >= 2]
try:  # the same from /proc/net/dev (netlink may be refused)
    links += [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]
except OSError as e:
    say(f"/proc/net/dev: {e}")
links = sorted(set(links))
if [l for l in links if l != "lo"]:
    esc(f"interfaces other than lo: {links}")
else:
    say(f"ip -o link: {links} {out.strip()[:200]}")
try:
    rows = [r.split() for r in open("/proc/net/route").read().splitlines()[1:]]
    r4 = [r[0] for r in rows if r and r[0] != "lo"]
    if r4:
        esc(f"ipv4 routes via {r4}")
    else:
        say(f"/proc/net/route: {len(rows)} route(s), none off lo")
except OSError as e:
    say(f"/proc/net/route: {e}")
try:
    rows = [r.split() for r in open("/proc/net/ipv6_route").read().splitlines()]
    r6 = [r[-1] for r in rows if r and r[-1] != "lo"]
    if r6:
        esc(f"ipv6 routes via {sorted(set(r6))}")
    else:
        say(f"/proc/net/ipv6_route: {len(rows)} route(s), none off lo")
except OSError as e:
    say(f"/proc/net/ipv6_route: {e}")
if mode == "host":
    sys.exit(0)

for addr in ("127.0.0.1", "198.18.0.10"):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(f"udp-{N}".encode(), (addr, 5300))
        say(f"udp to {addr}:5300 sent (the lab listener decides)")
    except OSError as e:
        say(f"udp {addr}: {ename(e.errno)}")
run(f"bash -c 'echo udp-{N} > /dev/udp/127.0.0.1/5300'")
for fam, addr, port in (("4", "198.18.0.10", 8080), ("6", "fd00:77::10", 80)):
    r = tryconnect(fam, addr, port)
    if r == "CONNECTED":
        esc(f"tcp connect {addr}:{port}")
    else:
        say(f"tcp {addr}:{port}: {r}")
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)).close()
    esc("AF_PACKET raw socket created")
except OSError as e:
    say(f"AF_PACKET: {ename(e.errno)}")


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b)//2}H", b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff


for kind, typ in (("raw", socket.SOCK_RAW), ("ping", socket.SOCK_DGRAM)):
    try:
        s = socket.socket(socket.AF_INET, typ, socket.IPPROTO_ICMP)
    except OSError as e:
        say(f"icmp {kind} socket: {ename(e.errno)}")
        continue
    payload = f"ping-{N}".encode()
    hdr = struct.pack("!BBHHH", 8, 0, 0, 0x4242, 1)
    pkt = struct.pack("!BBHHH", 8, 0, csum(hdr + payload), 0x4242, 1) + payload
    s.settimeout(1)
    try:
        s.sendto(pkt, ("198.18.0.10", 0))
        data = s.recv(1024)
        esc(f"icmp {kind} echo reply from 198.18.0.10 ({len(data)} bytes)")
    except OSError as e:
        say(f"icmp {kind} echo: {ename(e.errno) if e.errno else e}")
    except socket.timeout:
        say(f"icmp {kind} echo: no reply")
