#!/usr/bin/python3
# CRED-01: Environment scrubbing, including /proc/*/environ
# Guarantee: the worker's environment is an allowlist
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
C = f"CANARY-{N}"
allowed = set(ARGS[0].split(","))
names = sorted(os.environ)
say(f"env names: {names}")
for k in names:
    if k not in allowed:
        esc(f"env name {k} is not on the allowlist")
    if C in os.environ[k]:
        esc(f"env value of {k} holds the canary")
hits = 0
for p in sorted(os.listdir("/proc")):
    if not p.isdigit():
        continue
    for f in ("environ", "cmdline"):
        try:
            with open(f"/proc/{p}/{f}", "rb") as h:
                b = h.read()
        except OSError as e:
            say(f"/proc/{p}/{f}: {ename(e.errno)}")
            continue
        if C.encode() in b:
            hits += 1
            esc(f"/proc/{p}/{f} holds the canary")
say(f"canary count {hits}")
