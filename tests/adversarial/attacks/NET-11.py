#!/usr/bin/python3
# NET-11: DNS rebinding and multi-answer TOCTOU
# Guarantee: no DNS tricks
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "netlib.py")).read())  # corral: inline netlib.py

counts = {}
for i in range(120):
    st, code, data = get("rebind.test:8080", f"/n11-alt-{i}-{N}")
    counts[(st, code)] = counts.get((st, code), 0) + 1
    if st == 200 and b"hello-from-198.18.0.10:8080" not in data:
        esc(f"rebind.test answered from elsewhere: {data[:120]!r}")
    elif st not in (200, 403):
        say(f"alt {i}: {st} {code}")
say(f"alternating: {counts}")
ok = sum(v for (st, _), v in counts.items() if st == 200)
say(f"REBIND-OK {ok}")
counts = {}
for i in range(40):
    st, code, data = get("rebind2.test:8080", f"/n11-both-{i}-{N}")
    counts[(st, code)] = counts.get((st, code), 0) + 1
    if 200 <= st < 300:
        esc(f"rebind2.test (both answers) accepted: {st} {data[:80]!r}")
say(f"both answers: {counts}")
