#!/usr/bin/python3
# RES-DISK-02: Writes outside the workspace
# Guarantee: one shared disk cap covers every writable place; nothing persists on the host
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
cap = int(ARGS[0])
home = os.environ.get("HOME", "/nonexistent")
for d in ARGS[1:]:
    d = d.replace("$HOME", home)
    got, err = 0, "OK"
    try:
        fd = os.open(f"{d}/o-{N}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as e:
        say(f"OUT {d} 0 {ename(e.errno)}")
        continue
    buf = b"\0" * (4 << 20)
    try:
        while got < cap:
            got += os.write(fd, buf[: min(len(buf), cap - got)])
    except OSError as e:
        err = ename(e.errno)
    os.close(fd)
    say(f"OUT {d} {got} {err}")
