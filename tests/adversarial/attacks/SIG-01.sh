#!/bin/sh
# SIG-01: Signalling every process
# Guarantee: process isolation; the supervisor survives
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# A same-uid decoy in a session of its own (the control's detector), then: SIGSTOP to
# every pid up to pid_max (skipping only ourselves and the shell that runs the rest), TERM to
# our group, SIGKILL to everything (-1).
setsid bash -c "exec -a decoy-$N sleep 600" </dev/null >/dev/null 2>&1 &
DECOY=$!
sleep 0.3
python3 - "$1" <<'EOF'
import os, signal, sys
me, parent = os.getpid(), os.getppid()
# Every pid number up to pid_max (the corpus' 1<<22), and at least the host's pid_max
# (passed in: pid_max is per pid namespace on this kernel, 4M inside).
top = min(1 << 22, int(open("/proc/sys/kernel/pid_max").read()), max(int(sys.argv[1]), 65536))
n = 0
for p in range(2, top):
    if p in (me, parent):
        continue
    try:
        os.kill(p, signal.SIGSTOP)
        n += 1
    except OSError:
        pass
print(f"SIGSTOP delivered to {n} process(es) of pids 2..{top}", flush=True)
EOF
state=$(cut -d' ' -f3 /proc/$DECOY/stat 2>/dev/null)
echo "decoy state after SIGSTOP: $state"
[ "$state" = T ] && echo DECOY-STOPPED
kill -9 -1
sleep 0.3
state=$(cut -d' ' -f3 /proc/$DECOY/stat 2>/dev/null)
echo "decoy state after kill -9 -1: ${state:-gone}"
case "$state" in ""|Z|X) echo DECOY-KILLED;; esac
kill -TERM 0
echo "still here after kill -TERM 0"
