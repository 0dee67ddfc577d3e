# Helpers the benchmark scripts share (sourced, not run).

# The last "elapsed_ns N" a load program printed to FILE: its timed loop.
loop_ns() { sed -n 's/.*elapsed_ns \([0-9]*\).*/\1/p' "$1" | tail -1; }

# The median of the numbers on stdin (any whitespace between them; the mean of the middle
# two for an even count), "nan" for none.
median() {
  tr -s ' \t' '\n\n' | grep . | sort -g |
    awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else printf "%.15g\n", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# range [DIV] [FMT]: "LO-HI" of the numbers on stdin, each divided by DIV (default 1) and
# printed with FMT (default %.2f).
range() {
  tr -s ' \t' '\n\n' | grep . | sort -g |
    awk -v d="${1:-1}" -v f="${2:-%.2f}" 'NR == 1 { lo = $1 } { hi = $1 } END { printf f "-" f, lo / d, hi / d }'
}

# median_range [FMT]: "MEDIAN (LO-HI)" of the numbers on stdin, printed with FMT (default %s:
# the numbers as given).
median_range() {
  local f=${1:-%s} v
  v=$(cat)
  printf "$f ($f-$f)" "$(median <<<"$v")" "$(sort -g <<<"$v" | grep . | head -1)" "$(sort -g <<<"$v" | grep . | tail -1)"
}

# stats VALUES...: median_range of the arguments.
stats() { printf '%s\n' "$@" | median_range; }

# timed NAME COMMAND...: run COMMAND (stdout to $work/out, stderr to $work/err) and add its
# load's loop time (loop_ns) to LOOP[NAME] and its wall time to WALL[NAME], in ns (the
# script declares the associative arrays LOOP and WALL).
timed() {
  local name=$1 t0 t1
  shift
  t0=$(date +%s%N)
  "$@" > "$work/out" 2> "$work/err"
  t1=$(date +%s%N)
  LOOP[$name]+="$(loop_ns "$work/out") "
  WALL[$name]+="$(( t1 - t0 )) "
}

# loop_wall_table NAME...: per NAME, the median and range of LOOP and WALL, in ms.
loop_wall_table() {
  printf '%-8s %12s %17s %12s %17s\n' config loop range wall range
  local n
  for n in "$@"; do
    printf '%-8s %12.2f %17s %12.2f %17s\n' "$n" \
      "$(echo "${LOOP[$n]}" | median | awk '{ print $1 / 1e6 }')" "$(echo "${LOOP[$n]}" | range 1e6)" \
      "$(echo "${WALL[$n]}" | median | awk '{ print $1 / 1e6 }')" "$(echo "${WALL[$n]}" | range 1e6)"
  done
}

# build_tp: tp (release) built from the repository at $here, its path in $TP.
build_tp() {
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/target}
  (cd "$here" && cargo build --release -q -p tp-cli)
  TP="$CARGO_TARGET_DIR/release/tp"
}

# build_load SRC OUT: compile the load program SRC (the shared syscall load) to OUT.
build_load() {
  [ -f "$1" ] || { echo "missing $1 (clone shared/ beside the repository)" >&2; exit 1; }
  gcc -O2 -o "$2" "$1"
}

# need_perf: stop with a message when perf is not installed.
need_perf() { perf --version >/dev/null 2>&1 || { echo "perf not installed (Debian linux-perf)" >&2; exit 1; }; }

# stat_of FILE WHAT: the count of WHAT records (SAMPLE, LOST, LOST_SAMPLES) in a perf.data
# file, as `perf report --stats` gives it.
stat_of() {
  perf report --stats -i "$1" 2>/dev/null | awk -v w="$2" '$1 == w && $2 == "events:" { print $3; exit }'
}
