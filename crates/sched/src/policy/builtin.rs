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
    /// Linux with 7.2's cache-aware scheduling (`linux-cas` or
    /// `linux-cas:P:I`: `llc_overaggr_pct` and `llc_imb_pct`).
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
            BuiltinPolicy::LinuxCas(t) => write!(f, "linux-cas:{}:{}", t.overaggr_pct, t.imb_pct),
            BuiltinPolicy::LinuxCasWake(t) if *t == crate::config::CasTunables::default() => {
                f.write_str("linux-cas-wake")
            }
            BuiltinPolicy::LinuxCasWake(t) => {
                write!(f, "linux-cas-wake:{}:{}", t.overaggr_pct, t.imb_pct)
            }
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
                        "policy {s:?}: expected {family}:P:I, P = llc_overaggr_pct and I = llc_imb_pct in 0..=100"
                    ))
                };
                let (p, i) = arg.split_once(':').ok_or_else(bad)?;
                let pct = |v: &str| v.parse::<u32>().ok().filter(|v| *v <= 100).ok_or_else(bad);
                let t = crate::config::CasTunables {
                    overaggr_pct: pct(p)?,
                    imb_pct: pct(i)?,
                    ..Default::default()
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
                "policy {s:?}: expected home, waker-streak, waker-streak:K, waker-streak:K:flags, linux, linux-cas or linux-cas:P:I"
            ))),
        }
    }
}
