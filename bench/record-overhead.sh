#!/usr/bin/env bash
# Recording overhead of `tp record` against the kernel's floor and perf, in one run.
#
#   bench/record-overhead.sh [CALLS] [ROUNDS]     (root; run from the repository root)
#
# Workload: ../shared/peers/load/syscall-load.c, CALLS getppid() calls (default 2,000,000),
# each one raw_syscalls:sys_enter + sys_exit. The workload prints its own loop time, so the
# numbers exclude tracer start-up and tear-down. Configurations, interleaved ROUNDS times
# (default 3), median reported:
#   alone   no tracing
#   floor   raw_syscalls enabled into a large private instance (tp-<pid>, 512 MiB per CPU),
#           nobody reading: the kernel's own cost of writing the events
#   floor+pid  the same plus set_event_pid = the load's pid and options/event-fork, which is
#           how tp restricts a recording to `-- COMMAND` and its children (the load is
#           started behind a fifo so the pid is set before it runs)
#   tp      tp record -e raw_syscalls -- LOAD   (default settings)
#   perf    perf record -e 'raw_syscalls:*' -- LOAD
# For each: loop time, ratio to the floor, events lost, and the recorder's own CPU time
# (for tp: total, and in parentheses the part spent while recording, before the file is
# written).
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
CALLS=${1:-2000000}
ROUNDS=${2:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
src="$here/../shared/peers/load/syscall-load.c"
T=/sys/kernel/tracing
work=$(mktemp -d /tmp/tp-bench.XXXXXX)
inst="$T/instances/tp-$$"
cleanup() {
  if [ -d "$inst" ]; then
    echo 0 > "$inst/tracing_on" || true
    echo > "$inst/set_event" || true
    rmdir "$inst" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

[ -d "$T/instances" ] || { echo "tracefs not mounted at $T (run as root)" >&2; exit 1; }
build_load "$src" "$work/load"
build_tp
have_perf=1
perf --version >/dev/null 2>&1 || have_perf=0


run_alone() { "$work/load" "$CALLS" > "$work/out"; loop_ns "$work/out"; }

run_floor() {
  local with_pid=$1
  mkdir "$inst"
  echo 0 > "$inst/tracing_on"
  echo 524288 > "$inst/buffer_size_kb"
  echo mono > "$inst/trace_clock"
  echo 1 > "$inst/events/raw_syscalls/enable"
  if [ "$with_pid" = 1 ]; then
    rm -f "$work/gate"; mkfifo "$work/gate"
    ( read -r _ < "$work/gate"; exec "$work/load" "$CALLS" > "$work/out" ) &
    local p=$!
    echo "$p" > "$inst/set_event_pid"
    echo 1 > "$inst/options/event-fork"
    echo 1 > "$inst/tracing_on"
    echo go > "$work/gate"
    wait "$p"
  else
    echo 1 > "$inst/tracing_on"
    "$work/load" "$CALLS" > "$work/out"
  fi
  echo 0 > "$inst/tracing_on"
  local lost=0 n
  for s in "$inst"/per_cpu/cpu*/stats; do
    n=$(awk -F: '/^overrun|^commit overrun|^dropped events/ {s+=$2} END {print s+0}' "$s")
    lost=$((lost + n))
  done
  echo > "$inst/set_event"
  echo > "$inst/set_event_pid"
  rmdir "$inst"
  echo "$(loop_ns "$work/out") $lost -"
}

run_tp() {
  "$TP" record -e raw_syscalls -o "$work/tp.dat" -- "$work/load" "$CALLS" > "$work/out" 2> "$work/tp.err" || {
    cat "$work/tp.err" >&2
  }
  local lost cpu
  if grep -q "no events lost" "$work/tp.err"; then lost=0; else
    lost=$(sed -n 's/.*LOST EVENTS: \([0-9]*\).*/\1/p' "$work/tp.err"); lost=${lost:-?}; fi
  # total(while recording): tp's whole CPU time, and the part spent while the load ran.
  cpu=$(sed -n "s/.*tp's own CPU time \([0-9.]*\)s: .*, \([0-9.]*\)s while recording.*/\1(\2)/p" "$work/tp.err")
  echo "$(loop_ns "$work/out") $lost ${cpu:-?}"
}

run_perf() {
  /usr/bin/time -f "%U %S" -o "$work/perf.time" \
    perf record -q -o "$work/perf.data" -e 'raw_syscalls:*' -- "$work/load" "$CALLS" > "$work/out" 2> "$work/perf.err" || true
  # Lost = events the workload made that perf did not record (2 per call).
  local got lost cpu
  got=$(perf script -i "$work/perf.data" -F comm 2>/dev/null | awk '$1 == "load"' | wc -l)
  lost=$((2 * CALLS - got))
  [ "$lost" -lt 0 ] && lost=0
  cpu=$(awk '{printf "%.2f", $1 + $2}' "$work/perf.time")
  echo "$(loop_ns "$work/out") $lost $cpu"
}


declare -A T_NS LOST CPU
configs="alone floor floor+pid tp"
[ $have_perf = 1 ] && configs="$configs perf"
for r in $(seq "$ROUNDS"); do
  for c in $configs; do
    # Write back the previous run's files now, not during this measurement.
    rm -f "$work/tp.dat" "$work/perf.data"
    sync
    case $c in
      alone) line="$(run_alone) 0 -" ;;
      floor) line=$(run_floor 0) ;;
      floor+pid) line=$(run_floor 1) ;;
      tp) line=$(run_tp) ;;
      perf) line=$(run_perf) ;;
    esac
    set -- $line
    T_NS[$c]="${T_NS[$c]:-} $1"
    LOST[$c]="${LOST[$c]:-} $2"
    CPU[$c]="${CPU[$c]:-} $3"
  done
done

floor_ns=$(echo ${T_NS[floor]} | tr ' ' '\n' | median)
echo "syscall-load $CALLS getppid() calls, $ROUNDS rounds (median loop time; lost and recorder CPU per round)"
printf "%-9s %10s %9s  %-20s %s\n" config loop_ms vs_floor lost recorder_cpu_s
for c in $configs; do
  ns=$(echo ${T_NS[$c]} | tr ' ' '\n' | median)
  printf "%-9s %10.1f %8.3fx  %-20s %s\n" "$c" "$(echo "$ns / 1000000" | bc -l)" \
    "$(echo "$ns / $floor_ns" | bc -l)" "$(echo ${LOST[$c]} | tr ' ' ',')" "$(echo ${CPU[$c]} | tr ' ' ',')"
done
[ $have_perf = 1 ] || echo "perf: not installed (Debian linux-perf); skipped"
