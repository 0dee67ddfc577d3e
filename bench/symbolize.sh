#!/usr/bin/env bash
# Symbolizing stacks: `tp report` against `perf script` on the same perf.data of about
# FRAMES call-stack frames (kernel and user), output to /dev/null, caches warm on both sides
# (each reads the file once before the timed rounds: page cache, perf's ~/.debug build-id
# cache), interleaved rounds; wall and CPU time, median and range.
# Usage: bench/symbolize.sh [FRAMES] [ROUNDS]   (as root; default 1000000 frames, 5 rounds)
# The file: perf record -g -e raw_syscalls:sys_enter -c 1 around a C program built with frame
# pointers (main -> a -> b -> c -> getppid(), ~8 frames per sample: 3 kernel, 5 user), so
# every frame is one perf and tp name (both print the same frames: tests/stacks.rs).
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
FRAMES=${1:-1000000}
ROUNDS=${2:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
work=$(mktemp -d /tmp/tp-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
cat > "$work/prog.c" <<'EOF'
#include <stdlib.h>
#include <unistd.h>
static volatile long sink;
__attribute__((noinline)) void c(long n) { for (long i = 0; i < n; i++) sink += getppid(); }
__attribute__((noinline)) void b(long n) { c(n); }
__attribute__((noinline)) void a(long n) { b(n); }
int main(int argc, char **argv) { a(argc > 1 ? atol(argv[1]) : 1000); return 0; }
EOF
gcc -O1 -g -fno-omit-frame-pointer -o "$work/prog" "$work/prog.c"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/target}
(cd "$here" && cargo build --release -q -p tp-cli)
TP="$CARGO_TARGET_DIR/release/tp"

calls=$((FRAMES / 8))
perf record -q -m 8M -g -e raw_syscalls:sys_enter -c 1 -o "$work/g.data" -- "$work/prog" "$calls" >/dev/null 2>&1
# Warm both sides (and count what they print).
pf=$(perf script -i "$work/g.data" 2>/dev/null | grep -c $'^\t')
tf=$("$TP" report -i "$work/g.data" | grep -c $'^\t')
samples=$("$TP" report -i "$work/g.data" --stat | awk '/^total samples/ {print $3}')
printf 'file: %s samples, %s bytes; frames printed: perf script %s, tp report %s\n' \
  "$samples" "$(stat -c %s "$work/g.data")" "$pf" "$tf"

# measure CMD...: "wall_s cpu_s" (cpu: user + system, all threads)
measure() {
  /usr/bin/time -f '%e %U %S' -o "$work/t" "$@" >/dev/null 2>/dev/null
  awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$work/t"
}
perf_w=(); perf_c=(); tp_w=(); tp_c=(); ratio=(); cratio=()
for r in $(seq 1 "$ROUNDS"); do
  read -r pw pc < <(measure perf script -i "$work/g.data")
  read -r tw tc < <(measure "$TP" report -i "$work/g.data")
  perf_w+=("$pw"); perf_c+=("$pc"); tp_w+=("$tw"); tp_c+=("$tc")
  ratio+=("$(awk -v a="$pw" -v b="$tw" 'BEGIN { printf "%.2f", a / b }')")
  cratio+=("$(awk -v a="$pc" -v b="$tc" 'BEGIN { printf "%.2f", a / (b > 0 ? b : 0.01) }')")
  printf 'round %d: perf script %ss (cpu %ss), tp report %ss (cpu %ss), ratio wall %sx cpu %sx\n' \
    "$r" "$pw" "$pc" "$tw" "$tc" "${ratio[-1]}" "${cratio[-1]}"
done
echo "median (range) over $ROUNDS rounds, $tf frames; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '  perf script   wall %s s   cpu %s s\n' "$(stats "${perf_w[@]}")" "$(stats "${perf_c[@]}")"
printf '  tp report     wall %s s   cpu %s s\n' "$(stats "${tp_w[@]}")" "$(stats "${tp_c[@]}")"
printf '  perf script / tp report: wall %sx   cpu %sx\n' "$(stats "${ratio[@]}")" "$(stats "${cratio[@]}")"
