#!/usr/bin/python3
# CRED-08: The metadata service, reached directly (both modes)
# Guarantee: no cloud credentials, and no metadata addresses
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlib.py")).read())  # corral: inline netlib.py

for host, port, req in (
        ("169.254.169.254", 80, f"GET /latest/meta-data/iam/security-credentials/c08-{N} HTTP/1.0\r\n\r\n"),
        ("169.254.169.254", 80, f"PUT /latest/api/token/c08-{N} HTTP/1.0\r\nX-aws-ec2-metadata-token-ttl-seconds: 60\r\n\r\n"),
        ("fd00:ec2::254", 80, f"GET /latest/meta-data/c08-{N} HTTP/1.0\r\n\r\n"),
        ("metadata.google.internal", 80, f"GET /computeMetadata/v1/c08-{N} HTTP/1.0\r\nMetadata-Flavor: Google\r\n\r\n")):
    r = direct(host, port, req)
    if r == "CONNECTED":
        esc(f"metadata {host}:{port} reached")
    else:
        say(f"{host}:{port}: {r}")
if proxy():
    refused("proxied 169.254.169.254", *get("169.254.169.254", f"/latest/meta-data/c08-{N}"))
