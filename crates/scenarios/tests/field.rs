//! The field workloads built in (`hackbench`), held to what the tools do.

use schedlab_scenarios::{catalog, Params};
use schedlab_sim::Sim;

fn params(kv: &[&str]) -> Params {
    Params::parse(&kv.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("k=v")
}

/// Every child of every group runs to its end (each receiver reads all
/// `fds * loops` messages: it could not exit otherwise), the clock starts
/// only after every child is ready, and the figure is that one lap.
#[test]
fn hackbench_runs_every_group_to_the_end() {
    let s = catalog::build("hackbench", None, params(&["groups=2", "fds=3", "loops=4"])).unwrap();
    for seed in 1..=3 {
        let o = Sim::new(&s.spec, seed).run();
        let children: Vec<_> = o
            .tasks
            .iter()
            .filter(|(n, _)| n.starts_with("main."))
            .collect();
        assert_eq!(
            children.len(),
            2 * 3 * 2,
            "seed {seed}: 2 groups of 3 senders and 3 receivers"
        );
        assert!(
            children.iter().all(|(_, t)| t.exited_at.is_some()),
            "seed {seed}: every child exits"
        );
        let laps = &o.laps["total"];
        assert_eq!(laps.len(), 1, "seed {seed}: one Time");
        let first_exit = children
            .iter()
            .filter_map(|(_, t)| t.exited_at)
            .min()
            .unwrap();
        let end = o.tasks["main"].exited_at.expect("main exits");
        assert!(
            laps[0] > 0 && laps[0] <= end && end - laps[0] <= first_exit,
            "seed {seed}: the clock starts before the first child finishes and stops at the last reap: lap {} ns, first exit {first_exit}, main's exit {end}",
            laps[0]
        );
        let fig = s.figures[0].1.compute(&o);
        assert!(
            (fig - laps[0] as f64 / 1e6).abs() < 1e-9,
            "total_ms is the lap in ms"
        );
    }
}

/// More loops take longer (not in proportion: the longer the run, the
/// more messages a receiver finds waiting in its pipe at each wake).
#[test]
fn hackbench_time_grows_with_its_loops() {
    let t = |loops: u64| {
        let l = format!("loops={loops}");
        let s = catalog::build("hackbench", None, params(&["groups=1", "fds=8", &l])).unwrap();
        s.figures[0].1.compute(&Sim::new(&s.spec, 1).run())
    };
    let (a, b, c) = (t(20), t(40), t(60));
    assert!(a < b && b < c, "loops 20/40/60: {a:.3}/{b:.3}/{c:.3} ms");
}

#[test]
fn hackbench_rejects_what_it_cannot_run() {
    for bad in ["groups=0", "mode=fibers", "fds=0"] {
        let e = catalog::build("hackbench", None, params(&[bad])).err();
        assert!(e.is_some(), "{bad} must be an error");
    }
}
