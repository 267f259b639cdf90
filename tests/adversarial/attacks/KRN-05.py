#!/usr/bin/python3
# KRN-05: Filters that compare arguments whole instead of masking flags
# Guarantee: seccomp rules cannot be sidestepped
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
must_block("unshare(CLONE_NEWUSER|1<<40)", 272, 0x10010000000)
must_block("clone3", 435, 0, 0)
must_block("setns", 308, -1, 0)
r, e = must_block("open_tree", 428, -100, b"/", 0)
if r >= 0:
    os.close(r)
must_block("mount_setattr", 442, -1, b"", 0, 0, 0)
must_block("unshare(CLONE_NEWNS|1<<32)", 272, 0x100020000)
# Last: outside, this one succeeds and moves the control into a new user namespace.
must_block("unshare(CLONE_NEWUSER)", 272, 0x10000000)
