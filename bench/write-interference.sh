#!/usr/bin/env bash
# Does a second thread's I/O slow a tracer's producer here? (no tp code; see
# bench/src/write_interference.rs). Runs each consumer mode ROUNDS times, interleaved.
#
#   bench/write-interference.sh [ROUNDS] [DIR]      (DIR: where files are written, /tmp)
set -euo pipefail
ROUNDS=${1:-3}
DIR=${2:-/tmp}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(mktemp -d /tmp/tp-wi.XXXXXX)
trap 'rm -rf "$bin"' EXIT
rustc -O --edition 2021 -o "$bin/wi" "$root/bench/src/write_interference.rs"
echo "producer ns/event (events lost) per round; consumer takes full pages and:"
for mode in none memcpy overwrite write; do
  printf '%-10s' "$mode"
  for r in $(seq "$ROUNDS"); do
    sync
    "$bin/wi" "$mode" "$DIR" | awk '{ printf " %s (%s)", $2, $5 }'
  done
  echo
done
echo "machine: $(nproc) cores; $(uptime | sed 's/.*load average/load average/')"
