//! Stall reports: when a run cannot go on, what each task that has not
//! exited waits on, and whether the waits form a cycle.

use schedlab_sched::{Policy, TaskId, TaskState};

use super::code::Instr;
use super::interp::Waiting;
use super::Engine;
use crate::outcome::{find_cycle, Stall, StallCause, Wait};

impl<P: Policy> Engine<P> {
    /// The report of a run stopped by `cause`.
    pub(super) fn stall_report(&self, cause: StallCause) -> Stall {
        let mut waits = Vec::new();
        let mut edges: Vec<(TaskId, Vec<TaskId>)> = Vec::new();
        for (id, t) in self.tasks.iter() {
            if t.exited {
                continue;
            }
            let (on, on_tasks) = self.waits_on(id);
            let name = |i: &TaskId| self.name(*i).to_string();
            waits.push(Wait {
                task: self.name(id).to_string(),
                on,
                on_tasks: on_tasks.iter().map(name).collect(),
            });
            edges.push((id, on_tasks));
        }
        let cycle = find_cycle(&edges)
            .iter()
            .filter(|i| self.tasks.get(i).is_some())
            .map(|i| self.name(*i).to_string())
            .collect();
        Stall {
            cause,
            waits,
            cycle,
        }
    }

    /// What `task` waits on, and the tasks that could end the wait.
    fn waits_on(&self, task: TaskId) -> (String, Vec<TaskId>) {
        let t = self.tasks.get(&task).expect("a known task");
        let name = |i: TaskId| self.name(i).to_string();
        let blocked = t.waiting == Waiting::Op
            || matches!(
                self.sh.task_word(task).state,
                TaskState::Parked | TaskState::Committing
            );
        let Some(&instr) = t.code.get(t.pc).filter(|_| blocked) else {
            return ("nothing: runnable".into(), Vec::new());
        };
        let o = &self.objects;
        match instr {
            Instr::Call { port, .. } => {
                let server = o.ports[port.index()].server();
                let by = server.map_or(" (nobody serves it)".into(), |s| {
                    format!(" (served by {})", name(s))
                });
                (
                    format!("a reply on port {:?}{by}", o.port_name(port)),
                    server.into_iter().collect(),
                )
            }
            Instr::Serve(port) => (
                format!("a request on port {:?}", o.port_name(port)),
                Vec::new(),
            ),
            Instr::PipeRead { pipe, bytes } => (
                format!("{bytes} B in pipe {:?}", o.pipe_name(pipe)),
                Vec::new(),
            ),
            Instr::PipeWrite { pipe, bytes } => (
                format!("room for {bytes} B in pipe {:?}", o.pipe_name(pipe)),
                Vec::new(),
            ),
            Instr::FutexWait(f) => (format!("a wake of futex {:?}", o.futex_name(f)), Vec::new()),
            Instr::Lock(l) | Instr::CondWait { lock: Some(l), .. }
                if o.locks[l.index()].owner().is_some_and(|h| h != task) =>
            {
                let holder = o.locks[l.index()].owner().expect("held");
                (
                    format!("lock {:?} (held by {})", o.lock_name(l), {
                        let gone = self.tasks.get(&holder).is_some_and(|h| h.exited);
                        if gone {
                            format!("{}, which has exited", name(holder))
                        } else {
                            name(holder)
                        }
                    }),
                    vec![holder],
                )
            }
            Instr::CondWait { cond, .. } => (
                format!("a signal of condition {:?}", o.cond_name(cond)),
                Vec::new(),
            ),
            Instr::Barrier { barrier, n } => {
                let b = &o.barriers[barrier.index()];
                (
                    format!(
                        "barrier {:?} ({} of {n} arrived)",
                        o.barrier_name(barrier),
                        b.arrived()
                    ),
                    Vec::new(),
                )
            }
            Instr::Join => match t.children.first() {
                Some(&c) => (format!("child {} to exit (join)", name(c)), vec![c]),
                None => ("join".into(), Vec::new()),
            },
            Instr::JoinAny => ("a child to exit (join_any)".into(), t.children.clone()),
            Instr::Io(_) => ("a disk completion".into(), Vec::new()),
            other => (format!("{other:?}"), Vec::new()),
        }
    }
}
