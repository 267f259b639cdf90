#!/usr/bin/python3
# RES-MEM-03: SysV and POSIX IPC that persist after the run
# Guarantee: IPC objects die with the sandbox's IPC namespace; memory returns
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
size = int(ARGS[0])
key = int(N[:8], 16) & 0x7FFFFFFF
l = ctypes.CDLL(None, use_errno=True)
l.shmat.restype = ctypes.c_void_p
l.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
l.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
l.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
IPC_CREAT_0600 = 0o1600
r = l.msgget(key, IPC_CREAT_0600)
say(f"MSG {r} {ename(ctypes.get_errno()) if r < 0 else 'OK'}")
r = l.semget(key, 1, IPC_CREAT_0600)
say(f"SEM {r} {ename(ctypes.get_errno()) if r < 0 else 'OK'}")
try:
    fd = os.open(f"/dev/shm/psx-{N}", os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 1 << 20)
    os.write(fd, b"x" * 4096)
    say("PSXSHM OK")
except OSError as e:
    say(f"PSXSHM {ename(e.errno)}")
r = l.mq_open(f"/mq-{N}".encode(), os.O_CREAT | os.O_RDWR, 0o600, None)
say(f"MQ {r} {ename(ctypes.get_errno()) if r < 0 else 'OK'}")
i = l.shmget(key, size, IPC_CREAT_0600)
say(f"SHM {i} {ename(ctypes.get_errno()) if i < 0 else 'OK'} key {key:#x}")
say(run("ipcs -a")[1])
if i >= 0:
    p = l.shmat(i, None, 0)
    if p is not None and p != ctypes.c_void_p(-1).value:
        ctypes.memset(p, 1, size)
        say(f"SHM touched {size}")
