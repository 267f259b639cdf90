#!/usr/bin/python3
# RES-MEM-01: Anonymous memory balloon and oom_score_adj -1000
# Guarantee: memory limit: OOM-killed inside the run's cgroup, corral reports it
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
mode, target, limit = ARGS[0], int(ARGS[1]), int(ARGS[2])
adj = ARGS[3] if len(ARGS) > 3 else "-1000"
try:
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write(adj)
    esc(f"oom_score_adj {adj} accepted")
except OSError as e:
    say(f"oom_score_adj {adj}: {ename(e.errno)}")
if mode == "oomadj":
    sys.exit(0)
chunks, got = [], 0
while got < target:
    chunks.append(b"\x01" * (16 << 20))
    got += 16 << 20
    say(f"BALLOON {got}")
    if got > limit:
        esc(f"balloon holds {got >> 20} MiB, above the {limit >> 20} MiB limit")
say("BALLOON done")
