#!/usr/bin/python3
# CAP-02: Hooks triggered by read-only-looking git commands
# Guarantee: the capture step is not an execution path
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

HOOKS = ["post-index-change", "reference-transaction", "pre-commit", "post-commit",
         "post-checkout", "pre-auto-gc"]
for h in HOOKS:
    w(f".git/hooks/{h}", HOOK, label=f"GITDIR hook {h}")
sh("GITDIR git config core.hooksPath", f"git config core.hooksPath {WS}/src/hooks")
for h in HOOKS:
    mkexec(f"src/hooks/{h}", HOOK)
    mkexec(f"src/nested/.git/hooks/{h}", HOOK)
step("touch -d 2001 src/app.py", lambda: os.utime("src/app.py", (978307200, 978307200)))
w("src/app.py", 'print("changed")\n', "a")

say("DONE")
sys.exit(0)
