#!/usr/bin/env bash
# Builds every fuzz target on the pinned toolchain and runs each for a bounded number of
# inputs. A crash (a violated security assertion) fails the step.
set -euo pipefail
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1   # cargo-fuzz passes -Z flags; the pinned stable toolchain allows them this way
runs="${FUZZ_RUNS:-20000}"
targets=$(cargo fuzz list)
cargo fuzz build -s none --release
# Seed the WorkUnit target with the bundled documents so it starts from valid JSON.
mkdir -p corpus/work_unit
cp ../examples/work-units/*.json ../examples/invalid/work-unit/*.json corpus/work_unit/
# Seed the request-head target with heads the proxy accepts, so it starts past the first byte.
mkdir -p corpus/request_head
printf 'CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\nEARLY' > corpus/request_head/connect
printf 'GET http://a.test/p?q=1 HTTP/1.0\r\nHost: a.test\r\nContent-Length: 3\r\nX:  v \r\n\r\nabc' \
  > corpus/request_head/get
count=0
for t in $targets; do
  mkdir -p "corpus/$t"
  cargo fuzz run -s none --release "$t" "corpus/$t" -- -runs="$runs" -max_total_time=30 -max_len=4096 2>&1 | tail -n 2
  count=$((count + 1))
done
echo "fuzz: $count targets, $runs runs each, no crash"
