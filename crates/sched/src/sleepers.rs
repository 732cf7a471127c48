//! The wake protocol's state on a task's owner ([`Sleepers`]): the tasks
//! that parked on this CPU and the deadlines it keeps for them. The CPU
//! asks it; it never reaches back into the CPU.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use schedlab_topology::CpuId;

use crate::policy::PolicyState;
use crate::shared::Shared;
use crate::task::TaskId;

/// The tasks that parked on one CPU (each one's entity waits in its task
/// slot until the CPU that wins its wake takes it out), and the deadlines
/// of those that sleep until a time.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sleepers {
    parked: IdSet,
    deadlines: BTreeSet<(u64, TaskId)>,
}

impl Sleepers {
    /// `id` parked here, to be woken at `deadline` if it names one.
    #[inline]
    pub(crate) fn park(&mut self, id: TaskId, deadline: Option<u64>) {
        if let Some(d) = deadline {
            self.deadlines.insert((d, id));
        }
        self.parked.insert(id);
    }

    /// Whether `id` parked here (and no wake took it yet).
    #[inline]
    pub(crate) fn holds(&self, id: TaskId) -> bool {
        self.parked.contains(&id)
    }

    /// A wake takes `id`; false if it had not parked here.
    #[inline]
    pub(crate) fn unpark(&mut self, id: TaskId) -> bool {
        self.parked.remove(&id)
    }

    /// `id`'s deadline `d` will not fire: its wake came first.
    #[inline]
    pub(crate) fn cancel(&mut self, d: u64, id: TaskId) {
        self.deadlines.remove(&(d, id));
    }

    /// The earliest deadline kept.
    #[inline]
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|&(t, _)| t)
    }

    /// The earliest deadline at or before `now`, taken out.
    #[inline]
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<(u64, TaskId)> {
        match self.deadlines.first() {
            Some(&(t, _)) if t <= now => self.deadlines.pop_first(),
            _ => None,
        }
    }

    /// The ids that parked here, lowest first.
    #[inline]
    pub(crate) fn iter(&self) -> core::slice::Iter<'_, TaskId> {
        self.parked.iter()
    }

    /// Whether `id` parked on `cpu` (these are its sleepers) and its entity
    /// still waits in its slot.
    pub(crate) fn parked_here<S: PolicyState>(
        &self,
        cpu: CpuId,
        sh: &Shared<S>,
        id: TaskId,
    ) -> bool {
        self.holds(id) && sh.task_word(id).owner == cpu && sh.slot(id).parked.lock().is_some()
    }
}

/// Task ids in increasing order, kept in a vector: the tasks parked on one
/// CPU, usually a handful. Every park and wake inserts or removes one, and
/// a binary search and a short move cost less than a B-tree's node walk
/// and allocation (a 10,000-round request/reply run: 130.7M -> 127.6M
/// instructions). Iterates in the same order a `BTreeSet` would. Insert
/// and remove move the tail, so a CPU with thousands of parked tasks pays
/// linear time per park; that shape (every task parked on one CPU) is rare
/// and still bounded by the task count.
#[derive(Clone, Debug, Default)]
pub(crate) struct IdSet(Vec<TaskId>);

impl IdSet {
    /// Adds `id`; false if it was there.
    pub(crate) fn insert(&mut self, id: TaskId) -> bool {
        match self.0.binary_search(&id) {
            Ok(_) => false,
            Err(i) => {
                self.0.insert(i, id);
                true
            }
        }
    }

    /// Takes `id` out; false if it was not there.
    pub(crate) fn remove(&mut self, id: &TaskId) -> bool {
        match self.0.binary_search(id) {
            Ok(i) => {
                self.0.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    pub(crate) fn contains(&self, id: &TaskId) -> bool {
        self.0.binary_search(id).is_ok()
    }

    /// The ids, lowest first.
    pub(crate) fn iter(&self) -> core::slice::Iter<'_, TaskId> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::IdSet;
    use crate::TaskId;
    use alloc::collections::BTreeSet;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    proptest! {
        /// Any sequence of inserts and removes leaves an `IdSet` holding
        /// what a `BTreeSet` holds, in the same order, with the same
        /// answers on the way.
        #[test]
        fn an_id_set_answers_as_a_btree_set_does(ops in proptest::collection::vec((any::<bool>(), 0u32..40), 0..300)) {
            let mut ours = IdSet::default();
            let mut theirs = BTreeSet::new();
            for (add, raw) in ops {
                let id = TaskId(raw);
                if add {
                    prop_assert_eq!(ours.insert(id), theirs.insert(id), "insert {:?}", id);
                } else {
                    prop_assert_eq!(ours.remove(&id), theirs.remove(&id), "remove {:?}", id);
                }
                prop_assert_eq!(ours.contains(&id), theirs.contains(&id), "contains {:?}", id);
            }
            let a: Vec<TaskId> = ours.iter().copied().collect();
            let b: Vec<TaskId> = theirs.iter().copied().collect();
            prop_assert_eq!(a, b, "IdSet iteration differs from BTreeSet's");
        }
    }
}
