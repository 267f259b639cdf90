#!/usr/bin/python3
# FS-09: Writes to /proc/sys, /sys, release_agent and core_pattern
# Guarantee: the host kernel settings stay intact
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import glob, resource
P = ARGS[0]  # "" inside; a decoy root the harness owns in the control
assert P == "" or P.startswith("/tmp/corral-adv-"), P
for f, v in (("/proc/sys/kernel/core_pattern", f'|/bin/sh -c "touch /tmp/PWN-{N}"'),
             ("/proc/sysrq-trigger", "h"),
             ("/proc/sys/kernel/modprobe", f"/tmp/PWN-{N}"),
             ("/sys/kernel/uevent_helper", f"/tmp/PWN-{N}"),
             ("/sys/kernel/mm/ksm/run", "1"),
             ("/proc/sys/kernel/panic", "0")):
    try:
        with open(P + f, "w") as h:
            h.write(v)
        esc(f"write {f}")
    except OSError as e:
        say(f"write {f}: {ename(e.errno)}")
for f in sorted(glob.glob(P + "/sys/fs/cgroup/*/release_agent")):
    try:
        with open(f, "w") as h:
            h.write(f"/tmp/PWN-{N}")
        esc(f"write release_agent {f}")
    except OSError as e:
        say(f"write {f}: {ename(e.errno)}")
# CVE-2022-0492: a new user+mount+cgroup namespace, then mount a v1 hierarchy.
r, e = must_block("unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWCGROUP)", 272,
                  0x10000000 | 0x20000 | 0x02000000)
if r == 0:
    os.makedirs(P + "/tmp/c", exist_ok=True) if P else None
    r2 = scall(165, b"cgroup", (P + "/tmp/c").encode() if P else b"/tmp", b"cgroup", 0, b"rdma")
    say(f"mount cgroup rdma: {r2}")
    if r2[0] == 0:
        esc("mounted a cgroup v1 hierarchy in a nested namespace")
rc, out = run("unshare -UrmC --propagation=unchanged sh -c 'echo NESTED' 2>&1")
say(f"unshare -UrmC: {out.strip()}")
# Core dumps: the hard RLIMIT_CORE must be 0.
soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
say(f"RLIMIT_CORE {soft} {hard}")
if hard != 0:
    esc(f"RLIMIT_CORE hard limit is {hard}")
try:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    esc("raised RLIMIT_CORE")
except (ValueError, OSError) as e:
    say(f"raise RLIMIT_CORE: {e}")
rc, out = run("sh -c 'kill -SEGV $$'")
say(f"SEGV: rc {rc}; cwd now {sorted(os.listdir('.'))}")
