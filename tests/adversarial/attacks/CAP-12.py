#!/usr/bin/python3
# CAP-12: Huge, sparse and special files
# Guarantee: the capture step is bounded, and nothing blocks it
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

def sparse(path, sizes):
    for s in sizes:
        try:
            with open(path, "wb") as f:
                f.truncate(s)
            return s
        except OSError:
            pass
step("sparse src/sparse.bin", lambda: sparse("src/sparse.bin", [(1 << 63) - 1, 1 << 60, 1 << 40]))
def big():
    with open("src/big.bin", "wb") as f:
        chunk = os.urandom(1 << 20)
        for _ in range(int(ARGS[1])):
            f.write(chunk)
step("src/big.bin", big)
step("mkfifo src/pipe", lambda: os.mkfifo("src/pipe"))
def sock():
    s = socket.socket(socket.AF_UNIX)
    s.bind("src/sock")
step("socket src/sock", sock)
w(".git/refs/heads/b1", "x\n", label="GITDIR refs")
step("GITDIR truncate .git/index", lambda: os.truncate(".git/index", 1 << 32))
def many():
    os.makedirs("src/many", exist_ok=True)
    for i in range(3000):
        with open(f"src/many/f{i}", "w") as f:
            f.write(str(i))
step("src/many 3000 files", many)

say("DONE")
sys.exit(0)
