#!/bin/sh
# PROC-02: Double fork, setsid, closed fds and ignored signals
# Guarantee: no descendant survives, even when daemonized in a new session
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# A daemon: ignores HUP/INT/QUIT/TERM, double-forks around setsid, closes its stdio.
python3 -c 'import os,signal,sys,time
for s in (1,2,3,15): signal.signal(s,signal.SIG_IGN)
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
os.chdir("/"); [os.close(f) for f in (0,1,2)]
while True: open(sys.argv[1],"a").write("x"); time.sleep(0.2)' "$WS/src/.daemon-$N"
# And a sleeper in a new session.
# (its stdio goes to /dev/null so the control's pipes close; OUT-03 covers a pipe holder)
setsid -f bash -c "exec -a sleep100000-$N sleep 100000" </dev/null >/dev/null 2>&1
sleep 1
echo main-done
exit 0
