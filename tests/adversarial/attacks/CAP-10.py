#!/usr/bin/python3
# CAP-10: Control characters, ..-looking names, parser confusion
# Guarantee: the scope check cannot be fooled by names
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

for d in [".github/workflows/x -> src", "src-evil"]:
    step(f"mkdir {d!r}", lambda d=d: os.makedirs(d, exist_ok=True))
for name in ["src/a\nb", "src/\x1b[31mred", "src/a -> b", ".github/workflows/x -> src/ok.txt",
             'src/"q"', "src/\ttab", "src/ ", "src/..\\..\\.github\\workflows\\x.yml",
             "src/%2e%2e%2f.github", "src-evil/p.py", "srcX", "-rf",
             f"--upload-pack=touch PWN-{N}", ".github/workflows/x -> src/inner.txt"]:
    w(name, "x\n")

say("DONE")
sys.exit(0)
