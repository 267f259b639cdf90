#!/usr/bin/env bash
# Issue 13 (rootless mode, ADR-0080), in a guest whose init is systemd (`cargo xtask vm --layout
# systemd-service`): the qualification suite with every corral run by an ordinary user
# (`xtask adversarial --as-user`), the harness staying root to plant canaries and watch the
# host. The user is made with useradd's defaults (a subordinate range: the worker gets an id of
# its own) and its systemd manager started; corral asks that manager for its scopes.
# Usage: rootless-suite.sh XTASK CORRAL [suite arguments, e.g. --filter FS,CRED]. Exits with
# the suite's status; 1 as well if a cgroup of corral's or a process of the user's is left.
set -uo pipefail
xtask=$1
corral=$2
shift 2
user="corral-vm-suite"
useradd -m -U -s /bin/sh "$user"
uid=$(id -u "$user")
systemctl start "user@$uid.service"
"$xtask" adversarial --corral "$corral" --as-user "$user" "$@"
rc=$?
echo "rootless-suite: the suite exited $rc"
systemctl stop "user@$uid.service"
# (corral-vm.service is the guest's own unit, running this script.)
left=$(find /sys/fs/cgroup -name 'corral-*' ! -name corral-vm.service)
if [ -n "$left" ]; then
  echo "rootless-suite: FAIL: cgroups left: $left"
  exit 1
fi
if pgrep -u "$uid" >/dev/null; then
  echo "rootless-suite: FAIL: processes of the user left: $(pgrep -u "$uid" -a)"
  exit 1
fi
exit "$rc"
