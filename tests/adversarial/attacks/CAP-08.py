#!/usr/bin/python3
# CAP-08: Race during capture with a leftover process
# Guarantee: capture happens only after every sandbox process is dead
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

SECRET = ARGS[1]
mode = ARGS[2] if len(ARGS) > 2 else "run"
def flipper():
    while True:
        for t in ("/etc/passwd", SECRET):
            try:
                os.symlink(t, "src/x.lnk")
                os.replace("src/x.lnk", "src/x")
                with open("src/x.tmp", "w") as f:
                    f.write("ok\n")
                os.replace("src/x.tmp", "src/x")
            except OSError:
                pass
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        for fd in (0, 1, 2):
            try:
                os.close(fd)
            except OSError:
                pass
        flipper()
    os._exit(0)
os.waitpid(pid, 0)
if mode == "control":
    # A naive capture while the leftover runs: read src/x, following links.
    seen = set()
    end = time.time() + 2
    while time.time() < end:
        try:
            with open("src/x") as f:
                seen.add(f.read(64).split("\n")[0])
        except OSError:
            pass
    say("NAIVE-READ " + " | ".join(sorted(seen)))
else:
    time.sleep(0.5)

say("DONE")
sys.exit(0)
