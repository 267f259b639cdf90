#!/usr/bin/python3
# NET-04: Abstract unix sockets across the network-namespace boundary
# Guarantee: no egress, and no access to host services
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
name = ARGS[0]
say(f"HTTP_PROXY={os.environ.get('HTTP_PROXY')}")
r = tryconnect("u", "@" + name)
if r == "CONNECTED":
    esc(f"abstract connect @{name}")
else:
    say(f"@{name}: {r}")
try:
    n = open("/proc/net/unix").read().count(name)
    if n:
        esc(f"/proc/net/unix lists @{name} ({n})")
    else:
        say("/proc/net/unix: 0")
except OSError as e:
    say(f"/proc/net/unix: {e}")
for other in ("@/tmp/.X11-unix/X0", "@/tmp/dbus-corral", "@/containerd-shim"):
    r = tryconnect("u", other)
    if r == "CONNECTED":
        esc(f"abstract connect {other}")
