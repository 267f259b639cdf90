#!/usr/bin/python3
# RES-DISK-04: Running out of inodes, and a 20000-level tree
# Guarantee: inode cap; capture stays bounded and never skips a deep entry
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
mode = ARGS[0]
if mode == "flood":
    cap = int(ARGS[1])
    d = ARGS[2] if len(ARGS) > 2 else f"{WS}/src/f"
    os.makedirs(d, exist_ok=True)
    n, err, t0 = 0, "cap", time.time()
    try:
        while n < cap:
            os.close(os.open(f"{d}/{n}", os.O_CREAT | os.O_WRONLY, 0o644))
            n += 1
    except OSError as e:
        err = ename(e.errno)
    say(f"FLOOD {n} {err} {time.time() - t0:.1f}s")
else:
    # Each level costs more than the last (path walks are linear in the depth), so past
    # PATH_MAX (what the case needs, however slow the host) the tree grows for at most
    # `budget` seconds.
    depth, leaf, budget = int(ARGS[1]), ARGS[2], float(ARGS[3])
    os.chdir(f"{WS}/src")
    k, err, t0 = 0, "OK", time.time()
    try:
        while k < depth:
            os.mkdir("d")
            os.chdir("d")
            k += 1
            if k % 1000 == 0:
                say(f"DEEP_AT {k} {time.time() - t0:.1f}s")
                if 2 * k > 4096 and time.time() - t0 > budget:
                    err = "time"
                    break
    except OSError as e:
        err = ename(e.errno)
    with open(leaf, "w") as f:
        f.write(f"leaf {N}\n")
    say(f"DEEP {k} {err} path {2 * k + len(leaf)} bytes")
