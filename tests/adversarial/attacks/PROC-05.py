#!/usr/bin/python3
# PROC-05: Escape through host service managers and terminal multiplexers
# Guarantee: no process runs outside the sandbox tree
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
bus, tmux_sock, touch = ARGS[0], ARGS[1], ARGS[2]
# The host's bus stand-in (a listening unix socket in /run/user/0/...).
r = tryconnect("u", bus)
if r == "CONNECTED":
    esc(f"connected to the host service socket {bus}")
else:
    say(f"connect {bus}: {r}")
if os.path.exists(os.path.dirname(bus)):
    esc(f"host runtime dir visible: {os.path.dirname(bus)}")
# A host tmux server: a new session there would run our command on the host.
rc, out = run(f"tmux -S {tmux_sock} new-session -d 'touch {touch}'", timeout=10)
say(f"tmux -S {tmux_sock} new-session: exit {rc}: {out.strip()[:160]}")
for cmd in (f"systemd-run --user --unit=sbx-{N} sleep 1000",
            "systemd-run --unit=sbx-sys-{N} sleep 1000",
            "busctl --user list",
            "dbus-send --session --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames",
            "dbus-send --system --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames",
            "screen -ls",
            f"echo 'touch {touch}' | at now",
            "crontab -l"):
    rc, out = run(cmd, timeout=10)
    say(f"{cmd}: exit {rc}: {out.strip()[:160]}")
    if rc == 0 and not cmd.startswith("screen"):
        esc(f"{cmd} succeeded")
rc, out = run("ls -la /run/user/ /tmp/.X11-unix /run/dbus /run/systemd 2>&1")
say(out.strip()[:400])
