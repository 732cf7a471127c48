//! A load balancer of your own, outside schedlab's crates: the tutorial's
//! second half.
//!
//! `LlcSteal` never moves work between LLCs: a CPU about to idle asks the
//! busiest CPU of its own LLC for a waiting task, and the CPU asked gives
//! the waiting task that ran longest ago, if its mask allows. It has no
//! periodic part. It is a balancer for a machine whose LLCs a placement
//! policy keeps apart; a test compares it with the seed's on the same run.
//!
//! ## The trait: [`Balancer`]
//!
//! The scheduler is generic over it as over a policy: `CpuSched<P, B>`.
//! Every CPU holds its own value (`for_machine` makes one per CPU; a
//! balancer whose CPUs share state keeps it behind an `Arc` of its own, as
//! Linux's does). Its hooks see a [`Cx`]: the CPU, the machine's published
//! loads and doorbells, the CPU's queue read-only, and the counters. They
//! never move a task themselves: they return [`Requests`], which the core
//! carries out in order:
//!
//! * `Request::Send { task, to, reason }`: a task queued here goes to `to`;
//! * `Request::Post { to, msg }`: a message of the balancer's own type
//!   (`type Msg`) to another CPU, which gets it in [`Balancer::handle`];
//! * `Request::Ask { victim }`: ask `victim` for work; its
//!   [`Balancer::asked`] answers (this one uses it);
//! * `Request::PushRunning { task, to }`: move the running task at the next
//!   pick (Linux's active balance).
//!
//! ## Register it with a policy
//!
//! A policy brings its balancer as `linux` brings Linux's:
//! `Registry::add_policy_with_balancer::<P, B>(name, about, policy)`. Every
//! command then runs it; a user who names a built-in balancer
//! (`--param balance=seed`, `balance = "linux"` in a file) still wins.
//!
//! ```sh
//! cargo run --release -p schedlab-example-policy -- run many_pairs --policy example+steal
//! cargo run --release -p schedlab-example-policy -- suite --base example --head example+steal
//! ```

use std::convert::Infallible;

use schedlab::sched::balancer::{Balancer, Cx, Request, Requests};
use schedlab::sched::policy::PolicyState;
use schedlab::sched::topology::{CpuId, Topology};
use schedlab::sched::{Config, PlaceReason};

/// Steal within the LLC only, when newly idle.
#[derive(Clone, Copy, Debug, Default)]
pub struct LlcSteal;

impl Balancer for LlcSteal {
    type Msg = Infallible;

    fn for_machine(topo: &Topology, _config: &Config, _max_tasks: usize) -> Vec<LlcSteal> {
        topo.cpu_ids().map(|_| LlcSteal).collect()
    }

    fn name(&self) -> &str {
        "llc-steal"
    }

    fn tick<S: PolicyState>(&mut self, _cx: &mut Cx<'_, S>, _now: u64) -> Requests<Infallible> {
        Requests::none()
    }

    /// Ask the CPU of this LLC with the most tasks, if one has a task
    /// waiting (load 2 or more); the first such in id order.
    fn newly_idle<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        _now: u64,
    ) -> Requests<Infallible> {
        let sh = cx.shared();
        let mut busiest: Option<(u32, CpuId)> = None;
        for c in sh.topology().llc_cpus(cx.cpu()).iter() {
            let load = sh.load(c);
            if c != cx.cpu() && load >= 2 && busiest.is_none_or(|(b, _)| load > b) {
                busiest = Some((load, c));
            }
        }
        let mut req = Requests::none();
        if let Some((_, victim)) = busiest {
            req.push(Request::Ask { victim });
        }
        req
    }

    /// Give the waiting fair task that ran longest ago, if its mask names
    /// the thief (a steal: traces and `moves.steal` count it).
    fn asked<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        thief: CpuId,
        _now: u64,
    ) -> Requests<Infallible> {
        let mut req = Requests::none();
        let oldest = cx
            .queued_fair()
            .filter(|t| t.mask().contains(thief))
            .min_by_key(|t| (t.last_ran(), t.id()));
        if let Some(t) = oldest {
            req.push(Request::Send {
                task: t.id(),
                to: thief,
                reason: PlaceReason::Steal,
            });
        }
        req
    }
}
