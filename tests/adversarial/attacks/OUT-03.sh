#!/bin/sh
# OUT-03: A descendant holds the pipe open, or stdio is closed early
# Guarantee: the run ends correctly, and cleanup happens
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# (a) stragglers, one holding stdout/stderr; (b) stdio closed early, exit 7 after 3 s.
if [ "$1" = a ]; then
  (setsid bash -c "exec -a sleep100000-s-$N sleep 100000" &)
  (bash -c "exec -a sleep100000-h-$N sleep 100000" >&1 2>&2 &)
  sleep 0.5
  echo main-done
  exit 0
fi
exec >&- 2>&-
sleep 3
exit 7
