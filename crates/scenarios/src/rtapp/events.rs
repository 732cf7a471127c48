//! rt-app's events, each made into simulator ops (the module doc of
//! [`super`] says how each maps).

use schedlab_sim::Op;
use serde_json::value::RawValue;

use super::json::{Reader, Res};
use super::log;
use super::MEM_BYTES_PER_NS;

/// Event names in `obj_is_event()`'s order (a key is the first it starts
/// with).
pub(super) const EVENTS: &[&str] = &[
    "lock", "unlock", "wait", "signal", "broad", "sync", "sleep", "runtime", "run", "timer",
    "suspend", "resume", "mem", "iorun", "yield", "barrier", "fork",
];

/// A `{ref, mutex}` object's two names (rt-app's default for both:
/// `"unknown"`).
fn ref_mutex<'a>(r: &Reader<'a>, v: &'a RawValue) -> Res<(String, String)> {
    let (mut re, mut mutex) = ("unknown".to_string(), "unknown".to_string());
    for (k, x) in r.obj(v)?.0 {
        match k.as_str() {
            "ref" => re = r.string(x)?,
            "mutex" => mutex = r.string(x)?,
            _ => return Err(r.at(x, format!("unknown key {k:?}: expected ref or mutex"))),
        }
    }
    Ok((re, mutex))
}

pub(super) fn event<'a>(
    r: &mut Reader<'a>,
    ev: &str,
    v: &'a RawValue,
    names: &[&str],
    me: &str,
    out: &mut Vec<Op>,
) -> Res<()> {
    let lock = |l: &str| Op::Lock { lock: l.into() };
    let unlock = |l: &str| Op::Unlock { lock: l.into() };
    let wait = |c: &str, l: &str| Op::CondWait {
        cond: c.into(),
        lock: Some(l.into()),
    };
    let task_named = |r: &Reader<'a>, what: &str| -> Res<String> {
        let n = r.string(v)?;
        if !names.contains(&n.as_str()) {
            return Err(r.at(
                v,
                format!(
                    "{what} names {n:?}, which is no task: expected one of {}",
                    names.join(", ")
                ),
            ));
        }
        Ok(n)
    };
    match ev {
        // Stamped for rt-app's log (`log`): the event's wall time.
        "run" | "runtime" => {
            let ns = r.us(v)?;
            out.extend([
                stamp(log::RUN),
                if ev == "run" {
                    Op::Run(ns)
                } else {
                    Op::RunFor(ns)
                },
                stamp(log::RUN_END),
            ]);
        }
        "sleep" => out.push(Op::Sleep(r.us(v)?)),
        "mem" | "iorun" => {
            let bytes = u64::try_from(r.int(v)?)
                .map_err(|_| r.at(v, "expected a size in bytes, 0 or more".into()))?;
            r.note(
                v,
                &format!("{ev}: run for {bytes} B at {MEM_BYTES_PER_NS} B/ns (an estimate)"),
            );
            out.push(Op::Run(bytes / MEM_BYTES_PER_NS));
        }
        "lock" => {
            let m = r.string(v)?;
            r.held.insert(m.clone());
            out.push(lock(&m));
        }
        "unlock" => {
            let m = r.string(v)?;
            if !r.held.remove(&m) {
                return Err(r.at(
                    v,
                    format!("unlock {m:?} in thread {me:?}, which does not hold it here: undefined for a default mutex (lock it first)"),
                ));
            }
            out.push(unlock(&m));
        }
        "signal" => out.push(Op::CondSignal {
            cond: r.target(r.string(v)?),
        }),
        "broad" => out.push(Op::CondBroadcast {
            cond: r.target(r.string(v)?),
        }),
        "wait" => {
            let (c, m) = ref_mutex(r, v)?;
            out.push(wait(&c, &m));
        }
        "sync" => {
            let (c, m) = ref_mutex(r, v)?;
            out.push(Op::CondSignal { cond: c.clone() });
            out.push(wait(&c, &m));
        }
        // A resource's name, not a thread's (run_event()).
        "suspend" => {
            let n = r.string(v)?;
            out.extend([lock(&n), wait(&n, &n), unlock(&n)]);
        }
        "resume" => {
            let n = r.string(v)?;
            out.extend([lock(&n), Op::CondBroadcast { cond: n.clone() }, unlock(&n)]);
        }
        "timer" => out.extend([stamp(log::TIMER), timer(r, v, me)?, stamp(log::TIMER_END)]),
        "yield" => out.push(Op::Yield),
        "barrier" => out.push(Op::Barrier {
            barrier: r.string(v)?,
            n: 0,
        }),
        "fork" => out.push(Op::Spawn {
            program: task_named(r, "fork")?,
        }),
        _ => unreachable!("EVENTS lists {ev}"),
    }
    Ok(())
}

/// A stamp for rt-app's log.
pub(super) fn stamp(what: &str) -> Op {
    Op::Stamp {
        metric: what.into(),
    }
}

/// Marks a per-thread timer's name, replaced by the instance's own.
pub(super) const UNIQUE: &str = "\u{0}unique:";

fn timer<'a>(r: &Reader<'a>, v: &'a RawValue, me: &str) -> Res<Op> {
    let (mut re, mut period, mut absolute) = ("unknown".to_string(), 0, false);
    for (k, x) in r.obj(v)?.0 {
        match k.as_str() {
            "ref" => re = r.string(x)?,
            "period" => period = r.us(x)?,
            "mode" => {
                absolute = match r.string(x)?.as_str() {
                    "absolute" => true,
                    "relative" => false,
                    m => return Err(r.at(x, format!("expected relative or absolute, found {m:?}"))),
                }
            }
            _ => {
                return Err(r.at(
                    x,
                    format!("unknown key {k:?}: expected ref, period or mode"),
                ))
            }
        }
    }
    if re.starts_with("unique") {
        re = format!("{UNIQUE}{me}:{re}");
    }
    Ok(Op::Timer {
        timer: re,
        period,
        absolute,
        stamp: Some(log::EXPIRY.into()),
    })
}
