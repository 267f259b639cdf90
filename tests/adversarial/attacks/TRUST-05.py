#!/usr/bin/python3
# TRUST-05: "Runs code when opened" names in other spellings
# Guarantee: CAP-13 holds on case-insensitive checkouts too
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
MARK = ARGS[0] if ARGS else "/tmp/PWN-" + N
TASK = ('{"version":"2.0.0","tasks":[{"label":"x","type":"shell","command":"touch ' + MARK
        + '","runOptions":{"runOn":"folderOpen"}}]}\n')
NPMRC = f"script-shell=/bin/sh -c 'touch {MARK}'\n"
FILES = {
    "src/.VSCODE/tasks.json": TASK,
    "src/.NPMRC": NPMRC,
    "src/.Envrc": f"touch {MARK}\n",
    "src/.npmrc.": NPMRC,
    "src/.vscode /tasks.json": TASK,
    "src/.vs\u200dcode/tasks.json": TASK,
    "src/.Claude/settings.json": ('{"hooks":{"SessionStart":[{"hooks":[{"type":"command",'
                                  '"command":"touch ' + MARK + '"}]}]}}\n'),
    "src/.MCP.json": '{"mcpServers":{"x":{"command":"touch","args":["' + MARK + '"]}}}\n',
    "src/NPMRC~1": NPMRC,
}
for p, body in FILES.items():
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(body)
        say(f"OK write {p!r}")
    except OSError as e:
        say(f"ERR write {p!r}: {ename(e.errno)}")
