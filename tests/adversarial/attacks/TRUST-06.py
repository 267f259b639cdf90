#!/usr/bin/python3
# TRUST-06: Racing attempts on one base commit
# Guarantee: concurrent runs never break each other; every admitted run writes a manifest
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
# One of the 16 workers of TRUST-06, each started by its own `corral run` at the same time on
# one of two base commits no cache holds. argv: N MODE MARK FILES NONCE PORT. It checks the
# base it was given (the FILES files repos/wide.sh wrote under lib/, each naming its index and
# NONCE, which tells the two commits apart: a torn or foreign checkout prints ESC-<N>), that
# no other run's file is in its workspace and that the harness's upstream on the host's
# 127.0.0.1:PORT is out of its direct reach, writes its own marker to src/race/MARK.txt, and
# then
#   edit     exits 0 (a candidate holding MARK and nothing else),
#   net      (allowlist mode) asks the upstream for /MARK through its own egress proxy and
#            must get its own answer, asks for MARK.invalid (not on its list: refused and
#            recorded in its own manifest), then exits 0 like edit,
#   fail     exits 3,
#   sleep    sleeps past its wall budget,
#   balloon  grows past its memory budget.
# Outside (the positive control) MODE naive is a base cache without a lock: argv
# N naive ROOT SHA SRC. After the harness's start signal (ROOT/go) it looks for ROOT/base/SHA,
# and when it is missing copies SRC's files into ROOT/tmp/SHA-<pid> and renames that to
# ROOT/base/SHA, the way corral publishes an entry.
import shutil

MODE = ARGS[0]


def naive(root, sha, src):
    open(os.path.join(root, f"ready-{os.getpid()}"), "w").close()
    deadline = time.time() + 300  # a bound on a hang: the harness writes go once all are ready
    while not os.path.exists(os.path.join(root, "go")) and time.time() < deadline:
        time.sleep(0.001)
    dest = os.path.join(root, "base", sha)
    if os.path.isdir(dest):
        say("REUSED")
        return
    staging = os.path.join(root, "tmp", f"{sha}-{os.getpid()}")
    shutil.copytree(src, staging, ignore=shutil.ignore_patterns(".git"))
    try:
        os.rename(staging, dest)
        say("PUBLISHED")
    except OSError as e:
        say(f"RENAME-FAILED {ename(e.errno)}")


if MODE == "naive":
    naive(*ARGS[1:4])
    sys.exit(0)



def through_proxy(url, host):
    """An absolute-form GET through the run's proxy: (status line, body), or (errno, "")."""
    p = proxy()
    if p is None:
        return "NOPROXY", ""
    try:
        # A bound on a hang, not a pace: 16 runs share the CPUs (an emulated guest's too).
        s = socket.create_connection(p, 120)
        s.sendall(f"GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                  .encode("latin1"))
        data = b""
        while len(data) < 65536:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
    except OSError as e:
        return (ename(e.errno) if e.errno else str(e)), ""
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode("latin1"), body.decode("latin1")


MARK, FILES, NONCE, PORT = ARGS[1], int(ARGS[2]), ARGS[3], int(ARGS[4])
say(f"WORKER {MARK} {MODE}")
wrong, extra = wide_base(FILES, NONCE)
if wrong or extra:
    esc(f"the base is not the commit's: {len(wrong)} of {FILES} files wrong {wrong[:3]}, "
        f"{len(extra)} extra {extra[:3]}")
else:
    say(f"BASE {FILES} files intact")
foreign = sorted(os.listdir("src/race")) if os.path.isdir("src/race") else []
if foreign:
    esc(f"another run's files in this workspace: {foreign[:5]}")
# The upstream listens on the host's loopback; the sandbox has a loopback of its own.
direct = tryconnect("4", "127.0.0.1", PORT)
if direct == "CONNECTED":
    esc(f"connected to the host's 127.0.0.1:{PORT} directly")
if MODE == "net":
    status, body = through_proxy(f"http://127.0.0.1:{PORT}/{MARK}", f"127.0.0.1:{PORT}")
    # The answer names the marker the upstream was asked for: another run's is a mix-up.
    say(f"UPSTREAM-ANSWER {MARK} {status!r} {body.strip()!r}")
    status, _ = through_proxy(f"http://{MARK.lower()}.invalid/", f"{MARK.lower()}.invalid")
    say(f"REFUSED-ANSWER {MARK} {status!r}")
os.makedirs("src/race", exist_ok=True)
with open(f"src/race/{MARK}.txt", "w") as f:
    f.write(f"{MARK}\n")
if MODE == "fail":
    say(f"FAILING {MARK}")
    sys.exit(3)
if MODE == "sleep":
    say(f"SLEEPING {MARK}")
    time.sleep(600)
    say(f"WOKE {MARK}: outlived the wall budget")
elif MODE == "balloon":
    chunks = []
    for i in range(32):
        chunks.append(b"x" * (8 << 20))
        say(f"BALLOON {MARK} {len(chunks) * 8} MiB")
    say(f"BALLOON done {MARK}: 256 MiB, past the memory budget")
