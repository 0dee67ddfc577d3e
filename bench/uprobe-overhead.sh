#!/usr/bin/env bash
# Cost of counting a uprobe: `tp stat` against `perf stat` on the same probe, in one run.
#
#   bench/uprobe-overhead.sh [CALLS] [ROUNDS]     (root; run from anywhere)
#
# Workload: a C program calling a noinline function f() CALLS times (default 200,000); it
# prints its own loop time, so "loop" excludes the tools' start-up and tear-down and "wall"
# includes them. The uprobe probe_uloadPID:f is defined once with `tp probe -x LOAD --add f`
# (removed at the end), so both tools count the very same kernel probe. Configurations,
# interleaved ROUNDS times (default 5):
#   alone   the program, nothing attached
#   perf    perf stat -e probe_uloadPID:f -- LOAD
#   tp      tp stat   -e probe_uloadPID:f -- LOAD
# Prints the median and range per configuration, the cost per probe hit ((loop - alone) /
# CALLS) and tp/perf, and checks that both counted exactly CALLS hits.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
CALLS=${1:-200000}
ROUNDS=${2:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/tp-ubench.XXXXXX)
load="$work/uload$$"
group="probe_uload$$"
build_tp
trap '"$TP" probe --del "$group:*" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT INT TERM
need_perf
load_before=$(uptime | sed 's/.*load average/load average/')

cat > "$work/uload.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) int f(int x) { __asm__ volatile(""); return x + 1; }
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    struct timespec a, b;
    volatile int s = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++) s += f((int)i);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("elapsed_ns %lld\n", (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec));
    return 0;
}
C
gcc -O2 -o "$load" "$work/uload.c"
"$TP" probe -x "$load" --add f >/dev/null

count_of() { awk -F, -v e="$group:f" '$3 == e { print $1 }' "$1"; }

declare -A LOOP WALL
run() { # name, command...
  local name=$1
  timed "$@"
  if [ "$name" != alone ]; then
    local c; c=$(count_of "$work/err")
    [ "$c" = "$CALLS" ] || { echo "$name counted '$c' hits, not $CALLS:" >&2; cat "$work/err" >&2; exit 1; }
  fi
}

for r in $(seq "$ROUNDS"); do
  run alone "$load" "$CALLS"
  run perf perf stat -x, -e "$group:f" -- "$load" "$CALLS"
  run tp "$TP" stat -x, -e "$group:f" -- "$load" "$CALLS"
done


echo "uprobe counting: $CALLS calls of f() with the uprobe $group:f, $ROUNDS rounds (median, range; ms)"
loop_wall_table alone perf tp
la=$(echo "${LOOP[alone]}" | median); lp=$(echo "${LOOP[perf]}" | median); lt=$(echo "${LOOP[tp]}" | median)
wp=$(echo "${WALL[perf]}" | median); wt=$(echo "${WALL[tp]}" | median)
awk -v la="$la" -v lp="$lp" -v lt="$lt" -v wp="$wp" -v wt="$wt" -v n="$CALLS" 'BEGIN {
  printf "per hit (loop - alone) / calls: perf %.0f ns  tp %.0f ns  tp/perf %.3fx\n", (lp - la) / n, (lt - la) / n, (lt - la) / (lp - la)
  printf "wall: tp/perf %.3fx\n", wt / wp
}'
echo "machine: $(nproc) cores; $load_before (before), $(uptime | sed 's/.*load average/load average/') (after)"
