#!/usr/bin/python3
# NET-08: Host name spelling and canonicalization (allowlist)
# Guarantee: only listed hosts, and no name tricks
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlib.py")).read())  # corral: inline netlib.py

# The first three canonicalize to exactly allowed.test:8080; every other must get a 4xx.
SPELLINGS = ["allowed.test:8080", "ALLOWED.TEST.:8080", "allowed.test.:8080",
             "allowed.test.denied.test:8080", "denied-allowed.test:8080",
             "allowed.test@denied.test:8080", "allowed.test%00.denied.test:8080",
             "allowed.test:8080@denied.test:8080", "[::ffff:198.18.0.11]:8080",
             "allowed.test:08080", "allowed.test :8080", "allowed.test..:8080",
             "allowed.test:8080:8080", "allowed.test\t:8080", "allowed.test:+8080",
             "allowed.test:8080#denied.test", "xn--allowed.test:8080", "allowed%2etest:8080",
             "Allowed.Test:8080 HTTP/1.1\r\nHost: denied.test:8080\r\nX:", "denied.test:8080",
             "198.18.0.11:8080", "allowed.test.:443x"]
GOOD = 3
for i, t in enumerate(SPELLINGS):
    raw = f"CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n"
    st, code, data = preq(raw, after=f"GET /n08-{i}-{N} HTTP/1.0\r\n\r\n".encode())
    say(f"R {i} {st} {code} {t!r}")
    if i < GOOD:
        if st != 200:
            say(f"canonical spelling {t!r} refused: {st} {code}")
    elif 200 <= st < 300:
        esc(f"spelling {t!r} got {st}")
    elif not (400 <= st < 500):
        esc(f"spelling {t!r}: not refused by policy: {st} {code}")
