#!/usr/bin/python3
# CAP-01: core.fsmonitor runs inside the supervisor
# Guarantee: the capture step is not an execution path
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

if len(ARGS) > 1 and ARGS[1] == "inscope":
    # Variant B's run: only an in-scope change (the hostile state is in the canonical repo).
    w("src/app.py", 'print("changed")\n', "a")
else:
    sh("GITDIR git config core.fsmonitor", f"git config core.fsmonitor '{PAY}'")
    w(".git/config", f'[core]\n\tfsmonitor = "{PAY}"\n', "a", "GITDIR append .git/config")
    # What the worker can write: a nested repository with a live fsmonitor, and a gitfile.
    sh("git init src/nested", "git init -q src/nested")
    sh("nested fsmonitor", f"git -C src/nested config core.fsmonitor '{PAY}'")
    w("src/nested/a.txt", "x\n")
    w("src/evil.cfg", f'[core]\n\tfsmonitor = "{PAY}"\n')
    w("src/app.py", 'print("changed")\n', "a")

say("DONE")
sys.exit(0)
