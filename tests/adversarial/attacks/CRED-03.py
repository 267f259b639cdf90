#!/usr/bin/python3
# CRED-03: ssh-agent, gpg-agent and keyring daemons
# Guarantee: no agent socket
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
mode, targets = ARGS[0], ARGS[1:]
socks = list(targets)
say(f"SSH_AUTH_SOCK={os.environ.get('SSH_AUTH_SOCK')}")
rc, out = run("ssh-add -l 2>&1", timeout=5)
say(f"ssh-add -l: rc {rc} {out.strip()[:200]}")
if rc in (0, 1) and "Could not open" not in out and "Error connecting" not in out:
    esc("ssh-add -l talked to an agent")
if mode == "walk":
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in
                   ("/proc", "/sys", "/usr", "/lib", "/lib64", "/bin", "/sbin", "/dev")]
        for f in files + dirs:
            if f.startswith("agent.") or f.endswith(".agent") or f.startswith("S.gpg-agent") or f == "bus":
                socks.append(os.path.join(root, f))
for sk in socks:
    rc, out = run(f"SSH_AUTH_SOCK={sk} ssh-add -L 2>&1", timeout=5)
    say(f"ssh-add -L via {sk}: rc {rc} {out.strip()[:300]}")
    if rc == 0:
        esc(f"ssh-add -L listed keys via {sk}")
    r = tryconnect("u", sk)
    say(f"connect {sk}: {r}")
    if r == "CONNECTED":
        esc(f"connected to the agent socket {sk}")
if mode == "walk":
    rc, out = run("gpg-connect-agent --no-autostart 'keyinfo --list' /bye 2>&1", timeout=5)
    say(f"gpg-connect-agent: rc {rc} {out.strip()[:200]}")
    if "KEYINFO" in out:
        esc("gpg-agent listed keys")
