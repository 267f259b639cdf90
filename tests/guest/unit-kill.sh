#!/usr/bin/env bash
# Issue 17, item 2, in a guest whose init is systemd (`cargo xtask vm --layout systemd-service`,
# run by `cargo xtask ci`): corral's run ended from outside the way a systemd host ends it.
#   A. `systemctl kill --signal=SIGKILL` of corral's whole unit, while its worker runs: corral,
#      its reaper and its sandbox all die at once; the unit's cgroup goes with the unit.
#   B. The kernel's OOM killer picks corral itself, inside a unit with a memory limit, while its
#      worker fills that limit: corral dies of SIGKILL, systemd stops the rest of the unit with
#      SIGTERM, and the reaper (which outlasts SIGTERM) sweeps.
# In both, corral's groups are beneath its unit's cgroup (it stays in the unit it was given).
# After each: no process of the run, no cgroup of corral's pid anywhere, the unit's own cgroup
# gone, and nothing named by corral's pid in the cache, the store or /tmp once the next corral
# (`corral probe`) has run. Controls: the run's groups and worker were there before the kill,
# and the kernel's log names corral as the OOM killer's victim.
# Usage: unit-kill.sh CORRAL. One line per check; exit 1 on the first failure.
set -euo pipefail
corral=$1
work=$(mktemp -d /tmp/unitkill.XXXXXX)
export XDG_CACHE_HOME=$work/cache GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
fail() {
  echo "unit-kill: FAIL: $*"
  exit 1
}
ok() { echo "unit-kill: ok: $*"; }
# Polls until "$@" holds: a bound on a hang (60 s), never a pace.
wait_for() {
  local what=$1
  shift
  for _ in $(seq 1 600); do
    if "$@"; then return 0; fi
    sleep 0.1
  done
  fail "$what (not within 60 s)"
}

repo=$work/repo
git init -q "$repo"
mkdir "$repo/src"
echo hello > "$repo/src/a.txt"
git -C "$repo" add -A
git -C "$repo" -c user.name=t -c user.email=t@corral.invalid commit -qm base
sha=$(git -C "$repo" rev-parse HEAD)
py=$(readlink -f /usr/bin/python3)

# The documents: a worker that waits for SIGUSR1, then (mode balloon) fills memory; its budget
# (1 GiB) is above the unit's MemoryMax, so the unit's limit is what runs out.
documents() { # tag mode
  python3 - "$work" "$sha" "$py" "$1" "$2" <<'PY'
import json, sys
work, sha, py, tag, mode = sys.argv[1:]
code = ("import signal\n"
        "signal.signal(signal.SIGUSR1, lambda *a: None)\n"
        "signal.pause()\n"
        "chunks = []\n"
        "while True:\n"
        "    chunks.append(b'x' * (8 << 20))\n")
wu = {"schema_version": "corral.work-unit/v1", "id": "unit-kill", "objective": "wait",
      "repository": {"base_sha": sha}, "security": {"sandbox_required": True},
      "permissions": {"process_execution": True, "secrets": [], "network": "none",
                      "network_allowlist": [], "filesystem_write": ["src/"]},
      "budget": {"wall_seconds": 900, "cpu_seconds": 900, "memory_bytes": 1 << 30,
                 "disk_bytes": 256 << 20, "max_processes": 64, "max_output_bytes": 65536,
                 "max_patch_bytes": 1 << 20},
      "constraints": {"allowed_paths": ["src/"], "forbidden_paths": []}}
preset = {"schema_version": "corral.agent-preset/v1", "id": "unit-kill", "executable": py,
          "argv": ["-c", code, tag, mode], "prompt_transport": {"kind": "stdin"},
          "model_connection": None, "env_allowlist": [], "network_policy": "disabled",
          "read_only_paths": [], "authority": "candidate_only"}
json.dump(wu, open(f"{work}/{tag}.wu.json", "w"))
json.dump(preset, open(f"{work}/{tag}.preset.json", "w"))
PY
}

# Starts `corral run` as the main process of a transient Delegate=yes service; sets unit,
# cpid (corral), reaper, worker and cg (the unit's cgroup).
start() { # tag mode [systemd-run properties...]
  local tag=$1 mode=$2
  shift 2
  documents "$tag" "$mode"
  unit=$tag.service
  systemd-run --quiet --unit "$unit" -p Type=exec -p Delegate=yes "$@" \
    --setenv=XDG_CACHE_HOME="$XDG_CACHE_HOME" --setenv=PATH=/usr/bin:/bin \
    -p StandardOutput=file:"$work/$tag.out" -p StandardError=file:"$work/$tag.err" \
    "$corral" run --work-unit "$work/$tag.wu.json" --preset "$work/$tag.preset.json" \
    --repo "$repo" --artifacts "$work/artifacts" --json
  wait_for "the worker of $unit never ran ($(cat "$work/$tag.err" 2>/dev/null))" \
    pgrep -f "$tag $mode" > /dev/null
  worker=$(pgrep -f "$tag $mode")
  cpid=$(systemctl show -p MainPID --value "$unit")
  reaper=$(pgrep -P "$cpid" -f __corral-reaper)
  cg=/sys/fs/cgroup$(systemctl show -p ControlGroup --value "$unit")
  [ -n "$(groups_of "$cpid")" ] || fail "$unit: corral $cpid's groups were not found"
  # In a Delegate=yes service corral stays in its unit (its reaper, a child of its own, does
  # not make the unit shared), so the unit's limits hold for everything of the run.
  local g
  for g in $(groups_of "$cpid"); do
    case $g in "$cg"/*) ;; *) fail "$unit: corral's group $g is outside its unit's $cg" ;; esac
  done
  ok "$unit: corral $cpid, reaper $reaper, worker $worker, groups $(groups_of "$cpid" | tr '\n' ' ')"
}

groups_of() { find /sys/fs/cgroup -type d \( -name "corral-$1-*" -o -name "corral-probe-$1-*" \
  -o -name "corral-supervisor-$1" \); }
# What the reaper removes, by the forms only that pid creates (ADR-0092).
files_of() {
  find "$XDG_CACHE_HOME" "$work/artifacts" /tmp -maxdepth 3 \( -name "*-$1-[0-9]*" \
    -o -name "*.tmp-$1" -o -name ".*.$1" -o -name "corral-demo-$1" \) -print 2> /dev/null
}
gone() { [ ! -d "/proc/$1" ] || grep -q '^State:.*Z' "/proc/$1/status" 2> /dev/null; }
stopped() { ! systemctl is-active --quiet "$unit" && [ ! -d "$cg" ]; }

# Nothing of corral $cpid is left once the next corral has run.
nothing_left() { # what
  local p
  for p in "$cpid" "$reaper" "$worker"; do gone "$p" || fail "$1: process $p outlived the unit"; done
  [ -z "$(groups_of "$cpid")" ] || fail "$1: groups left: $(groups_of "$cpid")"
  echo "unit-kill: $1: named by corral $cpid before the next corral: $(files_of "$cpid" | tr '\n' ' ')"
  "$corral" probe > /dev/null || fail "$1: the next corral's probe failed"
  [ -z "$(files_of "$cpid")" ] || fail "$1: left after the next corral: $(files_of "$cpid")"
  [ -z "$(groups_of "$cpid")" ] || fail "$1: groups left after the next corral"
  ok "$1: no process, no cgroup, nothing named by corral $cpid"
}

# A. The whole unit killed with SIGKILL: the reaper dies too; systemd removes the unit's
# cgroup with everything below it.
start corral-unitkill-a sleep
systemctl kill --signal=SIGKILL "$unit"
wait_for "$unit did not stop" stopped
nothing_left "A, systemctl kill --signal=SIGKILL"
systemctl reset-failed "$unit" 2> /dev/null || true

# B. corral OOM-killed inside its unit. corral is made the killer's choice (oom_score_adj 1000,
# as if it were the largest process) after its worker started, so the worker keeps its own
# score; the reaper lowered its own to -1000.
start corral-unitkill-b balloon -p MemoryMax=256M -p MemorySwapMax=0 -p OOMPolicy=continue
adj=$(cat "/proc/$reaper/oom_score_adj")
[ "$adj" = -1000 ] || fail "B: the reaper's oom_score_adj is $adj"
echo 1000 > "/proc/$cpid/oom_score_adj"
kill -USR1 "$worker"
wait_for "$unit did not stop" stopped
dmesg | grep -Eq "Killed process $cpid \(corral\)" ||
  fail "B: the kernel did not OOM-kill corral $cpid: $(dmesg | grep -i 'killed process' | tail -3)"
ok "B: the kernel's log: $(dmesg | grep -E "Killed process $cpid " | tail -1 | cut -c1-120)"
nothing_left "B, corral OOM-killed"
systemctl reset-failed "$unit" 2> /dev/null || true
rm -rf "$work"
echo "unit-kill: all checks passed"
