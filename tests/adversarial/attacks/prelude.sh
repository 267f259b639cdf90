# shellcheck shell=sh
N="$1"; shift
# `--trivial`: exit at once, so the harness can time corral's own start-up and collection.
if [ "${1:-}" = --trivial ]; then echo trivial; exit 0; fi
# shellcheck disable=SC2034 # for the attack that inlines this file
WS="$(pwd)"
# Reports a breach: the harness counts every ESC-<N> line in the stored output.
esc() { echo "ESC-$N $*"; }
