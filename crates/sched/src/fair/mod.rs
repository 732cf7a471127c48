//! The fair band: EEVDF as Linux's kernel/sched/fair.c defines it (6.17+).
//!
//! Per entity `i`: weight `w_i` from nice (`sched_prio_to_weight`,
//! [`NICE_0_WEIGHT`] = 1024 at nice 0), virtual runtime `v_i`, a requested
//! `slice_i`, a virtual deadline `d_i`, a lag `vlag_i` and a protection
//! horizon `vprot_i`.
//!
//! * `calc_delta_fair(t, w) = t * 1024 / w`; running `t` ns adds
//!   `calc_delta_fair(t, w_i)` to `v_i` (`update_curr()`).
//! * `V = Σ w_i v_i / Σ w_i` over the queue and the running entity
//!   (`avg_vruntime()`); kept relative to a base so the sums fit in `i128`.
//!   An empty queue keeps the last `V` (`zero_vruntime`).
//! * Eligible: `v_i <= V`, tested as `(v_i - base) Σw <= Σ w_j (v_j - base)`
//!   without division (`entity_eligible()` / `vruntime_eligible()`).
//! * Pick (`pick_eevdf()`): the running entity while it is protected
//!   (`RUN_TO_PARITY`); else the eligible entity with the earliest `d_i`,
//!   the running one included if it is eligible.
//! * `d_i = v_i + calc_delta_fair(slice_i, w_i)`, renewed when `v_i`
//!   reaches it (`update_deadline()`, which asks for a reschedule).
//! * Lag on dequeue: `vlag_i = clamp(V - v_i, ±calc_delta_fair(max(2 slice_i,
//!   tick), w_i))` (`update_entity_lag()`).
//! * Place on enqueue (`place_entity()`): with `W` the queue's weight before
//!   the entity joins, `lag = vlag_i (W + w_i) / W` (`PLACE_LAG`; none on
//!   an empty queue, `cfs_rq->nr_queued == 0`), `v_i = V - lag`, `d_i = v_i
//!   + vslice`, halved for a new task (`PLACE_DEADLINE_INITIAL`), or the
//!   relative deadline it left with when it moved while runnable
//!   (`PLACE_REL_DEADLINE`).
//! * Protection (`set_protect_slice()`): `s = min(min slice of the queue,
//!   slice_i)`; `vprot_i = d_i` when `s == slice_i`, else `min(d_i, v_i +
//!   calc_delta_fair(s, w_i))`. `protect_slice()` is `vprot_i > v_i`.
//! * `update_curr()` asks for a reschedule when the deadline was renewed or
//!   protection has ended, unless the entity is alone (commit 0b9ca2dcabc3,
//!   "sched/fair: Always trigger resched at the end of a protected period").
//! * Re-pick: Linux arms protection only on a fresh pick
//!   (`put_prev_set_next_task()` returns early when the pick is the running
//!   task; otherwise `set_next_task(.., first = true)`, a core-scheduling
//!   sibling's selection included), so a re-picked entity keeps an expired
//!   `vprot` and every later `update_curr()` asks again (the seed-004
//!   storm, see `coresched`). [`FairConfig::protect_on_repick`] renews it
//!   (the seed-004 fix) and is on by default.
//!
//! The switches are Linux's `sched_features` by name ([`features`]); the
//! queue that applies them, delayed dequeue and buddies included, is
//! [`queue::FairQueue`], which the scheduler's run queue and the record's
//! shadow both hold. Not modelled: cgroups (one level of queue per CPU),
//! bandwidth control, `SCHED_IDLE` and `SCHED_BATCH`, reweighting a
//! queued entity. The queue is a vector scanned per pick; at the queue
//! lengths a CPU sees here (a few entities) that beats Linux's augmented
//! rbtree.

mod eevdf;
pub mod features;
pub mod queue;

pub use eevdf::*;
pub use features::{Feature, FeatureSet, Features, Kernel, ALL as ALL_FEATURES};
pub use queue::{Choice, FairQueue, Queued, WakeFlags};
