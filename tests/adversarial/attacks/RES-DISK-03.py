#!/usr/bin/python3
# RES-DISK-03: Unlinked open file to defeat du-based accounting
# Guarantee: writable-disk limit enforced by a size-capped mount, not by du
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
d, cap = ARGS[0], int(ARGS[1])
path = f"{d}/h-{N}"
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.unlink(path)
got, err = 0, "OK"
buf = b"\0" * (4 << 20)
try:
    while got < cap:
        got += os.write(fd, buf[: min(len(buf), cap - got)])
except OSError as e:
    err = ename(e.errno)
say(f"UNLINKED {got} {err}")
say("DU " + run(f"du -sk {d}")[1].strip())
time.sleep(1)
os.close(fd)
# The space comes back once the last descriptor is gone.
after = f"{d}/after-{N}"
try:
    with open(after, "wb") as f:
        f.write(b"\0" * (1 << 20))
    say("AFTER OK")
except OSError as e:
    say(f"AFTER {ename(e.errno)}")
try:
    os.unlink(after)
except OSError:
    pass
