//! The built-in policies' names: the one parser and printer of them.

use core::fmt;
use core::str::FromStr;

use crate::config::PolicyNameError;
use crate::streak::WAKER_RUN;

/// The built-in policies by name: `home`, `waker-streak` (the seed's run,
/// [`WAKER_RUN`]) and `waker-streak:K`. The one parser and printer of these
/// names; the CLI, scenario files and `--param policy=` all use it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BuiltinPolicy {
    Home,
    WakerStreak {
        waker_run: u8,
        /// Flagged wakes count too (`waker-streak:K:flags`).
        flags: bool,
    },
    /// Linux 6.19's wake placement (`crate::linux`).
    Linux,
    /// Linux with 7.2's cache-aware scheduling (`linux-cas`, or
    /// `linux-cas:P:I[:T]`: `llc_overaggr_pct`, `llc_imb_pct` and
    /// `llc_aggr_tolerance`, 1 when not named; 100 lifts the thread-count
    /// limit, as the RFC series before v1 had none).
    LinuxCas(crate::config::CasTunables),
    /// `linux-cas` steering wakes toward the preferred LLC as the RFC
    /// series did (`linux-cas-wake[:P:I]`).
    LinuxCasWake(crate::config::CasTunables),
}

impl fmt::Display for BuiltinPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuiltinPolicy::Home => f.write_str("home"),
            BuiltinPolicy::Linux => f.write_str("linux"),
            BuiltinPolicy::LinuxCas(t) if *t == crate::config::CasTunables::default() => {
                f.write_str("linux-cas")
            }
            BuiltinPolicy::LinuxCas(t) => write!(f, "linux-cas:{}", CasArg(t)),
            BuiltinPolicy::LinuxCasWake(t) if *t == crate::config::CasTunables::default() => {
                f.write_str("linux-cas-wake")
            }
            BuiltinPolicy::LinuxCasWake(t) => write!(f, "linux-cas-wake:{}", CasArg(t)),
            BuiltinPolicy::WakerStreak {
                waker_run,
                flags: true,
            } => write!(f, "waker-streak:{waker_run}:flags"),
            BuiltinPolicy::WakerStreak { waker_run, .. } if *waker_run == WAKER_RUN => {
                f.write_str("waker-streak")
            }
            BuiltinPolicy::WakerStreak { waker_run, .. } => write!(f, "waker-streak:{waker_run}"),
        }
    }
}

/// `P:I`, or `P:I:T` when the tolerance is not the default.
struct CasArg<'a>(&'a crate::config::CasTunables);

impl fmt::Display for CasArg<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0;
        write!(f, "{}:{}", t.overaggr_pct, t.imb_pct)?;
        if t.aggr_tolerance != crate::config::CasTunables::default().aggr_tolerance {
            write!(f, ":{}", t.aggr_tolerance)?;
        }
        Ok(())
    }
}

impl FromStr for BuiltinPolicy {
    type Err = PolicyNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (family, arg) = match s.split_once(':') {
            Some((f, a)) => (f, Some(a)),
            None => (s, None),
        };
        match (family, arg) {
            ("home", None) => Ok(BuiltinPolicy::Home),
            ("linux", None) => Ok(BuiltinPolicy::Linux),
            ("linux-cas", None) => Ok(BuiltinPolicy::LinuxCas(Default::default())),
            ("linux-cas-wake", None) => Ok(BuiltinPolicy::LinuxCasWake(Default::default())),
            ("linux-cas" | "linux-cas-wake", Some(arg)) => {
                let bad = || {
                    PolicyNameError(alloc::format!(
                        "policy {s:?}: expected {family}:P:I or {family}:P:I:T, P = llc_overaggr_pct, I = llc_imb_pct and T = llc_aggr_tolerance in 0..=100"
                    ))
                };
                let (p, rest) = arg.split_once(':').ok_or_else(bad)?;
                let (i, tol) = match rest.split_once(':') {
                    Some((i, t)) => (i, Some(t)),
                    None => (rest, None),
                };
                let pct = |v: &str| v.parse::<u32>().ok().filter(|v| *v <= 100).ok_or_else(bad);
                let default = crate::config::CasTunables::default();
                let t = crate::config::CasTunables {
                    overaggr_pct: pct(p)?,
                    imb_pct: pct(i)?,
                    aggr_tolerance: tol.map_or(Ok(default.aggr_tolerance), pct)?,
                    ..default
                };
                Ok(match family {
                    "linux-cas" => BuiltinPolicy::LinuxCas(t),
                    _ => BuiltinPolicy::LinuxCasWake(t),
                })
            }
            ("waker-streak", None) => Ok(BuiltinPolicy::WakerStreak {
                waker_run: WAKER_RUN,
                flags: false,
            }),
            ("waker-streak", Some(arg)) => {
                let (k, flags) = match arg.split_once(':') {
                    Some((k, "flags")) => (k, true),
                    Some(_) => {
                        return Err(PolicyNameError(alloc::format!(
                            "policy {s:?}: expected waker-streak:K or waker-streak:K:flags"
                        )))
                    }
                    None => (arg, false),
                };
                match k.parse::<u8>() {
                    Ok(k) if (1..=crate::streak::MAX_RUN).contains(&k) => {
                        Ok(BuiltinPolicy::WakerStreak { waker_run: k, flags })
                    }
                    _ => Err(PolicyNameError(alloc::format!(
                        "policy {s:?}: the run K of waker-streak:K must be 1..={}",
                        crate::streak::MAX_RUN
                    ))),
                }
            }
            ("home" | "linux", Some(_)) => Err(PolicyNameError(alloc::format!(
                "policy {s:?}: {family} takes no argument"
            ))),
            _ => Err(PolicyNameError(alloc::format!(
                "policy {s:?}: expected home, waker-streak, waker-streak:K, waker-streak:K:flags, linux, linux-cas or linux-cas:P:I[:T]"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn linux_cas_takes_its_tunables_and_prints_them_back() {
        let p: BuiltinPolicy = "linux-cas:50:20:100".parse().expect("three tunables");
        let BuiltinPolicy::LinuxCas(t) = p else {
            panic!("expected linux-cas, got {p}")
        };
        assert_eq!((t.overaggr_pct, t.imb_pct, t.aggr_tolerance), (50, 20, 100));
        assert_eq!(p.to_string(), "linux-cas:50:20:100");
        let q: BuiltinPolicy = "linux-cas-wake:60:10".parse().expect("two tunables");
        assert_eq!(
            q.to_string(),
            "linux-cas-wake:60:10",
            "the default tolerance is not printed"
        );
        let err = "linux-cas:50:20:101".parse::<BuiltinPolicy>().unwrap_err();
        assert!(err.0.contains("llc_aggr_tolerance"), "{}", err.0);
    }
}
