#!/bin/sh
# OUT-01: Output floods, one huge line, and binary bytes
# Guarantee: stdout and stderr capture is bounded
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# Binary bytes first (so they fall inside the cap), then floods: 200 MB of 4 KiB lines,
# 50 MB of random bytes on stderr, one 50 MB line. `trivial` prints only the bytes.
printf 'a\000b\377\376\n'
[ "$1" = trivial ] && exit 0
yes "$(head -c 4096 /dev/zero | tr '\0' A)" 2>/dev/null | head -c 200000000
head -c 50000000 /dev/urandom >&2
head -c 50000000 /dev/zero | tr '\0' a
echo
echo flood-done
