#!/bin/sh
# ADM-01, ADM-02, ADM-03, ADM-04, ADM-05, ADM-06, ADM-07, ADM-08, ADM-09, ADM-10, ADM-11, ADM-12, ADM-13: one worker shared by these cases (see their rows in README.md).
# argv: N [args...]; prints ESC-<N> for anything that got through.
# The worker: prints its marker and writes one in-scope file.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
echo "RAN-$N"
echo "ran $N" > "src/adm-ran-$N.txt"
