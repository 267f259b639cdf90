N="$1"; shift
WS="$(pwd)"
# Reports a breach: the harness counts every ESC-<N> line in the stored output.
esc() { echo "ESC-$N $*"; }
