#!/usr/bin/python3
# KRN-03: userfaultfd, perf_event_open, bpf, keyctl and module loading
# Guarantee: a reduced kernel attack surface
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import re
CALLS = [
    ("userfaultfd(UFFD_USER_MODE_ONLY)", 323, (0x80001,)),
    ("perf_event_open", 298, ("z:128", 0, -1, -1, 0)),
    ("bpf(BPF_MAP_CREATE)", 321, (0, "z:128", 128)),
    ("keyctl(GET_KEYRING_ID user)", 250, (0, -4, 0)),
    ("open_by_handle_at", 304, (-100, "z:64", 0)),
    ("init_module", 175, (0, 0, b"")),
    ("kexec_load", 246, (0, 0, 0, 0)),
]
for label, nr, args in CALLS:
    r, e = must_block(label, nr, *args)
    if r >= 0 and not label.startswith("keyctl"):
        os.close(r)
rc, out = run("perf stat -x, -e task-clock,cycles true")
for line in out.splitlines():
    f = line.split(",")
    if len(f) > 2 and re.match(r"^[0-9.]+$", f[0]):
        esc(f"perf stat counted: {line}")
    elif line.strip():
        say(f"perf stat: {line}")
