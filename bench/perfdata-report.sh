#!/usr/bin/env bash
# Reading perf.data: `tp report` against `perf script` on the same file of ~CALLS tracepoint
# samples, output to /dev/null, interleaved rounds; wall time and peak RSS (/usr/bin/time -v)
# of each, median and range, and tp's peak RSS on a file twice the size (memory must not grow
# with the file).
# Usage: bench/perfdata-report.sh [CALLS] [ROUNDS]   (as root; default 1000000 calls, 5 rounds)
# The file: perf record -e raw_syscalls:sys_enter -c 1 around syscall-load (CALLS getppid()
# calls, ../shared/peers/load/syscall-load.c), one sample per system call.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
CALLS=${1:-1000000}
ROUNDS=${2:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
src=""
for d in "$here/../shared" "$here/../../shared" /work/shared; do
  [ -f "$d/peers/load/syscall-load.c" ] && { src="$d/peers/load/syscall-load.c"; break; }
done
[ -n "$src" ] || { echo "missing shared/peers/load/syscall-load.c (clone shared/ beside the repository)" >&2; exit 1; }
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
work=$(mktemp -d /tmp/tp-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
gcc -O2 -o "$work/load" "$src"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/target}
(cd "$here" && cargo build --release -q -p tp-cli)
TP="$CARGO_TARGET_DIR/release/tp"

record() { # CALLS FILE: a large per-CPU ring (-m) so perf loses as little as it can
  perf record -q -m 8M -e raw_syscalls:sys_enter -c 1 -o "$2" -- "$work/load" "$1" >/dev/null 2>&1
}
record "$CALLS" "$work/a.data"
record $((CALLS * 2)) "$work/b.data"
samples() { "$TP" report -i "$1" --stat | awk '/^total samples/ {print $3}'; }
na=$(samples "$work/a.data"); nb=$(samples "$work/b.data")
printf 'file: %s samples, %s bytes; twice: %s samples, %s bytes\n' \
  "$na" "$(stat -c %s "$work/a.data")" "$nb" "$(stat -c %s "$work/b.data")"
pl=$(perf script -i "$work/a.data" 2>/dev/null | wc -l); tl=$("$TP" report -i "$work/a.data" | grep -vc ' \[LOST ' || true)
printf 'lines: perf script %s, tp report %s\n' "$pl" "$tl"

# measure CMD...: "wall_s max_rss_kb cpu_s" (cpu: user + system, all threads)
measure() {
  /usr/bin/time -f '%e %M %U %S' -o "$work/t" "$@" >/dev/null 2>/dev/null
  awk '{ printf "%s %s %.2f\n", $1, $2, $3 + $4 }' "$work/t"
}
perf_w=(); perf_m=(); perf_c=(); tp_w=(); tp_m=(); tp_c=(); tp2_m=(); ratio=(); cratio=()
for r in $(seq 1 "$ROUNDS"); do
  read -r pw pm pc < <(measure perf script -i "$work/a.data")
  read -r tw tm tc < <(measure "$TP" report -i "$work/a.data")
  read -r _ t2m _ < <(measure "$TP" report -i "$work/b.data")
  perf_w+=("$pw"); perf_m+=("$pm"); perf_c+=("$pc"); tp_w+=("$tw"); tp_m+=("$tm"); tp_c+=("$tc"); tp2_m+=("$t2m")
  ratio+=("$(awk -v a="$pw" -v b="$tw" 'BEGIN { printf "%.2f", a / b }')")
  cratio+=("$(awk -v a="$pc" -v b="$tc" 'BEGIN { printf "%.2f", a / b }')")
  printf 'round %d: perf script %ss (cpu %ss) %s kB, tp report %ss (cpu %ss) %s kB (twice the file: %s kB), ratio wall %sx cpu %sx\n' \
    "$r" "$pw" "$pc" "$pm" "$tw" "$tc" "$tm" "$t2m" "${ratio[-1]}" "${cratio[-1]}"
done
echo "median (range) over $ROUNDS rounds:"
printf '  perf script   wall %s s   cpu %s s   peak RSS %s kB\n' "$(stats "${perf_w[@]}")" "$(stats "${perf_c[@]}")" "$(stats "${perf_m[@]}")"
printf '  tp report     wall %s s   cpu %s s   peak RSS %s kB\n' "$(stats "${tp_w[@]}")" "$(stats "${tp_c[@]}")" "$(stats "${tp_m[@]}")"
printf '  tp report, twice the file: peak RSS %s kB\n' "$(stats "${tp2_m[@]}")"
printf '  perf script / tp report: wall %sx   cpu %sx\n' "$(stats "${ratio[@]}")" "$(stats "${cratio[@]}")"
