//! Policies by name: what a [`SimSpec`] runs, and the registry every name a
//! user writes (`--policy`, `--base`, `--head`, `policy = ".."` in a file,
//! `--param policy=..`) is looked up in.
//!
//! The scheduler is generic over its policy, so a simulation is an
//! [`Engine<P>`] for one `P`. A [`PolicyRef`] is a named, type-erased way to
//! start one: the only dynamic dispatch is this one call per run. A
//! [`Registry`] maps a family name (`home`, `waker-streak`, or a user's
//! own) to a constructor that takes the name's argument (`waker-streak:4`
//! gives `4`), so a binary of the user's can add a policy and get every
//! command with it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use schedlab_sched::linux::Linux;
use schedlab_sched::{BalanceKind, Balancer, BuiltinPolicy, Home, Policy, WakerStreakRule};

use crate::engine::{Engine, Outcome};
pub use crate::spec::PolicyRef;
use crate::spec::{Run, SimSpec};

impl<P: Policy, B: Balancer> Run for Engine<P, B> {
    fn run(self: Box<Self>) -> Outcome {
        Engine::run(*self)
    }
}

impl PolicyRef {
    /// `policy` under `name` (its canonical name: what outputs print).
    pub fn new<P: Policy>(name: impl Into<String>, policy: P) -> PolicyRef {
        PolicyRef {
            name: name.into(),
            spawn: policy.spawn_rule(),
            balance: policy.balance_rule(),
            features: policy.fair_features(),
            start: Arc::new(move |spec: &SimSpec, seed: u64| -> Box<dyn Run> {
                Box::new(Engine::new(spec, seed, policy.clone()))
            }),
        }
    }

    /// `policy` under `name`, bringing the balancer `B` as its own
    /// ([`BalanceKind::Own`]): a run balances with `B` unless its user
    /// names a built-in balancer (`balance = "seed"`, `--param
    /// balance=linux`), which wins as it does over any policy's own.
    pub fn with_balancer<P: Policy, B: Balancer>(name: impl Into<String>, policy: P) -> PolicyRef {
        PolicyRef {
            name: name.into(),
            spawn: policy.spawn_rule(),
            balance: Some(BalanceKind::Own),
            features: policy.fair_features(),
            start: Arc::new(move |spec: &SimSpec, seed: u64| -> Box<dyn Run> {
                if spec.config.balance.kind == BalanceKind::Own {
                    Box::new(Engine::<P, B>::with_balancer(spec, seed, policy.clone()))
                } else {
                    Box::new(Engine::new(spec, seed, policy.clone()))
                }
            }),
        }
    }
}

impl From<BuiltinPolicy> for PolicyRef {
    fn from(b: BuiltinPolicy) -> PolicyRef {
        match b {
            BuiltinPolicy::Home => PolicyRef::new(b.to_string(), Home),
            BuiltinPolicy::WakerStreak { waker_run, flags } => {
                PolicyRef::new(b.to_string(), WakerStreakRule { waker_run, flags })
            }
            BuiltinPolicy::Linux => PolicyRef::new(b.to_string(), Linux::default()),
            BuiltinPolicy::LinuxCas(t) => PolicyRef::new(b.to_string(), Linux::cas(t)),
            BuiltinPolicy::LinuxCasWake(t) => PolicyRef::new(b.to_string(), Linux::cas_wake(t)),
        }
    }
}

impl Default for PolicyRef {
    /// The seed's rule at its run, `waker-streak`.
    fn default() -> PolicyRef {
        PolicyRef::new("waker-streak", WakerStreakRule::default())
    }
}

type Make = dyn Fn(Option<&str>) -> Result<PolicyRef, String> + Send + Sync;

#[derive(Clone)]
struct Family {
    about: String,
    make: Arc<Make>,
}

/// Policy families by name.
#[derive(Clone)]
pub struct Registry {
    families: BTreeMap<String, Family>,
}

impl Default for Registry {
    fn default() -> Registry {
        Registry::builtin()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.families.keys()).finish()
    }
}

impl Registry {
    /// The built-in families: `home`, `waker-streak[:K[:flags]]`, `linux`
    /// and `linux-cas[:P:I]`.
    pub fn builtin() -> Registry {
        let mut r = Registry {
            families: BTreeMap::new(),
        };
        let builtin = |family: &'static str| {
            move |arg: Option<&str>| {
                let name = match arg {
                    Some(a) => format!("{family}:{a}"),
                    None => family.to_string(),
                };
                name.parse::<BuiltinPolicy>()
                    .map(PolicyRef::from)
                    .map_err(|e| e.0)
            }
        };
        r.add(
            "home",
            "the seed's base: back to the CPU it parked on, or a wake forward in its LLC",
            builtin("home"),
        );
        r.add(
            "waker-streak",
            "home plus the seed's rule: K parked wakes in a row from another LLC move it there (K = 8; waker-streak:K; waker-streak:K:flags counts flagged wakes too)",
            builtin("waker-streak"),
        );
        r.add(
            "waker-streak+lb",
            "the seed's rule beside Linux's load balancer, upstream's setup when it saw bouncing (waker-streak with balance=linux; waker-streak+lb:K)",
            move |arg: Option<&str>| {
                let base = builtin("waker-streak")(arg)?;
                let name = match arg {
                    Some(a) => format!("waker-streak+lb:{a}"),
                    None => "waker-streak+lb".to_string(),
                };
                Ok(base.with_balance(name, BalanceKind::Linux))
            },
        );
        r.add(
            "linux",
            "Linux 6.19's wake and fork placement (select_task_rq_fair, wakes decided on the waker) and its load balancer (sched domains, periodic, newly idle and nohz idle balancing)",
            builtin("linux"),
        );
        r.add(
            "linux-cas-wake",
            "linux-cas whose wake path also steers a task toward its process's preferred LLC, as the RFC series before v4 did (select_cache_cpu()), with the balancer's guards (linux-cas-wake:P:I as linux-cas:P:I)",
            builtin("linux-cas-wake"),
        );
        r.add(
            "linux-cas",
            "linux plus Linux 7.2's cache-aware scheduling: the balancer gathers a process's threads in its preferred LLC unless that LLC is busy (linux-cas:P:I sets llc_overaggr_pct and llc_imb_pct; defaults 50 and 20)",
            builtin("linux-cas"),
        );
        r
    }

    /// Adds (or replaces) a family whose constructor takes the argument
    /// after `family:`, if any.
    pub fn add(
        &mut self,
        family: &str,
        about: &str,
        make: impl Fn(Option<&str>) -> Result<PolicyRef, String> + Send + Sync + 'static,
    ) -> &mut Self {
        self.families.insert(
            family.to_string(),
            Family {
                about: about.to_string(),
                make: Arc::new(make),
            },
        );
        self
    }

    /// Adds a policy that takes no argument, under `name`.
    pub fn add_policy<P: Policy>(&mut self, name: &str, about: &str, policy: P) -> &mut Self {
        let family = name.to_string();
        self.add(name, about, move |arg| match arg {
            None => Ok(PolicyRef::new(family.clone(), policy.clone())),
            Some(a) => Err(format!("policy {family:?} takes no argument (got {a:?})")),
        })
    }

    /// Adds a policy that takes no argument and brings the balancer `B`
    /// as its own ([`PolicyRef::with_balancer`]), under `name`.
    pub fn add_policy_with_balancer<P: Policy, B: Balancer>(
        &mut self,
        name: &str,
        about: &str,
        policy: P,
    ) -> &mut Self {
        let family = name.to_string();
        self.add(name, about, move |arg| match arg {
            None => Ok(PolicyRef::with_balancer::<P, B>(
                family.clone(),
                policy.clone(),
            )),
            Some(a) => Err(format!("policy {family:?} takes no argument (got {a:?})")),
        })
    }

    /// The policy `name` names (`family` or `family:ARG`).
    pub fn resolve(&self, name: &str) -> Result<PolicyRef, String> {
        let (family, arg) = match name.split_once(':') {
            Some((f, a)) => (f, Some(a)),
            None => (name, None),
        };
        match self.families.get(family) {
            Some(f) => (f.make)(arg),
            None => Err(format!(
                "unknown policy {name:?}: expected one of {}",
                self.families
                    .keys()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// `(family, what it is)` in name order.
    pub fn families(&self) -> impl Iterator<Item = (&str, &str)> {
        self.families
            .iter()
            .map(|(n, f)| (n.as_str(), f.about.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_names_resolve_to_their_canonical_form() {
        let r = Registry::builtin();
        for (given, canonical) in [
            ("home", "home"),
            ("waker-streak", "waker-streak"),
            ("waker-streak:8", "waker-streak"),
            ("waker-streak:4", "waker-streak:4"),
            ("linux", "linux"),
            ("linux-cas", "linux-cas"),
            ("linux-cas:50:20", "linux-cas"),
            ("linux-cas:30:10", "linux-cas:30:10"),
        ] {
            let p = r.resolve(given).unwrap_or_else(|e| panic!("{given}: {e}"));
            assert_eq!(p.name(), canonical, "{given} resolves to {canonical}");
        }
        for bad in [
            "nope",
            "home:1",
            "linux:2",
            "waker-streak:0",
            "waker-streak:x",
            "linux-cas:50",
            "linux-cas:101:20",
            "",
        ] {
            assert!(r.resolve(bad).is_err(), "{bad:?} must be refused");
        }
    }

    /// Each Linux policy brings its balancer; `linux-cas:P:I` carries its
    /// tunables into it, the others keep the upstream defaults.
    #[test]
    fn linux_policies_bring_their_balancers_with_their_tunables() {
        let r = Registry::builtin();
        let kind = |n: &str| r.resolve(n).unwrap().balance_rule();
        assert_eq!(kind("home"), None);
        assert_eq!(kind("linux"), Some(BalanceKind::Linux));
        let Some(BalanceKind::LinuxCas(t)) = kind("linux-cas:30:10") else {
            panic!("linux-cas brings the cache-aware balancer");
        };
        assert_eq!(
            (t.overaggr_pct, t.imb_pct, t.epoch_ns),
            (30, 10, 10_000_000)
        );
        let Some(BalanceKind::LinuxCas(d)) = kind("linux-cas") else {
            panic!("linux-cas brings the cache-aware balancer");
        };
        assert_eq!(d, schedlab_sched::CasTunables::default());
    }

    /// `waker-streak+lb` is the seed's rule (its run K carried) with
    /// Linux's balancer as its own, and nothing else of Linux's: no fork
    /// path of Linux's.
    #[test]
    fn waker_streak_lb_is_the_rule_with_linux_s_balancer() {
        let r = Registry::builtin();
        for (given, name) in [
            ("waker-streak+lb", "waker-streak+lb"),
            ("waker-streak+lb:4", "waker-streak+lb:4"),
        ] {
            let p = r.resolve(given).unwrap();
            assert_eq!(p.name(), name);
            assert_eq!(p.balance_rule(), Some(BalanceKind::Linux), "{given}");
            assert_eq!(
                p.spawn_rule(),
                r.resolve("waker-streak").unwrap().spawn_rule(),
                "{given}: the rule's spawn placement"
            );
        }
        assert!(r.resolve("waker-streak+lb:0").is_err());
    }
}
