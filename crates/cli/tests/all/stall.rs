//! Inputs a person could write by mistake: each is a positioned error
//! (exit 2) or a stall report naming what waits on what (exit 3), never a
//! panic.

use crate::common::{schedlab, scratch_file, Scratch};

fn file(name: &str, text: &str) -> Scratch {
    scratch_file(name, text)
}

const HEAD: &str = "[topology]\npreset = \"amd-2x8\"\n";

fn task(name: &str, cpu: usize, program: &str) -> String {
    format!("[[task]]\nname = \"{name}\"\ncpu = {cpu}\nprogram = {program}\n")
}

fn no_panic(err: &str) {
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "a panic: {err}"
    );
}

#[test]
fn a_loop_that_spends_no_time_is_an_error_with_its_place() {
    let f = file(
        "spin.toml",
        &format!(
            "{HEAD}{}",
            task("c", 0, "[{ loop = { n = 1000000000, body = [] } }]")
        ),
    );
    let (code, _, err) = schedlab(&["run", &f]);
    no_panic(&err);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("spin.toml:6:11") && err.contains("never spends time"),
        "expected the program's place and why: {err}"
    );
}

#[test]
fn a_program_that_spawns_itself_is_an_error() {
    let f = file(
        "fork.toml",
        &format!(
            "{HEAD}[programs]\nc = [{{ spawn = {{ program = \"c\" }} }}, {{ run = 1000 }}]\n{}",
            task("c0", 0, "[{ spawn = { program = \"c\" } }, \"join\"]")
        ),
    );
    let (code, _, err) = schedlab(&["run", &f]);
    no_panic(&err);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("fork.toml:4:5: spawn recursion with no bound"),
        "{err}"
    );
}

#[test]
fn a_nice_of_40_is_an_error() {
    let f = file(
        "nice.toml",
        &format!(
            "{HEAD}[[task]]\nname = \"n\"\ncpu = 0\nnice = 40\nprogram = [{{ run = 1000 }}]\n"
        ),
    );
    let (code, _, err) = schedlab(&["run", &f]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("nice.toml:6:8: expected nice in -20..19, found 40"),
        "{err}"
    );
}

/// A call to a port nobody serves and a futex_wait nobody wakes: a warning
/// before, a stall report after, exit 3; `--allow-stall` exits 0 and
/// `--json` carries the report under `stalls`.
#[test]
fn waits_nobody_ends_are_a_stall_report() {
    let f = file(
        "call.toml",
        &format!(
            "{HEAD}{}{}",
            task("client", 0, "[{ call = { port = \"nobody\", bytes = 8 } }]"),
            task("w", 1, "[{ futex_wait = { futex = \"f\" } }]")
        ),
    );
    let (code, _, err) = schedlab(&["run", &f]);
    no_panic(&err);
    assert_eq!(code, 3, "{err}");
    for want in [
        "warning: port \"nobody\" is called and served by no program",
        "warning: futex \"f\" is waited on and woken by no program",
        "client waits on a reply on port \"nobody\" (nobody serves it)",
        "w waits on a wake of futex \"f\"",
    ] {
        assert!(err.contains(want), "expected {want:?} in {err}");
    }
    let (code, out, _) = schedlab(&["run", &f, "--allow-stall", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let st = &v["stalls"][0];
    assert_eq!(st["cause"]["kind"], "blocked", "{st}");
    assert_eq!(st["waits"].as_array().map(Vec::len), Some(2), "{st}");
}

#[test]
fn a_lock_cycle_is_named() {
    let f = file(
        "deadlock.toml",
        &format!(
            "{HEAD}{}{}",
            task(
                "a",
                0,
                "[{ lock = { lock = \"x\" } }, { run = 50000 }, { lock = { lock = \"y\" } }]"
            ),
            task(
                "b",
                1,
                "[{ lock = { lock = \"y\" } }, { run = 50000 }, { lock = { lock = \"x\" } }]"
            )
        ),
    );
    let (code, _, err) = schedlab(&["run", &f]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("a waits on lock \"y\" (held by b)"), "{err}");
    assert!(err.contains("the waits form a cycle: a -> b -> a"), "{err}");
}

/// Past the loader: a watchdog trip (a loop under the static bound whose
/// zero cost makes it spin) and a full task table stop the run with a
/// report, exit 3.
#[test]
fn the_watchdog_and_the_task_table_stop_a_run_with_a_report() {
    let f = file(
        "zero.toml",
        &format!(
            "{HEAD}[cost]\nsyscall_ns = 0\n{}",
            task(
                "z",
                0,
                "[{ loop = { n = 1000000, body = [{ futex_wake = { futex = \"f\", n = 1 } }] } }]"
            )
        ),
    );
    let (code, _, err) = schedlab(&["run", &f]);
    no_panic(&err);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("z ran 10000 instructions without spending time"),
        "{err}"
    );
    let f = file(
        "many.toml",
        &format!(
            "{HEAD}[programs]\nleaf = [{{ sleep = 1000000 }}]\n{}",
            task(
                "root",
                0,
                "[{ loop = { n = 100, body = [{ spawn = { program = \"leaf\" } }] } }]"
            )
        ),
    );
    let (code, _, err) = schedlab(&["run", &f, "--param", "max_tasks=10"]);
    no_panic(&err);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("program \"leaf\" spawned more than 10 tasks: raise max_tasks"),
        "{err}"
    );
}

/// A sweep says which of its runs stalled, per value, instead of hiding
/// them in the totals.
#[test]
fn a_sweep_reports_its_stalled_runs() {
    let f = file(
        "sweep.toml",
        &format!(
            "{HEAD}{}",
            task(
                "w",
                1,
                "[{ run = 5000 }, { futex_wait = { futex = \"f\" } }]"
            )
        ),
    );
    let (code, out, err) = schedlab(&["sweep", &f, "--param", "run_ms=1,2", "--seeds", "2"]);
    no_panic(&err);
    assert_eq!(code, 0, "{err}");
    for v in ["run_ms=1", "run_ms=2"] {
        assert!(
            out.contains(&format!("{v}: 2 of 2 runs stalled (seeds 1, 2)")),
            "expected {v}'s stalled runs in {out}"
        );
    }
}

/// A task that locks a lock it holds: a default mutex deadlocks there, so
/// the run stalls (exit 3) and the report names the lock and its holder,
/// itself.
#[test]
fn a_relock_is_a_stall_naming_the_lock_and_its_holder() {
    let f = file(
        "relock.toml",
        &format!(
            "{HEAD}{}",
            task(
                "t",
                0,
                "[{ lock = { lock = \"m\" } }, { run = 1000 }, { lock = { lock = \"m\" } }, { unlock = { lock = \"m\" } }]"
            )
        ),
    );
    let (code, _, err) = schedlab(&["run", &f]);
    no_panic(&err);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("t waits on lock \"m\", which it holds itself: a relock"),
        "{err}"
    );
}

/// An unlock by a task that does not hold the lock: in a scenario file the
/// run stops there (exit 3, naming the holder); in an rt-app file, where
/// it is seen as the file is read, an error at its place (exit 2).
#[test]
fn an_unlock_by_a_non_holder_is_named() {
    let f = file(
        "unlock.toml",
        &format!(
            "{HEAD}{}{}",
            task(
                "a",
                0,
                "[{ lock = { lock = \"m\" } }, { run = 5000000 }, { unlock = { lock = \"m\" } }]"
            ),
            task("b", 1, "[{ run = 100000 }, { unlock = { lock = \"m\" } }]")
        ),
    );
    let (code, _, err) = schedlab(&["run", &f]);
    no_panic(&err);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("b unlocked lock \"m\", which it does not hold (a holds it)"),
        "{err}"
    );
    let j = file(
        "unlock.json",
        "{ \"tasks\": { \"b\": { \"loop\": 1,\n   \"run\": 10, \"unlock\": \"m\" } } }",
    );
    let (code, _, err) = schedlab(&["run", &j]);
    no_panic(&err);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("unlock.json:2:25: unlock \"m\" in thread \"b\", which does not hold it here"),
        "{err}"
    );
}

/// A resume that finds its thread still running is lost, as in rt-app; when
/// that leaves a thread suspended for ever, the stall report says which
/// wake was lost, when, and by whom.
#[test]
fn a_lost_resume_is_named_in_the_stall_report() {
    let j = file(
        "lost.json",
        r#"{ "tasks": {
            "a": { "loop": 1, "run": 100, "resume": "b" },
            "b": { "loop": 1, "run": 5000, "suspend": "b" } } }"#,
    );
    let (code, _, err) = schedlab(&["run", &j]);
    no_panic(&err);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("b waits on a signal of condition \"b\"; its last wake, by a at ")
            && err.contains("found nobody waiting and was lost"),
        "{err}"
    );
}
