#!/usr/bin/python3
# FS-06: Overwriting runtime binaries through /proc/*/exe
# Guarantee: the host binaries stay intact
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
decoy = ARGS[0] if ARGS else ""
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
say(f"pids: {pids}")
held = []
for p in pids:
    try:
        say(f"{p} exe {os.readlink(f'/proc/{p}/exe')}")
    except OSError as e:
        say(f"{p} exe: {ename(e.errno)}")
    try:
        fd = os.open(f"/proc/{p}/exe", os.O_WRONLY)
        os.close(fd)
        esc(f"opened /proc/{p}/exe for writing")
    except OSError as e:
        say(f"open /proc/{p}/exe O_WRONLY: {ename(e.errno)}")
    try:
        held.append((p, os.open(f"/proc/{p}/exe", os.O_PATH)))
    except OSError as e:
        say(f"open /proc/{p}/exe O_PATH: {ename(e.errno)}")
try:
    with open("/proc/1/exe", "ab") as h:
        h.write(b"")
    esc("opened /proc/1/exe for appending")
except OSError as e:
    say(f"append /proc/1/exe: {ename(e.errno)}")
if decoy:
    # The CVE-2019-5736 sequence against a binary the harness owns: hold an O_PATH fd on a
    # running process's exe, let it exit, reopen the fd for writing.
    c = subprocess.Popen([decoy, "30"])
    time.sleep(0.2)
    held.append((c.pid, os.open(f"/proc/{c.pid}/exe", os.O_PATH)))
    c.kill()
    c.wait()
time.sleep(0.2)
for p, fd in held:
    try:
        w = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
        os.close(w)
        esc(f"reopened the exe of pid {p} for writing")
    except OSError as e:
        say(f"reopen exe of pid {p} O_WRONLY: {ename(e.errno)}")
