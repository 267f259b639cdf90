#!/usr/bin/python3
# TRUST-01, TRUST-02, TRUST-03: one worker shared by these cases (see their rows in README.md).
# argv: N [args...]; prints ESC-<N> for anything that got through.
# The naive writer (TRUST-01..03's script): what a base-checkout writer without corral's
# checks does. Run by the controls outside the sandbox in a copy of the hostile repository.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
# The base checkout corral must not be: each tree entry's name is joined onto the destination
# path and written by path, following whatever is already there (os.symlink, then open() and
# chmod() by path), with no check of the names and no ceiling.
# argv: N [DEST [CAP]]; cwd = the hostile repository (HEAD = the base commit). With CAP it
# stops once it has written more than CAP bytes. Without DEST (a worker on such a base:
# corral must never start one) it only says so.
if not ARGS:
    say(f"RAN-{N}")
    sys.exit(0)
DEST = ARGS[0]
CAP = int(ARGS[1]) if len(ARGS) > 1 else None
written = 0


def git(*a):
    return subprocess.run(["git", *a], capture_output=True, check=True).stdout


def entries(tree):
    raw = git("cat-file", "tree", tree)
    out = []
    while raw:
        sp = raw.index(b" ")
        nul = raw.index(b"\0", sp)
        out.append((raw[:sp].decode(), raw[sp + 1:nul], raw[nul + 1:nul + 21].hex()))
        raw = raw[nul + 21:]
    return out


def checkout(tree, dest):
    global written
    for mode, name, oid in entries(tree):
        say(f"ENTRY {mode} {name!r}")
        path = os.path.join(dest, os.fsdecode(name))
        try:
            if mode == "40000":
                os.makedirs(path, exist_ok=True)
                checkout(oid, path)
                continue
            data = git("cat-file", "blob", oid)
            if mode == "120000":
                os.symlink(os.fsdecode(data), path)
            else:
                with open(path, "wb") as f:
                    f.write(data)
                os.chmod(path, 0o755 if mode == "100755" else 0o644)
            written += len(data)
            say(f"WROTE {path!r} ({mode}, {len(data)} bytes)")
        except OSError as e:
            say(f"ERR {path!r}: {ename(e.errno)}")
        if CAP is not None and written > CAP:
            say(f"EXPANDED past {CAP} bytes: {written}")
            sys.exit(0)


head = git("cat-file", "commit", "HEAD").split(b"\n")[0].split(b" ")[1].decode()
os.makedirs(DEST, exist_ok=True)
checkout(head, DEST)
say(f"DONE {written} bytes")
