#!/usr/bin/env bash
# Issue 13 (rootless mode), in a guest whose init is systemd (`cargo xtask vm --layout
# systemd-service`, run by `cargo xtask ci`): what an ordinary user's corral finds under
# systemd's user manager, where rootless mode is to run (ADR-0080). A user is made with
# useradd's defaults (Debian's give it a subordinate id range), its manager started
# (user@UID.service: `Delegate=pids memory cpu` in systemd 252), and corral run as that user:
#   A. in a scope asked for with `systemd-run --user --scope -p Delegate=yes`, the fix that
#      corral's refusal names, from a cgroup the user does not own (this system service's, as
#      a login session's scope is root's): the preflight finds everything rootless mode needs
#      (user and mount namespaces with a tmpfs mounted in them, a kernel with overlay in a user
#      namespace, cgroup v2 owned by the user with cpu, memory and pids), so the refusal is for
#      the mode alone;
#   B. the same as the main process of a transient user service with Delegate=yes
#      (`systemd-run --user --wait --pipe`);
#   C. control: the same user left in this system service's cgroup (root's, not delegated) is
#      told that the cgroup is what is missing, and the command that fixes it.
# Usage: user-manager.sh CORRAL. One line per check; exit 1 on the first failure.
set -euo pipefail
corral=$1
user="corral-vm-user"
fail() {
  echo "user-manager: FAIL: $*"
  exit 1
}
ok() { echo "user-manager: ok: $*"; }

useradd -m -U -s /bin/sh "$user"
uid=$(id -u "$user")
gid=$(id -g "$user")
# The binary where the user may run it (the checkout's folders may be private to root).
bin=$(mktemp -d /tmp/corral-user-manager.XXXXXX)
chmod 755 "$bin"
install -m 0755 "$corral" "$bin/corral"
systemctl start "user@$uid.service"
manager=/sys/fs/cgroup/user.slice/user-$uid.slice/user@$uid.service
[ "$(stat -c %u "$manager")" = "$uid" ] || fail "$manager is not owned by uid $uid"
ok "user@$uid.service runs, its cgroup owned by the user, with: $(cat "$manager/cgroup.controllers")"

# As the user, from this service's cgroup: a clean environment, the user's runtime folder and bus.
as_user() {
  setpriv --reuid="$uid" --regid="$gid" --init-groups -- env -i HOME="/home/$user" USER="$user" \
    PATH=/usr/bin:/bin XDG_RUNTIME_DIR="/run/user/$uid" \
    DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" "$@"
}
# corral probe's output (with the cgroup it ran in first) and its exit code, in $out and $rc.
probe() { # the systemd-run prefix to run corral under, or none
  set +e
  out=$(cd /tmp && as_user "$@" sh -c "sed -n 's/^0::/cgroup: /p' /proc/self/cgroup; $bin/corral probe" 2>&1)
  rc=$?
  set -e
}
# The refusal is for the mode alone: exit 3, one MISSING line, the host has the rest.
for_the_mode_alone() { # what
  echo "$out"
  [ "$rc" = 3 ] || fail "$1: exit $rc, want 3"
  echo "$out" | grep -q "^cgroup: /user.slice/user-$uid.slice/user@$uid.service/" ||
    fail "$1: corral did not run beneath the user's manager"
  echo "$out" | grep -q "^mode: none: corral runs as uid $uid" || fail "$1: no mode line"
  [ "$(echo "$out" | grep -c MISSING)" = 1 ] || fail "$1: want one MISSING line"
  echo "$out" | grep MISSING | grep -q "rootless mode is not built yet; this host has what it would need" ||
    fail "$1: the preflight found something missing"
  ok "$1: refused for the mode alone; the host has what rootless mode needs"
}

probe systemd-run --user --scope --quiet -p Delegate=yes --
for_the_mode_alone "A. a delegated scope of the user's manager"
probe systemd-run --user --wait --pipe --quiet -p Delegate=yes -E HOME="/home/$user" \
  -E USER="$user" --working-directory=/tmp --
for_the_mode_alone "B. a delegated transient service of the user's manager"

probe
echo "$out"
[ "$rc" = 3 ] || fail "C. exit $rc, want 3"
echo "$out" | grep MISSING |
  grep -q "belongs to uid 0, not to uid $uid (not delegated): run corral under systemd's user manager, for example \`systemd-run --user --scope -p Delegate=yes corral ...\`" ||
  fail "C. the refusal does not name the undelegated cgroup and its fix"
ok "C. control: in root's cgroup the user is told the cgroup is missing, and the fix"

systemctl stop "user@$uid.service"
rm -rf "$bin"
