#!/bin/sh
# SIG-02: Terminal job control and terminal state
# Guarantee: the supervisor (and its terminal) is not disturbed
# argv: N [args...]; prints ESC-<N> for anything that got through.
. "$(dirname "$0")/prelude.sh"  # corral: inline prelude.sh

# --- attack ---
# Job-control signals to our group, grab the terminal, change its modes, switch screens.
kill -TSTP 0; echo "after kill -TSTP 0"
kill -TTOU 0; echo "after kill -TTOU 0"
python3 -c "import os, sys
try:
    os.tcsetpgrp(0, os.getpgrp())
    print('ESC-$N tcsetpgrp(0) succeeded')
except OSError as e:
    print('tcsetpgrp(0):', e)
try:
    fd = os.open('/dev/tty', os.O_RDWR)
    print('ESC-$N opened /dev/tty')
except OSError as e:
    print('open /dev/tty:', e)"
if stty -F /dev/tty raw -echo 2>/dev/null; then esc "stty -F /dev/tty raw -echo succeeded"; else echo "stty -F /dev/tty failed"; fi
if stty raw -echo 2>/dev/null; then esc "stty raw -echo on stdin succeeded"; else echo "stty on stdin failed"; fi
if printf '\033[?1049h' > /dev/tty 2>/dev/null; then esc "wrote to /dev/tty"; else echo "write /dev/tty failed"; fi
exit 0
