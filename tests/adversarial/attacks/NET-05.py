#!/usr/bin/python3
# NET-05: Unix socket files visible through read-only mounts
# Guarantee: no egress, and no access to host services or credentials
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import stat
mode, targets = ARGS[0], ARGS[1:]
found = set(targets)


def scan(d):
    try:
        it = list(os.scandir(d))
    except OSError:
        return
    for e in it:
        try:
            if e.is_symlink() or e.is_file(follow_symlinks=False):
                continue
            if e.is_dir(follow_symlinks=False):
                if e.path not in ("/proc", "/sys"):
                    scan(e.path)
            elif stat.S_ISSOCK(e.stat(follow_symlinks=False).st_mode):
                found.add(e.path)
        except OSError:
            pass


if mode == "scan":
    scan("/")
    say(f"socket files visible: {len(found) - len(targets)} (plus {len(targets)} named)")
for p in sorted(found):
    for fam in ("u", "ud"):
        r = tryconnect(fam, p, timeout=1)
        if r == "CONNECTED":
            esc(f"unix {fam} connect {p}")
        elif p in targets:
            say(f"{fam} {p}: {r}")
