#!/usr/bin/python3
# RES-PID-01: Fork bomb and thread bomb
# Guarantee: process limit: pids.max holds; the host and corral stay responsive
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
mode, cap = ARGS[0], int(ARGS[1])
code = """import os, sys, threading, time
n, cap = 0, int(sys.argv[1])
try:
    while n < cap:
        threading.Thread(target=time.sleep, args=(1e6,), daemon=True).start()
        n += 1
    print("THREADS", n, "cap", flush=True)
except Exception as e:
    print("THREADS", n, type(e).__name__, flush=True)
os._exit(0)
"""
try:
    p = subprocess.run([sys.executable, "-c", code, str(cap)], capture_output=True, timeout=30)
    say(p.stdout.decode().strip() or f"THREADS ? rc={p.returncode}")
except Exception as e:
    say(f"THREADS ? {type(e).__name__}")
kids, err = [], "cap"
try:
    while len(kids) < cap:
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        kids.append(pid)
except OSError as e:
    err = ename(e.errno)
say(f"FORKS {len(kids)} {err}")
for k in kids:
    os.kill(k, 9)
    os.waitpid(k, 0)
if mode == "bomb":
    bomb = subprocess.Popen(["bash", "-c", ":(){ :|:& };:", f"bomb-{N}"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(3)
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        say("FORK during the bomb: OK")
    except OSError as e:
        say(f"FORK during the bomb: {ename(e.errno)}")
    say("BOMB done")
