#!/bin/sh
# PROC-03: Timeout with a TERM-ignoring process, fork storm, zombies, stopped task
# Guarantee: timeout kills everything
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# Ignores TERM/INT/HUP, storms forks, leaves zombies and a stopped task, and spins.
# The stopped task first, and stopped before the storms begin: the host's watcher has the
# whole wall budget to see it, however slowly the host starts the rest (a TCG guest).
trap '' TERM INT HUP
sh -c 'kill -STOP $$' "stopped-$N" &
while ! grep -q '^State:.T' /proc/$!/status 2>/dev/null; do :; done
python3 -c "import os,sys,time
for _ in range(500):
    try:
        os.fork() or os._exit(0)
    except OSError:
        break
time.sleep(1e6)" "zombies-$N" &
(trap '' TERM; while :; do bash -c "exec -a sleep1000-$N sleep 1000" & done) 2>/dev/null &
echo storming
while :; do :; done
