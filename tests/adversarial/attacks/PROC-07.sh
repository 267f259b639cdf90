#!/bin/sh
# PROC-07: Nested PID and user namespaces used to dodge cleanup
# Guarantee: no descendant survives
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# Nested user+pid namespaces, and a bare pid namespace, to dodge the cleanup.
unshare -Urpf --mount-proc sh -c "setsid bash -c 'exec -a sleep100000-u-$N sleep 100000' </dev/null >/dev/null 2>&1 & echo nested"
echo "unshare -Urpf: exit $?"
unshare -pf bash -c "exec -a sleep100000-p-$N sleep 100000" </dev/null >/dev/null 2>&1 &
sleep 1
echo main-done
exit 0
