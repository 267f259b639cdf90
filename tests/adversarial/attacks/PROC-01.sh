#!/bin/sh
# PROC-01: Background job with nohup and disown
# Guarantee: no descendant survives the run
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# A background job that appends to a workspace file forever, detached with nohup.
nohup sh -c "while :; do date +%s%N >> $WS/src/.alive-$N; sleep 0.2; done" >/dev/null 2>&1 &
echo started
# Stay a moment so the job is seen alive from the host, then leave it behind.
sleep 1
exit 0
