#!/usr/bin/python3
# CAP-11: Non-UTF-8, Unicode and case tricks, .git lookalikes
# Guarantee: the scope check is byte-exact and drops nothing
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

names = [b".github/workflows/\xff\xfe.yml", b"src/\xc3\x28", "src/e\u0301.txt".encode(),
         "src/\u00e9.txt".encode(), "src/evil\u202egnp.sh".encode(), b"Src/x"]
for d in [".GIT", ".Git", ".g\u200cit", "git~1", ".git.", ".git "]:
    names.append(f"{d}/config".encode())
    names.append(f"src/{d}/config".encode())
for n in names:
    def mk(n=n):
        os.makedirs(os.path.dirname(n), exist_ok=True)
        with open(n, "wb") as f:
            f.write(b"x\n")
    step(f"write {n!r}", mk)

say("DONE")
sys.exit(0)
