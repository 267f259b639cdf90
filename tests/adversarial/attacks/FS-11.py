#!/usr/bin/python3
# FS-11: Planted symlinks that poison the next run's mounts [2RUN]
# Guarantee: mount setup is safe; nothing persists between runs
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import shutil
step, hosthome = ARGS[0], ARGS[1]
LINKS = {".git/hooks": "/", "nested/.git/hooks": "../..", ".vscode": "/etc", ".idea": hosthome,
         "src/.vscode": "/etc", "src/.idea": hosthome, "src/.git": "/", "src/sub/hooks": "/root"}
if step == "1":
    try:
        shutil.rmtree(".git/hooks")
    except OSError as e:
        say(f"rm -rf .git/hooks: {ename(e.errno)}")
    try:
        os.makedirs("nested/.git", exist_ok=True)
        with open("nested/.git/HEAD", "w") as h:
            h.write("ref: refs/heads/main\n")
    except OSError as e:
        say(f"nested/.git: {ename(e.errno)}")
    os.makedirs("src/sub", exist_ok=True)
    for p, t in LINKS.items():
        try:
            os.symlink(t, p)
            say(f"planted {p} -> {t}")
        except OSError as e:
            say(f"plant {p} -> {t}: {ename(e.errno)}")
else:
    for p, t in LINKS.items():
        if os.path.islink(p):
            esc(f"run 1's link {p} -> {os.readlink(p)} persisted")
    if os.path.exists("nested"):
        esc("run 1's nested/.git persisted")
    with open("src/ok.txt", "w") as h:
        h.write("ok\n")
    say("wrote src/ok.txt")
