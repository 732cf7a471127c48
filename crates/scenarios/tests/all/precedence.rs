//! Who decides a run's policy, spawn rule and balancer (`Builder::decide`,
//! the one place): a `--param` first, then what the user named in the
//! file, then what the policy brings, then the scenario's own. A named
//! `balance = "on"` is read against the policy the run ends with.

use std::path::Path;

use schedlab_scenarios::{catalog, file, Params};
use schedlab_sim::sched::{BalanceKind, SpawnPolicy};

/// What a run ended with: spawn rule, balancer (`None`: off), policy.
type Decided = (SpawnPolicy, Option<BalanceKind>, &'static str);

/// A one-task file with a `[policy]` table of `policy` lines.
fn load(policy: &str, params: &[&str]) -> (SpawnPolicy, Option<BalanceKind>, String) {
    let text = format!(
        "[policy]\n{policy}\n\n[[task]]\nname = \"t\"\ncpu = 0\nprogram = [{{ run = 1000 }}]\n"
    );
    let p =
        Params::parse(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("params");
    let s = file::load_str(&text, Path::new("p.toml"), p)
        .unwrap_or_else(|e| panic!("{policy:?} {params:?}: {e}"));
    let b = s.spec.config.balance;
    let kind = b.is_on().then_some(b.kind);
    (s.spec.config.spawn, kind, s.spec.policy.name().to_string())
}

#[test]
fn a_param_beats_what_the_file_names_which_beats_the_policys_own_which_beats_the_scenarios() {
    use BalanceKind::{Linux, LinuxCas, Seed};
    use SpawnPolicy::{Linux as LinuxFork, Near, Rotate};
    let cas = LinuxCas(Default::default());
    let cases: &[(&str, &[&str], Decided)] = &[
        // The scenario's own: near spawns, the seed's balancer.
        ("placement = \"home\"", &[], (Near, Some(Seed), "home")),
        // The policy brings its fork path and balancer.
        (
            "placement = \"linux\"",
            &[],
            (LinuxFork, Some(Linux), "linux"),
        ),
        // What the file names beats the policy's own.
        (
            "placement = \"linux\"\nspawn = \"rotate\"\nbalance = \"seed\"",
            &[],
            (Rotate, Some(Seed), "linux"),
        ),
        (
            "placement = \"linux\"\nbalance = false",
            &[],
            (LinuxFork, None, "linux"),
        ),
        // A param beats the file.
        (
            "placement = \"linux\"\nspawn = \"rotate\"\nbalance = \"seed\"",
            &["spawn=near", "balance=linux-cas"],
            (Near, Some(cas), "linux"),
        ),
        // A param's policy brings its own where the file named none.
        (
            "placement = \"home\"",
            &["policy=linux"],
            (LinuxFork, Some(Linux), "linux"),
        ),
        // `balance = "on"` is read against the policy decided last.
        (
            "placement = \"home\"\nbalance = \"on\"",
            &["policy=linux-cas"],
            (LinuxFork, Some(cas), "linux-cas"),
        ),
        // A named `off` holds whatever policy the run ends with.
        (
            "placement = \"linux\"\nbalance = \"off\"",
            &["policy=linux-cas"],
            (LinuxFork, None, "linux-cas"),
        ),
    ];
    for (policy, params, (spawn, balance, name)) in cases {
        let got = load(policy, params);
        assert_eq!(
            got,
            (*spawn, *balance, name.to_string()),
            "[policy] {policy:?} with {params:?}: expected (spawn, balancer, policy) = {:?}, got {got:?}",
            (spawn, balance, name)
        );
    }
}

#[test]
fn a_built_in_row_keeps_its_spawn_rule_only_under_a_policy_that_brings_none() {
    let row = |policy: &str| {
        let p = Params::parse(&[format!("policy={policy}")]).expect("params");
        let s = catalog::build("ipc.reqrep.8", None, p).expect("the row");
        (s.spec.config.spawn, s.spec.config.balance.kind)
    };
    assert_eq!(
        row("waker-streak"),
        (SpawnPolicy::Rotate, BalanceKind::Seed)
    );
    assert_eq!(row("linux"), (SpawnPolicy::Linux, BalanceKind::Linux));
}
