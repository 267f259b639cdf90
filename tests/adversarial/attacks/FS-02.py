#!/usr/bin/python3
# FS-02: Reading forbidden paths and the host home
# Guarantee: host secrets and the host home are not visible
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "canary.py")).read())  # corral: inline canary.py

mode, paths = ARGS[0], ARGS[1:]
home = os.environ.get("HOME", "")
for d in ("/", "/home", "/root", home, "/run", "/mnt", "/media", "/srv"):
    try:
        say(f"ls {d}: {sorted(os.listdir(d))}")
    except OSError as e:
        say(f"ls {d}: {ename(e.errno)}")
for p in [os.path.expanduser("~/.canary"), "/root/.canary", *paths]:
    show(p)
if mode == "walk":
    walk("/", SKIP)
    say(f"HOME {home}: {sorted(os.listdir(home)) if home and os.path.isdir(home) else 'absent'}")
