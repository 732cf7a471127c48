//! Stall reports: when a run cannot go on, what each task that has not
//! exited waits on, and whether the waits form a cycle.

use schedlab_sched::Balancer;
use schedlab_sched::{Policy, TaskId, TaskState};

use super::code::Instr;
use super::interp::Waiting;
use super::Engine;
use crate::objects::{BarrierId, LockId, Objects, PortId};
use crate::outcome::{find_cycle, LostWake, Stall, StallCause, Wait};

impl<P: Policy, B: Balancer> Engine<P, B> {
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
            let lost = match t.code.get(t.pc) {
                Some(Instr::CondWait { cond, .. }) if on.starts_with("a signal") => {
                    self.objects.conds[cond.index()]
                        .lost()
                        .map(|(at_ns, by)| LostWake {
                            by: name(&by),
                            at_ns,
                        })
                }
                _ => None,
            };
            waits.push(Wait {
                task: self.name(id).to_string(),
                on,
                on_tasks: on_tasks.iter().map(name).collect(),
                lost,
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
        let blocked = t.waiting == Waiting::Op
            || matches!(
                self.sh.task_word(task).state,
                TaskState::Parked | TaskState::Committing
            );
        let Some(&instr) = t.code.get(t.pc).filter(|_| blocked) else {
            return ("nothing: runnable".into(), Vec::new());
        };
        describe_wait(instr, task, &t.children, &self.objects, self)
    }
}

impl<P: Policy, B: Balancer> WaitState for Engine<P, B> {
    fn name(&self, t: TaskId) -> String {
        Engine::name(self, t).to_string()
    }

    fn exited(&self, t: TaskId) -> bool {
        self.tasks.get(&t).is_some_and(|h| h.exited)
    }

    fn server(&self, port: PortId) -> Option<TaskId> {
        self.objects.ports[port.index()].server()
    }

    fn lock_owner(&self, lock: LockId) -> Option<TaskId> {
        self.objects.locks[lock.index()].owner()
    }

    fn arrived(&self, barrier: BarrierId) -> u32 {
        self.objects.barriers[barrier.index()].arrived()
    }
}

/// What a stall report needs to know of a run's state: the simulator's
/// engine, or a real run's shared memory (`schedlab-real`).
pub trait WaitState {
    fn name(&self, t: TaskId) -> String;
    fn exited(&self, t: TaskId) -> bool;
    /// The task serving `port`, once one has.
    fn server(&self, port: PortId) -> Option<TaskId>;
    fn lock_owner(&self, lock: LockId) -> Option<TaskId>;
    /// Arrivals at `barrier` this round.
    fn arrived(&self, barrier: BarrierId) -> u32;
}

/// What `task`, blocked at `instr`, waits on, and the tasks that could end
/// the wait, in the words of every stall report. `children`: its children
/// not yet joined, first spawned first; `names`: the run's objects.
pub fn describe_wait(
    instr: Instr,
    task: TaskId,
    children: &[TaskId],
    names: &Objects,
    st: &impl WaitState,
) -> (String, Vec<TaskId>) {
    let o = names;
    match instr {
        Instr::Call { port, .. } => {
            let server = st.server(port);
            let by = server.map_or(" (nobody serves it)".into(), |s| {
                format!(" (served by {})", st.name(s))
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
        Instr::Lock(l) if st.lock_owner(l) == Some(task) => (
            format!(
                "lock {:?}, which it holds itself: a relock, where a default mutex deadlocks",
                o.lock_name(l)
            ),
            vec![task],
        ),
        Instr::Lock(l) | Instr::CondWait { lock: Some(l), .. }
            if st.lock_owner(l).is_some_and(|h| h != task) =>
        {
            let holder = st.lock_owner(l).expect("held");
            let who = if st.exited(holder) {
                format!("{}, which has exited", st.name(holder))
            } else {
                st.name(holder)
            };
            (
                format!("lock {:?} (held by {who})", o.lock_name(l)),
                vec![holder],
            )
        }
        Instr::CondWait { cond, .. } => (
            format!("a signal of condition {:?}", o.cond_name(cond)),
            Vec::new(),
        ),
        Instr::Barrier { barrier, n } => (
            format!(
                "barrier {:?} ({} of {n} arrived)",
                o.barrier_name(barrier),
                st.arrived(barrier)
            ),
            Vec::new(),
        ),
        Instr::Join => match children.first() {
            Some(&c) => (format!("child {} to exit (join)", st.name(c)), vec![c]),
            None => ("join".into(), Vec::new()),
        },
        Instr::JoinAny => ("a child to exit (join_any)".into(), children.to_vec()),
        Instr::Io(_) => ("a disk completion".into(), Vec::new()),
        other => (format!("{other:?}"), Vec::new()),
    }
}
