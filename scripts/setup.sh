#!/usr/bin/env bash
# Installs everything corral's build, demo and tests need on a fresh Debian/Ubuntu host.
# Idempotent: installs only what is missing. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v git >/dev/null || need_apt+=(git)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
command -v bwrap >/dev/null || need_apt+=(bubblewrap)
command -v node >/dev/null || need_apt+=(nodejs npm)
command -v cc >/dev/null || need_apt+=(build-essential)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v pgrep >/dev/null || need_apt+=(procps)
command -v mount >/dev/null || need_apt+=(mount)
# The sandbox runs the system interpreter (/usr is bound read-only); the qualification suite's
# attacks are python3 and sh scripts, its controls use setpriv/unshare, and script gives a pty.
[ -x /usr/bin/python3 ] || need_apt+=(python3)
command -v setpriv >/dev/null || need_apt+=(util-linux)
command -v script >/dev/null || need_apt+=(bsdutils)
# Host-side tools the qualification suite's cases and controls drive (tmux, ssh-agent and
# gpg-agent as real host services, curl, perf, setcap).
command -v tmux >/dev/null || need_apt+=(tmux)
command -v ssh-agent >/dev/null || need_apt+=(openssh-client)
command -v gpg-connect-agent >/dev/null || need_apt+=(gpgconf)
command -v curl >/dev/null || need_apt+=(curl)
command -v perf >/dev/null || need_apt+=(linux-perf)
command -v setcap >/dev/null || need_apt+=(libcap2-bin)
# The attack scripts are linted in the test command (shellcheck; python3 -m py_compile).
command -v shellcheck >/dev/null || need_apt+=(shellcheck)
# corral export oci: the bundle smoke test runs it under gVisor with a static busybox.
command -v runsc >/dev/null || need_apt+=(runsc)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' \
  || need_apt+=(busybox-static)
# `cargo xtask vm`: depmod indexes each guest kernel's modules, and the guests load modules
# on demand with the host's modprobe, as a real host does.
command -v depmod >/dev/null || [ -x /usr/sbin/depmod ] || need_apt+=(kmod)
# Ubuntu's kernel modules are .ko.zst (`cargo xtask vm --kernel ubuntu-24.04`).
command -v zstd >/dev/null || need_apt+=(zstd)
# tests/guest/user-manager.sh: an ordinary user's systemd manager and its session bus in the
# guests (whose root is this host's), reached with systemd-run --user.
dpkg-query -W -f='${Status}' dbus-user-session 2>/dev/null | grep -q 'ok installed' \
  || need_apt+=(dbus-user-session)
# Rootless mode with subordinate ids (tests/guest/user-manager.sh): newuidmap/newgidmap.
command -v newuidmap >/dev/null || need_apt+=(uidmap)
# The OCI runtime-spec JSON Schema (the exported config.json is validated against it).
[ -f /usr/share/gocode/src/github.com/opencontainers/runtime-spec/schema/config-schema.json ] \
  || need_apt+=(golang-github-opencontainers-specs-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# `cargo xtask vm` (QEMU guests with Debian's kernels; the kernels themselves are fetched by
# it with `apt-get download`, into target/vm/).
if ! command -v qemu-system-x86_64 >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null; }
fi

# Independent JSON Schema validator (python-jsonschema).
if ! python3 -c 'import jsonschema' 2>/dev/null; then
  python3 -m pip install --quiet jsonschema 2>/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-jsonschema >/dev/null; }
fi

# Independent Kubernetes validator (OpenAPI schemas bundled, works offline), pinned.
if ! command -v kubernetes-validate >/dev/null \
  || [ "$(kubernetes-validate --version 2>/dev/null)" != "1.37.0" ]; then
  python3 -m pip install --quiet kubernetes-validate==1.37.0 2>/dev/null \
    || python3 -m pip install --quiet --break-system-packages kubernetes-validate==1.37.0
fi

# ajv, to prove the schemas pass its strict draft 2020-12 mode.
if [ ! -f tests/.node/node_modules/ajv/dist/2020.js ]; then
  mkdir -p tests/.node
  (cd tests/.node && npm install --silent --no-audit --no-fund ajv@8 >/dev/null)
fi

# cargo-deny, for the dependency check (bans, licenses, sources) in the test command.
if ! cargo deny --version >/dev/null 2>&1; then
  cargo install --quiet --locked cargo-deny
fi

# cargo-fuzz, to build and smoke-run the fuzz targets.
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install --quiet --locked cargo-fuzz
fi
# Real agents from the registries, for corral-cli's tests/real_agents.rs (issue 14): every
# package pinned (tests/agents/*.txt), installed once into a folder named by the pin file's
# digest (a changed pin installs afresh), under /opt: the sandbox never shows a home
# directory. Built from the system's Python, which the sandbox shows under /usr.
agents=/opt/corral-agents
if ! /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi
# A venv's scripts name its folder, so it is built where it stays; `.complete` marks an
# install that finished.
for name in mini-swe-agent aider; do
  pin=tests/agents/$name.txt
  dir="$agents/$name-$(sha256sum "$pin" | cut -c1-16)"
  if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    mkdir -p "$agents"
    /usr/bin/python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet --no-deps --disable-pip-version-check -r "$pin"
    touch "$dir/.complete"
  fi
done
# codex, gemini-cli and goose (the AAIF's native build, published on npm) from npm: exactly
# tests/agents/<name>/package-lock.json (npm ci), the same way.
for name in codex gemini-cli goose; do
  pins=tests/agents/$name
  dir="$agents/$name-$(cat "$pins/package.json" "$pins/package-lock.json" | sha256sum | cut -c1-16)"
  if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$pins/package.json" "$pins/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --silent --no-audit --no-fund >/dev/null)
    touch "$dir/.complete"
  fi
done

echo "setup: ready"
