#!/usr/bin/python3
# NET-10: Allowlisted names that resolve to private, loopback or metadata IPs
# Guarantee: a listed name does not open non-public IPs, and no DNS tricks
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlib.py")).read())  # corral: inline netlib.py

proxy_ok("n10-ok")
for i, (host, path) in enumerate((("meta.test", "/latest/meta-data/"), ("private.test", "/"),
                                  ("loop.test:8080", "/"), ("v6meta.test", "/"),
                                  ("metadata.google.internal", "/computeMetadata/v1/"))):
    st, code, data = get(host, f"{path}n10-{i}-{N}", extra="Metadata-Flavor: Google\r\n")
    refused(f"GET {host}", st, code, data)
t = f"GET /n10-tunnel-{N} HTTP/1.0\r\n\r\n".encode()
for a in ("meta.test:80", "private.test:80", "loop.test:8080", "v6meta.test:80",
          "metadata.google.internal:80"):
    refused(f"CONNECT {a}", *preq(f"CONNECT {a} HTTP/1.1\r\nHost: {a}\r\n\r\n", after=t))
