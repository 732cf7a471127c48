#!/usr/bin/env bash
# Mutation controls for the scheduler's rule and delivery code (DESIGN.md
# section 12). Each mutation is a cargo feature of schedlab-sched that breaks
# one rule (see crates/sched/Cargo.toml); this script turns each on alone,
# runs the scheduler's host tests, the simulator's tests and the CLI's (the
# suite's claims among them), expects some to go red, and prints
# mutation -> the tests that went red. Nothing in the tree is edited, so
# there is nothing to restore. Exits 1 if any mutation leaves every test
# green.
#
#   scripts/mutants.sh            # all mutations (a few minutes on 2 cores)
#   scripts/mutants.sh no-rule    # one
set -uo pipefail
cd "$(dirname "$0")/.."

all=(rung-accepted no-core-check no-rule mask-ignored leaving-ignored flags-counted resched-always-ipi no-repick-renewal pick-left-always no-forceidle-turn no-cookie-steal)
muts=("${@:-${all[@]}}")
[ $# -gt 0 ] || muts=("${all[@]}")
declare -A what=(
  [rung-accepted]="the old predicate: a rung CPU is accepted (asleep, not sleeping_unrung)"
  [no-core-check]="no core check: the waker's SMT sibling may be chosen"
  [no-rule]="no rule: waker-streak places like home"
  [mask-ignored]="the move ignores the task's mask"
  [leaving-ignored]="waker() ignores the leaving bit"
  [flags-counted]="flagged wakes are counted in the streak"
  [resched-always-ipi]="a remote reschedule sends an IPI even when the flag is set"
  [no-repick-renewal]="protect_on_repick renews nothing"
  [pick-left-always]="a core-wide selection leaves a sibling a pick even when it is its running task"
  [no-forceidle-turn]="no task_tick_core(): a task beside a forced-idle sibling never gives way"
  [no-cookie-steal]="a forced-idle CPU pulls no task of the core's cookie"
)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/mutants}
status=0
printf '%-18s | %s\n' "mutation" "tests that went red"
printf '%-18s-+-%s\n' "------------------" "-------------------"
for m in "${muts[@]}"; do
  log=$(mktemp)
  # Release: the mask mutant trips debug asserts at once; we want the tests'
  # own assertions to be what goes red.
  cargo test -p schedlab-sched -p schedlab-scenarios -p schedlab --release --features "schedlab-sched/mutant-$m" --no-fail-fast >"$log" 2>&1
  red=$(grep -E '^test .* FAILED$' "$log" | sed -E 's/^test (.*) \.\.\. FAILED$/\1/' | sort -u | tr '\n' ' ')
  if grep -qE '^error: could not compile' "$log"; then
    red="(did not build: $(grep -m1 -E '^error' "$log"))"
    status=1
  elif [ -z "$red" ]; then
    red="NONE: every test stayed green (${what[$m]})"
    status=1
  fi
  printf '%-18s | %s\n' "$m" "$red"
  rm -f "$log"
done
exit $status
