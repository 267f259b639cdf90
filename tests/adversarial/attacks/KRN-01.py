#!/usr/bin/python3
# KRN-01: Terminal injection: TIOCSTI (and 64-bit), TIOCLINUX, TIOCCONS, TIOCSETD
# Guarantee: process isolation; nothing executes in the supervisor's terminal
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import fcntl, struct, termios
# argv: N [control]. "control" (the harness's pty outside the sandbox) skips TIOCLINUX,
# TIOCCONS and TIOCSETD: TIOCCONS would redirect the host console.
control = "control" in ARGS
text = f"touch /tmp/PWN-{N}\n".encode()
SAFE = {"EPERM", "EIO", "ENOTTY"}
fds = {0, 1, 2}
for name in os.listdir("/proc/self/fd"):
    try:
        if os.isatty(int(name)):
            fds.add(int(name))
    except (OSError, ValueError):
        pass


def check(label, r, e):
    if r >= 0 or e not in SAFE:
        esc(f"{label} returned {r} {e}")
    else:
        say(f"{label}: {e}")


for fd in sorted(fds):
    try:
        say(f"fd {fd}: {'a tty' if os.isatty(fd) else 'not a tty'} ({os.readlink(f'/proc/self/fd/{fd}')})")
    except OSError as ex:
        say(f"fd {fd}: {ename(ex.errno)}")
    try:
        for c in text:
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))
        esc(f"TIOCSTI fd {fd} injected {len(text)} bytes")
    except OSError as ex:
        check(f"TIOCSTI fd {fd}", -1, ename(ex.errno))
    check(f"TIOCSTI 64-bit fd {fd}", *scall(16, fd, 0x100005412, b"x"))
    if control:
        continue
    check(f"TIOCLINUX setsel fd {fd}", *scall(16, fd, 0x541C, struct.pack("=bHHHHH", 2, 0, 0, 10, 0, 0)))
    check(f"TIOCLINUX paste fd {fd}", *scall(16, fd, 0x541C, bytes([3])))
    check(f"TIOCCONS fd {fd}", *scall(16, fd, 0x541D, 0))
    check(f"TIOCSETD N_HDLC fd {fd}", *scall(16, fd, 0x5423, struct.pack("i", 13)))
try:
    t = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    esc(f"/dev/tty opened (fd {t})")
    os.close(t)
except OSError as ex:
    say(f"/dev/tty: {ename(ex.errno)}")
