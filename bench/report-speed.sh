#!/usr/bin/env bash
# Reading speed: `tp report` against `trace-cmd report` on the same trace.dat files, output
# to /dev/null, in A/B pairs (trace-cmd, then tp) so both see the same machine state. Per
# file: events, CPU (user + system, all threads) and wall seconds of each (median and range
# over ROUNDS pairs), the median of the per-pair ratios trace-cmd / tp, tp's peak RSS, and
# the md5 of tp's output (must not change when the renderer is made faster).
# Usage: [TP=BINARY] [ROUNDS=7] bench/report-speed.sh [FILE...]   (as root; needs perf)
# Without FILE it records one: sched, irq, timer, syscalls, kmem events in a private
# instance, extracted by trace-cmd. For the issue's figures pass an all-events recording
# (`tp record -a -e '*:*' --duration 1s` under load, ~200k events) and one of at least 10
# million events (the same for longer; a few hundred MB of zstd trace.dat at most).
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$(dirname "$0")/.."
command -v trace-cmd >/dev/null || { echo "needs trace-cmd (apt-get install trace-cmd)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
ROUNDS=${ROUNDS:-7}
# TP=PATH measures that binary (e.g. a build from before a change) instead of building one.
if [ -z "${TP:-}" ]; then
  cargo build --release -q -p tp-cli
  TP=${CARGO_TARGET_DIR:-target}/release/tp
fi
tp=$TP
work=$(mktemp -d /tmp/tp-bench.XXXXXX)
T=/sys/kernel/tracing
inst=tp-bench-$$
trap 'rm -rf "$work"; [ -d $T/instances/$inst ] && { echo 0 > $T/instances/$inst/events/enable; rmdir $T/instances/$inst; }; true' EXIT
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  file=$work/sched.dat
  mkdir $T/instances/$inst
  echo 32768 > $T/instances/$inst/buffer_size_kb
  for e in sched irq timer syscalls kmem; do echo 1 > $T/instances/$inst/events/$e/enable; done
  for _ in $(seq 1 40); do ls -R /usr/share/doc >/dev/null; done
  echo 0 > $T/instances/$inst/tracing_on
  echo 0 > $T/instances/$inst/events/enable
  # trace-cmd extract -B removes the instance when it is done.
  trace-cmd extract -B $inst -o "$file" >/dev/null 2>&1
  files=("$file")
fi

# measure CMD...: "wall_s cpu_s" (cpu: perf stat's task-clock, every thread, to the
# microsecond; /usr/bin/time's 10 ms ticks are too coarse for the small file)
measure() {
  local s e
  s=$(date +%s%N)
  perf stat -x, -e task-clock -o "$work/t" -- "$@" >/dev/null 2>/dev/null || true
  e=$(date +%s%N)
  awk -F, -v s="$s" -v e="$e" '/task-clock/ { printf "%.4f %.4f\n", (e - s) / 1e9, $1 / 1e3 }' "$work/t"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for file in "${files[@]}"; do
  events=$($tp report -i "$file" --stat | awk '/^total events/ {print $3}')
  printf 'file %s: %s events, %s bytes, tp output md5 %s\n' "$file" "$events" \
    "$(stat -c %s "$file")" "$($tp report -i "$file" 2>/dev/null | md5sum | cut -d' ' -f1)"
  tc_w=(); tc_c=(); tp_w=(); tp_c=(); wr=(); cr=()
  for r in $(seq 1 "$ROUNDS"); do
    read -r aw ac < <(measure trace-cmd report -i "$file")
    read -r bw bc < <(measure "$tp" report -i "$file")
    tc_w+=("$aw"); tc_c+=("$ac"); tp_w+=("$bw"); tp_c+=("$bc")
    wr+=("$(awk -v a="$aw" -v b="$bw" 'BEGIN { printf "%.2f", a / (b > 0 ? b : 0.005) }')")
    cr+=("$(awk -v a="$ac" -v b="$bc" 'BEGIN { printf "%.2f", a / (b > 0 ? b : 0.005) }')")
  done
  printf '  trace-cmd report  wall %s s  cpu %s s\n' "$(stats "${tc_w[@]}")" "$(stats "${tc_c[@]}")"
  printf '  tp report         wall %s s  cpu %s s  peak RSS %s kB\n' "$(stats "${tp_w[@]}")" \
    "$(stats "${tp_c[@]}")" "$(/usr/bin/time -f %M "$tp" report -i "$file" 2>&1 >/dev/null | tail -1)"
  printf '  trace-cmd / tp (median of %s pairs): wall %sx  cpu %sx\n' "$ROUNDS" \
    "$(stats "${wr[@]}")" "$(stats "${cr[@]}")"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
