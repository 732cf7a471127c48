//! The lifecycle's room on a CPU ([`Held`]): the tasks it holds runnable
//! but stopped, until a continue (or a kill) releases them.

use alloc::collections::BTreeMap;

use crate::task::{Task, TaskId};

/// The tasks a CPU holds runnable but stopped, by id.
#[derive(Debug)]
pub(crate) struct Held<S>(BTreeMap<TaskId, Task<S>>);

impl<S> Default for Held<S> {
    fn default() -> Self {
        Held(BTreeMap::new())
    }
}

impl<S> Held<S> {
    pub(crate) fn hold(&mut self, task: Task<S>) {
        self.0.insert(task.id, task);
    }

    pub(crate) fn release(&mut self, id: TaskId) -> Option<Task<S>> {
        self.0.remove(&id)
    }

    pub(crate) fn get(&self, id: TaskId) -> Option<&Task<S>> {
        self.0.get(&id)
    }

    pub(crate) fn get_mut(&mut self, id: TaskId) -> Option<&mut Task<S>> {
        self.0.get_mut(&id)
    }

    /// The held ids, lowest first.
    pub(crate) fn ids(&self) -> impl Iterator<Item = TaskId> + '_ {
        self.0.keys().copied()
    }
}
