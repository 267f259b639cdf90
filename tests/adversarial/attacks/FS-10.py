#!/usr/bin/python3
# FS-10: setuid files, file capabilities, privilege that persists
# Guarantee: no privilege inside; no setuid file reaches a candidate
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import shutil, struct
SCR = ARGS[0]  # scratch outside the capture: the sandbox's /tmp, or the control's folder
st = {}
for line in open("/proc/self/status"):
    k, _, v = line.partition(":")
    st[k] = v.strip()
    if k in ("NoNewPrivs", "CapPrm", "CapEff", "CapAmb", "CapBnd", "Seccomp", "Uid", "Gid"):
        say(line.rstrip())
if st.get("NoNewPrivs") != "1":
    esc(f"NoNewPrivs is {st.get('NoNewPrivs')}")
for k in ("CapPrm", "CapEff", "CapAmb"):
    if int(st.get(k, "0"), 16) != 0:
        esc(f"{k} is {st[k]}")
for cmd in ("sudo -n id", "su -c id root </dev/null", "pkexec id"):
    # A bound on a hang, not a pace: su's PAM stack takes seconds in an emulated guest.
    rc, out = run(f"{cmd} 2>&1", timeout=60)
    say(f"{cmd}: rc {rc} {out.strip()[:200]}")
    if "uid=0" in out:
        esc(f"{cmd} ran as root")
sb = os.path.join(SCR, "sb")
CAP = struct.pack("<IIIII", 0x02000001, 1 << 7, 0, 0, 0)  # cap_setuid+ep
try:
    shutil.copy("/bin/bash", sb)
    os.chmod(sb, 0o6755)
    say(f"sb mode {oct(os.stat(sb).st_mode)}")
    rc, out = run(f"{sb} -p -c id")
    say(f"sb -p -c id: {out.strip()}")
    if "uid=0" in out:
        esc("a setuid copy of bash ran as root")
except OSError as e:
    say(f"setuid copy: {ename(e.errno)}")
os.makedirs("src", exist_ok=True)
tool = "src/suid-tool"
with open(tool, "w") as h:
    h.write("\x23!/bin/sh\nid\n")
for p in (sb, tool):
    try:
        os.setxattr(p, "security.capability", CAP)
        esc(f"setcap cap_setuid+ep on {p}")
    except OSError as e:
        say(f"setcap {p}: {ename(e.errno)}")
os.chmod(tool, 0o6755)
say(f"{tool} mode {oct(os.stat(tool).st_mode)}")
