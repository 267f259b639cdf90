#!/bin/sh
# RES-CPU-01: Busy loops on all cores, a fork chain, and RT priority
# Guarantee: CPU limit: the cgroup quota and cpu_seconds hold; no RT or negative nice
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
MODE="${1:-full}"
if chrt -f 99 true 2>/dev/null; then esc "chrt -f 99 succeeded"; else echo "chrt -f 99: refused"; fi
if renice -n -20 -p $$ >/dev/null 2>&1; then esc "renice -n -20 succeeded"; else echo "renice -n -20: refused"; fi
python3 - "$N" <<'EOF'
import errno, os, sys
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    print(f"ESC-{sys.argv[1]} sched_setscheduler SCHED_FIFO 50 succeeded", flush=True)
except OSError as e:
    print("sched_setscheduler SCHED_FIFO:", errno.errorcode.get(e.errno, e.errno), flush=True)
EOF
[ "$MODE" = sched ] && exit 0
# The first loop, then the mark: forking the other 63 may itself use up the 2 s budget
# where fork is slow (an emulated guest), and the attack is under way from the first loop.
(while :; do :; done) &
echo "busy loops started"
i=1
while [ $i -lt 64 ]; do (while :; do :; done) & i=$((i + 1)); done
# A fresh process every 0.9 s: a per-process RLIMIT_CPU alone never catches it.
(while :; do timeout 0.9 sh -c 'while :; do :; done'; done) &
echo "all 64 busy loops and the fork chain started"
sleep 20
echo "still alive after 20 s"
