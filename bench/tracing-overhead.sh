#!/usr/bin/env bash
# Cost of Rust `tracing` through the tp layer (crate tp-tracing) against the subscribers
# people use, all in one run:
#
#   bench/tracing-overhead.sh [N] [ROUNDS]      (default 1000000 events, 5 rounds)
#
# tp:    crates/tp-tracing/examples/overhead.rs: `info!(a, b, c, "ev")` (three integers) with
#        no subscriber (none), with the layer installed and nothing recorded (disabled), and
#        recorded (event); a span enter + exit recorded (span); N events at 1 million per
#        second (sustained). It prints wall, thread-CPU and process-CPU ns per op (process
#        CPU adds the recorder's background thread: compression, the file) and events/lost.
#        The `event` run of N events is also the burst: its `lost` must be 0.
# peers: ../shared/peers/tracing (tracing-chrome 0.7, fmt + tracing-appender non_blocking),
#        built once here; each prints wall ns/event over the same loop. Their process CPU
#        (perf stat task-clock over N, start-up included) is printed beside tp's.
# Each configuration runs ROUNDS times, interleaved; medians are reported, with the ratios
# tracing-chrome / tp and fmt / tp, and the load average before and after.
set -euo pipefail
N=${1:-1000000}
ROUNDS=${2:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
peer_src="$root/../shared/peers/tracing"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
cargo build -q --release --example overhead -p tp-tracing --manifest-path "$root/Cargo.toml"
ex="$CARGO_TARGET_DIR/release/examples/overhead"
work=$(mktemp -d /tmp/tp-tracingbench.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
have_peer=0
if [ -d "$peer_src" ]; then
    cp -r "$peer_src/Cargo.toml" "$peer_src/src" "$work/"
    if (cd "$work" && CARGO_TARGET_DIR="$work/target" cargo build --release -q); then
        have_peer=1
    fi
fi
[ "$have_peer" = 1 ] || echo "peer ($peer_src) not built: tp's figures only"
peer="$work/target/release/tbench"

# task-clock ms of a command (perf stat), to ns per op.
cpu_per_op() {
    local ms
    ms=$(perf stat -x, -e task-clock -- "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}')
    awk -v ms="$ms" -v n="$N" 'BEGIN {printf "%.2f", ms * 1e6 / n}'
}

declare -A vals
add() { vals[$1]="${vals[$1]:-} $2"; }
for r in $(seq "$ROUNDS"); do
    for m in none disabled event span sustained; do
        line=$("$ex" "$m" "$N" "$work/t.dat")
        set -- $line
        add "$m.wall" "$2"; add "$m.thread" "$5"; add "$m.process" "$8"; add "$m.lost" "${13}"
    done
    if [ "$have_peer" = 1 ]; then
        w=$(cd "$work" && "$peer" chrome "$N" | awk '{print $2}'); add chrome.wall "$w"
        add chrome.process "$(cd "$work" && cpu_per_op "$peer" chrome "$N")"
        w=$(cd "$work" && "$peer" fmt "$N" | awk '{print $2}'); add fmt.wall "$w"
        add fmt.process "$(cd "$work" && cpu_per_op "$peer" fmt "$N")"
        add fmt.kept "$(wc -l < "$work/fmt.log")"
        rm -f "$work/chrome.json" "$work/fmt.log"
    fi
    echo "round $r done (load $(cut -d' ' -f1 /proc/loadavg))"
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
max() { tr ' ' '\n' | grep -v '^$' | sort -g | tail -1; }
m() { echo "${vals[$1]:-}" | median; }
printf '\nmedians of %s rounds, N=%s (ns per op)\n' "$ROUNDS" "$N"
printf '%-34s %10s %12s %12s\n' "configuration" "wall" "thread-cpu" "process-cpu"
for k in none disabled event span sustained; do
    printf '%-34s %10s %12s %12s\n' "tp-tracing $k" "$(m $k.wall)" "$(m $k.thread)" "$(m $k.process)"
done
echo "disabled - none (thread cpu): $(awk -v a="$(m disabled.thread)" -v b="$(m none.thread)" 'BEGIN {printf "%+.2f ns", a - b}')"
echo "lost, most of any round: event (a burst of $N) $(echo "${vals[event.lost]}" | max), sustained 1M/s $(echo "${vals[sustained.lost]}" | max)"
if [ "$have_peer" = 1 ]; then
    printf '%-34s %10s %12s %12s\n' "tracing-chrome" "$(m chrome.wall)" "-" "$(m chrome.process)"
    printf '%-34s %10s %12s %12s\n' "fmt + non_blocking" "$(m fmt.wall)" "-" "$(m fmt.process)"
    echo "fmt lines kept (median): $(m fmt.kept) of $N"
    awk -v c="$(m chrome.wall)" -v f="$(m fmt.wall)" -v t="$(m event.wall)" \
        -v cp="$(m chrome.process)" -v fp="$(m fmt.process)" -v tp="$(m event.process)" \
        'BEGIN {printf "tracing-chrome / tp: %.1fx wall, %.1fx process cpu; fmt / tp: %.1fx wall, %.1fx process cpu\n", c / t, cp / tp, f / t, fp / tp}'
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
