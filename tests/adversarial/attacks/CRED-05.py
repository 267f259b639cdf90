#!/usr/bin/python3
# CRED-05: Credentials inside the workspace's own .git
# Guarantee: the repository's credentials never reach the sandbox
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "canary.py")).read())  # corral: inline canary.py

import base64
B = base64.b64encode(f"x-access-token:{C}".encode()).decode()
rc, out = run("git config -l --show-origin 2>&1")
say(f"git config -l: {out.strip()[:600]}")
rc, out2 = run("git -C vendor/lib config -l --show-origin 2>&1; git remote -v 2>&1")
say(f"submodule/remote: {out2.strip()[:300]}")
for t in (out, out2):
    if C in t or B in t:
        esc("git config printed the repository credentials")
found = 0
for root, dirs, files in os.walk(WS):
    for f in files:
        p = os.path.join(root, f)
        try:
            with open(p, "rb") as h:
                data = h.read()
        except OSError:
            continue
        if C.encode() in data:
            esc(f"canary in {p}")
        if B.encode() in data:
            esc(f"base64 token in {p}")
