#!/usr/bin/python3
# TRUST-04: Symlink chains in the candidate
# Guarantee: a captured candidate never contains a link that resolves outside the allowed scope or the repository
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
def link(name, target):
    try:
        os.symlink(target, name)
        say(f"OK symlink {name} -> {target}")
    except OSError as e:
        say(f"ERR symlink {name}: {ename(e.errno)}")


os.makedirs("src/sub", exist_ok=True)
if ARGS and ARGS[0] == "inside":
    # A chain that stays inside the scope: src/sub/d -> . , src/sub/f -> d/../app.py (src/app.py).
    link("src/sub/d", ".")
    link("src/sub/f", "d/../app.py")
else:
    # Lexically src/docs/guide.md (inside src/); physically d is src/sub, so d/.. is src and
    # ../docs/guide.md is docs/guide.md, outside the scope.
    link("src/sub/d", ".")
    link("src/sub/e", "d/../../docs/guide.md")
    # Twelve links to "." and one link through all of them: lexically src/deep/etc/passwd,
    # but the twelve ".." apply after the links resolved to src/deep, climbing to /:
    # /etc/passwd.
    os.makedirs("src/deep", exist_ok=True)
    chain = [f"l{i:02d}" for i in range(1, 13)]
    for name in chain:
        link(f"src/deep/{name}", ".")
    link("src/deep/pw", "/".join(chain) + "/" + "../" * 12 + "etc/passwd")
