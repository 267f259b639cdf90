#!/usr/bin/python3
# CRED-06: Kernel keyring
# Guarantee: no access to the kernel keyring
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
desc = f"sbx_{N}".encode()
# A session keyring of our own (outside: a throwaway one; inside: must be refused).
must_block("keyctl(JOIN_SESSION_KEYRING)", 250, 1, 0)
must_block("keyctl(GET_KEYRING_ID, @u)", 250, 0, -4, 0)
must_block("keyctl(SEARCH @u user sbx_N)", 250, 10, -4, b"user", desc, 0, also=())
must_block("request_key(user, sbx_N)", 249, b"user", desc, 0, -3)
r, e = must_block("add_key(user, @s)", 248, b"user", b"k0", "z:1", 1, -3)
if r >= 0 and ARGS[0] == "flood":  # never in the control: it would use up 65534's key quota
    for i in range(1, 300):
        r2, e2 = scall(248, b"user", f"k{i}".encode(), "z:1", 1, -3)
        if r2 < 0:
            say(f"add_key #{i}: {e2}")
            break
try:
    with open("/proc/keys") as h:
        keys = h.read()
    say(f"/proc/keys: {keys.strip()[:400]}")
    if f"sbx_{N}" in keys:
        esc(f"/proc/keys shows the host user's key sbx_{N} (its description, uid and permissions)")
except OSError as e:
    say(f"/proc/keys: {ename(e.errno)}")
