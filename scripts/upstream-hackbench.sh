#!/usr/bin/env bash
# Upstream's hackbench baselines on upstream's machine shapes: one group of
# hackbench in thread mode over pipes (`hackbench -p -T -g 1 -f N`), fds
# 2..6, under `linux` (the baseline), `linux-cas` (cache-aware
# scheduling as 7.2 has it) and `linux-cas:50:20:100` (the same with
# llc_aggr_tolerance 100: no thread-count limit, as in the RFC v3 series
# the Milan reply measured), on milan-4n-128 (the RFC v3 thread's Milan),
# genoa-4n-128 (the v1 cover's Genoa) and spr-2s. Prints one markdown row
# per machine and fd count: each policy's median time and LLCs at the end
# over the seeds, and the ratios to linux (below 1: cache-aware faster).
#
#   cargo build --release -p schedlab
#   scripts/upstream-hackbench.sh              # loops=100000, seeds 1..3 (about a minute on 2 cores)
#   LOOPS=300000 SEEDS=5 scripts/upstream-hackbench.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${SCHEDLAB:-target/release/schedlab}
if [[ ! -x $bin ]]; then
  echo "upstream-hackbench: no $bin; build it with: cargo build --release -p schedlab" >&2
  exit 1
fi
loops=${LOOPS:-100000}
seeds=${SEEDS:-3}
machines=${MACHINES:-milan-4n-128 genoa-4n-128 spr-2s}

echo "| machine | fds | linux ms (LLCs at end) | linux-cas ms (LLCs) | ratio | tolerance 100 ms (LLCs) | ratio |"
echo "|---|---|---|---|---|---|---|"
for m in $machines; do
  for f in 2 3 4 5 6; do
    # The --policies table: a header, then one row per policy: policy,
    # total_ms, end_llcs, wakes, sim_ms (medians over the seeds).
    rows=$("$bin" run hackbench.thread.g1.f4 --topology "$m" \
      --policies linux,linux-cas,linux-cas:50:20:100 \
      --param fds="$f" --param loops="$loops" --seeds "$seeds" | tail -n 3)
    awk -v m="$m" -v f="$f" '
      $1 == "linux" { lm = $2; ll = $3 }
      $1 == "linux-cas" { cm = $2; cl = $3 }
      $1 == "linux-cas:50:20:100" { tm = $2; tl = $3 }
      END {
        printf "| %s | %s | %.1f (%s) | %.1f (%s) | %.3f | %.1f (%s) | %.3f |\n",
          m, f, lm, ll, cm, cl, cm / lm, tm, tl, tm / lm
      }
    ' <<<"$rows"
  done
done
