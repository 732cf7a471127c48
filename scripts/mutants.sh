#!/usr/bin/env bash
# Mutation controls: each file in scripts/mutants/ is a patch that breaks
# one rule of the scheduler. This script applies each alone, runs the
# scheduler's host tests, the simulator's tests and the CLI's (the suite's
# claims among them), expects some to go red, reverses the patch, and
# prints mutation -> the tests that went red. No mutant code lives in
# crates/: a patch is applied, run and reversed, and the tree is restored
# even when the script is interrupted. Exits 1 if any mutation leaves every
# test green or does not apply.
#
#   scripts/mutants.sh            # all mutations (about an hour on 2 cores)
#   scripts/mutants.sh no-rule    # one
set -uo pipefail
cd "$(dirname "$0")/.."

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
  [wake-wide-never]="linux: wake_wide() is always false"
  [no-wa-idle]="linux: wake_affine() skips WA_IDLE"
  [sis-no-depth]="linux: select_idle_cpu() ignores SIS_UTIL's scan depth"
  [fork-stays-local]="linux: sched_balance_find_dst_group() never leaves the local group"
  [cond-wake-anonymous]="rt-app: a condition variable's signal names no waker"
  [phase-cpus-ignored]="rt-app: a phase's cpus do not move its thread"
  [switch-unaccounted]="accounting: a switch is charged to the CPU, not to its task"
  [shared-never-invalidated]="warmth: a process's shared data stays warm in every LLC its threads wrote it from"
  [llc-never-evicts]="warmth: an LLC holds any amount of hot data"
  [holders-unmarked]="warmth: no LLC is recorded as holding an owner (its entries are found only by a scan)"
  [flags-not-counted]="waker-streak:K:flags: a consumed flag does not reach the streak"
  [no-task-hot]="linux balancer: task_hot() never holds a task back"
  [fork-joins-parent]="processes: a forked child joins its parent's process, as a spawned thread does"
  [on-waker-drops-rules]="OnWaker forwards neither the spawn rule nor the balancer of the policy it wraps"
  [import-circle]="structure: a room imports the CPU that imports it"
  [import-circle-crate]="structure: a module of schedlab-validate imports the module that imports it"
  [long-function]="size: a function of 85 lines, unlisted"
  [long-listed-function]="size: a listed function past 120 lines"
  [long-file]="size: a file past 700 lines"
  [shadow-place-never-idle]="shadow placement: every CPU shown busy to the model's select_task_rq_fair()"
  [shadow-balance-never-hot]="shadow balance: can_migrate_task() is never told a task is cache-hot"
  [ni-random-never-skips]="linux balancer: NI_RANDOM's die never skips a domain"
  [behaviour-outside-cpu]="structure: a module outside cpu/ implements CpuSched"
  [balance-read-early]="scenarios: a named balance = \"on\" is read without the policy the run ends with"
  [cas-wake-never]="linux-cas-wake: select_cache_cpu() always keeps prev (no steering at wake)"
  [lb-not-brought]="waker-streak+lb: the policy does not bring Linux's balancer"
  [pick-pair-shortcut]="pick_eevdf: the running task beside one queued is picked again without the weighted mean"
  [cas-no-overload-guard]="linux-cas: no thread-count or utilization guard (always toward the preferred LLC, never out of it)"
  [shadow-lag-ignored]="shadow: a woken entity is placed at V, its lag ignored"
  [delay-dequeue-never]="fair: DELAY_DEQUEUE never delays a blocking task (it always leaves the queue)"
  [delay-zero-off]="fair: DELAY_ZERO never clips a delayed task's positive lag"
  [next-buddy-sync-ignored]="fair: NEXT_BUDDY's sync branch (preempt_sync()) never taken"
  [balancer-moves-delayed]="balancer: the delayed tasks among the candidates a balancer may move"
  [sweep-never-stale]="real runs: no pid counts as gone, so a killed run's tracefs instance and mount stay"
  [real-lost-unnamed]="real runs: a stall report never names the signal or futex wake that was lost"
  [record-uncut]="real runs: the kernel's record keeps the exits after the run's end, whose wakes of finished threads name a waker outside the run"
  [fit-endpoints-only]="calibrate: a fit looks only at its range's two ends, so a response that falls again is out of reach"
  [import-compact-no-waker]="import: a compact-sched waking's waker is not inferred from its CPU's running task, so every compact wake reads as an interrupt's"
  [import-pid-reuse-merged]="import: a pid given again after its thread exited stays the old thread, two threads read as one"
  [import-v7-chunks-raw]="import: a trace.dat v7 buffer compressed in chunks is read as if it were not"
)
if [ $# -gt 0 ]; then
  muts=("$@")
else
  muts=()
  for p in scripts/mutants/*.patch; do muts+=("$(basename "$p" .patch)"); done
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/mutants}
applied=""
restore() { [ -z "$applied" ] || git apply -R "$applied"; applied=""; }
trap restore EXIT
trap 'exit 130' INT TERM
status=0
printf '%-18s | %s\n' "mutation" "tests that went red"
printf '%-18s-+-%s\n' "------------------" "-------------------"
for m in "${muts[@]}"; do
  patch="scripts/mutants/$m.patch"
  if ! git apply "$patch" 2>/dev/null; then
    printf '%-18s | %s\n' "$m" "(does not apply: $patch)"
    status=1
    continue
  fi
  applied=$patch
  log=$(mktemp)
  # Release: the mask mutant trips debug asserts at once; we want the tests'
  # own assertions to be what goes red.
  cargo test -p schedlab-sched -p schedlab-sim -p schedlab-scenarios -p schedlab --release --no-fail-fast >"$log" 2>&1
  # The real executor's tests that need no root: its unit tests, the
  # shadow's and import's (the kernel's own tests run as root in CI, not
  # here).
  cargo test -p schedlab-real --release --no-fail-fast --lib --test all -- shadow:: import:: >>"$log" 2>&1
  restore
  red=$(grep -E '^test .* FAILED$' "$log" | sed -E 's/^test (.*) \.\.\. FAILED$/\1/' | sort -u | tr '\n' ' ')
  if grep -qE '^error: could not compile' "$log"; then
    red="(did not build: $(grep -m1 -E '^error' "$log"))"
    status=1
  elif [ -z "$red" ]; then
    red="NONE: every test stayed green (${what[$m]:-$m})"
    status=1
  fi
  printf '%-18s | %s\n' "$m" "$red"
  rm -f "$log"
done
exit $status
