//! Structured fuzzing: random scenario *values* (odd machines, task sets
//! with random programs over every op, random policies and cost
//! overrides) written as scenario files, loaded and run with the
//! scheduler's invariant checks on. Each must give a run (or a stall
//! report) or a positioned error, never a panic; and one seed must give
//! one trace hash twice.
//!
//! CI runs a few hundred cases; a long run:
//!
//! ```sh
//! PROPTEST_CASES=20000 FUZZ_RUN_MS=50 cargo test --release -p schedlab-scenarios --test all scenario_fuzz::
//! ```
//!
//! (release keeps the invariant checks: the spec asks for them below.)
//! Every input that ever failed is kept: proptest's own regression file
//! beside this one, and the files of `tests/fuzz_corpus/`, which
//! `the_corpus_never_panics` runs each time.

use std::path::Path;

use proptest::prelude::*;
use schedlab_scenarios::{file, Params};
use schedlab_sim::Sim;

/// A name from a small pool, so ops meet on shared objects.
fn pick(kind: &'static str, n: usize) -> impl Strategy<Value = String> {
    (0..n).prop_map(move |i| format!("{kind}{i}"))
}

/// One op, as scenario-file TOML; loops nest `depth` deep at most.
fn op(depth: u32) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        (0u64..200_000).prop_map(|n| format!("{{ run = {n} }}")),
        (0u64..200_000).prop_map(|n| format!("{{ run_for = {n} }}")),
        (pick("p", 2), 0u64..70_000)
            .prop_map(|(p, b)| format!("{{ call = {{ port = \"{p}\", bytes = {b} }} }}")),
        pick("p", 2).prop_map(|p| format!("{{ serve = {{ port = \"{p}\" }} }}")),
        (0u64..70_000).prop_map(|b| format!("{{ reply = {{ bytes = {b} }} }}")),
        (pick("pipe", 2), 0u64..100_000)
            .prop_map(|(p, b)| format!("{{ pipe_write = {{ pipe = \"{p}\", bytes = {b} }} }}")),
        (pick("pipe", 2), 0u64..100_000)
            .prop_map(|(p, b)| format!("{{ pipe_read = {{ pipe = \"{p}\", bytes = {b} }} }}")),
        pick("f", 2).prop_map(|f| format!("{{ futex_wait = {{ futex = \"{f}\" }} }}")),
        (pick("f", 2), prop_oneof![9 => 1u32..4, 1 => Just(0u32)])
            .prop_map(|(f, n)| format!("{{ futex_wake = {{ futex = \"{f}\", n = {n} }} }}")),
        pick("l", 2).prop_map(|l| format!("{{ lock = {{ lock = \"{l}\" }} }}")),
        pick("l", 2).prop_map(|l| format!("{{ unlock = {{ lock = \"{l}\" }} }}")),
        (pick("c", 2), proptest::option::of(pick("l", 2))).prop_map(|(c, l)| match l {
            Some(l) => format!("{{ cond_wait = {{ cond = \"{c}\", lock = \"{l}\" }} }}"),
            None => format!("{{ cond_wait = {{ cond = \"{c}\" }} }}"),
        }),
        pick("c", 2).prop_map(|c| format!("{{ cond_signal = {{ cond = \"{c}\" }} }}")),
        pick("c", 2).prop_map(|c| format!("{{ cond_broadcast = {{ cond = \"{c}\" }} }}")),
        (pick("b", 2), prop_oneof![9 => 1u32..4, 1 => Just(0u32)])
            .prop_map(|(b, n)| format!("{{ barrier = {{ barrier = \"{b}\", n = {n} }} }}")),
        (pick("t", 2), 0u64..2_000_000, any::<bool>()).prop_map(|(t, p, a)| format!(
            "{{ timer = {{ timer = \"{t}\", period = {p}, absolute = {a} }} }}"
        )),
        (0u64..2_000_000).prop_map(|n| format!("{{ sleep = {n} }}")),
        (
            0u64..100_000,
            prop_oneof![9 => 0u64..100_000, 1 => Just(u64::MAX)]
        )
            .prop_map(|(a, d)| {
                // Mostly min <= max; now and then max below min.
                let b = if d == u64::MAX { a / 2 } else { a + d };
                format!("{{ random_sleep = {{ min = {a}, max = {b} }} }}")
            }),
        (0u64..100_000).prop_map(|m| format!("{{ exp_sleep = {{ mean = {m} }} }}")),
        (0u64..100_000).prop_map(|n| format!("{{ io = {n} }}")),
        prop_oneof![9 => pick("q", 2), 1 => Just("undefined".to_string())]
            .prop_map(|q| format!("{{ spawn = {{ program = \"{q}\" }} }}")),
        Just("\"join\"".to_string()),
        Just("\"join_any\"".to_string()),
        Just("\"exit\"".to_string()),
        Just("\"yield\"".to_string()),
        Just("\"leave\"".to_string()),
        pick("m", 2).prop_map(|m| format!("{{ lap = {{ metric = \"{m}\" }} }}")),
        pick("m", 2).prop_map(|m| format!("{{ lap_start = {{ metric = \"{m}\" }} }}")),
        pick("m", 2).prop_map(|m| format!("{{ wake_lap = {{ metric = \"{m}\" }} }}")),
        (pick("m", 2), 0u64..10)
            .prop_map(|(m, n)| format!("{{ count = {{ metric = \"{m}\", n = {n} }} }}")),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        6 => leaf,
        1 => (prop_oneof![9 => 0u64..50, 1 => 0u64..20_000], program(depth - 1))
            .prop_map(|(n, body)| format!("{{ loop = {{ n = {n}, body = {body} }} }}")),
    ]
    .boxed()
}

fn program(depth: u32) -> BoxedStrategy<String> {
    prop::collection::vec(op(depth), 0..6)
        .prop_map(|ops| format!("[{}]", ops.join(", ")))
        .boxed()
}

/// A machine: a preset, or a shape (one CPU, SMT-4, many small LLCs,
/// several nodes among them).
fn topology() -> impl Strategy<Value = (String, usize)> {
    prop_oneof![
        prop::sample::select(vec![("amd-2x8", 16usize), ("smt-2x2", 4), ("t14", 16)])
            .prop_map(|(p, n)| (format!("[topology]\npreset = \"{p}\"\n"), n)),
        (1usize..3, 1usize..5, 1usize..4, prop::sample::select(vec![1usize, 2, 4]), any::<bool>()).prop_map(
            |(nodes, llcs, cores, smt, split)| {
                let sib = if split { "split" } else { "adjacent" };
                (
                    format!("[topology.shape]\nnodes = {nodes}\nllcs_per_node = {llcs}\ncores_per_llc = {cores}\nthreads_per_core = {smt}\nsiblings = \"{sib}\"\n"),
                    nodes * llcs * cores * smt,
                )
            }
        ),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    text: String,
}

fn task(n_cpus: usize) -> impl Strategy<Value = String> {
    (
        prop_oneof![9 => 0..n_cpus.max(1), 1 => 0..n_cpus + 2],
        prop_oneof![
            8 => (-20i32..20).prop_map(|n| format!("nice = {n}")),
            2 => (1u32..100).prop_map(|p| format!("rt = {p}")),
            1 => prop_oneof![(-128i32..128).prop_map(|n| format!("nice = {n}")), (0u32..256).prop_map(|p| format!("rt = {p}"))],
        ],
        proptest::option::of(0u64..1_000_000),
        proptest::option::of(1u64..4),
        program(2),
    )
        .prop_map(|(cpu, class, ws, cookie, prog)| {
            let mut t = format!("cpu = {cpu}\n{class}\nprogram = {prog}\n");
            if let Some(w) = ws {
                t += &format!("working_set = {w}\n");
            }
            if let Some(c) = cookie {
                t += &format!("cookie = {c}\n");
            }
            t
        })
}

fn case() -> impl Strategy<Value = Case> {
    // Longer runs find more (FUZZ_RUN_MS=50 for a long run); CI keeps them
    // short.
    let max_ms: u64 = std::env::var("FUZZ_RUN_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    topology().prop_flat_map(move |(topo, n)| {
        (
            Just(topo),
            prop::collection::vec(task(n), 1..5),
            prop::sample::select(vec!["home", "waker-streak", "waker-streak:2", "linux", "linux-cas"]),
            prop::sample::select(vec!["near", "rotate", "linux"]),
            prop::sample::select(vec!["true", "false", "\"seed\"", "\"linux\"", "\"linux-cas\""]),
            (0u64..3000, 0u64..2000),
            prop::collection::vec(program(1), 2..3),
            1u64..max_ms.max(2),
        )
            .prop_map(|(topo, tasks, place, spawn, bal, (cs, sys), progs, run_ms)| {
                let mut t = format!("run_ms = {run_ms}\n{topo}\n[policy]\nplacement = \"{place}\"\nspawn = \"{spawn}\"\nbalance = {bal}\n\n[cost]\ncontext_switch_ns = {cs}\nsyscall_ns = {sys}\n\n[programs]\n");
                for (i, p) in progs.iter().enumerate() {
                    t += &format!("q{i} = {p}\n");
                }
                for (i, body) in tasks.iter().enumerate() {
                    t += &format!("\n[[task]]\nname = \"t{i}\"\n{body}");
                }
                Case { text: t }
            })
    })
}

/// Loads and runs `text` (twice per seed): `Err` with the message when it
/// is refused.
fn try_case(text: &str, name: &str) -> Result<(), String> {
    let loaded =
        file::load_str(text, Path::new(name), Params::default()).map_err(|e| e.to_string());
    if std::env::var_os("FUZZ_TALLY").is_some() {
        eprintln!(
            "TALLY {}",
            match &loaded {
                Ok(_) => "run".to_string(),
                Err(e) => e
                    .split(": ")
                    .skip(1)
                    .collect::<Vec<_>>()
                    .join(": ")
                    .chars()
                    .take(60)
                    .collect(),
            }
        );
    }
    let mut s = loaded?;
    s.spec.check_invariants = true;
    for seed in 1..=2 {
        let a = Sim::new(&s.spec, seed).run();
        let b = Sim::new(&s.spec, seed).run();
        assert_eq!(
            a.trace_hash, b.trace_hash,
            "seed {seed}: one seed, two trace hashes:\n{text}"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// A run, a stall report or a positioned error; never a panic.
    #[test]
    fn random_scenarios_run_or_are_refused_with_a_place(c in case()) {
        if let Err(e) = try_case(&c.text, "fuzz.toml") {
            prop_assert!(e.starts_with("fuzz.toml"), "an error without its file: {e}\n{}", c.text);
        }
    }
}

/// Every file that ever broke the loader or the run (the first five were
/// found by hand, before this fuzzing) stays here and must keep giving an
/// error or a run.
#[test]
fn the_corpus_never_panics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_corpus");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("the corpus") {
        let p = e.expect("an entry").path();
        if p.extension().is_some_and(|x| x == "toml") {
            let text = std::fs::read_to_string(&p).expect("read");
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if let Err(e) = try_case(&text, &name) {
                assert!(
                    e.starts_with(&name),
                    "{name}: an error without its file: {e}"
                );
            }
            n += 1;
        }
    }
    assert!(
        n >= 5,
        "the corpus holds the five hand-found inputs at least, found {n}"
    );
}
