#!/usr/bin/python3
# TRUST-06: Racing attempts on one base commit
# Guarantee: concurrent runs never break each other; every admitted run writes a manifest
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
# One of the 16 workers of TRUST-06, each started by its own `corral run` at the same time on
# a base commit no cache holds. argv: N MODE MARK FILES. It checks the base it was given (the
# FILES files repos/wide.sh wrote under lib/, each naming its index and the nonce: a torn or
# foreign checkout prints ESC-<N>) and that no other run's file is in its workspace, writes
# its own marker to src/race/MARK.txt, and then
#   edit     exits 0 (a candidate holding MARK and nothing else),
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

MARK, FILES = ARGS[1], int(ARGS[2])
say(f"WORKER {MARK} {MODE}")
wrong, extra = wide_base(FILES)
if wrong or extra:
    esc(f"the base is not the commit's: {len(wrong)} of {FILES} files wrong {wrong[:3]}, "
        f"{len(extra)} extra {extra[:3]}")
else:
    say(f"BASE {FILES} files intact")
foreign = sorted(os.listdir("src/race")) if os.path.isdir("src/race") else []
if foreign:
    esc(f"another run's files in this workspace: {foreign[:5]}")
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
