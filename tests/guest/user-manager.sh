#!/usr/bin/env bash
# Issue 13 (rootless mode, ADR-0080), in a guest whose init is systemd (`cargo xtask vm --layout
# systemd-service`, run by `cargo xtask ci`): ordinary users' corral under systemd's user
# manager (user@UID.service: `Delegate=pids memory cpu` in systemd 252), in both of the mode's
# mappings: a user with a subordinate id range (useradd's default; `newuidmap` from the uidmap
# package), whose worker gets an id of its own, and a user without one, whose worker is the
# user's one mapped id. For each:
#   A. from a cgroup the user does not own (this system service's, as a login session's scope
#      is root's): corral asks the user's manager for a delegated scope of its own over the
#      user's bus, enters rootless mode, and the probe attests all nine capabilities (exit 0),
#      naming the mode (and the worker's ids) and the scope;
#   B. in a scope the user asked for (`systemd-run --user --scope -p Delegate=yes`) shared with
#      another of the user's processes: corral asks for a scope of its own; `corral demo`
#      captures its patch, the manifest records `"mode": "rootless"`, `corral verify` accepts it;
#      B2. started as the last process of its mount namespace from a mount made there, it still
#      starts its helpers and captures;
#   C. attacks from inside a rootless run, each with its control outside: the user's own secret
#      in HOME (the user reads it outside) is not visible inside; a file written to the user's
#      HOME does not appear; a new user namespace and a mount are refused; the worker holds no
#      capability; an opaque mark the worker sets on a folder (`user.overlay.opaque`, the
#      overlay's own xattr in rootless mode) does not make capture delete the folder's files;
#      the worker's ids are the expected ones (with a range: inside 1000, on the host the
#      range's 1000th id, not the user's; without: the user's, as 0); `corral cache` lists the
#      runs' checkouts and empties the cache, after which the user can remove it by hand;
# Then, for the user with a range:
#   D. control: with the user's manager stopped (no bus to ask) the run is refused in one line
#      that names the cgroup, what asking said, and the fix;
#   E. nothing is left: no corral cgroup, no corral scope, no process of either user's.
# Usage: user-manager.sh CORRAL. One line per check; exit 1 on the first failure.
set -euo pipefail
corral=$1
fail() {
  echo "user-manager: FAIL: $*"
  exit 1
}
ok() { echo "user-manager: ok: $*"; }

command -v newuidmap >/dev/null || fail "newuidmap is not installed (scripts/setup.sh installs uidmap)"
# The binary where the users may run it (the checkout's folders may be private to root).
bin=$(mktemp -d /tmp/corral-user-manager.XXXXXX)
chmod 755 "$bin"
install -m 0755 "$corral" "$bin/corral"

# As the user, from this service's cgroup: a clean environment, the user's runtime folder and bus.
as_user() {
  setpriv --reuid="$uid" --regid="$gid" --init-groups -- env -i HOME="$home" USER="$user" \
    PATH=/usr/bin:/bin XDG_RUNTIME_DIR="/run/user/$uid" \
    DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" "$@"
}
# The output of "$@" as the user, and its exit code, in $out and $rc.
capture() {
  set +e
  out=$(cd /tmp && as_user "$@" 2>&1)
  rc=$?
  set -e
}

# One user, its manager started; sets user, uid, gid, home, worker (the mode line's worker
# clause) and ids (the worker's "uid gid" inside).
make_user() { # name with-range|no-range
  user=$1
  if [ "$2" = with-range ]; then
    useradd -m -U -s /bin/sh "$user"
  else
    useradd -m -U -s /bin/sh -K SUB_UID_COUNT=0 -K SUB_GID_COUNT=0 "$user"
  fi
  uid=$(id -u "$user")
  gid=$(id -g "$user")
  home=/home/$user
  if [ "$2" = with-range ]; then
    start=$(sed -n "s/^$user:\([0-9]*\):.*/\1/p" /etc/subuid)
    [ -n "$start" ] || fail "useradd gave $user no subordinate range"
    worker="the worker is uid 1000 there, $((start + 999)) on the host, from the user's subordinate ids"
    ids="1000 1000"
  else
    ! grep -q "^$user:" /etc/subuid || fail "$user has a subordinate range"
    worker="the worker is that one id without capabilities: no subordinate ids are used"
    ids="0 0"
  fi
  systemctl start "user@$uid.service"
  local manager=/sys/fs/cgroup/user.slice/user-$uid.slice/user@$uid.service
  [ "$(stat -c %u "$manager")" = "$uid" ] || fail "$manager is not owned by uid $uid"
  ok "$user ($2): user@$uid.service runs, its cgroup owned by the user, with: $(cat "$manager/cgroup.controllers")"
}

checks() { # label
# A. From root's cgroup: corral asks the user's manager for its own scope.
capture "$bin/corral" probe
echo "$out"
[ "$rc" = 0 ] || fail "A. probe exit $rc, want 0"
echo "$out" | grep -qF "mode: rootless (corral runs as uid $uid gid $gid, mapped to 0 in a user namespace of its own; $worker)" ||
  fail "A. no rootless mode line naming the worker's ids"
[ "$(echo "$out" | grep -c '^enforced')" = 9 ] || fail "A. want nine enforced capabilities"
echo "$out" | grep -q "user@$uid.service/app.slice/corral-scope-[0-9]*-[0-9]*.scope (the transient scope" ||
  fail "A. the evidence does not name the scope the user's manager gave corral"
ok "$1: A. rootless from a cgroup the user does not own: all nine capabilities, in a scope of the user's manager"

# B. In a scope shared with another of the user's processes: a scope of corral's own, a captured
# patch, the manifest's mode, and verify.
capture systemd-run --user --scope --quiet -p Delegate=yes -- sh -c \
  "sleep 1000 & s=\$!; $bin/corral demo; r=\$?; kill \$s; exit \$r"
echo "$out" | head -12
[ "$rc" = 0 ] || fail "B. demo exit $rc, want 0"
echo "$out" | grep -q "outcome     candidate_captured (exited 0)" || fail "B. no captured candidate"
manifest=$(echo "$out" | sed -n 's/^  manifest    //p')
[ -n "$manifest" ] || fail "B. no manifest path"
grep -q '"mode":"rootless"' "$manifest" || grep -q '"mode": "rootless"' "$manifest" ||
  fail "B. the manifest does not record the rootless mode"
[ "$(stat -c %u "$manifest")" = "$uid" ] || fail "B. the manifest is not the user's"
capture "$bin/corral" verify "$manifest"
[ "$rc" = 0 ] || fail "B. verify exit $rc: $out"
ok "$1: B. demo in a shared scope: captured, manifest records rootless, owned by the user, verified"

# B2. corral as the last process of the mount namespace it was started in, run from a mount made
# there (as a unit with PrivateTmp= or a wrapper's `unshare -m` starts it): entering rootless
# mode leaves that namespace and its mounts go with it; corral's checkout helper and the demo
# agent (corral itself) must still start. Without the fix: "starting the checkout helper
# /corral: No such file or directory" (the path relative to the detached mount).
set +e
out=$(cd /tmp && unshare -m --propagation private sh -c \
  'mount -t tmpfs -o size=400m,mode=755 corral-b2 /mnt && install -m 0755 "$1" /mnt/corral && shift && exec "$@"' \
  sh "$bin/corral" setpriv --reuid="$uid" --regid="$gid" --init-groups -- env -i HOME="$home" \
  USER="$user" PATH=/usr/bin:/bin XDG_RUNTIME_DIR="/run/user/$uid" \
  DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$uid/bus" /mnt/corral demo 2>&1)
rc=$?
set -e
[ "$rc" = 0 ] || fail "B2. demo from a mount of a namespace corral leaves: exit $rc: $(echo "$out" | tail -3)"
echo "$out" | grep -q "outcome     candidate_captured (exited 0)" || fail "B2. no captured candidate"
ok "$1: B2. started as the last process of its mount namespace, from a mount made there: captured"

# C. Attacks from inside, each with its control outside.
canary="corral-canary-$RANDOM$RANDOM"
mkdir -p "$home/.ssh"
echo "$canary" > "$home/.ssh/id_canary"
chmod 700 "$home/.ssh"
chmod 600 "$home/.ssh/id_canary"
chown -R "$user:$user" "$home/.ssh"
capture cat "$home/.ssh/id_canary"
[ "$out" = "$canary" ] || fail "C. control: the user cannot read its own secret outside"
work=$(as_user mktemp -d /tmp/corral-um-run.XXXXXX)
as_user sh -c "cd $work && git init -q repo && mkdir repo/src && echo base > repo/src/a.txt && echo base > repo/src/b.txt &&
  git -C repo add -A && git -C repo -c user.name=t -c user.email=t@corral.invalid commit -qm base"
sha=$(as_user git -C "$work/repo" rev-parse HEAD)
sh_real=$(readlink -f /bin/sh)
# Each attack prints "ATTACK name: blocked" or "ATTACK name: ESCAPED"; the worker then changes
# src/a.txt so the run has a patch.
attack="for t in grep unshare mount; do command -v \$t >/dev/null || echo \"MISSING TOOL \$t\"; done
r() { if eval \"\$2\" >/dev/null 2>&1; then echo \"ATTACK \$1: ESCAPED\"; else echo \"ATTACK \$1: blocked\"; fi; }
r secret 'grep -q $canary $home/.ssh/id_canary'
r home-write 'echo x > $home/pwned-$canary'
r userns 'unshare -U true'
r mount 'mount -t tmpfs x /tmp'
r caps 'grep -q \"^CapEff:.*[1-9a-f]\" /proc/self/status'
python3 -c \"import os; os.setxattr('src', 'user.overlay.opaque', b'y')\" 2>/dev/null
echo \"ids \$(id -u) \$(id -g)\"
echo changed > src/a.txt"
as_user python3 - "$work" "$sha" "$sh_real" "$attack" <<'PY'
import json, sys
work, sha, sh, code = sys.argv[1:]
wu = {"schema_version": "corral.work-unit/v1", "id": "rootless-attacks", "objective": "attack",
      "repository": {"base_sha": sha}, "security": {"sandbox_required": True},
      "permissions": {"process_execution": True, "secrets": [], "network": "none",
                      "network_allowlist": [], "filesystem_write": ["src/"]},
      "budget": {"wall_seconds": 120, "cpu_seconds": 60, "memory_bytes": 256 << 20,
                 "disk_bytes": 64 << 20, "max_processes": 64, "max_output_bytes": 65536,
                 "max_patch_bytes": 1 << 20},
      "constraints": {"allowed_paths": ["src/"], "forbidden_paths": []}}
preset = {"schema_version": "corral.agent-preset/v1", "id": "rootless-attacks", "executable": sh,
          "argv": ["-c", code], "prompt_transport": {"kind": "stdin"},
          "model_connection": None, "env_allowlist": [], "network_policy": "disabled",
          "read_only_paths": [], "authority": "candidate_only"}
json.dump(wu, open(f"{work}/wu.json", "w"))
json.dump(preset, open(f"{work}/preset.json", "w"))
PY
# Control: the same attacks outside, as the user, reach the secret, HOME and a user namespace.
mkdir -p "$work/outside/src"
chown -R "$user:$user" "$work/outside"
capture sh -c "cd $work/outside && $attack"
for a in secret home-write userns; do
  echo "$out" | grep -qx "ATTACK $a: ESCAPED" || fail "C. control: attack $a does not work outside: $out"
done
rm -f "$home/pwned-$canary"
capture "$bin/corral" run --work-unit "$work/wu.json" --preset "$work/preset.json" \
  --repo "$work/repo" --artifacts "$work/artifacts"
[ "$rc" = 0 ] || fail "C. the attack run exit $rc: $out"
manifest=$(echo "$out" | tail -1)
capture "$bin/corral" logs "$manifest" --artifacts "$work/artifacts"
echo "$out"
echo "$out" | grep -q "^MISSING TOOL" && fail "C. the sandbox lacks a tool an attack needs"
for a in secret home-write userns mount caps; do
  echo "$out" | grep -qx "ATTACK $a: blocked" || fail "C. attack $a: not blocked"
done
[ ! -e "$home/pwned-$canary" ] || fail "C. the worker wrote into the user's HOME"
echo "$out" | grep -qx "ids $ids" || fail "C. the worker's ids inside are not $ids"
# The overlay's own xattrs are user.overlay.* in rootless mode: an opaque mark the worker
# tries to set on src/ must not make capture report the lower's src/b.txt deleted.
grep -q '"src/a.txt"' "$manifest" || fail "C. the manifest does not list src/a.txt"
if grep -q '"src/b.txt"' "$manifest"; then fail "C. a forged opaque mark deleted src/b.txt"; fi
ok "$1: C. the user's secret unseen, HOME unwritten, no user namespace, no mount, no capability, no forged deletion"

# The cache the runs filled, listed and emptied by `corral cache`: with a range the worker owns
# those checkouts, so only corral (in its namespace) can remove them; after `gc --all` the
# user can remove the whole cache by hand.
capture "$bin/corral" cache ls
echo "$out" | head -1
echo "$out" | grep -q "^2 base checkout(s)" || fail "C. cache ls: want the two runs' checkouts: $out"
capture "$bin/corral" cache gc --all
[ "$rc" = 0 ] || fail "C. cache gc --all exit $rc: $out"
capture "$bin/corral" cache ls
echo "$out" | grep -q "^0 base checkout(s)" || fail "C. cache ls after gc --all: $out"
capture rm -rf "$home/.cache/corral"
if [ "$rc" != 0 ] || [ -e "$home/.cache/corral" ]; then fail "C. the user cannot remove its cache: $out"; fi
ok "$1: the cache lists both checkouts, gc --all empties it, the user removes the rest"

rm -rf "$work"
}

make_user corral-vm-user with-range
checks "with a range"
first_uid=$uid
make_user corral-vm-single no-range
checks "without a range"
systemctl stop "user@$uid.service"
single_uid=$uid
user=corral-vm-user uid=$first_uid gid=$(id -g corral-vm-user) home=/home/corral-vm-user

# D. Control: no manager to ask.
systemctl stop "user@$uid.service"
capture "$bin/corral" probe
echo "$out"
[ "$rc" = 3 ] || fail "D. exit $rc, want 3"
[ "$(echo "$out" | grep -c MISSING)" = 1 ] || fail "D. want one MISSING line"
echo "$out" | grep MISSING |
  grep "belongs to uid 0, not to uid $uid (not delegated): run corral under systemd's user manager" |
  grep -q "corral asked the user's systemd manager for a delegated scope" ||
  fail "D. the refusal does not name the undelegated cgroup, what asking said, and the fix"
ok "D. control: without the user's manager, refused in one line naming the cgroup and the fix"

# E. Nothing left.
# (corral-vm.service is the guest's own unit, running this script.)
left=$(find /sys/fs/cgroup -name 'corral-*' ! -name corral-vm.service)
[ -z "$left" ] || fail "E. cgroups left: $left"
for u in "$uid" "$single_uid"; do
  pgrep -u "$u" >/dev/null && fail "E. processes of uid $u left: $(pgrep -u "$u" -a)"
done
ok "E. no corral cgroup, scope or process of the user's left"
rm -rf "$bin"
