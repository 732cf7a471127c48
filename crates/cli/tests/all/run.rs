//! `schedlab run` and `schedlab sweep` end to end.

use std::process::Command;

use crate::common::schedlab;

#[test]
fn run_json_has_the_documented_shape() {
    let (code, out, err) = schedlab(&["run", "split_pair", "--seeds", "2", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for k in ["scenario", "topology", "policy", "params", "runs"] {
        assert!(v.get(k).is_some(), "missing {k}: {out}");
    }
    assert_eq!(v["topology"], "amd-2x8");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        for f in ["pair_moves", "final_same_llc", "final_same_core", "rtt_us"] {
            assert!(r["figures"].get(f).is_some(), "figure {f} missing");
        }
        for c in [
            "wakes.parked",
            "wakes.flagged",
            "moves.waker_rule",
            "moves.forward",
            "moves.steal",
            "moves.spawn",
            "ipi.kick",
            "ipi.resched",
        ] {
            assert!(r["counters"].get(c).is_some(), "counter {c} missing");
        }
        assert!(r["trace_hash"].as_str().unwrap().len() == 16);
        assert_eq!(
            r["per_cpu"].as_array().map(Vec::len),
            Some(16),
            "one counter set per CPU of amd-2x8"
        );
    }
}

#[test]
fn policy_and_topology_flags_take_effect() {
    let (code, out, err) = schedlab(&[
        "run",
        "split_pair",
        "--policy",
        "home",
        "--topology",
        "epyc-2s-384",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["policy"], "home");
    assert_eq!(v["topology"], "epyc-2s-384");
    assert_eq!(
        v["runs"][0]["figures"]["pair_moves"], 0,
        "home never moves the pair"
    );
}

#[test]
fn check_determinism_passes() {
    let (code, out, err) = schedlab(&[
        "run",
        "server_two_llcs",
        "--seed",
        "3",
        "--check-determinism",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("deterministic"), "{out}");
}

#[test]
fn sweep_prints_the_seeds_table() {
    let (code, out, err) = schedlab(&[
        "sweep",
        "server_two_llcs",
        "--param",
        "waker_run=1,8",
        "--param",
        "rounds=24",
        "--seeds",
        "4",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("total / most in a run / runs nonzero"),
        "{out}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.trim_start().starts_with('1') || l.trim_start().starts_with('8'))
            .count(),
        2,
        "{out}"
    );
    let sweep_json = |jobs: &str| -> serde_json::Value {
        let (code, out, err) = schedlab(&[
            "sweep",
            "server_two_llcs",
            "--param",
            "waker_run=1,8",
            "--seeds",
            "3",
            "--json",
            "--jobs",
            jobs,
        ]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&out).unwrap()
    };
    let (a, b) = (sweep_json("1"), sweep_json("2"));
    assert_eq!(a, b, "the result must not depend on --jobs");
    assert!(a["rows"][0]["figures"]["server_moves"]
        .get("runs_nonzero")
        .is_some());
}

#[test]
fn bad_scenarios_exit_2_with_a_reason() {
    let (code, _, err) = schedlab(&["run", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown scenario"), "{err}");
    let (code, _, err) = schedlab(&["run", "reqrep", "--param", "bogus=1"]);
    assert_eq!(code, 2);
    assert!(err.contains("no parameter"), "{err}");
    let (code, _, err) = schedlab(&["run", "/no/such.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("/no/such.toml: cannot read"), "{err}");
    let (code, _, err) = schedlab(&["sweep", "reqrep", "--param", "bytes=8"]);
    assert_eq!(code, 2);
    assert!(err.contains("exactly one"), "{err}");
}

#[test]
fn a_closed_pipe_is_not_a_panic() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["run", "split_pair", "--seeds", "40"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away at once
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("panicked"),
        "a closed stdout made schedlab panic: {err}"
    );
    assert_eq!(out.status.code(), Some(0), "{err}");
}

/// `--topology` takes every source `topo` reads, names the machine as
/// given, and reports a broken file with its position, exit 2.
#[test]
fn topology_from_lscpu_sysfs_and_toml() {
    let fx = concat!(env!("CARGO_MANIFEST_DIR"), "/../topology/tests/fixtures");
    let lscpu = format!("lscpu:{fx}/ryzen-2ccx.lscpu");
    let sysfs = format!("sysfs:{fx}/ryzen-2ccx");
    let toml = format!("{fx}/two-llc.toml");
    for t in [&lscpu, &sysfs, &toml] {
        let (code, out, err) = schedlab(&["run", "split_pair", "--topology", t, "--seeds", "1"]);
        assert_eq!(code, 0, "--topology {t}: {err}");
        assert!(
            out.starts_with(&format!("split_pair on {t} (")),
            "the machine is named as given: {out}"
        );
    }
    // The same machine, read as lscpu text or as a sysfs tree, runs alike.
    let hash = |t: &str| {
        let (_, out, _) = schedlab(&[
            "run",
            "split_pair",
            "--topology",
            t,
            "--seeds",
            "1",
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        v["runs"][0]["trace_hash"].clone()
    };
    assert_eq!(
        hash(&lscpu),
        hash(&sysfs),
        "ryzen-2ccx from lscpu and from sysfs"
    );
    let (code, _, err) = schedlab(&[
        "suite",
        "--topology",
        &format!("lscpu:{fx}/broken.lscpu"),
        "--rows",
        "ipc.reqrep.8",
    ]);
    assert_eq!(code, 2, "a broken topology file is bad input: {err}");
    assert!(
        err.contains("broken.lscpu:4:7"),
        "the error has its position: {err}"
    );
    let (code, _, err) = schedlab(&["trace", "split_pair", "--topology", "nope"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("sysfs:ROOT") && err.contains("lscpu:FILE"),
        "{err}"
    );
}

/// An rt-app file runs like any scenario (on `--topology`), its notes
/// first; a broken one is exit 2 with its place.
#[test]
fn rt_app_files_run_from_the_command_line() {
    let f = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/rt-app/periodic.json"
    );
    let (code, out, err) = schedlab(&["run", f, "--topology", "t14", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("note: ") && err.contains("calibration"),
        "the notes: {err}"
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["topology"], "t14");
    assert_eq!(v["scenario"], "periodic");
    let bad_tmp = tempfile::tempdir().expect("a temp dir");
    let bad = bad_tmp.path().join("bad.json");
    std::fs::write(
        &bad,
        "{ \"tasks\": { \"a\": { \"run\": 1,\n \"cpus\": [99] } } }",
    )
    .unwrap();
    let (code, _, err) = schedlab(&["run", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cpus: expected CPUs below 16 on amd-2x8, found 99"),
        "{err}"
    );
}

/// A timed thread of 5 loops: rt-app's log has 5 lines whose configured
/// columns are the file's, in `--json` and in the files `--rtapp-log`
/// writes, named as rt-app names them.
#[test]
fn an_rt_app_file_prints_rt_apps_log_and_writes_its_files() {
    let d_tmp = tempfile::tempdir().expect("a temp dir");
    let d = d_tmp.path().to_path_buf();
    let f = d.join("five.json");
    std::fs::write(
        &f,
        r#"{ "tasks": { "tick": { "loop": 5, "phases": { "p": { "run": 300, "timer": { "ref": "unique", "period": 2000 } } } },
                        "idle": { "loop": 2, "phases": { "p": { "run": 100, "sleep": 100 } } } } }"#,
    )
    .unwrap();
    let (code, out, err) = schedlab(&["run", f.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let log = &v["runs"][0]["rtapp_log"];
    let tick = log["tick"].as_array().expect("tick's lines");
    assert_eq!(tick.len(), 5, "one line per loop: {log}");
    for l in tick {
        assert_eq!(
            (l["c_duration"].as_u64(), l["c_period"].as_u64()),
            (Some(300), Some(2000)),
            "{l}"
        );
        assert!(l["run"].as_u64() >= Some(300), "ran its 300 µs: {l}");
    }
    assert_eq!(
        tick[1]["period"], 2000,
        "a loop on its timer lasts the period: {}",
        tick[1]
    );
    assert_eq!(log["idle"].as_array().map(Vec::len), Some(2), "{log}");
    assert_eq!(log["idle"][0]["idx"], 1, "the file's second thread");

    let dir = d.join("logs");
    let (code, out, err) = schedlab(&[
        "run",
        f.to_str().unwrap(),
        "--rtapp-log",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("rt-app's log, per thread") && out.contains("tick"),
        "the summary: {out}"
    );
    let text =
        std::fs::read_to_string(dir.join("five-tick-0.log")).expect("rt-app's name for tick's log");
    let lines = schedlab_scenarios::rtapp::log::parse(&text).expect("rt-app's layout");
    assert_eq!(lines.len(), 5, "{text}");
    assert!(dir.join("five-idle-1.log").exists(), "idle's log");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A scenario file without [topology] runs on --topology (amd-2x8 when
/// none is given, as built-ins do); over a file's own [topology],
/// --topology wins with a note.
#[test]
fn a_scenario_file_without_a_topology_runs_on_the_one_given() {
    let d_tmp = tempfile::tempdir().expect("a temp dir");
    let d = d_tmp.path().to_path_buf();
    let f = d.join("bare.toml");
    std::fs::write(
        &f,
        "[[task]]\nname = \"a\"\ncpu = 1\nprogram = [{ run = 1000 }]\n",
    )
    .unwrap();
    let f = f.to_str().unwrap();
    for (topo, want) in [
        (None, "amd-2x8"),
        (Some("sysfs"), "sysfs"),
        (Some("t14"), "t14"),
    ] {
        let mut args = vec!["run", f, "--json"];
        args.extend(topo.iter().flat_map(|t| ["--topology", *t]));
        let (code, out, err) = schedlab(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(v["topology"], want, "{args:?}");
    }
    let named = d.join("named.toml");
    std::fs::write(
        &named,
        "[topology]\npreset = \"genoa-96\"\n[[task]]\nname = \"a\"\ncpu = 1\nprogram = [{ run = 1000 }]\n",
    )
    .unwrap();
    let (code, out, err) = schedlab(&[
        "run",
        named.to_str().unwrap(),
        "--topology",
        "t14",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("runs on t14, not on the [topology] it names"),
        "the note: {err}"
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v["topology"], "t14");
    std::fs::remove_dir_all(&d).unwrap();
}

/// `--policies` runs the scenario under each policy and prints one row
/// per policy, in the order given.
#[test]
fn policies_side_by_side() {
    let (code, out, err) = schedlab(&[
        "run",
        "split_pair",
        "--policies",
        "home,linux,waker-streak",
        "--seeds",
        "2",
    ]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ["home", "linux", "waker-streak"].contains(w))
        .collect();
    assert_eq!(rows, ["home", "linux", "waker-streak"], "{out}");
    let (code, _, err) = schedlab(&["run", "split_pair", "--policies", "home,nope"]);
    assert_eq!(code, 2, "an unknown policy is bad input: {err}");
}

/// `--kernel` and `--features` name the fair class; every run says which
/// it ran (header and JSON), its hash depends on it, and a wrong name is
/// an error that lists the right ones.
#[test]
fn the_fair_class_is_named_by_kernel_and_features() {
    let json = |args: &[&str]| {
        let mut all = vec!["run", "split_pair", "--seed", "1", "--json"];
        all.extend_from_slice(args);
        let (code, out, err) = schedlab(&all);
        assert_eq!(code, 0, "{args:?}: {err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let v = json(&["--kernel", "6.18", "--features", "NO_DELAY_DEQUEUE,hrtick"]);
    assert_eq!(
        v["fair"]["kernel"], "6.18+NO_DELAY_DEQUEUE,HRTICK",
        "{}",
        v["fair"]
    );
    let all = v["fair"]["features"].as_str().unwrap();
    assert!(
        all.contains("NO_DELAY_DEQUEUE") && all.contains(" NEXT_BUDDY"),
        "{all}"
    );
    assert_eq!(v["fair"]["hz"], 1000, "amd-2x8 is a preset: HZ 1000");
    assert_eq!(v["params"]["kernel"], "6.18", "the parameters as given");
    let (code, out, _) = schedlab(&["features", "--json"]);
    assert_eq!(code, 0);
    let f: serde_json::Value = serde_json::from_str(&out).unwrap();
    let linux = json(&["--policy", "linux"]);
    assert_eq!(
        linux["fair"]["kernel"], f["linux_default"],
        "linux brings its release"
    );
    let home = json(&["--policy", "home"]);
    assert_eq!(
        home["fair"]["kernel"], f["default"],
        "home runs the model's base"
    );
    let h = |v: &serde_json::Value| v["runs"][0]["trace_hash"].clone();
    assert_ne!(
        h(&json(&["--policy", "home", "--kernel", "6.19"])),
        h(&home),
        "another fair class, another hash"
    );
    let (code, _, err) = schedlab(&["run", "split_pair", "--features", "DELAY_DEQUE"]);
    assert_eq!(code, 2, "an unknown feature is bad input");
    assert!(
        err.contains("unknown feature \"DELAY_DEQUE\"")
            && err.contains("DELAY_DEQUEUE, DELAY_ZERO"),
        "the error names it and lists the known ones: {err}"
    );
    let (code, _, err) = schedlab(&["run", "split_pair", "--kernel", "6.17"]);
    assert_eq!(code, 2);
    assert!(err.contains("base, 6.12, 6.18, 6.19, 7.2"), "{err}");
    let (code, out, err) = schedlab(&["run", "split_pair", "--seed", "1", "--kernel", "7.2"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .next()
            .unwrap()
            .contains("fair class 7.2 at 1000 Hz"),
        "{out}"
    );
}
