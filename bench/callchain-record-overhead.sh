#!/usr/bin/env bash
# Call stacks on every hit of a tracepoint: `tp record -g` against `perf record -g` with the
# same event, in one run.
#
#   bench/callchain-record-overhead.sh [CALLS] [ROUNDS]     (root; run from the repository root)
#   CALL_GRAPH=dwarf bench/callchain-record-overhead.sh ...  (--call-graph dwarf on both sides:
#                                                            8 KiB of user stack a sample)
#
# Workload: ../shared/peers/load/syscall-load.c (or $LOAD_SRC), CALLS getppid() calls
# (default 1,000,000), each one raw_syscalls:sys_enter with its kernel and user frames. It
# prints its own loop time. Configurations, interleaved ROUNDS times (default 5):
#   alone   the load, nothing recording
#   perf    perf record -g -e raw_syscalls:sys_enter -- LOAD     (perf's default ring, every hit)
#   tp      tp record -g -e raw_syscalls:sys_enter -- LOAD       (every hit)
# For each: the loop time (wall, as the load prints it), the load's CPU time (user + system,
# as /usr/bin/time gets it from wait4: less disturbed by the other work of a shared machine
# than wall time), and the samples lost (the load's syscalls, counted exactly by perf stat,
# minus the samples in the file; and the LOST records), median and range over the rounds, as
# `perf report --stats` counts them in either file. The load runs under /usr/bin/time
# everywhere (its few syscalls are in every count).
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
CALLS=${1:-1000000}
ROUNDS=${2:-5}
case ${CALL_GRAPH:-fp} in
  fp) CG=(-g) ;;
  dwarf) CG=(--call-graph dwarf) ;;
  *) echo "CALL_GRAPH: fp or dwarf" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")/.." && pwd)
src=${LOAD_SRC:-$here/../shared/peers/load/syscall-load.c}
work=$(mktemp -d /tmp/tp-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM

need_perf
[ -x /usr/bin/time ] || { echo "/usr/bin/time not installed (Debian time)" >&2; exit 1; }
build_load "$src" "$work/load-bin"
printf '#!/bin/sh\nexec /usr/bin/time -o "%s/cpu" -f "%%U %%S" "%s/load-bin" "$@"\n' "$work" "$work" > "$work/load"
chmod +x "$work/load"
build_tp

cpu_ns() { awk '{ printf "%.0f", ($1 + $2) * 1e9 }' "$work/cpu"; }
# The syscalls of one run of the load (start-up included; its stdout a file, as below: to
# /dev/null it makes one more), counted exactly by perf stat.
perf stat -x, -o "$work/stat" -e raw_syscalls:sys_enter -- "$work/load" "$CALLS" > "$work/out"
expected=$(awk -F, '/raw_syscalls:sys_enter/ { print $1 }' "$work/stat")

declare -A LOOP CPU MISSING LOSTREC
for r in $(seq "$ROUNDS"); do
  "$work/load" "$CALLS" > "$work/out"
  LOOP[alone]+="$(loop_ns "$work/out") "
  CPU[alone]+="$(cpu_ns) "
  for tool in perf tp; do
    rm -f "$work/$tool.data"
    if [ "$tool" = perf ]; then
      perf record -q "${CG[@]}" -e raw_syscalls:sys_enter -o "$work/perf.data" -- "$work/load" "$CALLS" > "$work/out" 2> "$work/err"
    else
      "$TP" record -q "${CG[@]}" -e raw_syscalls:sys_enter -o "$work/tp.data" -- "$work/load" "$CALLS" > "$work/out" 2> "$work/err"
    fi
    LOOP[$tool]+="$(loop_ns "$work/out") "
    CPU[$tool]+="$(cpu_ns) "
    s=$(stat_of "$work/$tool.data" SAMPLE); l=$(stat_of "$work/$tool.data" LOST)
    m=$(( expected - ${s:-0} )); [ "$m" -lt 0 ] && m=0
    MISSING[$tool]+="$m "
    LOSTREC[$tool]+="${l:-0} "
  done
done

echo "raw_syscalls:sys_enter with call stacks (${CG[*]}) on every hit: $CALLS getppid() calls ($expected syscalls a run), $ROUNDS rounds, median (range)"
printf '%-6s %10s %14s %10s %14s %20s %8s\n' config "loop ms" range "cpu ms" range "samples lost" "LOSTrec"
for n in alone perf tp; do
  lost="-"; lrange=""; rec="-"
  if [ "$n" != alone ]; then
    lost="$(echo "${MISSING[$n]}" | median) ($(echo "${MISSING[$n]}" | range 1 %.0f))"
    rec="$(echo "${LOSTREC[$n]}" | median)"
  fi
  printf '%-6s %10.0f %14s %10.0f %14s %20s %8s\n' "$n" "$(echo "${LOOP[$n]}" | median | awk '{ print $1 / 1e6 }')" "$(echo "${LOOP[$n]}" | range 1e6 %.0f)" \
    "$(echo "${CPU[$n]}" | median | awk '{ print $1 / 1e6 }')" "$(echo "${CPU[$n]}" | range 1e6 %.0f)" "$lost" "$rec"
done
awk -v a="$(echo "${LOOP[alone]}" | median)" -v p="$(echo "${LOOP[perf]}" | median)" -v t="$(echo "${LOOP[tp]}" | median)" \
  'BEGIN { printf "loop: perf/alone %.2fx  tp/alone %.2fx  tp/perf %.2fx\n", p / a, t / a, t / p }'
awk -v a="$(echo "${CPU[alone]}" | median)" -v p="$(echo "${CPU[perf]}" | median)" -v t="$(echo "${CPU[tp]}" | median)" \
  'BEGIN { printf "cpu:  perf/alone %.2fx  tp/alone %.2fx  tp/perf %.2fx\n", p / a, t / a, t / p }'
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (a shared machine: other builds run beside)"
