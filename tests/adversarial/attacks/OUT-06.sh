#!/bin/sh
# OUT-06: stdin
# Guarantee: stdin does not expose the supervisor or make the run hang
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# What is fd 0, what does it carry, and does it end?
ls -l /proc/self/fd/0
fd0=$(readlink /proc/self/fd/0)
echo "fd0 -> $fd0"
if [ -t 0 ]; then esc "stdin is a terminal ($fd0)"; fi
case "$fd0" in /dev/pts/*|/dev/tty*|/dev/console) esc "stdin is $fd0";; esac
start=$(date +%s%N)
cat | sed 's/^/cat-read:/'
echo
bash -c 'read -t 5 x; echo "got:[$x]"'
end=$(date +%s%N)
echo "elapsed_ms=$(( (end - start) / 1000000 ))"
