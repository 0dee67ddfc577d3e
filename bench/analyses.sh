#!/usr/bin/env bash
# Speed and peak memory of `tp syscalls`, `tp sched`, `tp faults` and `tp convert --to
# perfetto` against `tp report` on the same trace.dat (all output to /dev/null), in one run.
#
#   bench/analyses.sh [ROUNDS] [CALLS]     (root; run from the repository root)
#
# Records two files with `tp record -e raw_syscalls -e sched -e exceptions` around a loop of
# getppid() calls (CALLS, default 1,000,000, then 4 x CALLS; two events per call), so that
# peak memory can be compared between a file and one four times its size. Each command runs
# ROUNDS times (default 3), interleaved; prints the median wall time with its range, events
# per second and the largest peak RSS of the rounds (/usr/bin/time).
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
ROUNDS=${1:-3}
CALLS=${2:-1000000}
here=$(cd "$(dirname "$0")/.." && pwd)
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
cargo build --release -q -p tp-cli --manifest-path "$here/Cargo.toml"
tp=${CARGO_TARGET_DIR:-$here/target}/release/tp
work=$(mktemp -d /tmp/tp-bench-analyses.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/load.c" <<'EOF'
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  for (long i = 0; i < n; i++) syscall(SYS_getppid);
  return 0;
}
EOF
gcc -O2 -o "$work/load" "$work/load.c"


for size in 1 4; do
  file="$work/trace-$size.dat"
  "$tp" record -q -e raw_syscalls -e sched -e exceptions -o "$file" -- \
    sh -c "'$work/load' $((CALLS * size)); ls -R /usr/share/doc >/dev/null" >/dev/null
  events=$("$tp" report -i "$file" --stat | awk '/^total events/ {print $3}')
  printf '\nfile %s: %s events, %s bytes\n' "$(basename "$file")" "$events" "$(stat -c %s "$file")"
  printf '%-10s %22s %14s %12s\n' command "wall s median (range)" events/s "max RSS KiB"
  names=(report syscalls sched faults convert)
  declare -A walls=() rss=()
  for _ in $(seq 1 "$ROUNDS"); do
    for name in "${names[@]}"; do
      case $name in
        report) cmd=("$tp" report -i "$file") ;;
        convert) cmd=("$tp" convert -i "$file" --to perfetto -o "$work/out.perfetto") ;;
        *) cmd=("$tp" "$name" -i "$file") ;;
      esac
      out=$(/usr/bin/time -f '%e %M' "${cmd[@]}" 2>&1 >/dev/null | tail -1)
      walls[$name]+="${out%% *} "
      r=${out##* }
      if [ -z "${rss[$name]:-}" ] || [ "$r" -gt "${rss[$name]}" ]; then rss[$name]=$r; fi
    done
  done
  for name in "${names[@]}"; do
    med=$(tr ' ' '\n' <<<"${walls[$name]}" | grep . | median_range %.2f)
    m=${med%% *}
    printf '%-10s %22s %14s %12s\n' "$name" "$med" \
      "$(awk -v n="$events" -v t="$m" 'BEGIN { printf "%.0f", (t > 0 ? n / t : 0) }')" "${rss[$name]}"
  done
  unset walls rss
done
