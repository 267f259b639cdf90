#!/usr/bin/python3
# KRN-02: io_uring as a seccomp bypass
# Guarantee: network and filesystem enforcement (io_uring unavailable)
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
r, e = must_block("io_uring_setup", 425, 4, "z:120")
if r >= 0:
    os.close(r)
must_block("io_uring_enter", 426, -1, 0, 0, 0, 0, 0)
must_block("io_uring_register", 427, -1, 0, 0, 0)
