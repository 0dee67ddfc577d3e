#!/usr/bin/env bash
# tp trace against bpftrace, in one run: the added cost per event of three one-liners on N
# getppid() calls (../shared/peers/load/syscall-load.c), and the time from start to attached.
#
#   bench/bpf-overhead.sh [N] [RUNS] [STARTS]     (root; defaults 2000000 5 5)
#
# Added ns/event, as ../shared/peers/bpftrace/overhead.sh measures it: the best of 5 loads
# with the program attached minus the best of 5 without, divided by N. Each run measures
# both tracers on each one-liner (which goes first alternates); the table gives the median
# over RUNS runs and the range. Single loads scatter widely on a busy machine: read the
# medians, and the load average printed beside them.
#
# Program ns/event: the kernel's own account of the time spent in the tracer's programs
# (run_time_ns / run_cnt of each program fd in /proc/PID/fdinfo over two more loads, with
# kernel.bpf_stats_enabled=1 for those only), which does not count the tracepoint's own
# cost and is less disturbed by other processes than a load's wall time. It counts every
# process's events, not only the load's.
#
# Start to attached: the wall time from starting the tracer to its -c command's start (the
# command, `/usr/bin/date +%s%N`, starts once the probes are attached), for the first one-liner;
# median of STARTS.
set -euo pipefail
N=${1:-2000000}
RUNS=${2:-5}
STARTS=${3:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/bench/lib.sh"
command -v bpftrace >/dev/null || { echo "bpftrace not installed (Debian bpftrace)" >&2; exit 1; }
build_tp
work=$(mktemp -d /tmp/tp-bpfbench.XXXXXX)
stats_before=$(sysctl -n kernel.bpf_stats_enabled)
tracer_pid=
cleanup() {
  [ -n "$tracer_pid" ] && kill -INT "$tracer_pid" 2>/dev/null && wait "$tracer_pid" 2>/dev/null
  sysctl -qw kernel.bpf_stats_enabled="$stats_before"
  rm -rf "$work"
}
trap cleanup EXIT
build_load "$here/../shared/peers/load/syscall-load.c" "$work/load"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

progs=('tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }'
       'tracepoint:raw_syscalls:sys_exit /pid > 1/ { @ = hist(args->ret); }'
       'tracepoint:raw_syscalls:sys_enter { @[pid, args->id] = count(); }')
labels=('@[comm] = count()' '@ = hist(args->ret)' '@[pid, args->id] = count()')

tracer() { # NAME ARGS...: become tracer NAME (tp or bpftrace) with ARGS (exec: started
  # with &, $! is the tracer itself, whose fds are read and which is sent SIGINT)
  local name=$1
  shift
  if [ "$name" = tp ]; then exec "$TP" trace "$@"; else exec bpftrace "$@"; fi
}

# run_stats PID: "RUN_TIME_NS RUN_CNT" summed over the BPF programs PID holds.
run_stats() {
  cat /proc/"$1"/fdinfo/* 2>/dev/null |
    awk '/^run_time_ns:/ { t += $2 } /^run_cnt:/ { c += $2 } END { print t + 0, c + 0 }'
}

best_load() { # the fastest of 5 loads' loop times, ns
  for _ in 1 2 3 4 5; do "$work/load" "$N"; done | awk '{ print $4 }' | sort -n | head -1
}

# measure NAME I: the added ns/event and the program ns/event of tracer NAME on one-liner I.
# bpf_stats is on only while waiting for the attach and for the program's own figure (two
# more loads): it times every program run, which would add its own cost to the added figure.
measure() {
  local name=$1 prog=${progs[$2]} a b s0 s1 deadline
  sysctl -qw kernel.bpf_stats_enabled=1
  tracer "$name" -e "$prog" >"$work/out" 2>"$work/err" &
  tracer_pid=$!
  # Attached: it said so, and its program has run (syscalls happen all the time).
  deadline=$((SECONDS + 300))
  until grep -q Attaching "$work/out" && [ "$(run_stats $tracer_pid | cut -d' ' -f2)" -gt 0 ]; do
    kill -0 $tracer_pid 2>/dev/null || { echo "$name failed: $(cat "$work/err")" >&2; exit 1; }
    [ $SECONDS -lt $deadline ] || { echo "$name did not attach" >&2; exit 1; }
    sleep 0.05
  done
  sysctl -qw kernel.bpf_stats_enabled=0
  a=$(best_load)
  sysctl -qw kernel.bpf_stats_enabled=1
  s0=$(run_stats $tracer_pid)
  "$work/load" "$N" >/dev/null
  "$work/load" "$N" >/dev/null
  s1=$(run_stats $tracer_pid)
  sysctl -qw kernel.bpf_stats_enabled=0
  kill -INT $tracer_pid
  wait $tracer_pid || true
  tracer_pid=
  b=$(best_load)
  awk -v a="$a" -v b="$b" -v n="$N" -v s0="$s0" -v s1="$s1" 'BEGIN {
    split(s0, x, " "); split(s1, y, " ")
    printf "%.1f %.1f\n", (a - b) / n, (y[2] > x[2] ? (y[1] - x[1]) / (y[2] - x[2]) : 0) }'
}

declare -A ADDED PROGNS
for r in $(seq "$RUNS"); do
  for i in "${!progs[@]}"; do
    if [ $((r % 2)) = 1 ]; then order="tp bpftrace"; else order="bpftrace tp"; fi
    for t in $order; do
      measure "$t" "$i" >"$work/m"
      read -r added progns <"$work/m"
      ADDED[$t,$i]+="$added"$'\n'
      PROGNS[$t,$i]+="$progns"$'\n'
    done
  done
  echo "run $r/$RUNS done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done

start_ms() { # NAME: ms from start to the -c command's start
  local t0 t1
  t0=$(date +%s%N)
  (tracer "$1" -c '/usr/bin/date +%s%N' -e "${progs[0]}" >"$work/start" 2>&1)
  t1=$(grep -E '^[0-9]{19}$' "$work/start" | head -1)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", (b - a) / 1e6 }'
}
declare -A START
for _ in $(seq "$STARTS"); do
  for t in tp bpftrace; do START[$t]+="$(start_ms $t)"$'\n'; done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) print "n/a"; else printf "%.2f\n", a / b }'; }
echo "tp trace vs bpftrace: N=$N getppid() calls, median (range) of $RUNS runs"
echo "load average: $load_before (before), $(cut -d' ' -f1-3 /proc/loadavg) (after); $(nproc) cores"
echo
echo "added ns/event (best of 5 loads attached - best of 5 without)"
printf '%-28s %22s %22s %8s\n' one-liner tp bpftrace tp/bt
for i in "${!progs[@]}"; do
  mt=$(echo "${ADDED[tp,$i]}" | median); mb=$(echo "${ADDED[bpftrace,$i]}" | median)
  printf '%-28s %22s %22s %8s\n' "${labels[$i]}" "$(printf %s "${ADDED[tp,$i]}" | median_range)" \
    "$(printf %s "${ADDED[bpftrace,$i]}" | median_range)" "$(ratio "$mt" "$mb")"
done
echo
echo "program ns/event (bpf_stats: run_time_ns / run_cnt over two loads)"
printf '%-28s %22s %22s %8s\n' one-liner tp bpftrace tp/bt
for i in "${!progs[@]}"; do
  mt=$(echo "${PROGNS[tp,$i]}" | median); mb=$(echo "${PROGNS[bpftrace,$i]}" | median)
  printf '%-28s %22s %22s %8s\n' "${labels[$i]}" "$(printf %s "${PROGNS[tp,$i]}" | median_range)" \
    "$(printf %s "${PROGNS[bpftrace,$i]}" | median_range)" "$(ratio "$mt" "$mb")"
done
echo
echo "start to attached, ms (median (range) of $STARTS; '${labels[0]}')"
printf '%-28s %22s %22s %8s\n' "" tp bpftrace tp/bt
printf '%-28s %22s %22s %8s\n' "" "$(printf %s "${START[tp]}" | median_range)" \
  "$(printf %s "${START[bpftrace]}" | median_range)" \
  "$(ratio "$(echo "${START[tp]}" | median)" "$(echo "${START[bpftrace]}" | median)")"
