#!/usr/bin/env bash
# Counting overhead of `tp stat` against `perf stat` on the same events, in one run.
#
#   bench/stat-overhead.sh [CALLS] [ROUNDS] [EVENTS]     (root; run from the repository root)
#
# Workload: ../shared/peers/load/syscall-load.c (or $LOAD_SRC), CALLS getppid() calls (default 2,000,000);
# it prints its own loop time, so "loop" excludes the tools' start-up and tear-down and
# "wall" includes them. Configurations, interleaved ROUNDS times (default 5):
#   alone   the load, nothing counting
#   perf    perf stat -e EVENTS -- LOAD
#   tp      tp stat   -e EVENTS -- LOAD
# EVENTS defaults to syscalls:sys_enter_getppid,task-clock,context-switches,page-faults (the
# tracepoint fires on every call, so its counting cost is in the loop). Prints the median
# and range per configuration, the ratios to the load alone and tp/perf, and checks that
# both tools counted exactly CALLS getppid calls.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
CALLS=${1:-2000000}
ROUNDS=${2:-5}
EVENTS=${3:-syscalls:sys_enter_getppid,task-clock,context-switches,page-faults}
here=$(cd "$(dirname "$0")/.." && pwd)
src=${LOAD_SRC:-$here/../shared/peers/load/syscall-load.c}
work=$(mktemp -d /tmp/tp-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM

need_perf
build_load "$src" "$work/load"
build_tp

count_of() { awk -F, -v e=syscalls:sys_enter_getppid '$3 == e { print $1 }' "$1"; }

declare -A LOOP WALL
run() { # name, command...
  local name=$1
  timed "$@"
  if [ "$name" != alone ] && [[ $EVENTS == *syscalls:sys_enter_getppid* ]]; then
    local c; c=$(count_of "$work/err")
    [ "$c" = "$CALLS" ] || { echo "$name counted '$c' getppid calls, not $CALLS:" >&2; cat "$work/err" >&2; exit 1; }
  fi
}

for r in $(seq "$ROUNDS"); do
  run alone "$work/load" "$CALLS"
  run perf perf stat -x, -e "$EVENTS" -- "$work/load" "$CALLS"
  run tp "$TP" stat -x, -e "$EVENTS" -- "$work/load" "$CALLS"
done


echo "stat overhead: $CALLS getppid() calls, events $EVENTS, $ROUNDS rounds (median, range; ms)"
loop_wall_table alone perf tp
la=$(echo "${LOOP[alone]}" | median); lp=$(echo "${LOOP[perf]}" | median); lt=$(echo "${LOOP[tp]}" | median)
wa=$(echo "${WALL[alone]}" | median); wp=$(echo "${WALL[perf]}" | median); wt=$(echo "${WALL[tp]}" | median)
awk -v la="$la" -v lp="$lp" -v lt="$lt" -v wa="$wa" -v wp="$wp" -v wt="$wt" 'BEGIN {
  printf "loop: perf/alone %.3fx  tp/alone %.3fx  tp/perf %.3fx\n", lp / la, lt / la, lt / lp
  printf "wall: perf/alone %.3fx  tp/alone %.3fx  tp/perf %.3fx\n", wp / wa, wt / wa, wt / wp
}'
