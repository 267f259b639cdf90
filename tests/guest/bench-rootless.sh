#!/usr/bin/env bash
# Issue 13's bench (ADR-0080), in a guest whose init is systemd (`cargo xtask vm --layout
# systemd-service`): corral-linux's startup bench (`/bin/true` plainly, under
# `bwrap --unshare-all`, and in corral's sandbox) run as root (root mode) and as an ordinary
# user under its systemd manager (rootless mode, and bwrap as that same user), side by side in
# one guest. Not a test: it prints the medians and ratios.
# Usage: bench-rootless.sh BENCH_BINARY (cargo bench --no-run -p corral-linux --bench startup).
set -euo pipefail
bench=$1
user="corral-vm-bench"
useradd -m -U -s /bin/sh "$user"
uid=$(id -u "$user")
gid=$(id -g "$user")
bin=$(mktemp -d /tmp/corral-bench.XXXXXX)
chmod 755 "$bin"
install -m 0755 "$bench" "$bin/startup"
systemctl start "user@$uid.service"
echo "== root mode (as root)"
(cd /tmp && XDG_CACHE_HOME=/tmp/.cache-bench "$bin/startup")
echo "== rootless mode (as uid $uid)"
cd /tmp
setpriv --reuid="$uid" --regid="$gid" --init-groups -- env -i HOME="/home/$user" USER="$user" \
  PATH=/usr/bin:/bin XDG_RUNTIME_DIR="/run/user/$uid" \
  DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" "$bin/startup"
systemctl stop "user@$uid.service"
rm -rf "$bin"
