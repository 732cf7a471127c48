//! Every op of the program language, run through scenario files on the
//! simulator with the invariant checker on: what each must do, measured.

use std::path::Path;

use schedlab_scenarios::{file, Params, Scenario};
use schedlab_sim::{Outcome, Sim};

fn load(text: &str) -> Scenario {
    file::load_str(text, Path::new("inline.toml"), Params::default())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn run(text: &str) -> (Scenario, Outcome) {
    let s = load(text);
    let o = Sim::new(&s.spec, 1).run();
    (s, o)
}

const HEAD: &str = "run_ms = 200\n[topology]\npreset = \"amd-2x8\"\n[policy]\nbalance = false\n";

#[test]
fn disk_completions_wake_by_interrupt_naming_no_waker() {
    let (_, o) = run(&format!(
        "{HEAD}[[task]]\nname = \"reader\"\ncpu = 9\nprogram = [{{ lap = {{ metric = \"io\" }} }}, {{ loop = {{ n = 50, body = [{{ io = 20000 }}, {{ lap = {{ metric = \"io\" }} }}] }} }}]\n"
    ));
    let laps = &o.laps["io"];
    assert_eq!(laps.len(), 50, "every request completes");
    assert!(
        laps.iter().all(|&l| l >= 20_000),
        "no read faster than the disk: {laps:?}"
    );
    assert_eq!(
        o.counters["wakes.counted"], 0,
        "an interrupt's wake names no waker"
    );
    assert!(o.counters["wakes.parked"] >= 50);
}

#[test]
fn a_pipe_moves_every_byte_and_blocks_both_ways() {
    let (_, o) = run(&format!(
        "{HEAD}[[task]]\nname = \"writer\"\ncpu = 2\nprogram = [{{ loop = {{ n = 64, body = [{{ pipe_write = {{ pipe = \"x\", bytes = 16384 }} }}] }} }}]\n\
         [[task]]\nname = \"reader\"\ncpu = 4\nprogram = [{{ loop = {{ n = 64, body = [{{ pipe_read = {{ pipe = \"x\", bytes = 16384 }} }}, {{ count = {{ metric = \"bytes\", n = 16384 }} }}] }} }}]\n"
    ));
    assert_eq!(o.counts["bytes"], 64 * 16384, "the reader got every byte");
    assert!(
        o.counters["wakes.parked"] > 0,
        "a full or empty pipe parks its side"
    );
}

#[test]
fn a_sleeplock_hands_off_in_order() {
    let body = "[{ loop = { n = 20, body = [{ lock = { lock = \"l\" } }, { run = 5000 }, { count = { metric = \"held\", n = 1 } }, { unlock = { lock = \"l\" } }] } }]";
    let (_, o) = run(&format!(
        "{HEAD}[[task]]\nname = \"a\"\ncpu = 1\nprogram = {body}\n[[task]]\nname = \"b\"\ncpu = 3\nprogram = {body}\n[[task]]\nname = \"c\"\ncpu = 10\nprogram = {body}\n"
    ));
    assert_eq!(o.counts["held"], 60, "every critical section ran");
    // 60 sections of 5 µs each cannot overlap: the run took at least 300 µs.
    assert!(
        o.end_ns >= 300_000,
        "critical sections overlapped: the run ended at {} ns",
        o.end_ns
    );
}

#[test]
fn spawn_and_join_run_every_child() {
    let (_, o) = run(&format!(
        "{HEAD}[programs]\nchild = [{{ run = 30000 }}, {{ count = {{ metric = \"done\", n = 1 }} }}, \"exit\"]\n\
         [[task]]\nname = \"parent\"\ncpu = 0\nprogram = [{{ loop = {{ n = 8, body = [{{ spawn = {{ program = \"child\" }} }}] }} }}, {{ loop = {{ n = 8, body = [\"join\"] }} }}, {{ count = {{ metric = \"joined\", n = 1 }} }}]\n"
    ));
    assert_eq!(o.counts["done"], 8, "every child ran");
    assert_eq!(o.counts["joined"], 1, "the parent got past its joins");
    assert!(
        o.counters["moves.spawn"] >= 1,
        "near placed children on other cores"
    );
}

#[test]
fn sleep_wakes_on_time_and_yield_shares_a_cpu() {
    let (_, o) = run(&format!(
        "{HEAD}[[task]]\nname = \"s\"\ncpu = 5\nprogram = [{{ lap = {{ metric = \"s\" }} }}, {{ loop = {{ n = 10, body = [{{ sleep = 100000 }}, {{ lap = {{ metric = \"s\" }} }}] }} }}]\n\
         [[task]]\nname = \"y1\"\ncpu = 7\nmask = \"7\"\nprogram = [{{ loop = {{ n = 100, body = [{{ run = 1000 }}, \"yield\"] }} }}]\n\
         [[task]]\nname = \"y2\"\ncpu = 7\nmask = \"7\"\nprogram = [{{ loop = {{ n = 100, body = [{{ run = 1000 }}, \"yield\"] }} }}]\n"
    ));
    assert!(
        o.laps["s"].iter().all(|&l| (100_000..110_000).contains(&l)),
        "sleeps of 100 µs: {:?}",
        o.laps["s"]
    );
    let (a, b) = (o.tasks["y1"].cpu_ns, o.tasks["y2"].cpu_ns);
    assert!(
        a > 0 && b > 0 && (a as f64 / b as f64 - 1.0).abs() < 0.2,
        "yielding tasks share cpu7: {a} vs {b}"
    );
}

#[test]
fn nice_shares_hold_in_the_simulator() {
    let (s, o) = run(&format!(
        "{HEAD}[[task]]\nname = \"n0\"\ncpu = 6\nmask = \"6\"\nprogram = [{{ run = 150000000 }}]\n\
         [[task]]\nname = \"n5\"\ncpu = 6\nmask = \"6\"\nnice = 5\nprogram = [{{ run = 150000000 }}]\n\
         [[figure]]\nname = \"share0\"\nkind = \"cpu_share\"\ntask = \"n0\"\n[[figure]]\nname = \"share5\"\nkind = \"cpu_share\"\ntask = \"n5\"\n"
    ));
    let f: Vec<f64> = s.figures.iter().map(|(_, f)| f.compute(&o)).collect();
    let ratio = f[0] / f[1];
    assert!(
        (ratio / (1024.0 / 335.0) - 1.0).abs() < 0.05,
        "nice 0 : nice 5 = {ratio:.3}, weights say 3.057"
    );
}

#[test]
fn file_errors_name_line_and_column() {
    let e = file::load_str(
        &format!("{HEAD}[[task]]\nname = \"x\"\ncpu = 1\nmask = \"0-3,x\"\nprogram = []\n"),
        Path::new("m.toml"),
        Params::default(),
    )
    .unwrap_err();
    assert_eq!(e.line, Some(9), "{e}");
    assert!(e.to_string().starts_with("m.toml:9:"), "{e}");
    let e = file::load_str(&format!("{HEAD}[[task]]\nname = \"x\"\ncpu = 1\nprogram = [{{ spawn = {{ program = \"nope\" }} }}]\n"), Path::new("m.toml"), Params::default()).unwrap_err();
    assert!(e.message.contains("nope"), "{e}");
    let e = file::load_str(
        "[topology]\npreset = \"amd-3x8\"\n[[task]]\nname=\"x\"\ncpu=0\nprogram=[]\n",
        Path::new("p.toml"),
        Params::default(),
    )
    .unwrap_err();
    assert_eq!((e.line, e.column), (Some(2), Some(10)), "{e}");
}

#[test]
fn a_waking_op_pays_its_syscall_before_its_wake() {
    // A futex ping-pong round trip holds two futex_wake syscalls in series
    // (each wake is posted when its syscall is done), plus two block paths.
    let (s, o) = run(&format!(
        "{HEAD}[[task]]\nname = \"ping\"\ncpu = 1\nmask = \"1\"\nprogram = [{{ loop = {{ n = 200, body = [{{ lap_start = {{ metric = \"rtt\" }} }}, {{ futex_wake = {{ futex = \"a\", n = 1 }} }}, {{ futex_wait = {{ futex = \"b\" }} }}, {{ lap = {{ metric = \"rtt\" }} }}] }} }}]\n\
         [[task]]\nname = \"pong\"\ncpu = 2\nmask = \"2\"\nprogram = [{{ loop = {{ n = 200, body = [{{ futex_wait = {{ futex = \"a\" }} }}, {{ futex_wake = {{ futex = \"b\", n = 1 }} }}] }} }}]\n"
    ));
    let floor = 2 * s.spec.cost.syscall_ns + 2 * s.spec.cost.block_ns;
    let laps = &o.laps["rtt"];
    assert_eq!(laps.len(), 200);
    assert!(
        laps.iter().all(|&l| l >= floor),
        "every round trip must hold two wake syscalls and two block paths ({floor} ns); the fastest was {} ns",
        laps.iter().min().unwrap()
    );
}

#[test]
fn join_any_reaps_each_exit_in_turn_and_the_exits_name_no_waker() {
    let (_, o) = run(&format!(
        "{HEAD}[programs]\nshort = [{{ run = 10000 }}, \"exit\"]\nlong = [{{ run = 90000 }}, \"exit\"]\n\
         [[task]]\nname = \"parent\"\ncpu = 0\nprogram = [{{ lap_start = {{ metric = \"all\" }} }}, {{ lap_start = {{ metric = \"first\" }} }}, {{ spawn = {{ program = \"long\" }} }}, {{ spawn = {{ program = \"short\" }} }}, \
         \"join_any\", {{ lap = {{ metric = \"first\" }} }}, \"join_any\", \"join_any\", {{ lap = {{ metric = \"all\" }} }}]\n"
    ));
    let first = o.laps["first"][0];
    let all = o.laps["all"][0];
    assert!(
        (10_000..90_000).contains(&first),
        "the first join_any returns at the short child's exit, not the long one's: {first} ns"
    );
    assert!(
        all >= 90_000,
        "the third join_any has no child left and returns: {all} ns"
    );
    assert_eq!(
        o.counters["wakes.counted"], 0,
        "an exiting child's wake of its parent names no waker (it is leaving)"
    );
}

#[test]
fn linux_brings_its_fork_path_unless_the_user_names_a_spawn_rule() {
    use schedlab_sim::sched::SpawnPolicy;
    let body = "[[task]]\nname = \"x\"\ncpu = 0\nprogram = [{ run = 1000 }]\n";
    let spawn_of = |policy: &str, params: &[&str]| {
        let text =
            format!("run_ms = 1\n[topology]\npreset = \"amd-2x8\"\n[policy]\n{policy}{body}");
        let args: Vec<String> = params.iter().map(|s| s.to_string()).collect();
        let p = Params::parse(&args).expect("k=v");
        file::load_str(&text, Path::new("inline.toml"), p)
            .unwrap_or_else(|e| panic!("{e}"))
            .spec
            .config
            .spawn
    };
    assert_eq!(
        spawn_of("placement = \"linux\"\n", &[]),
        SpawnPolicy::Linux,
        "linux's own rule"
    );
    assert_eq!(
        spawn_of("placement = \"linux\"\nspawn = \"rotate\"\n", &[]),
        SpawnPolicy::Rotate,
        "a spawn rule the file names wins"
    );
    assert_eq!(
        spawn_of("placement = \"linux\"\n", &["spawn=near"]),
        SpawnPolicy::Near,
        "a spawn parameter wins"
    );
    assert_eq!(
        spawn_of("placement = \"home\"\n", &[]),
        SpawnPolicy::Near,
        "home: the machine's default"
    );
    assert_eq!(
        spawn_of("placement = \"home\"\n", &["spawn=linux"]),
        SpawnPolicy::Linux,
        "spawn=linux for any policy"
    );
}

#[test]
fn a_same_at_figure_with_an_unknown_level_is_an_error() {
    let text = format!(
        "{HEAD}[[task]]\nname = \"a\"\ncpu = 0\nprogram = [{{ run = 1000 }}]\n[[figure]]\nname = \"x\"\nkind = \"same_at\"\na = \"a\"\nb = \"a\"\nlevel = \"anything\"\n"
    );
    let Err(e) = file::load_str(&text, Path::new("f.toml"), Params::default()) else {
        panic!("level = \"anything\" must not load (it once meant llc silently)");
    };
    let msg = e.to_string();
    assert!(
        msg.contains("anything") && msg.contains("core") && msg.contains("llc"),
        "expected an error naming the bad level and the choices, got: {msg}"
    );
}

#[test]
fn a_moves_figure_with_an_unknown_reason_is_an_error_and_a_known_one_counts() {
    let fig = |reason: &str| {
        format!(
            "{HEAD}[[task]]\nname = \"a\"\ncpu = 0\nprogram = [{{ run = 1000 }}]\n[[figure]]\nname = \"x\"\nkind = \"moves\"\nreasons = [\"{reason}\"]\n"
        )
    };
    let Err(e) = file::load_str(&fig("anything"), Path::new("f.toml"), Params::default()) else {
        panic!("reasons = [\"anything\"] must not load");
    };
    let msg = e.to_string();
    assert!(
        msg.contains("anything") && msg.contains("waker_rule") && msg.contains("policy"),
        "expected an error naming the bad reason and the choices, got: {msg}"
    );
    for ok in ["waker_rule", "balance", "policy", "spawn"] {
        assert!(
            file::load_str(&fig(ok), Path::new("f.toml"), Params::default()).is_ok(),
            "reasons = [{ok:?}] loads"
        );
    }
}

/// The accounting sums (every nanosecond of a CPU is busy or idle, and
/// the tasks' CPU time is what the CPUs spent running them), asserted from
/// the outcome so they hold
/// in release too: per CPU, busy + idle is the run's length; the tasks'
/// CPU time is the CPUs' busy time. Scenarios with preemption, switches,
/// SMT siblings and core scheduling.
#[test]
fn accounting_sums_hold() {
    for name in [
        "cs_spinners",
        "fair.nice",
        "tail.timer",
        "hackbench.pipe.g1",
        "schbench.m2.t4.wakeup_p99",
    ] {
        let p = Params::parse(&["run_ms=30".to_string()]).unwrap();
        let s = schedlab_scenarios::catalog::build(name, None, p).unwrap();
        for seed in 1..=2 {
            let o = Sim::new(&s.spec, seed).run();
            for (c, (b, i)) in o.busy_ns.iter().zip(&o.idle_ns).enumerate() {
                assert_eq!(
                    b + i,
                    o.end_ns,
                    "{name} seed {seed}: cpu{c} busy {b} + idle {i} is not the run's {} ns",
                    o.end_ns
                );
            }
            let busy: u64 = o.busy_ns.iter().sum();
            let tasks: u64 = o.tasks.values().map(|t| t.cpu_ns).sum();
            assert_eq!(
                busy, tasks,
                "{name} seed {seed}: CPUs busy {busy} ns, tasks ran {tasks} ns"
            );
        }
    }
}
