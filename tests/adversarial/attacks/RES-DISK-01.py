#!/usr/bin/python3
# RES-DISK-01: Filling the workspace and the holes of a sparse file
# Guarantee: writable-disk limit: ENOSPC at disk_bytes; corral still writes its result
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
d, fall, cap = ARGS[0], ARGS[1], int(ARGS[2])
big, sp = f"{d}/big-{N}", f"{d}/sp-{N}"


def fill(path, offset, cap):
    got, err = 0, "OK"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    except OSError as e:
        return 0, ename(e.errno)
    buf = b"\0" * (4 << 20)
    try:
        os.lseek(fd, offset, os.SEEK_SET)
        while got < cap:
            got += os.write(fd, buf[: min(len(buf), cap - got)])
    except OSError as e:
        err = ename(e.errno)
    os.close(fd)
    return got, err


rc, out = run(f"fallocate -l {fall} {big}")
say(f"FALLOCATE rc={rc} {out.strip()}")
if rc != 0:
    got, err = fill(big, 0, cap)
    say(f"WROTE big {got} {err}")
# Room for the second attack (the corpus runs them back to back on a full disk).
try:
    os.unlink(big)
except OSError:
    pass
rc, out = run(f"truncate -s 1T {sp}")
say(f"TRUNCATE rc={rc} {out.strip()}")
got, err = fill(sp, 1000 * (4 << 20), cap)
say(f"WROTE sparse {got} {err}")
say(run(f"du -sk {d}; df -k {d}")[1])
