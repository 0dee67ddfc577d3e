#!/usr/bin/env bash
# Events lost at a sustained rate: tp's in-process recorder against LTTng-UST.
#
#   bench/recorder-sustained.sh [SECONDS] [RATES...]     (root; default 2 s, rates below)
#
# tp:    crates/tp/examples/sustained.rs RATE SECONDS (one thread, the recorder at its
#        defaults: a buffer of up to 256 MiB faulted in as pages wait, pages compressed with
#        zstd as they are taken); also prints the file's size and the most memory the
#        thread's buffer had faulted in.
# peer:  bench/peers/lttng-sustained.c, the peer's bench:ev3 tracepoint fired at the same
#        paced rate into a real LTTng session (one channel of 8 x 4 MiB sub-buffers, discard
#        mode, as ../shared/peers/lttng-ust/run.sh sets up); its loss is the session's
#        "Discarded events". A rate above what a program can fire shows as a lower reached
#        rate. Needs Debian lttng-tools liblttng-ust-dev.
set -euo pipefail
SECS=${1:-2}
shift || true
RATES=${*:-1e6 5e6 10e6 20e6 30e6 40e6}
root=$(cd "$(dirname "$0")/.." && pwd)
peer="$root/../shared/peers/lttng-ust"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
cargo build -q --release --example sustained -p tp --manifest-path "$root/Cargo.toml"
ex="$CARGO_TARGET_DIR/release/examples/sustained"
work=$(mktemp -d /tmp/tp-sustained.XXXXXX)
sess=tpsust-$$
trap 'lttng destroy "$sess" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

have_peer=1
if command -v lttng-sessiond >/dev/null && [ -f "$peer/tp.h" ]; then
  gcc -O2 -I"$peer" -c "$peer/tp.c" -o "$work/tp.o"
  gcc -O2 -I"$peer" "$root/bench/peers/lttng-sustained.c" "$work/tp.o" -o "$work/lt" -llttng-ust -ldl
  pgrep -x lttng-sessiond >/dev/null || lttng-sessiond --daemonize --no-kernel >/dev/null 2>&1
else
  have_peer=0
fi

echo "sustained rate, one thread, $SECS s per rate: events lost"
printf '%-12s %-64s %s\n' "rate/s" "tp" "lttng-ust"
for r in $RATES; do
  sync
  t=$("$ex" "$r" "$SECS" | sed -n 's/^tp sustained \([0-9]*\) events\/s.*lost \([0-9]*\) (\([0-9.]*%\)), file \([0-9]*\) MB, buffers at most \([0-9]*\) MiB.*/reached \1\/s, lost \2 (\3), \4 MB, buffer \5 MiB/p')
  l="n/a (install lttng-tools liblttng-ust-dev)"
  if [ $have_peer = 1 ]; then
    sync
    lttng create "$sess" --output="$work/trace" >/dev/null
    lttng enable-channel -u ch --subbuf-size=4M --num-subbuf=8 -s "$sess" >/dev/null
    lttng enable-event -u -c ch 'bench:ev3' -s "$sess" >/dev/null
    lttng start "$sess" >/dev/null
    reached=$("$work/lt" "$r" "$SECS" | sed -n 's/.*sustained \([0-9]*\) events.*/\1/p')
    lttng stop "$sess" >/dev/null
    lost=$(lttng list "$sess" | awk '/Discarded events:/ { s += $3 } END { print s + 0 }')
    lttng destroy "$sess" >/dev/null
    rm -rf "$work/trace"
    l="reached $reached/s, lost $lost"
  fi
  printf '%-12s %-64s %s\n' "$r" "$t" "$l"
done
echo "machine: $(nproc) cores; $(uptime | sed 's/.*load average/load average/')"
