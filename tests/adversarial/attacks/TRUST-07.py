#!/usr/bin/python3
# TRUST-07: The supervisor killed at the worst moment
# Guarantee: nothing is lost or corrupted; nothing is left behind
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
# The worker of every TRUST-07 run; the harness kills `corral run` (SIGKILL) while it
# materializes the base, captures this worker's change, or stores the artifacts, then checks
# the store, the cache and the host, and runs this worker once more on what is left.
# argv: N FILES OUT BIG. It checks the base it was given (the FILES files repos/wide.sh wrote
# under lib/, each naming its index and the nonce: a torn checkout that was reused prints
# ESC-<N>), then makes a change that takes capture and the store a while: OUT small files
# under src/crash/, one file of BIG bytes, and BIG bytes on stdout, each holding a token of
# its own run.
FILES, OUT, BIG = int(ARGS[0]), int(ARGS[1]), int(ARGS[2])
wrong, extra = wide_base(FILES)
if wrong or extra:
    esc(f"the base is not the commit's: {len(wrong)} of {FILES} files wrong {wrong[:3]}, "
        f"{len(extra)} extra {extra[:3]}")
else:
    say(f"BASE {FILES} files intact")
# Unique to this run: otherwise its logs and patch are already stored by an earlier run, the
# store keeps those copies, and only the small manifest is written (no store phase to hit).
tag = os.urandom(8).hex()
say(f"RUN {tag}")
os.makedirs("src/crash", exist_ok=True)
for i in range(OUT):
    with open(f"src/crash/f{i:05d}.txt", "w") as f:
        f.write(f"crash file {i}, TRUST-{N}\n")
line = "".join(chr(97 + (i % 26)) for i in range(99)) + "\n"
with open("src/crash/big.txt", "w") as f:
    f.write(f"run {tag}\n")
    for i in range(BIG // 100):
        f.write(line)
out = sys.stdout
for i in range(BIG // 100):
    out.write(line)
out.flush()
say(f"CHANGED {OUT} files and {BIG} bytes")
