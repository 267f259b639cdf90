#!/usr/bin/python3
# CAP-09: Hard links in the change set
# Guarantee: the capture step is correct
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

if step("GITDIR ln .git/config src/gitcfg", lambda: os.link(".git/config", "src/gitcfg")):
    w("src/gitcfg", f"[core]\n\tfsmonitor = {PAY}\n", "a", "GITDIR append via src/gitcfg")
step("ln src/app.py .github/workflows/ci2.yml", lambda: os.link("src/app.py", ".github/workflows/ci2.yml"))
step("ln src/app.py src/alias.py", lambda: os.link("src/app.py", "src/alias.py"))
step("ln /etc/hostname src/h", lambda: os.link("/etc/hostname", "src/h"))
step("ln /etc/passwd src/pw", lambda: os.link("/etc/passwd", "src/pw"))
w("src/app.py", 'print("changed")\n', "a")

say("DONE")
sys.exit(0)
