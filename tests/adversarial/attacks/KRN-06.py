#!/usr/bin/python3
# KRN-06: Module autoload through rare socket families
# Guarantee: a reduced kernel attack surface
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
FAMS = [3, 4, 5, 6, 9, 11, 12, 19, 20, 21, 23, 24, 26, 27, 29, 30, 31, 33, 34, 35,
        36, 37, 39, 41, 42, 43, 44, 45]
for af in FAMS:
    row = []
    for t in (1, 2, 3, 5):
        try:
            s = socket.socket(af, t)
            s.close()
            esc(f"af={af} t={t} OK")
            row.append(f"t{t}=OK")
        except OSError as ex:
            row.append(f"t{t}={ename(ex.errno)}")
    say(f"RES af={af} " + " ".join(row))
# Inside the policy (AF_INET), but the protocols are autoloaded modules on most kernels.
for label, args in (("DCCP socket(2,6,0)", (2, 6, 0)), ("SCTP socket(2,1,132)", (2, 1, 132))):
    try:
        socket.socket(*args).close()
        say(f"INET {label}: OK")
    except OSError as ex:
        say(f"INET {label}: {ename(ex.errno)}")
