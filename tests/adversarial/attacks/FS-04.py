#!/usr/bin/python3
# FS-04: Hard links to files outside the workspace
# Guarantee: filesystem isolation
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "canary.py")).read())  # corral: inline canary.py

os.makedirs("src", exist_ok=True)
for i, t in enumerate([*ARGS, ".git/config"]):
    dst = f"src/h{i}"
    try:
        os.link(t, dst)
        esc(f"hard link {t} (nlink {os.stat(dst).st_nlink})")
        show(dst, "read canary through a hard link")
    except OSError as e:
        say(f"link {t} -> {dst}: {ename(e.errno)}")
