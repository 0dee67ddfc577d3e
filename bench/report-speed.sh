#!/usr/bin/env bash
# Reading speed: `tp report` against `trace-cmd report` on the same trace.dat, output to
# /dev/null, side by side in one run. Prints events, seconds and events/s for each, and the
# ratio. Usage: bench/report-speed.sh [FILE]   (as root; without FILE it records one:
# sched, irq, timer, syscalls, kmem events in a private instance, extracted by trace-cmd).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v trace-cmd >/dev/null || { echo "needs trace-cmd (apt-get install trace-cmd)" >&2; exit 2; }
cargo build --release -q -p tp-cli
tp=${CARGO_TARGET_DIR:-target}/release/tp
file=${1:-}
T=/sys/kernel/tracing
if [ -z "$file" ]; then
  file=$(mktemp --suffix=.dat)
  inst=tp-bench-$$
  trap 'rm -f "$file"; [ -d $T/instances/$inst ] && { echo 0 > $T/instances/$inst/events/enable; rmdir $T/instances/$inst; }; true' EXIT
  mkdir $T/instances/$inst
  echo 32768 > $T/instances/$inst/buffer_size_kb
  for e in sched irq timer syscalls kmem; do echo 1 > $T/instances/$inst/events/$e/enable; done
  for _ in $(seq 1 40); do ls -R /usr/share/doc >/dev/null; done
  echo 0 > $T/instances/$inst/tracing_on
  echo 0 > $T/instances/$inst/events/enable
  # trace-cmd extract -B removes the instance when it is done.
  trace-cmd extract -B $inst -o "$file" >/dev/null 2>&1
fi
events=$($tp report -i "$file" --stat | awk '/^total events/ {print $3}')
time_of() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); awk -v a="$s" -v b="$e" 'BEGIN { printf "%.4f", (b - a) / 1e9 }'; }
tc=$(time_of trace-cmd report -i "$file")
tps=$(time_of "$tp" report -i "$file")
rate() { awk -v n="$1" -v t="$2" 'BEGIN { printf "%.0f", n / t }'; }
printf 'file %s: %s events, %s bytes\n' "$file" "$events" "$(stat -c %s "$file")"
printf 'trace-cmd report: %s s  %s events/s\n' "$tc" "$(rate "$events" "$tc")"
printf 'tp report:        %s s  %s events/s\n' "$tps" "$(rate "$events" "$tps")"
printf 'ratio (tp / trace-cmd events/s): %s\n' "$(awk -v a="$tc" -v b="$tps" 'BEGIN { printf "%.1fx", a / b }')"
