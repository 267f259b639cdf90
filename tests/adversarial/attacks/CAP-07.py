#!/usr/bin/python3
# CAP-07: Symlinks in the change set
# Guarantee: the capture step does not follow links out of the workspace
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

SECRET = ARGS[1]
if len(ARGS) > 2 and ARGS[2] == "inscope":
    step("symlink src/ok -> app.py", lambda: os.symlink("app.py", "src/ok"))
    w("src/app.py", 'print("changed")\n', "a")
else:
    for name, target in [("src/a.txt", "/etc/shadow"), ("src/p", "/etc/passwd"),
                         ("src/c", SECRET), ("src/rel", "../" * 12 + SECRET.lstrip("/")),
                         ("src/k", "../../../../home/corral/.ssh/id_ed25519"),
                         ("src/gh", "../.github"), ("src/e", "/proc/self/root/etc"),
                         ("src/g", "../.git/config")]:
        step(f"symlink {name} -> {target}", lambda n=name, t=target: os.symlink(t, n))
    w("src/gh/workflows/x.yml", "evil\n")
    w("src/app.py", 'print("changed")\n', "a")

say("DONE")
sys.exit(0)
