#!/usr/bin/python3
# RES-MEM-02: tmpfs and memfd balloons charged outside the limit
# Guarantee: memory and disk limits cover /dev/shm, /tmp, memfd; nothing outlives the run
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
memfd_bytes = int(ARGS[0])


def fill(path, cap):
    got, err = 0, "OK"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as e:
        return 0, ename(e.errno)
    buf = b"\0" * (1 << 20)
    try:
        while got < cap:
            got += os.write(fd, buf[: min(len(buf), cap - got)])
    except OSError as e:
        err = ename(e.errno)
    os.close(fd)
    return got, err


for spec in ARGS[1:]:
    d, cap = spec.rsplit("=", 1)
    got, err = fill(f"{d}/fill-{N}", int(cap))
    say(f"FILL {d} {got} {err}")
code = """import errno, os, sys
fd, n, step, at = os.memfd_create("balloon"), int(sys.argv[1]), 16 << 20, 0
try:
    while at < n:
        os.posix_fallocate(fd, at, step)
        at += step
        print("MEMFD_AT", at, flush=True)
    print("MEMFD", n, "OK", flush=True)
except OSError as e:
    print("MEMFD", n, errno.errorcode.get(e.errno, e.errno), flush=True)
"""
# The child reports straight to stdout: an OOM kill of either process keeps what it said.
rc = subprocess.run([sys.executable, "-c", code, str(memfd_bytes)], timeout=30).returncode
say(f"MEMFD_RC {rc}")
