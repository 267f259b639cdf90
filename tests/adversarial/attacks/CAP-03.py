#!/usr/bin/python3
# CAP-03: Filter/diff drivers, include, pager, sshCommand, gpg.program
# Guarantee: the capture step is not an execution path
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

ATTR = "* filter=x diff=x\n"
w(".gitattributes", ATTR, "a")
w("src/.gitattributes", ATTR)
q = lambda s: "'" + s.replace("'", "'\\''") + "'"
for k, v in [("filter.x.clean", f"sh -c {q('touch ' + MARK + '; cat')}"),
             ("filter.x.smudge", f"sh -c {q('touch ' + MARK + '; cat')}"),
             ("diff.x.textconv", f"sh -c {q('touch ' + MARK + '; cat')}"),
             ("diff.external", f"touch {MARK}"), ("core.pager", f"touch {MARK}; cat"),
             ("core.sshCommand", f"touch {MARK}"), ("gpg.program", f"touch {MARK}"),
             ("commit.gpgsign", "true")]:
    sh(f"GITDIR git config {k}", f"git config {k} {q(v)}")
w(".git/config", "[include]\n\tpath = ../src/evil.cfg\n", "a", "GITDIR include")
w("src/evil.cfg", f"[filter \"x\"]\n\tclean = sh -c 'touch {MARK}; cat'\n"
  f"[diff \"x\"]\n\ttextconv = sh -c 'touch {MARK}; cat'\n")
w("src/app.py", 'print("changed")\n', "a")

say("DONE")
sys.exit(0)
