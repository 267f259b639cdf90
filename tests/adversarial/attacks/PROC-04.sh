#!/bin/sh
# PROC-04: Cancellation, and the supervisor being killed
# Guarantee: cancellation kills everything; nothing outlives the supervisor
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# Two long sleepers and a wait.
bash -c "exec -a sleep1000-a-$N sleep 1000" &
bash -c "exec -a sleep1000-b-$N sleep 1000" &
echo waiting
wait
