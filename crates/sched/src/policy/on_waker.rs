//! [`OnWaker`]: any policy, decided on the waker's CPU.

use schedlab_topology::{CpuId, CpuSet, LlcId};

use super::seam::{Decides, Decision, Policy, Wake};
use crate::config::SpawnPolicy;
use crate::park::Delivery;
use crate::shared::Machine;
use crate::task::{Task, TaskId};

/// Any policy, decided on the waker's CPU instead of its own choice: the
/// same rule with Linux's one hop. `OnWaker(WakerStreakRule::default())`
/// is the seed's rule placed where `try_to_wake_up()` places. Every other
/// rule of the wrapped policy is its own: its hooks, its spawn placement,
/// and the spawn rule and balancer it comes with (`OnWaker(Linux)` keeps
/// Linux's fork path and balancer).
#[derive(Clone, Copy, Debug, Default)]
pub struct OnWaker<P>(pub P);

impl<P: Policy> Policy for OnWaker<P> {
    type TaskState = P::TaskState;
    const DECIDES: Decides = Decides::Waker;

    fn name(&self) -> &str {
        self.0.name()
    }

    fn wake_posted(
        &mut self,
        m: &Machine<'_>,
        waker: Option<&mut Self::TaskState>,
        wakee: TaskId,
        delivery: Delivery,
    ) {
        self.0.wake_posted(m, waker, wakee, delivery)
    }

    fn wake_parked(&mut self, m: &Machine<'_>, wake: &Wake, state: &mut Self::TaskState) {
        self.0.wake_parked(m, wake, state)
    }

    fn counts_flags(&self) -> bool {
        self.0.counts_flags()
    }

    fn flag_consumed(&mut self, m: &Machine<'_>, waker_llc: LlcId, state: &mut Self::TaskState) {
        self.0.flag_consumed(m, waker_llc, state)
    }

    fn place(
        &mut self,
        m: &Machine<'_>,
        wake: &Wake,
        task: &mut Task<Self::TaskState>,
    ) -> Decision {
        self.0.place(m, wake, task)
    }

    fn place_new(&mut self, m: &Machine<'_>, spawner: CpuId, mask: &CpuSet) -> Option<CpuId> {
        self.0.place_new(m, spawner, mask)
    }

    fn spawn_rule(&self) -> Option<SpawnPolicy> {
        self.0.spawn_rule()
    }

    fn balance_rule(&self) -> Option<crate::config::BalanceKind> {
        self.0.balance_rule()
    }

    fn fair_features(&self) -> Option<crate::fair::FeatureSet> {
        self.0.fair_features()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BalanceKind, CasTunables};
    use crate::linux::Linux;

    /// `OnWaker` changes where a policy decides and nothing else: the spawn
    /// rule, balancer and fair-class features Linux comes with survive the wrapping (a wrapper
    /// that forgot them ran `OnWaker(linux)` with the scenario's spawn rule
    /// and the seed's balancer).
    #[test]
    fn on_waker_keeps_every_rule_of_the_policy_it_wraps() {
        for (name, p) in [
            ("linux", Linux::default()),
            ("linux-cas", Linux::cas(CasTunables::default())),
            ("linux-cas-wake", Linux::cas_wake(CasTunables::default())),
        ] {
            let w = OnWaker(p);
            assert_eq!(w.spawn_rule(), p.spawn_rule(), "{name}: spawn rule");
            assert_eq!(w.balance_rule(), p.balance_rule(), "{name}: balancer");
            assert_eq!(
                w.fair_features(),
                p.fair_features(),
                "{name}: fair features"
            );
            assert_eq!(w.counts_flags(), p.counts_flags(), "{name}: flags");
            assert_eq!(w.name(), p.name(), "{name}: name");
        }
        let w = OnWaker(Linux::default());
        assert_eq!(w.spawn_rule(), Some(SpawnPolicy::Linux));
        assert_eq!(w.balance_rule(), Some(BalanceKind::Linux));
        assert_eq!(<OnWaker<Linux> as Policy>::DECIDES, Decides::Waker);
    }
}
