//! rt-app JSON files: the shipped examples run, the wakes their events name
//! reach the scheduler naming the thread that posted them, and what cannot
//! run is an error with its place.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use schedlab_scenarios::{rtapp, Params, Scenario};
use schedlab_sim::events::EventKind;
use schedlab_sim::{Outcome, Sim};
use schedlab_topology::preset;

const PERIODIC: &str = include_str!("../../../../scenarios/rt-app/periodic.json");
const PRODUCER: &str = include_str!("../../../../scenarios/rt-app/producer_consumer.json");
const BARRIER: &str = include_str!("../../../../scenarios/rt-app/barrier.json");

fn load(text: &str, name: &str) -> Result<Scenario, String> {
    let topo = preset("amd-2x8").expect("a preset");
    rtapp::load_str(text, Path::new(name), topo, Params::default()).map_err(|e| e.to_string())
}

fn run(text: &str, name: &str, seed: u64) -> Outcome {
    let mut s = load(text, name).unwrap_or_else(|e| panic!("{name} loads: {e}"));
    s.spec.keep_events = true;
    Sim::new(&s.spec, seed).run()
}

/// Parked wakes of each task, by who posted them (`None`: no thread),
/// once the threads have started: the wakes of rt-app's start-up (each
/// thread's creation and `threads_barrier`) come before any thread's first
/// loop, and are left out.
fn wakes(o: &Outcome) -> BTreeMap<(String, Option<String>), usize> {
    let name = |id: u32| o.task_names[&id].clone();
    let begun = o
        .tasks
        .values()
        .filter_map(|t| t.stamps.first().map(|(_, ns)| *ns))
        .min()
        .unwrap_or(0);
    let mut m = BTreeMap::new();
    for e in o.event_log.iter().filter(|e| e.at > begun) {
        if let EventKind::Waking {
            task,
            waker,
            parked: true,
            ..
        } = &e.kind
        {
            *m.entry((name(task.0), waker.map(|w| name(w.0))))
                .or_default() += 1;
        }
    }
    m
}

fn key(task: &str, waker: Option<&str>) -> (String, Option<String>) {
    (task.to_string(), waker.map(str::to_string))
}

/// Each signal finds the consumer waiting and wakes it, posted by the
/// producer; so does the mutex handed back to it. Nothing else wakes it.
#[test]
fn producer_consumer_wakes_name_the_producer() {
    for seed in 1..=3 {
        let o = run(PRODUCER, "producer_consumer.json", seed);
        let w = wakes(&o);
        let by_producer = w
            .get(&key("consumer", Some("producer")))
            .copied()
            .unwrap_or(0);
        let all: usize = w
            .iter()
            .filter(|((t, _), _)| t == "consumer")
            .map(|(_, n)| n)
            .sum();
        assert!(
            by_producer >= 400,
            "seed {seed}: 400 signals each wake the parked consumer, posted by the producer; found {by_producer} ({w:?})"
        );
        assert_eq!(
            all, by_producer,
            "seed {seed}: only the producer wakes the consumer ({w:?})"
        );
        assert!(
            o.tasks["consumer"].exited_at.is_some(),
            "seed {seed}: the consumer ran its 400 rounds and ended"
        );
    }
}

/// 100 rounds of four arrivals: the last arrival of each round wakes the
/// three others, each wake named after a thread of the group, never the
/// woken one.
#[test]
fn a_barrier_s_last_arrival_wakes_the_rest_naming_itself() {
    let group = ["worker-0", "worker-1", "worker-2", "straggler"];
    for seed in 1..=3 {
        let o = run(BARRIER, "barrier.json", seed);
        let w = wakes(&o);
        let mut total = 0;
        for ((task, waker), n) in &w {
            let waker = waker.as_deref().unwrap_or("none");
            assert!(
                group.contains(&task.as_str()) && group.contains(&waker) && waker != task,
                "seed {seed}: {task} woken {n} times by {waker}: expected another thread of the group"
            );
            total += n;
        }
        assert_eq!(total, 300, "seed {seed}: 100 rounds x 3 woken ({w:?})");
        for t in group {
            assert!(o.tasks[t].exited_at.is_some(), "seed {seed}: {t} ended");
        }
    }
}

/// Timer wakes come from no thread; each thread gets its share of the
/// CPU (run over period: audio 400 of 2000 µs), the timers keeping the
/// period though a run is late.
#[test]
fn periodic_threads_keep_their_periods() {
    let o = run(PERIODIC, "periodic.json", 1);
    let w = wakes(&o);
    assert!(
        w.keys().all(|(_, waker)| waker.is_none()),
        "timer wakes name no thread: {w:?}"
    );
    for (task, share) in [
        ("audio", 0.2),
        ("video-0", 0.3),
        ("video-1", 0.3),
        ("housekeeping", 0.3),
    ] {
        let got = o.tasks[task].cpu_ns as f64 / o.end_ns as f64;
        assert!(
            (got - share).abs() < 0.02,
            "{task}: CPU share {got:.3}, expected {share} (its run over its period)"
        );
    }
}

/// A file the examples do not show: suspend/resume, sync, fork of an
/// instance-0 template, runtime, yield; threads with phases.
const MIXED: &str = r#"{
  "tasks": {
    "ping": {
      "loop": 50,
      "phases": {
        "p0": { "run": 100, "resume": "pong", "suspend": "ping" },
        "p1": { "loop": 2, "runtime": 50, "yield": "" }
      }
    },
    "pong": { "loop": 50, "suspend": "pong", "run": 80, "resume": "ping" },
    "boss": { "loop": 3, "fork": "child", "sleep": 2000 },
    "child": { "instance": 0, "loop": 1, "run": 300 }
  },
  "global": { "duration": 1 }
}"#;

#[test]
fn suspend_resume_and_fork_post_their_wakes() {
    let o = run(MIXED, "mixed.json", 7);
    let w = wakes(&o);
    let pong = w.get(&key("pong", Some("ping"))).copied().unwrap_or(0);
    let ping = w.get(&key("ping", Some("pong"))).copied().unwrap_or(0);
    assert!(
        pong >= 45 && ping >= 45,
        "resume wakes the suspended thread, posted by the resumer: pong by ping {pong}, ping by pong {ping} ({w:?})"
    );
    let children = o
        .tasks
        .keys()
        .filter(|n| n.starts_with("boss.child"))
        .count();
    assert_eq!(
        children,
        3,
        "three forks of the template: {:?}",
        o.tasks.keys()
    );
}

fn err(text: &str) -> String {
    match load(text, "bad.json") {
        Ok(_) => panic!("expected an error for {text}"),
        Err(e) => e,
    }
}

#[test]
fn bad_files_are_errors_with_their_place() {
    let cases: &[(&str, &str)] = &[
        ("{\n \"tasks\": { \"a\": { \"run\" 10 } }\n}", "bad.json:2:"),
        (
            "{ \"tasks\": {\n  \"a\": { \"external_workload\": {} }\n} }",
            "bad.json:2:31: unknown key \"external_workload\"",
        ),
        (
            "{ \"tasks\": { \"a\": {\n \"cpus\": [0, 99], \"run\": 1 } } }",
            "cpus: expected CPUs below 16 on amd-2x8, found 99",
        ),
        (
            "{ \"tasks\": { \"a\": { \"run\": 1,\n \"fork\": \"nobody\" } } }",
            "bad.json:2:10: fork names \"nobody\", which is no task",
        ),
        (
            "{ \"tasks\": { \"a\": { \"policy\": \"SCHED_DEADLINE\", \"run\": 1 } } }",
            "SCHED_DEADLINE: not modelled",
        ),
        (
            "{ \"tasks\": { \"a\": { \"priority\": 40, \"run\": 1 } } }",
            "nice) in -20..19, found 40",
        ),
        (
            "/* a comment\n over lines */ { \"tasks\": {\n \"a\": { \"sleep\": \"x\" } } }",
            "bad.json:3:18: expected an integer, found \"x\"",
        ),
        ("{ \"global\": {} }", "expected a \"tasks\" object"),
        (
            "{ \"tasks\": { \"a\": { \"loop\": 3 } } }",
            "expected at least one event",
        ),
        (
            "{ \"tasks\": { \"a\": { \"phases\": { \"p\": { \"policy\": \"SCHED_FIFO\", \"run\": 1 } } } } }",
            "class is fixed (its affinity may change by phase)",
        ),
        (
            "{ \"tasks\": { \"a\": { \"phases\": { \"p\": {\n \"cpus\": [99], \"run\": 1 } } } } }",
            "bad.json:2:10: cpus: expected CPUs below 16",
        ),
    ];
    for (text, want) in cases {
        let e = err(text);
        assert!(e.contains(want), "for {text:?}: expected {want:?} in {e:?}");
    }
}

const GOOD: &str = MIXED;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        let _ = load(&text, "fuzz.json");
    }

    /// The mixed file with one span replaced by junk: an error naming the
    /// file, or a scenario.
    #[test]
    fn near_misses_never_panic(at in 0usize..GOOD.len(), len in 0usize..12, junk in "[a-z0-9:\\[\\]{}\",. \n*/-]{0,12}") {
        let mut s = GOOD.to_string();
        let b = (at + len).min(s.len());
        s.replace_range(at..b, &junk);
        if let Err(e) = load(&s, "near.json") {
            prop_assert!(e.starts_with("near.json"), "{}", e);
        }
    }

    /// The same for a file that needs workgen's rewrites (bare suspends,
    /// repeated keys, at several depths): junk anywhere in it, the
    /// rewrites included, gives an error naming the file or a scenario.
    #[test]
    fn near_misses_of_a_workgen_file_never_panic(at in 0usize..WORKGEN.len(), len in 0usize..12, junk in "[a-z0-9:\\[\\]{}\",. \n*/-]{0,12}") {
        let mut s = WORKGEN.to_string();
        let b = (at + len).min(s.len());
        s.replace_range(at..b, &junk);
        if let Err(e) = load(&s, "near.json") {
            prop_assert!(e.starts_with("near.json"), "{}", e);
        }
    }
}

/// A file for workgen, as rt-app's video-*.json are written.
const WORKGEN: &str = r#"{
  "tasks": {
    "sf": { "loop": -1, "suspend", "run": 150 },
    "disp": { "loop": -1, "phases": {
      "p1": { "suspend", "run": 35, "resume": "sf", "run": 40, },
      "p2": { "loop": 2, "suspend", "run": 30 }
    } },
    "mon": { "loop": -1, "resume": "disp", "run": 115, "timer": { "ref": "t", "period": 16667 } }
  },
  "global": { "duration": 1 }
}"#;

/// rt-app's own examples carry trailing commas and the legacy `resources`
/// section, where a `signal` resource names the condition it wakes.
#[test]
fn legacy_resources_route_a_signal_to_its_target() {
    let text = r#"{
        "tasks": {
            "tick": { "loop": 20, "run": 100, "lock": "m", "signal": "trig", "unlock": "m", "sleep": 1000, },
            "tock": { "loop": 20, "lock": "m", "wait": { "ref": "cv", "mutex": "m" }, "unlock": "m", "run": 50, },
        },
        "resources": { "m": { "type": "mutex" }, "cv": { "type": "wait" }, "trig": { "type": "signal", "target": "cv" }, },
        "global": { "duration": -1, "frag": 1, },
    }"#;
    let o = run(text, "legacy.json", 1);
    let w = wakes(&o);
    let n = w.get(&key("tock", Some("tick"))).copied().unwrap_or(0);
    assert!(
        n >= 20,
        "each signal of trig wakes tock, waiting on cv: {w:?}"
    );
    assert!(
        o.tasks["tock"].exited_at.is_some(),
        "tock ran its 20 rounds"
    );
    let s = load(text, "legacy.json").unwrap();
    assert!(
        s.notes.iter().any(|n| n.contains("\"frag\"")),
        "an unknown global key is noted: {:?}",
        s.notes
    );
}

/// rt-app's tutorial example 8: a thread of `cpus` [2] whose first two
/// phases name [0] and [1]. Each phase's work runs where its `cpus` say
/// (the third on the thread's): the CPUs it ran on from each `run`'s start
/// to its end.
#[test]
fn a_phase_s_cpus_move_its_thread() {
    let text = r#"{ "tasks": { "thread0": { "cpus": [2], "loop": 1, "phases": {
        "phase1": { "cpus": [0], "run": 1500 },
        "phase2": { "cpus": [1], "run": 1500 },
        "phase3": { "run": 1500 } } } } }"#;
    for seed in 1..=3 {
        let o = run(text, "example8.json", seed);
        let t = &o.tasks["thread0"];
        let at = |what: &str| -> Vec<u64> {
            t.stamps
                .iter()
                .filter(|(m, _)| m == what)
                .map(|(_, ns)| *ns)
                .collect()
        };
        let (runs, ends) = (at(rtapp::log::RUN), at(rtapp::log::RUN_END));
        assert_eq!(
            (runs.len(), ends.len()),
            (3, 3),
            "three phases' runs (seed {seed})"
        );
        let id = o
            .task_names
            .iter()
            .find(|(_, n)| *n == "thread0")
            .map(|(id, _)| *id)
            .expect("its id");
        let ins: Vec<(u64, usize)> = o
            .event_log
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Switch {
                    cpu, next: Some(n), ..
                } if n.0 == id => Some((e.at, cpu.index())),
                _ => None,
            })
            .collect();
        // Where it ran at `from` (its last switch-in by then), and every
        // switch-in after, before `to`.
        let ran_on = |from: u64, to: u64| -> Vec<usize> {
            let at_start = ins.iter().rfind(|(at, _)| *at <= from);
            let after = ins.iter().filter(|(at, _)| *at > from && *at < to);
            let mut c: Vec<usize> = at_start.into_iter().chain(after).map(|(_, c)| *c).collect();
            c.sort_unstable();
            c.dedup();
            c
        };
        let ran: Vec<Vec<usize>> = (0..3).map(|i| ran_on(runs[i], ends[i])).collect();
        assert_eq!(
            ran,
            vec![vec![0], vec![1], vec![2]],
            "each phase's work on its cpus, the last on the thread's (seed {seed})"
        );
    }
}

/// `suspend` and `resume` name a resource (a condition and a mutex of
/// that name), not a thread: two threads suspend on `Sub`, and each
/// resume of `Sub` wakes both, posted by the resumer (rt-app's
/// browser-*.json do this).
#[test]
fn suspend_and_resume_name_a_resource_two_threads_share() {
    let text = r#"{ "tasks": {
        "Main": { "loop": 40, "phases": { "p": { "run": 200, "resume": "Sub", "sleep": 2000 } } },
        "Sub1": { "loop": 40, "phases": { "p": { "suspend": "Sub", "run": 100 } } },
        "Sub2": { "loop": 40, "phases": { "p": { "suspend": "Sub", "run": 100 } } } } }"#;
    let o = run(text, "browser.json", 3);
    let w = wakes(&o);
    for sub in ["Sub1", "Sub2"] {
        let n = w.get(&key(sub, Some("Main"))).copied().unwrap_or(0);
        assert!(n >= 35, "{sub} woken by Main's resumes: {n} ({w:?})");
    }
}

/// A file written for rt-app's workgen: a bare `"suspend"` and a key
/// repeated in one object. Both rewrites are applied and noted: the
/// suspend waits on its thread's name, both runs count.
#[test]
fn workgen_files_are_read_as_workgen_rewrites_them() {
    let text = "{ \"tasks\": {\n \"A\": { \"loop\": 20,\n \"suspend\",\n \"run\": 100,\n \"run\": 200 },\n \"B\": { \"loop\": 20, \"run\": 50, \"resume\": \"A\", \"sleep\": 1000 } } }";
    let s = load(text, "workgen.json").expect("read after workgen's rewrites");
    let notes = s.notes.join("\n");
    assert!(
        notes.contains("workgen.json:3:2: workgen's rewrite: a bare \"suspend\" in thread \"A\"")
            && notes.contains("workgen.json:5:2: workgen's rewrite: \"run\" repeated in one object: read as \"run1\""),
        "{notes}"
    );
    let o = run(text, "workgen.json", 1);
    let lines = rtapp::log::lines(0, &o.tasks["A"].stamps);
    assert!(
        !lines.is_empty() && lines.iter().all(|l| l.c_duration == 300),
        "both runs: {lines:?}"
    );
    let w = wakes(&o);
    assert!(
        w.get(&key("A", Some("B"))).copied().unwrap_or(0) >= 15,
        "A's bare suspend waits on \"A\", which B resumes: {w:?}"
    );
}

/// Every JSON file rt-app ships in its doc/examples (a distribution's
/// `/usr/share/doc/rt-app/examples`) loads and runs, or is refused only as
/// a fragment for rt-app's merge script or for rt-app's first grammar.
#[test]
#[ignore = "needs rt-app's examples installed (apt-get install rt-app); cargo test -p schedlab-scenarios --test all rtapp:: -- --ignored"]
fn every_example_rt_app_ships_runs() {
    let root = Path::new("/usr/share/doc/rt-app/examples");
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("rt-app's examples").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 20, "rt-app's examples: {files:?}");
    let topo = preset("amd-2x8").expect("a preset");
    for f in files {
        match rtapp::load(&f, topo.clone(), Params::default()) {
            Ok(mut s) => {
                s.spec.run_ns = s.spec.run_ns.min(200_000_000);
                let o = Sim::new(&s.spec, 1).run();
                assert!(o.end_ns > 0, "{}: ran", f.display());
            }
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains("expected a \"tasks\" object")
                        || e.contains("rt-app's first grammar"),
                    "{}: refused for another reason: {e}",
                    f.display()
                );
            }
        }
    }
}
