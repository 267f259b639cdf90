#!/usr/bin/env bash
# Issue 13 (rootless mode, ADR-0080): `corral setup apparmor` on Ubuntu's own kernel, in a guest
# whose init is systemd (`cargo xtask vm --kernel ubuntu-24.04 --layout systemd-service`, run by
# `cargo xtask ci`). The guest is made an Ubuntu 24.04 host where it matters: Ubuntu's kernel
# (AppArmor with its user namespace restriction), AppArmor 4's parser as
# /usr/sbin/apparmor_parser (Ubuntu's, run through Ubuntu's C library: the userland is Debian
# 12's), Ubuntu's `unprivileged_userns` profile loaded and
# kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu's /usr/lib/sysctl.d/10-apparmor.conf).
#   A. control: an ordinary user's `corral probe` is refused (exit 3) in one line naming the
#      sysctl and `sudo corral setup apparmor`;
#   B. setup refuses an ordinary user (needs root) and a binary others could replace (/tmp);
#   C. root's `corral setup apparmor` loads the profile `corral` for /usr/local/bin/corral;
#   D. the user's probe attests all nine capabilities under that profile, and `corral demo`
#      captures; the same bytes at another path stay refused (the profile is for one path);
#   E. setup again replaces its own file; removing the profile brings the refusal back.
# Usage: apparmor.sh CORRAL APPARMOR_DIR (the folder `xtask vm --kernel ubuntu-24.04` unpacks
# Ubuntu's parser into, target/vm/ubuntu-apparmor).
set -euo pipefail
corral=$1
aa=$2
fail() {
  echo "apparmor: FAIL: $*"
  exit 1
}
ok() { echo "apparmor: ok: $*"; }

[ -e /sys/kernel/security/apparmor/profiles ] || fail "AppArmor is not enabled in this kernel ($(uname -r))"
[ -e /proc/sys/kernel/apparmor_restrict_unprivileged_userns ] ||
  fail "this kernel ($(uname -r)) has no kernel.apparmor_restrict_unprivileged_userns"

# AppArmor 4's parser where Ubuntu has it, and the parts of /etc/apparmor.d profiles include.
cat > /usr/sbin/apparmor_parser <<EOF
#!/bin/sh
exec $aa/usr/lib64/ld-linux-x86-64.so.2 --library-path $aa/lib/x86_64-linux-gnu:$aa/usr/lib/x86_64-linux-gnu $aa/sbin/apparmor_parser --config-file=$aa/etc/apparmor/parser.conf "\$@"
EOF
chmod 0755 /usr/sbin/apparmor_parser
mkdir -p /etc/apparmor.d
cp -r "$aa/etc/apparmor.d/abi" "$aa/etc/apparmor.d/tunables" "$aa/etc/apparmor.d/abstractions" /etc/apparmor.d/
cp "$aa/etc/apparmor.d/unprivileged_userns" /etc/apparmor.d/
apparmor_parser --replace /etc/apparmor.d/unprivileged_userns
sysctl -q -w kernel.apparmor_restrict_unprivileged_userns=1
ok "an Ubuntu 24.04 host: $(uname -r), $(apparmor_parser --version | head -1), restriction on, unprivileged_userns loaded"

install -m 0755 "$corral" /usr/local/bin/corral
user="corral-vm-aa"
useradd -m -U -s /bin/sh "$user"
uid=$(id -u "$user")
gid=$(id -g "$user")
home=/home/$user
systemctl start "user@$uid.service"
as_user() {
  setpriv --reuid="$uid" --regid="$gid" --init-groups -- env -i HOME="$home" USER="$user" \
    PATH=/usr/bin:/bin XDG_RUNTIME_DIR="/run/user/$uid" \
    DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" "$@"
}
capture() {
  set +e
  out=$(cd /tmp && as_user "$@" 2>&1)
  rc=$?
  set -e
}
refused_by_apparmor() { # what
  [ "$rc" = 3 ] || fail "$1: exit $rc, want 3: $out"
  echo "$out" | grep MISSING | grep "kernel.apparmor_restrict_unprivileged_userns = 1" |
    grep -q "sudo corral setup apparmor" || fail "$1: the refusal does not name the sysctl and the fix: $out"
}

# A. Control: restricted, no profile.
capture /usr/local/bin/corral probe
refused_by_apparmor "A. probe before setup"
ok "A. before setup: refused (exit 3) naming the sysctl and \`sudo corral setup apparmor\`"

# B. Setup's own refusals.
capture /usr/local/bin/corral setup apparmor
[ "$rc" = 1 ] && echo "$out" | grep -q "needs root" || fail "B. setup as the user: exit $rc: $out"
tmpbin=$(mktemp -d /tmp/corral-aa.XXXXXX)
chmod 755 "$tmpbin"
install -m 0755 "$corral" "$tmpbin/corral"
set +e
out=$("$tmpbin/corral" setup apparmor 2>&1)
rc=$?
set -e
[ "$rc" = 1 ] && echo "$out" | grep -q "/tmp is writable by group or others" ||
  fail "B. setup of a binary under /tmp: exit $rc: $out"
[ ! -e /etc/apparmor.d/corral ] || fail "B. a refused setup wrote /etc/apparmor.d/corral"
ok "B. setup refuses an ordinary user, and a binary under /tmp (writes nothing)"

# C. Setup.
/usr/local/bin/corral setup apparmor || fail "C. setup apparmor failed"
grep -q '^corral (unconfined)$' /sys/kernel/security/apparmor/profiles ||
  fail "C. the kernel lists no profile corral: $(cat /sys/kernel/security/apparmor/profiles)"
grep -q "profile corral /usr/local/bin/corral flags=(unconfined)" /etc/apparmor.d/corral ||
  fail "C. /etc/apparmor.d/corral does not name the binary"
ok "C. setup loaded the profile corral for /usr/local/bin/corral"

# D. The user's corral, under the profile.
capture /usr/local/bin/corral probe
echo "$out"
[ "$rc" = 0 ] || fail "D. probe after setup: exit $rc"
[ "$(echo "$out" | grep -c '^enforced')" = 9 ] || fail "D. want nine enforced capabilities"
echo "$out" | grep '^mode: rootless' | grep -q 'corral runs under the profile "corral (unconfined)"' ||
  fail "D. the mode line does not name the profile"
capture /usr/local/bin/corral demo
echo "$out" | head -6
[ "$rc" = 0 ] && echo "$out" | grep -q "outcome     candidate_captured (exited 0)" ||
  fail "D. demo after setup: exit $rc"
# The profile is for one path: the same bytes elsewhere stay restricted.
install -d -m 0755 /opt/other
install -m 0755 "$corral" /opt/other/corral
capture /opt/other/corral probe
refused_by_apparmor "D. the same binary at another path"
ok "D. after setup: nine of nine and a captured demo as the user; the same bytes at /opt/other stay refused"

# E. Again, then undone.
/usr/local/bin/corral setup apparmor >/dev/null || fail "E. setup a second time failed"
apparmor_parser --remove /etc/apparmor.d/corral
rm /etc/apparmor.d/corral
capture /usr/local/bin/corral probe
refused_by_apparmor "E. probe after the profile was removed"
ok "E. setup again replaces its own file; with the profile removed the refusal is back"

systemctl stop "user@$uid.service"
left=$(find /sys/fs/cgroup -name 'corral-*' ! -name corral-vm.service)
[ -z "$left" ] || fail "cgroups left: $left"
! pgrep -u "$uid" >/dev/null || fail "processes of the user left: $(pgrep -u "$uid" -a)"
rm -rf "$tmpbin"
ok "nothing left"
