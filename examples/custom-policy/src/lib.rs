//! A placement policy and a load balancer of your own, outside schedlab's
//! crates: the tutorial.
//!
//! `PrevOrWakersLlc` is ten lines of rule: a woken task goes back to the
//! CPU it parked on when that CPU is idle; else to the first idle CPU of
//! its waker's LLC; else back anyway. It decides on the waker's CPU, as
//! Linux's `try_to_wake_up()` does, so a move costs one wake, not two.
//!
//! ## 1. The trait: [`Policy`]
//!
//! The scheduler (`schedlab-sched`) is generic over it; your type runs in
//! the very code the simulator runs, with no dispatch. You write:
//!
//! * `type TaskState`: per-task state of your own type. The scheduler keeps
//!   one in every task, moves it with the task, and hands it to you by
//!   `&mut` only on the CPU that holds the task. It must be small and
//!   `Copy` (the seed's rule keeps one `u16`, `WakerStreak`: the LLC its
//!   last parked wakes came from and how many in a row). This policy needs
//!   none: `()`.
//! * `const DECIDES`: [`Decides::Owner`] (the task's owner decides after its
//!   own wake: two wakes for a move) or [`Decides::Waker`] (the CPU that
//!   posts the wake decides: one).
//! * `wake_posted` (optional): runs on the waker's CPU for every wake, with
//!   the waking thread's own state: where Linux's `record_wakee()` would go.
//! * `wake_parked` (optional): runs on the deciding CPU for a wake that
//!   found the task parked, before `place`: count it in the task's state.
//! * `place`: the decision. It sees a [`Machine`] (topology, config, each
//!   CPU's doorbell and published load, `now`; nothing it could post
//!   through), the [`Wake`] (the task, the CPU it parked on and whether
//!   that CPU is busy, the waker's CPU) and the task. It returns a
//!   `#[must_use]` [`Decision`]: `Stay`, or `Send(cpu, reason)` with a CPU
//!   in the task's mask. Name your reasons with `PlaceReason::Custom`:
//!   traces and `moves.policy` count them.
//! * `place_new` (optional): where a new task starts; `None` leaves it to
//!   the machine's spawn rule (`near` or `rotate`).
//!
//! Helpers the built-ins use are public: `policy::idle_among` (the best
//! sleeping CPU of a set: a free core first, then the shallowest idle
//! state), `policy::ordinary` (the seed's base placement),
//! `policy::toward_its_waker`.
//!
//! ## 2. Register it and get every command
//!
//! `main.rs` is the whole binary: the built-in registry plus `example`.
//!
//! ```sh
//! cargo run --release -p schedlab-example-policy -- policies
//! cargo run --release -p schedlab-example-policy -- suite --head example
//! cargo run --release -p schedlab-example-policy -- suite --base waker-streak --head example --rows 'ipc.*'
//! cargo run --release -p schedlab-example-policy -- run split_pair --policy example --seeds 40
//! cargo run --release -p schedlab-example-policy -- trace split_pair --policy example -o ex.pftrace
//! ```
//!
//! A scenario file names it the same way: `placement = "example"` under
//! `[policy]`. A policy with an argument registers with `Registry::add`,
//! whose constructor gets the text after `name:`.
//!
//! ## 3. A balancer of your own
//!
//! [`balancer`] has the second half: [`LlcSteal`], a load balancer written
//! here against the `Balancer` trait, registered with this policy as
//! `example+steal`.
//!
//! ## 4. Test it like the built-ins
//!
//! `tests/example.rs` drives the policy on the scheduler's test host
//! (feature `testhost` of `schedlab-sched`: no costs, kicks in order, the
//! invariants checked after every step) and through the simulator.

pub mod balancer;

pub use balancer::LlcSteal;
use schedlab::sched::policy::{Decides, Decision, Machine, Policy, Wake};
use schedlab::sched::{PlaceReason, Task};

/// Back to the CPU it parked on when idle, else the first idle CPU of the
/// waker's LLC, decided on the waker's CPU.
#[derive(Clone, Copy, Debug, Default)]
pub struct PrevOrWakersLlc;

/// Why it moved a task, in traces.
pub const TO_WAKERS_LLC: PlaceReason = PlaceReason::Custom("wakers_llc");

impl Policy for PrevOrWakersLlc {
    type TaskState = ();
    const DECIDES: Decides = Decides::Waker;

    fn name(&self) -> &str {
        "example"
    }

    fn place(&mut self, m: &Machine<'_>, wake: &Wake, task: &mut Task<()>) -> Decision {
        let Some(waker) = wake.cause.waker.filter(|_| wake.prev_busy) else {
            return Decision::Stay;
        };
        m.topology()
            .llc_cpus(waker)
            .iter()
            .find(|&c| c != wake.prev && task.mask().contains(c) && m.sleeping_unrung(c))
            .map_or(Decision::Stay, |c| Decision::Send(c, TO_WAKERS_LLC))
    }
}

/// The built-in policies plus this one, as `example`, and with the
/// tutorial's balancer ([`LlcSteal`]) as `example+steal`.
pub fn registry() -> schedlab::Registry {
    let mut r = schedlab::Registry::builtin();
    r.add_policy(
        "example",
        "the tutorial's policy: prev if idle, else the first idle CPU of the waker's LLC (decided on the waker)",
        PrevOrWakersLlc,
    );
    r.add_policy_with_balancer::<_, LlcSteal>(
        "example+steal",
        "the tutorial's policy with the tutorial's balancer: a newly idle CPU steals only inside its LLC",
        PrevOrWakersLlc,
    );
    r
}
