#!/usr/bin/python3
# OUT-02: Deadlock when both pipes fill
# Guarantee: the run ends and output is captured
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
# 8 MiB on one stream before a word on the other.
if ARGS[0] == "err-first":
    os.write(2, b"e" * (8 << 20)); os.write(1, b"done\n")
else:
    os.write(1, b"o" * (8 << 20)); os.write(2, b"done\n")
