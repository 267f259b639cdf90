#!/usr/bin/env bash
# Issue 13 (rootless mode, ADR-0080): runs COMMAND as an ordinary user, in a guest whose init is
# systemd (`cargo xtask vm --layout systemd-service --as-user`, e.g. with `--tests`): the user is
# made with useradd's defaults (a subordinate range: corral's worker gets an id of its own), its
# systemd manager started, and COMMAND run from this folder with the user's clean environment
# and bus, so every corral it starts (and every test binary that enters the mode itself)
# runs in rootless mode. Exits with COMMAND's status; 1 as well if a cgroup of corral's or a
# process of the user's is left.
# Usage: as-user.sh COMMAND [ARGS...]
set -uo pipefail
user="corral-vm-tests"
useradd -m -U -s /bin/sh "$user"
uid=$(id -u "$user")
gid=$(id -g "$user")
systemctl start "user@$uid.service"
setpriv --reuid="$uid" --regid="$gid" --init-groups -- env -i HOME="/home/$user" USER="$user" \
  PATH=/usr/local/bin:/usr/bin:/bin XDG_RUNTIME_DIR="/run/user/$uid" \
  DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" "$@"
rc=$?
echo "as-user: the command exited $rc as $user (uid $uid)"
systemctl stop "user@$uid.service"
# (corral-vm.service is the guest's own unit, running this script.)
left=$(find /sys/fs/cgroup -name 'corral-*' ! -name corral-vm.service)
if [ -n "$left" ]; then
  echo "as-user: FAIL: cgroups left: $left"
  exit 1
fi
if pgrep -u "$uid" >/dev/null; then
  echo "as-user: FAIL: processes of the user left: $(pgrep -u "$uid" -a)"
  exit 1
fi
exit "$rc"
