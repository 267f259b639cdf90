#!/usr/bin/python3
# FS-01: Writes to the read-only system
# Guarantee: the system is read-only
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
P = ARGS[0]  # "" inside the sandbox; a decoy root the harness owns in the control
assert P == "" or P.startswith("/tmp/corral-adv-"), P


def attempt(label, fn):
    try:
        fn()
        esc(label)
    except OSError as e:
        say(f"{label}: {ename(e.errno)}")


def append(f):
    with open(P + f, "ab") as h:
        h.write(f"PWN-{N}\n".encode())


for f in ("/etc/passwd", "/etc/ld.so.preload", "/usr/bin/env", "/bin/sh", "/usr/lib/os-release",
          "/etc/hosts", f"/opt/PWN-{N}", f"/var/lib/PWN-{N}", f"/boot/PWN-{N}", f"/PWN-{N}",
          f"/etc/PWN-{N}", f"/usr/bin/PWN-{N}", f"/usr/PWN-{N}", f"/lib/PWN-{N}"):
    attempt(f"write {f}", lambda f=f: append(f))
rc, out = run(f"sh -c 'echo PWN-{N} >> {P}/usr/bin/env' 2>&1")
say(f"sh append /usr/bin/env: rc {rc} {out.strip()}")
attempt("chmod 777 /usr/bin", lambda: os.chmod(P + "/usr/bin", 0o777))
attempt("chown /etc", lambda: os.chown(P + "/etc", os.getuid(), -1))
attempt("touch -d 2000-01-01 /etc/hosts", lambda: os.utime(P + "/etc/hosts", (946684800, 946684800)))
attempt("mkdir /etc/PWN-dir", lambda: os.mkdir(P + f"/etc/PWN-{N}-dir"))
attempt("symlink /usr/bin/PWN", lambda: os.symlink("/bin/sh", P + f"/usr/bin/PWN-{N}-ln"))
