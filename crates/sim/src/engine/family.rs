//! Where tasks come from and go: the scenario's tasks started at boot (each
//! in its process), a thread spawned by a program, waiting for a child to
//! exit (one in order, or any), and exiting.

use std::rc::Rc;

use schedlab_sched::Balancer;
use schedlab_sched::{Policy, TaskId, TaskSpec, TaskState};
use schedlab_topology::{CpuId, CpuSet};

use super::code::{Instr, ProgId};
use super::interp::SimTask;
use super::{Engine, TaskDef};
use crate::outcome::StallCause;

impl<P: Policy, B: Balancer> Engine<P, B> {
    /// Starts a task on CPU `c` (its start CPU, or the one drawn from its
    /// `start_in`), then widens its mask to its own.
    pub(super) fn start_task(&mut self, def: &TaskDef, c: CpuId) {
        let process = if def.process.is_empty() {
            &def.name
        } else {
            &def.process
        };
        let pid = self.process_id(process);
        let mut spec = def.spec;
        // The scheduler sees the process too (cache-aware scheduling's
        // `p->mm`); threads it spawns inherit it with the spec.
        spec.process = Some(pid);
        let mask = spec.mask.unwrap_or(*self.sh.topology().cpus());
        spec.mask = Some(CpuSet::single(c));
        let s = self.sched[c.index()]
            .spawn(&self.sh, spec, self.now)
            .expect("start a task");
        let (id, fx) = (s.task, s.effects);
        self.apply(c, &fx);
        if mask != CpuSet::single(c) {
            let fx = self.sched[c.index()].set_mask(&self.sh, id, mask, self.now);
            self.apply(c, &fx);
        }
        let code = self.code.compile(&def.program, &mut self.objects);
        let mut real = spec;
        real.mask = Some(mask);
        self.add_task(id, &def.name, code, def.working_set, real);
        self.tasks.get_mut(&id).expect("just added").process = pid;
    }

    /// `task`'s own spec (what a thread it spawns inherits) with `mask`.
    pub(super) fn set_spec_mask(&mut self, task: TaskId, mask: CpuSet) {
        let Some(id) = self.tasks.get_mut(&task).map(|t| t.spec) else {
            return;
        };
        let mut spec = self.specs[id as usize];
        spec.mask = Some(mask);
        let id = self.intern_spec(spec);
        if let Some(t) = self.tasks.get_mut(&task) {
            t.spec = id;
        }
    }

    /// `spec`'s index among the distinct specs, its process left out.
    fn intern_spec(&mut self, mut spec: TaskSpec) -> u32 {
        spec.process = None;
        let next = self.specs.len() as u32;
        let id = *self.spec_ids.entry(spec).or_insert(next);
        if id == next {
            self.specs.push(spec);
        }
        id
    }

    /// The id of the process named `name`, made on first use.
    fn process_id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.proc_ids.get(name) {
            return i;
        }
        let id = self.new_process(name);
        self.proc_ids.insert(name.to_string(), id);
        id
    }

    /// A new process named `name` (a fork's child: never one found by
    /// name), with the shared data a scenario process of that name has.
    fn new_process(&mut self, name: &str) -> u32 {
        let id = self.procs.len() as u32;
        self.procs
            .push(self.shared_of.get(name).copied().unwrap_or(0));
        self.proc_names.push(name.to_string());
        id
    }

    /// The name the next task called `base` gets: `base`, then `base#1`,
    /// `base#2`, ...
    fn numbered(&self, base: &str) -> String {
        match self.names.get(base).copied().unwrap_or(0) {
            0 => base.to_string(),
            k => format!("{base}#{k}"),
        }
    }

    pub(super) fn add_task(
        &mut self,
        id: TaskId,
        name: &str,
        code: Rc<[Instr]>,
        working_set: u64,
        spec: TaskSpec,
    ) {
        let spec = self.intern_spec(spec);
        let unique = self.numbered(name);
        *self.names.entry(name.to_string()).or_insert(0) += 1;
        self.rec.out.task_names.insert(id.0, unique);
        self.tasks.insert(id, SimTask::new(code, working_set, spec));
        self.live += 1;
    }

    /// `spawn` (a thread of the parent's process) or, with `fork`, a
    /// child in a process of its own, named after the child. Both cost
    /// `spawn_ns` (a fork's page-table copy is not modelled) and are placed
    /// by the run's spawn rule, as Linux places `clone()` and `fork()` by
    /// the same `SD_BALANCE_FORK` path.
    pub(super) fn op_spawn(
        &mut self,
        cpu: CpuId,
        task: TaskId,
        op: Instr,
        prog: ProgId,
        fork: bool,
    ) -> bool {
        if let Some(r) = self.syscall_first(cpu, task, self.cost.spawn_ns, op) {
            return r;
        }
        let (pname, code) = self.code.programs[prog.0 as usize].clone();
        let st = self.task(task);
        let (spec_id, process, ws) = (st.spec, st.process, st.working_set);
        // A thread its own program spawned again keeps its parent's name
        // (numbered apart): recursion does not grow names.
        let parent = self.name(task);
        let name =
            if parent.ends_with(&format!(".{pname}")) || parent.contains(&format!(".{pname}#")) {
                parent.split('#').next().unwrap_or(parent).to_string()
            } else {
                format!("{parent}.{pname}")
            };
        let mut spec = self.specs[spec_id as usize];
        let process = if fork {
            // Named after the child, as `add_task` will number it.
            let unique = self.numbered(&name);
            self.new_process(&unique)
        } else {
            process
        };
        spec.process = Some(process);
        let s = match self.sched[cpu.index()].spawn(&self.sh, spec, self.now) {
            Ok(s) => s,
            Err(_) => {
                // The table is full: the run stops with a report.
                self.halt = Some(StallCause::TaskTable {
                    program: pname,
                    max_tasks: self.max_tasks,
                });
                return false;
            }
        };
        let (child, fx) = (s.task, s.effects);
        self.add_task(child, &name, code, ws, spec);
        self.task(child).process = process;
        self.task(child).parent = Some(task);
        self.task(task).children.push(child);
        self.apply(cpu, &fx);
        self.done(task)
    }

    pub(super) fn op_join(&mut self, cpu: CpuId, task: TaskId) -> bool {
        let Some(&child) = self.task(task).children.first() else {
            return self.done(task);
        };
        if self.sh.task_word(child).state == TaskState::Dead {
            let st = self.task(task);
            st.children.remove(0);
            st.zombies.retain(|&z| z != child);
            return self.done(task);
        }
        let fx = self.sched[cpu.index()].join(&self.sh, child, self.now, self.idle_depth);
        self.apply_returning(cpu, task, &fx)
    }

    pub(super) fn op_join_any(&mut self, cpu: CpuId, task: TaskId) -> bool {
        let st = self.task(task);
        if let Some(z) = st.zombies.pop() {
            st.children.retain(|&c| c != z);
            return self.done(task);
        }
        if st.children.is_empty() {
            return self.done(task);
        }
        self.wait(cpu, task)
    }

    pub(super) fn do_exit(&mut self, cpu: CpuId, task: TaskId) {
        if let Some(st) = self.tasks.get_mut(&task) {
            if st.exited {
                return;
            }
            st.exited = true;
            let name = self.name(task).to_string();
            self.rec.out.tasks.entry(name).or_default().exited_at = Some(self.now);
        }
        self.live -= 1;
        // Its own data is freed: it no longer takes room in any LLC.
        self.warmth.forget(task);
        // Its parent hears of the exit (a `join_any` waits for that): as
        // Linux's exit does, after the thread has begun leaving, so the wake
        // names no waker.
        let parent = self.tasks.get(&task).and_then(|t| t.parent);
        if let Some(p) = parent.filter(|p| self.tasks.get(p).is_some_and(|t| !t.exited)) {
            self.sched[cpu.index()].begin_leaving();
            self.task(p).zombies.push(task);
            self.wake(cpu, p);
        }
        let fx = self.sched[cpu.index()].exit(&self.sh, self.now, self.idle_depth);
        self.hw[cpu.index()].current = None;
        self.apply(cpu, &fx);
    }
}
