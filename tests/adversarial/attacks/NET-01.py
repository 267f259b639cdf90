#!/usr/bin/python3
# NET-01: TCP to the supervisor's loopback (mode none)
# Guarantee: mode none allows no egress
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
ports = {"127.0.0.2": ARGS[0], "127.0.0.1": ARGS[1], "::1": ARGS[2]}
for addr, port in ports.items():
    fam = "6" if ":" in addr else "4"
    r = tryconnect(fam, addr, port)
    if r == "CONNECTED":
        esc(f"tcp connect {addr}:{port}")
    else:
        say(f"tcp {addr}:{port}: {r}")
for addr in ("127.0.0.2", "127.0.0.1"):
    rc, out = run(f"bash -c 'exec 3<>/dev/tcp/{addr}/{ports[addr]}' && echo OPENED")
    if "OPENED" in out:
        esc(f"bash /dev/tcp {addr}:{ports[addr]}")
# The host's other loopback addresses, and IPv4 on the host side of any interface.
for addr in ("127.1.2.3", "0.0.0.0"):
    r = tryconnect("4", addr, ports["127.0.0.1"])
    if r == "CONNECTED":
        esc(f"tcp connect {addr}:{ports['127.0.0.1']}")
    else:
        say(f"tcp {addr}: {r}")
