//! The shadow holds the model's fair class to the kernel's decisions; first
//! it must hold the model to itself: from a simulated run's own schedule,
//! it makes the simulator's picks.

use schedlab_real::shadow;
use schedlab_scenarios::{catalog, Params};
use schedlab_sim::sched::fair::FairConfig;
use schedlab_sim::Sim;

/// hackbench (2 groups of 20, 20 loops) on a 16-CPU machine: the picks the
/// shadow rebuilds from the event log are the simulator's, but for a few
/// near-ties the log's times cannot order (the simulator charges a switch's
/// cost between the events the shadow sees).
#[test]
fn the_shadow_makes_the_simulator_s_own_picks() {
    for seed in 1..=3 {
        let p =
            Params::parse(&["groups=2".to_string(), "loops=100".to_string()]).expect("parameters");
        let mut s = catalog::build("hackbench", Some("amd-2x8"), p).expect("hackbench");
        s.spec.keep_events = true;
        let c = &mut s.spec.cost;
        (
            c.context_switch_ns,
            c.ipi_ns,
            c.pass_ns,
            c.block_ns,
            c.syscall_ns,
        ) = (0, 0, 0, 0, 0);
        c.wake_from_idle_ns = [0; 3];
        c.jitter = 0.0;
        let o = Sim::new(&s.spec, seed).run();
        let evs = shadow::events_of_sim(&o.event_log);
        let a = shadow::compare(&evs, &|_| true, FairConfig::for_cpus(16));
        assert!(
            a.picks > 500 && a.pick_share() >= 0.90,
            "seed {seed}: expected at least 90% of over 500 picks to be the simulator's, got {a:?} ({:.3})",
            a.pick_share()
        );
        eprintln!("seed {seed}: {:.3} of {} picks", a.pick_share(), a.picks);
    }
}
