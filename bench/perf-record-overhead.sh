#!/usr/bin/env bash
# Sampling a tracepoint on every hit through perf_event_open: `tp record --perf` against
# `perf record` with the same attr, in one run.
#
#   bench/perf-record-overhead.sh [CALLS] [ROUNDS]     (root; run from the repository root)
#
# Workload: ../shared/peers/load/syscall-load.c (or $LOAD_SRC), CALLS getppid() calls
# (default 2,000,000), each one raw_syscalls:sys_enter. It prints its own loop time.
# Configurations, interleaved ROUNDS times (default 3):
#   alone   the load, nothing recording
#   perf    perf record -e raw_syscalls:sys_enter -c 1 -- LOAD    (perf's default ring)
#   tp      tp record --perf -e raw_syscalls:sys_enter --period 1 -- LOAD
# For each: loop time (median, range); per round the samples in the file, "missing" = CALLS
# minus samples (the load's own start-up syscalls are sampled too, so a lossless round shows
# about -34), the LOST / LOST_SAMPLES records (each stands for a run of dropped samples), all
# as `perf report --stats` counts them in either file, and the file size.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
CALLS=${1:-2000000}
ROUNDS=${2:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
src=${LOAD_SRC:-$here/../shared/peers/load/syscall-load.c}
work=$(mktemp -d /tmp/tp-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM

need_perf
build_load "$src" "$work/load"
build_tp


declare -A LOOP INFO
for r in $(seq "$ROUNDS"); do
  "$work/load" "$CALLS" > "$work/out"
  LOOP[alone]+="$(loop_ns "$work/out") "
  for tool in perf tp; do
    rm -f "$work/$tool.data"
    if [ "$tool" = perf ]; then
      perf record -q -e raw_syscalls:sys_enter -c 1 -o "$work/perf.data" -- "$work/load" "$CALLS" > "$work/out" 2> "$work/err"
    else
      "$TP" record -q --perf -e raw_syscalls:sys_enter --period 1 -o "$work/tp.data" -- "$work/load" "$CALLS" > "$work/out" 2> "$work/err"
    fi
    LOOP[$tool]+="$(loop_ns "$work/out") "
    s=$(stat_of "$work/$tool.data" SAMPLE); l=$(stat_of "$work/$tool.data" LOST); ls=$(stat_of "$work/$tool.data" LOST_SAMPLES)
    # LOST records count chunks; the samples they stand for are the difference to CALLS.
    INFO[$tool]+="round $r: samples ${s:-0} (missing $(( CALLS - ${s:-0} ))), LOST records ${l:-0}, LOST_SAMPLES records ${ls:-0}, $(( $(stat -c %s "$work/$tool.data") / 1048576 )) MiB"$'\n'
  done
done

echo "raw_syscalls:sys_enter sampled on every hit: $CALLS getppid() calls, $ROUNDS rounds (loop ms: median, range)"
for n in alone perf tp; do
  printf '%-6s %10.0f  %s\n' "$n" "$(echo "${LOOP[$n]}" | median | awk '{ print $1 / 1e6 }')" "$(echo "${LOOP[$n]}" | range 1e6 %.0f)"
done
awk -v a="$(echo "${LOOP[alone]}" | median)" -v p="$(echo "${LOOP[perf]}" | median)" -v t="$(echo "${LOOP[tp]}" | median)" \
  'BEGIN { printf "loop: perf/alone %.2fx  tp/alone %.2fx  tp/perf %.2fx\n", p / a, t / a, t / p }'
for n in perf tp; do echo "$n:"; printf '%s' "${INFO[$n]}" | sed 's/^/  /'; done
