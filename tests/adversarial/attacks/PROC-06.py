#!/usr/bin/python3
# PROC-06: Escaping the cgroup by migration
# Guarantee: cleanup and resource limits stay attached to every process
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import struct
roots = [r for r in ARGS[0].split(",") if r]
say(open("/proc/self/cgroup").read().strip().replace("\n", " | "))
procs, freeze, v2dirs = [], [], []
for root in roots:
    for dp, dns, fns in os.walk(root):
        for f in fns:
            if f in ("cgroup.procs", "tasks"):
                procs.append(os.path.join(dp, f))
            if f in ("cgroup.freeze", "freezer.state"):
                freeze.append(os.path.join(dp, f))
        if "cgroup.controllers" in fns:
            v2dirs.append(dp)
say(f"{len(procs)} cgroup.procs/tasks files under {roots}")
for f in procs:
    try:
        with open(f, "w") as fh:
            fh.write(str(os.getpid()))
        esc(f"MOVED into {f}")
    except OSError as e:
        say(f"{f}: {ename(e.errno)}")
for f in freeze:
    try:
        with open(f, "w") as fh:
            fh.write("0" if f.endswith("cgroup.freeze") else "THAWED")
        esc(f"wrote {f}")
    except OSError as e:
        say(f"{f}: {ename(e.errno)}")
# clone3(CLONE_INTO_CGROUP) with an O_PATH fd on a cgroup v2 directory.
CLONE_INTO_CGROUP = 0x200000000
for d in v2dirs:
    try:
        fd = os.open(d, os.O_PATH | os.O_DIRECTORY)
    except OSError as e:
        say(f"open {d}: {ename(e.errno)}")
        continue
    args = struct.pack("11Q", CLONE_INTO_CGROUP, 0, 0, 0, 17, 0, 0, 0, 0, 0, fd)
    buf = ctypes.create_string_buffer(args, len(args))
    r = _libc.syscall(ctypes.c_long(435), buf, ctypes.c_long(len(args)))
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
        esc(f"clone3 CLONE_INTO_CGROUP {d}")
    else:
        say(f"clone3 into {d}: {ename(ctypes.get_errno())}")
    os.close(fd)
# A fresh cgroupfs of our own, on a mount point in the workspace or (when its root is
# read-only, as in the sandbox) in the temp folder.
mnt = os.path.join(WS, ".cgm")
try:
    os.makedirs(mnt, exist_ok=True)
except OSError:
    import tempfile
    mnt = tempfile.mkdtemp(prefix=".cgm-")
for fs, opts in ((b"cgroup2", None), (b"cgroup", b"pids")):
    r = _libc.mount(b"none", mnt.encode(), fs, 0, opts)
    if r == 0:
        esc(f"mounted {fs.decode()} at {mnt}")
        _libc.umount2(mnt.encode(), 2)
    else:
        say(f"mount {fs.decode()}: {ename(ctypes.get_errno())}")
os.rmdir(mnt)
# Handshake (sandboxed run only): every attempt is made; mark that (SIGUSR2 ignored) and wait
# for the host watcher, which takes its cgroup reading of this process when it sees the mark
# and then sends SIGUSR1. Blocked first, so the signal is never lost and never kills.
if len(ARGS) > 1 and ARGS[1] == "release":
    import signal
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    got = signal.sigtimedwait([signal.SIGUSR1], 20)
    say("released by the host watcher" if got else "no release from the host watcher in 20 s")
