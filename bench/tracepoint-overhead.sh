#!/usr/bin/env bash
# Cost of one user-space tracepoint (int, int, long): tp against LTTng-UST, in one run.
#
#   bench/tracepoint-overhead.sh [N] [ROUNDS]     (root; run from anywhere)
#
# tp:    crates/tp/examples/overhead.rs, N events disabled then N enabled with the in-process
#        recorder on at its defaults (1 thread, then 2 threads: the per-thread cost should
#        stay flat). Before the enabled loop it times back-to-back rdtsc reads (the clock
#        read each event makes, whose cost is the host's), alone and beside a thread
#        compressing as the recorder does: printed per round beside the enabled cost, with
#        the events lost, the memory the thread's buffer grew to (a burst that outruns
#        compression faults it in, in the kernel time shown), so a slow round shows whether
#        the clock read or the memory was slow. Also the floor: rdtsc plus a 32-byte store
#        into a thread-local buffer (in the L1 cache, and streaming through 64 MiB), the
#        least an event can cost; per round tp - rdtsc and tp - floor (same run), and their
#        medians.
# peer:  ../shared/peers/lttng-ust/run.sh N (LTTng-UST, a real lttng session; needs Debian
#        lttng-tools liblttng-ust-dev).
# Each configuration runs ROUNDS times (default 3), interleaved; the median is reported, and
# the best round of each side (the least disturbed by the rest of the machine).
# Wall-clock ns/event is what both programs print. On a busy machine wall time also counts
# the time other processes took the core, so CPU time is reported too: tp's thread CPU
# time per event (stderr of the example), and the LTTng peer's process task-clock
# (perf stat) over N for the enabled run (includes LTTng-UST's start-up, a few ms).
set -euo pipefail
N=${1:-10000000}
ROUNDS=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
peer="$root/../shared/peers/lttng-ust/run.sh"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
cargo build -q --release --example overhead -p tp --manifest-path "$root/Cargo.toml"
ex="$CARGO_TARGET_DIR/release/examples/overhead"
work=$(mktemp -d /tmp/tp-tpbench.XXXXXX)
load_before=$(uptime | sed 's/.*load average/load average/')
trap 'rm -rf "$work"' EXIT

have_peer=1
command -v lttng-sessiond >/dev/null || have_peer=0

# Each program starts with no dirty page cache left by the previous one (its writeback
# would compete for the 2 cores and throttle the next program's writes).
for r in $(seq "$ROUNDS"); do
  sync
  "$ex" "$N" 1 >"$work/tp1.$r" 2>"$work/tp1.err.$r"
  sync
  "$ex" "$N" 2 >"$work/tp2.$r" 2>"$work/tp2.err.$r"
  sync
  if [ $have_peer = 1 ]; then bash "$peer" "$N" >"$work/lt.$r" 2>/dev/null || have_peer=0; fi
done

# LTTng-UST enabled, CPU time: the peer's own program, built and traced as run.sh does.
lt_cpu=nan
if [ $have_peer = 1 ] && command -v perf >/dev/null; then
  pd="$root/../shared/peers/lttng-ust"
  gcc -O2 -I"$pd" -c "$pd/tp.c" -o "$work/tp.o"
  gcc -O2 -I"$pd" "$pd/main.c" "$work/tp.o" -o "$work/ltbench" -llttng-ust -ldl
  pgrep -x lttng-sessiond >/dev/null || lttng-sessiond --daemonize --no-kernel >/dev/null 2>&1
  sess=tpcpu-$$
  lttng create "$sess" --output="$work/lttrace" >/dev/null
  lttng enable-channel -u ch --subbuf-size=4M --num-subbuf=8 -s "$sess" >/dev/null
  lttng enable-event -u -c ch 'bench:ev3' -s "$sess" >/dev/null
  lttng start "$sess" >/dev/null
  for r in $(seq "$ROUNDS"); do
    sync
    perf stat -x, -e task-clock -o "$work/ltcpu.$r" -- "$work/ltbench" "$N" >/dev/null
    awk -F, -v n="$N" '$3 == "task-clock" { printf "cpu %.2f\n", $1 * 1e6 / n }' "$work/ltcpu.$r" >"$work/ltc.$r"
  done
  lttng stop "$sess" >/dev/null
  lttng destroy "$sess" >/dev/null
  rm -rf "$work/lttrace"
fi

# median of the numbers on lines matching $2 (field $3) across rounds of file prefix $1
med() {
  for r in $(seq "$ROUNDS"); do awk -v pat="$2" -v f="$3" '$0 ~ pat { print $f }' "$work/$1.$r"; done |
    sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else print a[int((NR + 1) / 2)] }'
}
best() { # smallest of the numbers on lines matching $2 (field $3) across rounds of $1
  for r in $(seq "$ROUNDS"); do awk -v pat="$2" -v f="$3" '$0 ~ pat { print $f }' "$work/$1.$r"; done |
    sort -g | awk 'NR == 1 { print $1 } END { if (NR == 0) print "nan" }' | head -1
}
cpu() { # median thread-CPU ns/event from the example's stderr: $1 file prefix, $2 disabled|enabled
  for r in $(seq "$ROUNDS"); do
    sed -n "s/.*$2 \([0-9.]*\) ns\/event.*/\1/p" "$work/$1.err.$r"
  done | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}
lost() { for r in $(seq "$ROUNDS"); do sed -n 's/.*lost \([0-9]*\),.*/\1/p' "$work/$1.err.$r"; done | paste -sd/ -; }

t1d=$(med tp1 "^tp disabled" 3); t1e=$(med tp1 "^tp enabled" 3)
t2d=$(med tp2 "^tp disabled" 3); t2e=$(med tp2 "^tp enabled" 3)
if [ $have_peer = 1 ]; then
  ld=$(med lt "disabled" 3); le=$(med lt "enabled" 3)
  [ -f "$work/ltc.1" ] && lt_cpu=$(med ltc "^cpu" 2)
else
  ld=nan; le=nan
fi
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "n/a"; else printf "%.1fx", a / b }'; }

echo "tracepoint (int, int, long), N=$N per thread, median of $ROUNDS rounds, ns/event (wall clock)"
printf '%-22s %12s %12s\n' "" disabled enabled
printf '%-22s %12s %12s\n' "lttng-ust" "$ld" "$le"
printf '%-22s %12s %12s\n' "tp, 1 thread" "$t1d" "$t1e"
printf '%-22s %12s %12s\n' "tp, 2 threads (each)" "$t2d" "$t2e"
printf '%-22s %12s %12s\n' "lttng-ust / tp" "$(ratio "$ld" "$t1d")" "$(ratio "$le" "$t1e")"
if [ $have_peer = 1 ]; then lb=$(best lt "enabled" 3); else lb=nan; fi
tb=$(best tp1 "^tp enabled" 3)
printf '%-22s %12s %12s\n' "best round: lttng-ust" "" "$lb"
printf '%-22s %12s %12s\n' "best round: tp" "" "$tb"
printf '%-22s %12s %12s\n' "best lttng-ust / tp" "" "$(ratio "$lb" "$tb")"
echo "CPU time, ns/event"
t1c=$(cpu tp1 enabled)
printf '%-22s %12s %12s\n' "lttng-ust (process)" "-" "$lt_cpu"
printf '%-22s %12s %12s\n' "tp, 1 thread" "$(cpu tp1 disabled)" "$t1c"
printf '%-22s %12s %12s\n' "tp, 2 threads (each)" "$(cpu tp2 disabled)" "$(cpu tp2 enabled)"
printf '%-22s %12s %12s\n' "lttng-ust / tp" "" "$(ratio "$lt_cpu" "$t1c")"
echo "tp events lost per round: 1 thread $(lost tp1), 2 threads $(lost tp2)"
echo "tp per round, 1 thread: enabled | rdtsc | rdtsc beside compression | floor | floor streaming (wall ns); enabled - rdtsc, enabled - floor (wall ns); enabled | rdtsc | floor (thread CPU ns); of enabled, kernel (page faults) ns; lost; buffer MiB"
for r in $(seq "$ROUNDS"); do
  w=$(awk '/^tp enabled/ { e = $3 } /^tp rdtsc / { t = $3 } /^tp rdtsc-busy/ { b = $3 } /^tp floor / { f = $3 } /^tp floor-stream/ { s = $3 }
    END { printf "%s | %s | %s | %s | %s; %+.2f, %+.2f", e, t, b, f, s, e - t, e - f }' "$work/tp1.$r")
  c=$(sed -n 's/.*enabled \([0-9.]*\) ns\/event.*/\1/p' "$work/tp1.err.$r")
  rc=$(sed -n 's/.*rdtsc thread-cpu-time: \([0-9.]*\) ns.*/\1/p' "$work/tp1.err.$r")
  rc="$rc | $(sed -n 's/.*floor thread-cpu-time: \([0-9.]*\) ns.*/\1/p' "$work/tp1.err.$r")"
  l=$(sed -n 's/.*lost \([0-9]*\),.*/\1/p' "$work/tp1.err.$r")
  h=$(sed -n 's/.*buffers at most \([0-9]*\) MiB.*/\1/p' "$work/tp1.err.$r")
  k=$(sed -n 's/.*thread-kernel-time over the enabled loop: \([0-9.]*\) ns.*/\1/p' "$work/tp1.err.$r")
  echo "  round $r: $w; $c | $rc; kernel $k; lost $l; buffer $h MiB"
done
diffs() { # median over rounds of (tp enabled - the line matching $1), wall ns
  for r in $(seq "$ROUNDS"); do
    awk -v pat="$1" '/^tp enabled/ { e = $3 } $0 ~ pat { t = $3 } END { printf "%.2f\n", e - t }' "$work/tp1.$r"
  done | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}
echo "tp enabled - rdtsc, median of rounds: $(diffs '^tp rdtsc ') ns; enabled - floor: $(diffs '^tp floor ') ns; enabled - floor streaming: $(diffs '^tp floor-stream') ns"
echo "tp enabled wall per round: 1 thread $(for r in $(seq "$ROUNDS"); do awk '/^tp enabled/ { print $3 }' "$work/tp1.$r"; done | paste -sd/ -), lttng-ust enabled wall per round: $(if [ $have_peer = 1 ]; then for r in $(seq "$ROUNDS"); do awk '/enabled/ { print $3 }' "$work/lt.$r"; done | paste -sd/ -; else echo n/a; fi)"
echo "machine: $(nproc) cores; $load_before (before), $(uptime | sed 's/.*load average/load average/') (after)"
[ $have_peer = 1 ] || echo "(lttng-ust peer not run: install lttng-tools liblttng-ust-dev)"
