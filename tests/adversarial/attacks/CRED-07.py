#!/usr/bin/python3
# CRED-07: Other processes through /proc, ptrace and process_vm_readv
# Guarantee: no view of other processes
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
target = int(ARGS[0])
pids = [p for p in os.listdir("/proc") if p.isdigit()]
say(f"{len(pids)} pids: {sorted(pids, key=int)[:40]}")
if len(pids) >= 30:
    esc(f"{len(pids)} processes visible in /proc")
for p in pids:
    for f in ("cmdline", "environ"):
        try:
            with open(f"/proc/{p}/{f}", "rb") as h:
                b = h.read()
        except OSError:
            continue
        if f"sbx-canary-{N}".encode() in b or f"CANARY-{N}".encode() in b:
            esc(f"/proc/{p}/{f} shows the canary process")
for pid in sorted({1, target}):
    must_block(f"ptrace(PTRACE_ATTACH, {pid})", 101, 16, pid, 0, 0, also=("ESRCH",) if pid != 1 else ())
    must_block(f"process_vm_readv({pid})", 310, pid, "z:16", 1, "z:16", 1, 0,
               also=("ESRCH",) if pid != 1 else ())
