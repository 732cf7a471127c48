//! The fair class's switches by Linux's own names (`kernel/sched/features.h`),
//! and kernel releases as the sets of them they default to.
//!
//! A [`FeatureSet`] is a [`Kernel`] (which release's code: some behaviour
//! changed between releases without a feature of its own) and the
//! features on ([`Features`]). `--kernel 6.18` takes that release's
//! defaults; `--features NAME,NO_NAME` then turns features on and off one
//! by one, spelled as `/sys/kernel/debug/sched/features` spells them.
//!
//! ## The features the model has
//!
//! | feature | default since | what it does here |
//! |---|---|---|
//! | `PLACE_LAG` | 6.6 (86bfbb7ce4f6) | a woken task keeps its lag (`place_entity()`); off: placed at `V` |
//! | `PLACE_DEADLINE_INITIAL` | 6.6 | a new task's first deadline is half a slice away |
//! | `PLACE_REL_DEADLINE` | 6.12 (82e9d0456e06) | a task moved while runnable keeps its deadline relative to its vruntime |
//! | `RUN_TO_PARITY` | 6.6; to the min slice in 6.17 | the running task is not preempted by wakes while protected (`vprot`) |
//! | `PREEMPT_SHORT` | 6.12 (85e511df3cec) | a woken task with a shorter slice ignores that protection |
//! | `NEXT_BUDDY` | off; on in 6.18's stable series (e837456fdca8), off again in 6.19 (4f70f106bca1) | a woken task becomes the next buddy (deadline-aware since the rework); with `WF_SYNC`, `preempt_sync()` |
//! | `PICK_BUDDY` | 6.12 | an eligible next buddy is picked first |
//! | `DELAY_DEQUEUE` | 6.12 (152e11f6df29) | a task that blocks while ineligible stays queued until picked or woken |
//! | `DELAY_ZERO` | 6.12 (54a58a787791) | a delayed task's positive lag is clipped to 0 when it leaves or is woken |
//! | `WAKEUP_PREEMPTION` | always | a wake may preempt the running task at all |
//! | `HRTICK` | off; on where hrtimers rearm deferred in 7.x (9213aa4784cf) | the slice ends at its exact time, not at the next tick |
//!
//! The rest of `features.h` (`CACHE_HOT_BUDDY`, `TTWU_QUEUE`, `SIS_UTIL`,
//! `WA_*`, `UTIL_EST`, `NI_RANDOM`, ...) concerns placement, balancing or
//! accounting: [`FeatureSet::parse`] names them as known to Linux and not
//! switched here, rather than as unknown. (`NI_RANDOM` is modelled, in the
//! Linux balancer, on by default and switched by a scenario's `ni_random`
//! parameter, not by this set.)
//!
//! ## What changed between releases without a feature
//!
//! * **Protection**: 6.12 protects the running entity until its deadline
//!   and asks for a reschedule only when the deadline is renewed
//!   (`update_deadline()`); 6.17 limits protection to the smallest slice
//!   queued (`set_protect_slice()`) and asks once protection ends (commit
//!   0b9ca2dcabc3). Linux asks at every `update_curr()` (the tick, an
//!   enqueue, the wake-up check, a dequeue); the model before these
//!   features asked at the tick only ([`Kernel::Base`]).
//! * **NEXT_BUDDY**: before the rework every non-fork wake set the buddy;
//!   after it (6.18's stable series, 6.19, 7.x) a buddy with an earlier
//!   deadline stays, and a sync wake preempts only once the waker has run
//!   `sysctl_sched_migration_cost` (`preempt_sync()`).
//! * **A waker no longer eligible is preempted** by any wake it posts: in
//!   the rework as 6.18's stable series took it; reverted in 6.19
//!   (15257cc2f905, "Revert force wakeup preemption").
//!
//! [`Kernel::Base`] is the model's fair class before its features were
//! named, kept because the seed's policies and their tests are defined on
//! it: EEVDF with lag placement, half a first slice and protection to the
//! smallest slice, no delayed dequeue, no buddies, a reschedule asked at
//! the tick.

use core::fmt;

/// One of the fair class's switches, as `features.h` names it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Feature {
    bit: u16,
    pub name: &'static str,
    /// What it does, in a line.
    pub about: &'static str,
}

macro_rules! features {
    ($($konst:ident = $bit:literal, $name:literal, $about:literal;)*) => {
        impl Features {
            $(pub const $konst: Features = Features(1 << $bit);)*
        }
        /// Every feature the model has, in `features.h`'s order.
        pub const ALL: &[Feature] = &[
            $(Feature { bit: 1 << $bit, name: $name, about: $about },)*
        ];
    };
}

/// A set of [`Feature`]s.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Features(u16);

features! {
    PLACE_LAG = 0, "PLACE_LAG", "a woken task keeps its lag across the sleep";
    PLACE_DEADLINE_INITIAL = 1, "PLACE_DEADLINE_INITIAL", "a new task's first deadline is half a slice away";
    PLACE_REL_DEADLINE = 2, "PLACE_REL_DEADLINE", "a task moved while runnable keeps its relative deadline";
    RUN_TO_PARITY = 3, "RUN_TO_PARITY", "wakes do not preempt the running task while it is protected";
    PREEMPT_SHORT = 4, "PREEMPT_SHORT", "a woken task with a shorter slice ignores the protection";
    NEXT_BUDDY = 5, "NEXT_BUDDY", "a woken task that did not preempt becomes the next buddy";
    PICK_BUDDY = 6, "PICK_BUDDY", "an eligible next buddy is picked first";
    DELAY_DEQUEUE = 7, "DELAY_DEQUEUE", "a task that blocks while ineligible stays queued until picked or woken";
    DELAY_ZERO = 8, "DELAY_ZERO", "a delayed task's positive lag is clipped to 0";
    WAKEUP_PREEMPTION = 9, "WAKEUP_PREEMPTION", "a wake may preempt the running task";
    HRTICK = 10, "HRTICK", "the slice ends at its exact time, not at the next tick";
}

/// The rest of `features.h`: known to Linux, not switched in the fair
/// class here (placement, balancing, accounting, debugging).
pub const NOT_MODELLED: &[&str] = &[
    "CACHE_HOT_BUDDY",
    "PARANOID_AVG",
    "HRTICK_DL",
    "DOUBLE_TICK",
    "NONTASK_CAPACITY",
    "TTWU_QUEUE",
    "SIS_UTIL",
    "WARN_DOUBLE_CLOCK",
    "RT_PUSH_IPI",
    "RT_RUNTIME_SHARE",
    "LB_MIN",
    "ATTACH_AGE_LOAD",
    "WA_IDLE",
    "WA_WEIGHT",
    "WA_BIAS",
    "UTIL_EST",
    "LATENCY_WARN",
    "NI_RANDOM",
    "NI_RATE",
];

impl Feature {
    /// The feature as a set of one.
    pub fn set(&self) -> Features {
        Features(self.bit)
    }
}

impl Features {
    pub const NONE: Features = Features(0);

    pub fn contains(self, f: Features) -> bool {
        self.0 & f.0 == f.0
    }

    pub fn with(self, f: Features, on: bool) -> Features {
        if on {
            Features(self.0 | f.0)
        } else {
            Features(self.0 & !f.0)
        }
    }

    /// The raw bits (for a hash).
    pub fn bits(self) -> u16 {
        self.0
    }
}

impl core::ops::BitOr for Features {
    type Output = Features;
    fn bitor(self, o: Features) -> Features {
        Features(self.0 | o.0)
    }
}

impl fmt::Debug for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// As `/sys/kernel/debug/sched/features` prints: every feature, `NO_`
/// before those off, separated by spaces.
impl fmt::Display for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, feat) in ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            if self.0 & feat.bit == 0 {
                f.write_str("NO_")?;
            }
            f.write_str(feat.name)?;
        }
        Ok(())
    }
}

/// Which release's fair-class code runs (see the module doc for what
/// changed between them without a feature).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Kernel {
    /// The model before Linux's features were named: what the seed's
    /// policies run.
    Base,
    /// 6.12 (delayed dequeue, `PREEMPT_SHORT`, `PLACE_REL_DEADLINE`;
    /// protection to the deadline).
    L6_12,
    /// 6.18 as its stable series runs it: protection to the min slice,
    /// the `NEXT_BUDDY` rework on.
    L6_18,
    /// 6.19: the rework's code, `NEXT_BUDDY` off, the forced wake-up
    /// preemption reverted.
    L6_19,
    /// 7.2: 6.19's, with `HRTICK` on.
    L7_2,
}

/// Every release, oldest first.
pub const KERNELS: [Kernel; 5] = [
    Kernel::Base,
    Kernel::L6_12,
    Kernel::L6_18,
    Kernel::L6_19,
    Kernel::L7_2,
];

impl Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Base => "base",
            Kernel::L6_12 => "6.12",
            Kernel::L6_18 => "6.18",
            Kernel::L6_19 => "6.19",
            Kernel::L7_2 => "7.2",
        }
    }

    /// The features this release turns on by default (`features.h` of
    /// that release).
    pub const fn defaults(self) -> Features {
        const EEVDF: u16 = Features::PLACE_LAG.0
            | Features::PLACE_DEADLINE_INITIAL.0
            | Features::RUN_TO_PARITY.0
            | Features::WAKEUP_PREEMPTION.0;
        // 6.12's series: delayed dequeue with DELAY_ZERO, PREEMPT_SHORT,
        // PLACE_REL_DEADLINE, PICK_BUDDY.
        const V6_12: u16 = EEVDF
            | Features::PLACE_REL_DEADLINE.0
            | Features::PREEMPT_SHORT.0
            | Features::PICK_BUDDY.0
            | Features::DELAY_DEQUEUE.0
            | Features::DELAY_ZERO.0;
        Features(match self {
            Kernel::Base => EEVDF,
            Kernel::L6_12 | Kernel::L6_19 => V6_12,
            // 8f839c9c55f2 turned the reworked NEXT_BUDDY on; the stable
            // series took both.
            Kernel::L6_18 => V6_12 | Features::NEXT_BUDDY.0,
            // 9213aa4784cf: HRTICK on where deferred rearming is built.
            Kernel::L7_2 => V6_12 | Features::HRTICK.0,
        })
    }

    /// Protection ends at the smallest slice queued, and its end asks for
    /// a reschedule (6.17: `set_protect_slice()`, 0b9ca2dcabc3); before,
    /// until the deadline, asked at its renewal.
    pub fn protects_to_min_slice(self) -> bool {
        self != Kernel::L6_12
    }

    /// Every `update_curr()` may ask for a reschedule (the tick, an
    /// enqueue, the wake-up check); the model before asked at the tick.
    pub fn resched_at_every_update(self) -> bool {
        self != Kernel::Base
    }

    /// `NEXT_BUDDY` as reworked by e837456fdca8 (deadline-aware buddy,
    /// `preempt_sync()`); else the old code (every non-fork wake).
    pub fn reworked_next_buddy(self) -> bool {
        self >= Kernel::L6_18
    }

    /// A wake preempts a waker that is no longer eligible (the rework as
    /// the stable series took it; reverted in 6.19 by 15257cc2f905).
    pub fn preempts_ineligible_waker(self) -> bool {
        self == Kernel::L6_18
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Kernel {
    type Err = alloc::string::String;

    fn from_str(s: &str) -> Result<Kernel, Self::Err> {
        KERNELS
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: alloc::vec::Vec<&str> = KERNELS.iter().map(|k| k.name()).collect();
                alloc::format!("unknown kernel {s:?}: expected one of {}", names.join(", "))
            })
    }
}

/// A release's code with its features: what a run's fair class is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct FeatureSet {
    pub kernel: Kernel,
    pub on: Features,
}

impl FeatureSet {
    /// What the `linux` policies run unless told otherwise: 6.19's
    /// defaults, the release their placement and balancer follow
    /// (`DELAY_DEQUEUE` with `DELAY_ZERO`, `PLACE_REL_DEADLINE`,
    /// `PREEMPT_SHORT`, `PICK_BUDDY`, protection to the smallest slice, a
    /// reschedule asked at every `update_curr()`; `NEXT_BUDDY` off).
    pub const LINUX: FeatureSet = FeatureSet::of(Kernel::L6_19);

    /// `kernel` with its default features.
    pub const fn of(kernel: Kernel) -> FeatureSet {
        FeatureSet {
            kernel,
            on: kernel.defaults(),
        }
    }

    pub fn has(&self, f: Features) -> bool {
        self.on.contains(f)
    }

    /// `NAME,NO_NAME,...` applied in order over this set. Names are
    /// `features.h`'s, in any case; an unknown one is an error that lists
    /// the known ones.
    pub fn parse(mut self, list: &str) -> Result<FeatureSet, alloc::string::String> {
        for word in list
            .split([',', ' '])
            .map(str::trim)
            .filter(|w| !w.is_empty())
        {
            let upper = word.to_ascii_uppercase();
            let (on, name) = match upper.strip_prefix("NO_") {
                Some(n) => (false, n),
                None => (true, upper.as_str()),
            };
            match ALL.iter().find(|f| f.name == name) {
                Some(f) => self.on = self.on.with(Features(f.bit), on),
                None if NOT_MODELLED.contains(&name) => {
                    return Err(alloc::format!(
                        "feature {word:?}: Linux has it, but it is not a switch of the model's \
                         fair class; the switches are {}",
                        names()
                    ))
                }
                None => {
                    return Err(alloc::format!(
                    "unknown feature {word:?}: expected one of {} (NO_ before a name turns it off)",
                    names()
                ))
                }
            }
        }
        Ok(self)
    }

    /// What differs from the release's defaults, as `--features` takes it
    /// (`""` when nothing does).
    pub fn overrides(&self) -> alloc::string::String {
        let d = self.kernel.defaults();
        let mut out = alloc::vec::Vec::new();
        for f in ALL {
            let (mine, theirs) = (self.on.0 & f.bit != 0, d.0 & f.bit != 0);
            if mine != theirs {
                out.push(if mine {
                    alloc::string::String::from(f.name)
                } else {
                    alloc::format!("NO_{}", f.name)
                });
            }
        }
        out.join(",")
    }

    /// A word for the trace hash.
    pub fn word(&self) -> u64 {
        ((self.kernel as u64) << 16) | self.on.0 as u64
    }
}

impl Default for FeatureSet {
    /// [`Kernel::Base`]: what a policy runs unless it brings a release.
    fn default() -> FeatureSet {
        FeatureSet::of(Kernel::Base)
    }
}

/// `6.18` or `6.18+NEXT_BUDDY,NO_DELAY_DEQUEUE`: the release and what
/// differs from its defaults.
impl fmt::Display for FeatureSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.overrides();
        if o.is_empty() {
            write!(f, "{}", self.kernel)
        } else {
            write!(f, "{}+{o}", self.kernel)
        }
    }
}

impl core::str::FromStr for FeatureSet {
    type Err = alloc::string::String;

    /// The [`fmt::Display`] form: `KERNEL` or `KERNEL+FEATURES`.
    fn from_str(s: &str) -> Result<FeatureSet, Self::Err> {
        let (k, rest) = s.split_once('+').unwrap_or((s, ""));
        FeatureSet::of(k.trim().parse()?).parse(rest)
    }
}

fn names() -> alloc::string::String {
    let v: alloc::vec::Vec<&str> = ALL.iter().map(|f| f.name).collect();
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn each_release_differs_from_the_last_where_its_commits_say() {
        let d = |k: Kernel| FeatureSet::of(k);
        assert_eq!(d(Kernel::L6_12).overrides(), "");
        assert!(!d(Kernel::Base).has(Features::DELAY_DEQUEUE));
        assert!(d(Kernel::L6_12).has(Features::DELAY_DEQUEUE));
        assert!(d(Kernel::L6_18).has(Features::NEXT_BUDDY), "8f839c9c55f2");
        assert!(!d(Kernel::L6_19).has(Features::NEXT_BUDDY), "4f70f106bca1");
        assert!(d(Kernel::L7_2).has(Features::HRTICK), "9213aa4784cf");
        assert!(!d(Kernel::L6_19).has(Features::HRTICK));
    }

    #[test]
    fn features_print_as_debugfs_prints_them() {
        let s = FeatureSet::of(Kernel::L6_19).on.to_string();
        assert!(
            s.starts_with("PLACE_LAG PLACE_DEADLINE_INITIAL PLACE_REL_DEADLINE RUN_TO_PARITY"),
            "{s}"
        );
        assert!(s.contains(" NO_NEXT_BUDDY PICK_BUDDY DELAY_DEQUEUE"), "{s}");
        assert!(s.ends_with(" NO_HRTICK"), "{s}");
    }

    #[test]
    fn overrides_apply_in_order_and_print_back() {
        let s = FeatureSet::of(Kernel::L6_19)
            .parse("NEXT_BUDDY,no_delay_dequeue,DELAY_DEQUEUE,NO_DELAY_ZERO")
            .unwrap();
        assert!(s.has(Features::NEXT_BUDDY) && s.has(Features::DELAY_DEQUEUE));
        assert!(!s.has(Features::DELAY_ZERO));
        assert_eq!(s.to_string(), "6.19+NEXT_BUDDY,NO_DELAY_ZERO");
        assert_eq!(s.to_string().parse::<FeatureSet>().unwrap(), s);
        assert_eq!(FeatureSet::of(Kernel::L6_18).to_string(), "6.18");
    }

    #[test]
    fn an_unknown_feature_is_named_with_the_known_ones() {
        let e = FeatureSet::default().parse("DELAY_DEQUE").unwrap_err();
        assert!(
            e.contains("\"DELAY_DEQUE\"") && e.contains("DELAY_DEQUEUE, DELAY_ZERO"),
            "{e}"
        );
        let e = FeatureSet::default().parse("NO_SIS_UTIL").unwrap_err();
        assert!(e.contains("Linux has it"), "{e}");
        let e = "6.17".parse::<Kernel>().unwrap_err();
        assert!(e.contains("base, 6.12, 6.18, 6.19, 7.2"), "{e}");
    }
}
