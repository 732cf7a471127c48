#!/usr/bin/env bash
# Where a run's instructions go: the scheduler under test (code from
# crates/sched and crates/topology, counted also where the compiler inlined
# it into the engine) versus the rest (the simulator's loop, cost model,
# warmth, programs, accounting, trace hash and queue; the libraries they
# call; setup). Instruction counts from callgrind are stable from run to
# run, unlike wall times on a shared machine.
#
#   cargo build --release -p schedlab
#   scripts/cost-split.sh run reqrep --param rounds=10000 --seed 1
#   SCHEDLAB=/other/build/schedlab scripts/cost-split.sh run reqrep ...
#
# Needs valgrind. Prints total, scheduler and rest in millions of
# instructions (`run ... --json` gives the run's events, to divide by).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${SCHEDLAB:-target/release/schedlab}
if [[ ! -x $bin ]]; then
  echo "cost-split: no $bin; build it with: cargo build --release -p schedlab" >&2
  exit 2
fi
if [[ $# -eq 0 ]]; then
  echo "usage: scripts/cost-split.sh <schedlab arguments>, e.g. run reqrep --seed 1" >&2
  exit 2
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$dir/cg" "$bin" "$@" >"$dir/out" 2>"$dir/err" || {
  echo "cost-split: the run failed:" >&2
  cat "$dir/err" >&2
  exit 1
}
callgrind_annotate --auto=no --threshold=100 "$dir/cg" 2>/dev/null |
  sed 's/(\s*/(/' |
  awk '
    /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1; next }
    /^ *[0-9,]+ \(.*:/ {
      c = $1; gsub(",", "", c)
      if ($3 ~ /crates\/(sched|topology)\/src\// || $3 ~ /:<?schedlab_(sched|topology)::/) sched += c
    }
    END {
      printf "total %.1fM  scheduler %.1fM (%.1f%%)  rest %.1fM\n",
        total / 1e6, sched / 1e6, 100 * sched / total, (total - sched) / 1e6
    }'
