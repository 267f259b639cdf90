#!/usr/bin/python3
# FS-08: Device nodes and /dev
# Guarantee: minimal /dev, mknod refused
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import stat
P = ARGS[0]  # "" inside; a decoy prefix is never needed: the control only opens devices
ALLOWED = set("null zero full random urandom tty ptmx pts shm fd stdin stdout stderr core mqueue".split())
ents = sorted(os.listdir("/dev"))
say(f"/dev: {ents}")
for e in ents:
    if e in ALLOWED:
        continue
    st = os.lstat("/dev/" + e)
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        esc(f"device node /dev/{e} is present")
    else:
        say(f"extra /dev/{e}")
os.makedirs("src", exist_ok=True)
for name, kind, dev in (("sda", stat.S_IFBLK, os.makedev(8, 0)), ("mem", stat.S_IFCHR, os.makedev(1, 1)),
                        ("kmsg", stat.S_IFCHR, os.makedev(1, 11))):
    try:
        os.mknod(f"src/{name}", kind | 0o666, dev)
        esc(f"mknod {name}")
    except OSError as e:
        say(f"mknod src/{name}: {ename(e.errno)}")
for d in ("/dev/kmsg", "/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/mem", "/dev/kmem", "/dev/port",
          "/dev/fuse", "/dev/net/tun", "/dev/kvm", "/dev/vsock", "/dev/userfaultfd",
          "/dev/loop-control", "/dev/loop0", "/dev/btrfs-control", "/dev/hwrng"):
    try:
        fd = os.open(d, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        os.close(fd)
        esc(f"opened {d}")
    except OSError as e:
        say(f"open {d}: {ename(e.errno)}")
