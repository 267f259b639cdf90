#!/usr/bin/python3
# RES-PID-02: Exhausting per-user counters the host user shares
# Guarantee: resource limits do not spill onto a host user or another sandbox
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
hold = float(ARGS[0])
l = ctypes.CDLL(None, use_errno=True)
fds, err = [], "cap"
while len(fds) < 100000:
    r = l.inotify_init1(0)
    if r < 0:
        err = ename(ctypes.get_errno())
        break
    fds.append(r)
say(f"INOTIFY {len(fds)} {err}")
kids, err = [], "cap"
max_kids = int(ARGS[1]) if len(ARGS) > 1 else 100000
try:
    while len(kids) < max_kids:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
except OSError as e:
    err = ename(e.errno)
say(f"FORKS {len(kids)} {err}")
# Hold, and keep taking any instance another process of the same uid gives back.
end = time.time() + hold
while time.time() < end:
    r = l.inotify_init1(0)
    if r >= 0:
        fds.append(r)
    time.sleep(0.005)
say(f"HELD {len(fds)}")
for k in kids:
    os.kill(k, 9)
    os.waitpid(k, 0)
