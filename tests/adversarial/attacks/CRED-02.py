#!/usr/bin/python3
# CRED-02: docker, containerd and podman sockets
# Guarantee: no container engine socket
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import glob
mode, targets = ARGS[0], ARGS[1:]
socks = [t for t in targets if t.startswith("/")]
tcps = [t for t in targets if not t.startswith("/")]
if mode == "std":
    socks += ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
              "/run/podman/podman.sock", "/var/run/crio/crio.sock", "/run/buildkit/buildkitd.sock",
              *glob.glob("/run/user/*/docker.sock"), *glob.glob("/run/user/*/podman/podman.sock")]
    tcps += ["127.0.0.1:2375", "127.0.0.1:2376"]
    for k in ("DOCKER_HOST", "CONTAINER_HOST", "XDG_RUNTIME_DIR"):
        say(f"{k}={os.environ.get(k)}")
for p in socks:
    try:
        say(f"ls {p}: mode {oct(os.lstat(p).st_mode)}")
    except OSError as e:
        say(f"ls {p}: {ename(e.errno)}")
    r = tryconnect("u", p)
    say(f"connect {p}: {r}")
    if r == "CONNECTED":
        esc(f"connected to the engine socket {p}")
for t in tcps:
    host, port = t.rsplit(":", 1)
    r = tryconnect("4", host, port)
    say(f"connect {t}: {r}")
    if r == "CONNECTED":
        esc(f"connected to the engine port {t}")
if mode == "std":
    rc, out = run("docker version 2>&1; DOCKER_HOST=tcp://127.0.0.1:2375 docker ps 2>&1", timeout=10)
    say(f"docker: {out.strip()[:300]}")
    if "Server:" in out:
        esc("docker version reached a server")
