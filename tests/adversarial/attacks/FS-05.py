#!/usr/bin/python3
# FS-05: Leaked file descriptors and /proc/self/fd traversal
# Guarantee: filesystem isolation (fds 0-2 only, no open_by_handle_at)
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import stat
d = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
fds = []
for name in os.listdir(d):
    fd = int(name)
    if fd == d:
        continue
    try:
        tgt = os.readlink(f"/proc/self/fd/{fd}")
    except OSError as e:
        continue  # the descriptor listdir itself used, closed by now
    fds.append((fd, tgt))
os.close(d)
say(f"fds: {sorted(fds)}")
for fd, tgt in sorted(fds):
    if fd > 2:
        esc(f"leaked fd {fd} -> {tgt}")
    try:
        isdir = stat.S_ISDIR(os.fstat(fd).st_mode)
    except OSError:
        isdir = False
    if isdir or tgt.startswith("/sys") or tgt.startswith("/proc"):
        esc(f"fd {fd} resolves to a directory or kernel tree: {tgt}")
    try:
        say(f"ls fd {fd}: {sorted(os.listdir(f'/proc/self/fd/{fd}/'))[:3]}")
    except OSError as e:
        say(f"ls fd {fd}: {ename(e.errno)}")
    for rel in ("../../../etc/hostname", "../etc/hostname", "hostname"):
        try:
            with open(f"/proc/self/fd/{fd}/{rel}") as h:
                h.read(64)
            esc(f"fd {fd} traversal to {rel}")
        except OSError as e:
            pass
try:
    os.chdir(f"/proc/self/fd/3/../..")
    esc(f"cd /proc/self/fd/3/../.. -> {os.getcwd()}")
except OSError as e:
    say(f"cd /proc/self/fd/3/../..: {ename(e.errno)}")
must_block("open_by_handle_at", 304, -100, "z:64", 0)
