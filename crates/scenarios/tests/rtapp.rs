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

const PERIODIC: &str = include_str!("../../../scenarios/rt-app/periodic.json");
const PRODUCER: &str = include_str!("../../../scenarios/rt-app/producer_consumer.json");
const BARRIER: &str = include_str!("../../../scenarios/rt-app/barrier.json");

fn load(text: &str, name: &str) -> Result<Scenario, String> {
    let topo = preset("amd-2x8").expect("a preset");
    rtapp::load_str(text, Path::new(name), topo, Params::default()).map_err(|e| e.to_string())
}

fn run(text: &str, name: &str, seed: u64) -> Outcome {
    let mut s = load(text, name).unwrap_or_else(|e| panic!("{name} loads: {e}"));
    s.spec.keep_events = true;
    Sim::new(&s.spec, seed).run()
}

/// Parked wakes of each task, by who posted them (`None`: no thread).
fn wakes(o: &Outcome) -> BTreeMap<(String, Option<String>), usize> {
    let name = |id: u32| o.task_names[&id].clone();
    let mut m = BTreeMap::new();
    for e in &o.event_log {
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
        "p0": { "run": 100, "resume": "pong", "suspend": "" },
        "p1": { "loop": 2, "runtime": 50, "yield": "" }
      }
    },
    "pong": { "loop": 50, "suspend": "", "run": 80, "resume": "ping" },
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
            "{ \"tasks\": { \"a\": { \"run\": 1,\n \"resume\": \"nobody\" } } }",
            "bad.json:2:12: resume names \"nobody\", which is no task",
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
            "{ \"tasks\": { \"a\": { \"phases\": { \"p\": { \"cpus\": [1], \"run\": 1 } } } } }",
            "class and affinity are fixed",
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
}

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
