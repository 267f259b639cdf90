#!/usr/bin/python3
# NET-13: AF_VSOCK and socket-family argument width
# Guarantee: no egress, including to the hypervisor or host
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
# No connect is attempted anywhere: this host's only vsock transport goes to the
# hypervisor (no vsock_loopback), so the attack is the socket(2) call itself.
for label, dom, typ in (("vsock-stream", 40, 1), ("vsock-dgram", 40, 2),
                        ("vsock-seqpacket", 40, 5), ("vsock-wide 1<<32", 0x100000028, 1),
                        ("vsock-wide ffffffff<<32", 0xffffffff00000028, 1),
                        ("vsock-wide cloexec", 0x100000028, 1 | 0x80000)):
    r, e = scall(41, dom, typ, 0)
    if r >= 0:
        esc(f"{label}: socket(AF_VSOCK) returned fd {r}")
        os.close(r)
    elif e in ("EPERM", "EAFNOSUPPORT", "ENODEV", "EACCES", "ENOSYS"):
        say(f"{label}: {e}")
    else:
        esc(f"{label}: reached the kernel ({e})")
