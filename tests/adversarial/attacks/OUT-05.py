#!/usr/bin/python3
# OUT-05: Side channels that bypass the capture
# Guarantee: output is bounded and captured
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
ctl = ARGS[0] == "ctl"
targets = ["/dev/kmsg"] if ctl else ["/dev/tty", "/dev/console", "/dev/kmsg"]
level = "<6>" if ctl else "<0>"
for path in targets:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)
        os.write(fd, f"{level}PWN-{N} via {path}\n".encode())
        os.close(fd)
        esc(f"wrote to {path}")
    except OSError as e:
        say(f"{path}: {ename(e.errno)}")
for fam, path in (("ud", "/dev/log"), ("ud", "/run/systemd/journal/socket"),
                  ("u", "/run/systemd/journal/stdout")):
    r = tryconnect(fam, path)
    if r == "CONNECTED":
        esc(f"connected to {path}")
    else:
        say(f"{path}: {r}")
if not ctl:
    for cmd in (f"logger PWN-{N}", f"systemd-cat echo PWN-{N}"):
        rc, out = run(cmd, timeout=10)
        say(f"{cmd}: exit {rc} {out.strip()[:120]}")
    try:
        with open("/proc/1/fd/1", "w") as f:
            f.write(f"via-proc1-{N}\n")
        say(f"PROC1-WRITE-OK")
    except OSError as e:
        say(f"/proc/1/fd/1: {ename(e.errno)}")
