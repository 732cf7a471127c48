//! What the loaders check of programs before a run: what cannot run is an
//! error (a loop that would spin without spending time, a spawn recursion
//! with no bound, a wake of no one, a barrier of no one), and what runs
//! but likely not as meant is a warning (a port called but never served).
//! The simulator still guards at run time (its watchdog and task-table
//! limit stop a run with a stall report): these checks say it earlier,
//! with the place.

use std::collections::{BTreeMap, BTreeSet};

use schedlab_sim::Op;

/// The most instructions a task runs without spending time before the
/// simulator's watchdog stops the run (`engine::interp`'s limit).
const WATCHDOG: u64 = 10_000;

/// Whether `op` can take simulated time (or hand the CPU away).
pub fn spends_time(op: &Op) -> bool {
    match op {
        Op::Run(ns) | Op::RunFor(ns) | Op::Sleep(ns) => *ns > 0,
        Op::RandomSleep { max, .. } => *max > 0,
        Op::Timer { period, .. } => *period > 0,
        Op::Loop { n, body } => *n > 0 && body.iter().any(spends_time),
        Op::Unlock { .. }
        | Op::Lap { .. }
        | Op::LapStart { .. }
        | Op::Count { .. }
        | Op::WakeLap { .. }
        | Op::Leave => false,
        _ => true,
    }
}

/// Instructions one pass of `ops` runs (a loop: its start, its body each
/// time, its end), saturating.
fn instructions(ops: &[Op]) -> u64 {
    ops.iter().fold(0u64, |acc, op| {
        let n = match op {
            Op::Loop { n, body } => n.saturating_mul(instructions(body).saturating_add(1)),
            _ => 1,
        };
        acc.saturating_add(n)
    })
}

/// The ops' own faults: the first, as a sentence.
pub fn check_ops(ops: &[Op], programs: &BTreeMap<String, Vec<Op>>) -> Result<(), String> {
    for (i, op) in ops.iter().enumerate() {
        let at = |m: String| format!("op {}: {m}", i + 1);
        match op {
            Op::Spawn { program } | Op::Fork { program } if !programs.contains_key(program) => {
                let what = if matches!(op, Op::Fork { .. }) {
                    "fork"
                } else {
                    "spawn"
                };
                return Err(at(format!(
                    "{what} names program {program:?}, which [programs] does not define"
                )));
            }
            Op::Loop { n, body } => {
                if !body.iter().any(spends_time)
                    && instructions(std::slice::from_ref(op)) > WATCHDOG
                {
                    return Err(at(format!(
                        "a loop of {n} whose body never spends time (no run, sleep, wait or syscall): it would spin with the clock stopped; give the body some work or lower n"
                    )));
                }
                check_ops(body, programs).map_err(|m| at(format!("in the loop, {m}")))?;
            }
            Op::RandomSleep { min, max } if min > max => {
                return Err(at(format!(
                    "random_sleep: expected min <= max, found {min} > {max}"
                )));
            }
            Op::FutexWake { n: 0, .. } => {
                return Err(at(
                    "futex_wake of n = 0 wakes no one: expected n >= 1".into()
                ));
            }
            Op::Barrier { n: 0, .. } => {
                return Err(at("barrier of n = 0: expected n >= 1 arrivals".into()));
            }
            Op::Timer { period: 0, .. } => {
                return Err(at(
                    "timer of period 0: expected a period of 1 ns or more".into()
                ));
            }
            Op::ExpSleep { mean: 0 } => {
                return Err(at(
                    "exp_sleep of mean 0: expected a mean of 1 ns or more".into()
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Every op of `ops` in order, loop bodies included.
pub fn for_each_op<'a>(ops: &'a [Op], f: &mut impl FnMut(&'a Op)) {
    for op in ops {
        f(op);
        if let Op::Loop { body, .. } = op {
            for_each_op(body, f);
        }
    }
}

/// The programs `ops` spawns, loops included.
fn spawned<'a>(ops: &'a [Op], out: &mut BTreeSet<&'a str>) {
    for_each_op(ops, &mut |op| {
        if let Op::Spawn { program } | Op::Fork { program } = op {
            out.insert(program);
        }
    });
}

/// A cycle of programs each spawning the next (the last spawning the
/// first), if any: with no conditional spawn, such a recursion never
/// ends.
pub fn spawn_cycle(programs: &BTreeMap<String, Vec<Op>>) -> Option<Vec<String>> {
    fn visit<'a>(
        p: &'a str,
        programs: &'a BTreeMap<String, Vec<Op>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|&q| q == p) {
            return Some(path[i..].iter().map(|s| s.to_string()).collect());
        }
        if done.contains(p) {
            return None;
        }
        path.push(p);
        let mut next = BTreeSet::new();
        spawned(programs.get(p).map_or(&[][..], Vec::as_slice), &mut next);
        for q in next {
            if let Some(c) = visit(q, programs, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(p);
        None
    }
    let mut done = BTreeSet::new();
    programs
        .keys()
        .find_map(|p| visit(p, programs, &mut Vec::new(), &mut done))
}

/// The names some op waits on and no op answers: `side` says of an op
/// that it waits on a name (`Some((true, name))`) or answers it
/// (`Some((false, name))`).
fn unanswered<'a>(
    all: impl Iterator<Item = &'a [Op]>,
    side: impl Fn(&Op) -> Option<(bool, String)>,
) -> Vec<String> {
    let (mut waited, mut answered) = (BTreeSet::new(), BTreeSet::new());
    for ops in all {
        for_each_op(ops, &mut |op| match side(op) {
            Some((true, n)) => {
                waited.insert(n);
            }
            Some((false, n)) => {
                answered.insert(n);
            }
            None => {}
        });
    }
    waited.difference(&answered).cloned().collect()
}

/// Ports some program calls and none serves: each call would wait for
/// ever (a warning: a test may mean it).
pub fn unserved_ports<'a>(all: impl Iterator<Item = &'a [Op]>) -> Vec<String> {
    unanswered(all, |op| match op {
        Op::Call { port, .. } => Some((true, port.clone())),
        Op::Serve { port } => Some((false, port.clone())),
        _ => None,
    })
}

/// Futexes and condition variables some program waits on and none wakes:
/// each such wait lasts for ever (a warning, like [`unserved_ports`]).
pub fn never_woken<'a>(all: impl Iterator<Item = &'a [Op]>) -> Vec<String> {
    unanswered(all, |op| match op {
        Op::FutexWait { futex } => Some((true, format!("futex {futex:?}"))),
        Op::FutexWake { futex, .. } => Some((false, format!("futex {futex:?}"))),
        Op::CondWait { cond, .. } => Some((true, format!("condition {cond:?}"))),
        Op::CondSignal { cond } | Op::CondBroadcast { cond } => {
            Some((false, format!("condition {cond:?}")))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progs(v: &[(&str, Vec<Op>)]) -> BTreeMap<String, Vec<Op>> {
        v.iter().map(|(k, o)| (k.to_string(), o.clone())).collect()
    }

    fn spawn(p: &str) -> Op {
        Op::Spawn { program: p.into() }
    }

    #[test]
    fn a_spinning_loop_is_refused_and_a_working_one_is_not() {
        let none = BTreeMap::new();
        let spin = Op::Loop {
            n: 1_000_000_000,
            body: vec![],
        };
        let e = check_ops(&[spin], &none).unwrap_err();
        assert!(e.contains("never spends time"), "{e}");
        let counted = Op::Loop {
            n: 20_000,
            body: vec![Op::Count {
                metric: "m".into(),
                n: 1,
            }],
        };
        assert!(
            check_ops(&[counted], &none).is_err(),
            "a count takes no time"
        );
        let short = Op::Loop { n: 3, body: vec![] };
        assert_eq!(
            check_ops(&[short], &none),
            Ok(()),
            "under the watchdog: harmless"
        );
        let work = Op::Loop {
            n: 1_000_000_000,
            body: vec![Op::Run(1)],
        };
        assert_eq!(check_ops(&[work], &none), Ok(()));
        let nested = Op::Loop {
            n: 1000,
            body: vec![Op::Loop {
                n: 1000,
                body: vec![Op::Unlock { lock: "l".into() }],
            }],
        };
        assert!(check_ops(&[nested], &none).is_err(), "nesting multiplies");
    }

    #[test]
    fn a_spawn_cycle_is_named() {
        let p = progs(&[
            ("a", vec![spawn("b")]),
            ("b", vec![Op::Run(1), spawn("a")]),
            ("c", vec![]),
        ]);
        assert_eq!(spawn_cycle(&p), Some(vec!["a".into(), "b".into()]));
        let p = progs(&[(
            "c",
            vec![Op::Loop {
                n: 2,
                body: vec![spawn("c")],
            }],
        )]);
        assert_eq!(spawn_cycle(&p), Some(vec!["c".into()]));
        let p = progs(&[("a", vec![spawn("b"), spawn("b")]), ("b", vec![Op::Run(1)])]);
        assert_eq!(spawn_cycle(&p), None, "a tree, not a cycle");
    }

    #[test]
    fn a_wait_nobody_wakes_is_found() {
        let a = vec![
            Op::FutexWait { futex: "f".into() },
            Op::CondWait {
                cond: "c".into(),
                lock: None,
            },
        ];
        let b = vec![Op::CondSignal { cond: "c".into() }];
        let all = [a.as_slice(), b.as_slice()];
        assert_eq!(
            never_woken(all.into_iter()),
            vec!["futex \"f\"".to_string()]
        );
    }

    #[test]
    fn a_port_nobody_serves_is_found() {
        let a = vec![Op::Call {
            port: "p".into(),
            bytes: 8,
        }];
        let b = vec![Op::Serve { port: "q".into() }];
        let all = [a.as_slice(), b.as_slice()];
        assert_eq!(unserved_ports(all.into_iter()), vec!["p".to_string()]);
    }
}
