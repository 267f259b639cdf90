#!/usr/bin/python3
# FS-03: Symlink escapes for writing and for reading
# Guarantee: only the workspace is writable; host paths stay unreadable
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "canary.py")).read())  # corral: inline canary.py

T, R = ARGS[0], ARGS[1:]  # write target (/etc/hosts inside, a decoy outside); canaries to read
os.makedirs("src", exist_ok=True)


def link(target, name):
    p = f"src/{name}"
    try:
        os.symlink(target, p)
    except OSError as e:
        say(f"symlink {p} -> {target}: {ename(e.errno)}")
    return p


p = link(T, "l1")
try:
    with open(p, "ab") as h:
        h.write(f"PWN-{N}\n".encode())
    esc(f"symlink write {T}")
except OSError as e:
    say(f"write through {p}: {ename(e.errno)}")
# A forbidden repository path through a link: corral binds it read-only.
p = link("../.github/workflows/ci.yml", "l3")
try:
    with open(p, "ab") as h:
        h.write(b"-- through a link\n")
    say(f"NOTE wrote .github/workflows/ci.yml through {p}")
except OSError as e:
    say(f"write .github through {p}: {ename(e.errno)}")
for i, r in enumerate(R):
    show(link(r, f"l2_{i}"), "symlink read")
    for pre in ("/proc/self/root", "/proc/1/root", "/proc/1/cwd/../../../../../.."):
        show(pre + r, f"proc read via {pre}")
