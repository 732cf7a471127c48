//! What every command prints with: numbers for tables and JSON, a run's
//! header pieces, and stalled runs' reports. Commands print; this module
//! only formats, below all of them.

use schedlab_scenarios::Scenario;
use schedlab_sim::Outcome;
use serde_json::{json, Value};

use crate::Failure;

pub(crate) fn num(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        json!(v as i64)
    } else {
        json!((v * 1e4).round() / 1e4)
    }
}

pub(crate) fn fmt(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// A scenario's parameters as `k=v k=v`, for a run's header line.
pub(crate) fn params_text(s: &Scenario) -> String {
    s.params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Each stalled run's report, with its seed (or rep: `what`), for JSON.
pub(crate) fn stalls_json<'o>(
    outs: impl IntoIterator<Item = &'o Outcome>,
    what: &str,
) -> Vec<Value> {
    outs.into_iter()
        .filter_map(|o| {
            o.stall.as_ref().map(|st| {
                let mut v = serde_json::to_value(st).expect("plain data");
                v[what] = json!(o.seed);
                v
            })
        })
        .collect()
}

/// Each stalled run's report on stderr, named by its seed (or rep:
/// `what`); exit 3 when one stalled, unless `allow`.
pub(crate) fn stalled<'o>(
    outs: impl IntoIterator<Item = &'o Outcome>,
    what: &str,
    allow: bool,
) -> Result<(), Failure> {
    let outs: Vec<&Outcome> = outs.into_iter().collect();
    let n = outs.iter().filter(|o| o.stall.is_some()).count();
    for o in &outs {
        if let Some(st) = &o.stall {
            eprintln!("{what} {}: {st}", o.seed);
        }
    }
    if n > 0 && !allow {
        return Err(Failure::Stall(format!(
            "{n} of {} run(s) stalled (exit 3; --allow-stall accepts them)",
            outs.len()
        )));
    }
    Ok(())
}

/// A run's fair class for its header: `6.19 at 1000 Hz`.
pub(crate) fn fair_text(s: &Scenario) -> String {
    let f = &s.spec.config.fair;
    format!("fair class {} at {} Hz", f.features, f.hz())
}

/// A run's fair class for its JSON: the release with its overrides, every
/// feature as debugfs prints them, and the tick.
pub(crate) fn fair_json(s: &Scenario) -> Value {
    let f = &s.spec.config.fair;
    json!({"kernel": f.features.to_string(), "features": f.features.on.to_string(), "hz": f.hz()})
}

/// A value to four significant figures.
pub(crate) fn sig(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}
