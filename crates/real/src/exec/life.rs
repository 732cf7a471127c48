//! The executor's ops of one kind: threads' and processes' lives: spawn,
//! fork, join, yield, affinity.

use super::*;

impl Task<'_> {
    pub(super) fn life(&mut self, op: Instr) -> Result<(), String> {
        let (me, objs) = (self.me, &self.objs);
        match op {
            Instr::Spawn(p) => self.spawn(p.0 as usize, false)?,
            Instr::Fork(p) => self.spawn(p.0 as usize, true)?,
            Instr::Join => {
                if let Some(child) = self.children.pop_front() {
                    objs.kernel_wait(me, child);
                    self.until_exited(child);
                    self.objs.running(me);
                }
            }
            Instr::JoinAny => self.join_any()?,
            Instr::Yield => sys::yield_now(),
            // Linux has no "leaving" bit: a real thread's wakes name it
            // until it has exited.
            Instr::Leave => {}
            Instr::Affinity(m) => sys::set_affinity(&self.run.masks[m as usize])
                .map_err(|e| format!("sched_setaffinity: {e}"))?,
            other => unreachable!("{other:?} is not a life op"),
        }
        Ok(())
    }

    /// Sleeps until the child in slot `child` has exited (each exit bumps
    /// this task's `EXITS` word and wakes it): `pthread_join` of a thread,
    /// `waitpid` of a forked process. Both are joined when the child's
    /// program has ended, as the simulator's join: a thread sleeps from
    /// then until its process exits ([`super::start`]), and a forked
    /// process until its parent process reaps it ([`super::manage`]), so
    /// the executor's own teardown stays out of the workload's time.
    /// Simplified: `pthread_join` and `wait(2)` would also wait for the
    /// kernel's exit of the thread or process.
    fn until_exited(&self, child: usize) {
        let shm = &self.run.shm;
        let exits = shm.slot(self.me, slot::EXITS);
        loop {
            let seen = exits.load(Acquire);
            if State::of(shm.slot(child, slot::STATE).load(Acquire)) == State::Exited {
                return;
            }
            sys::futex_wait(exits, seen, None);
        }
    }

    /// A thread of this process running spawnable program `p`, in a free
    /// slot; with `fork`, a process of its own ([`Task::fork`]).
    fn spawn(&mut self, p: usize, fork: bool) -> Result<(), String> {
        let shm = &self.run.shm;
        let s = shm.ctl(ctl::NEXT_SLOT).fetch_add(1, SeqCst) as usize;
        if s >= self.run.slots {
            let _ =
                shm.ctl(ctl::TABLE_FULL)
                    .compare_exchange(0, self.me as u32 + 1, SeqCst, SeqCst);
            return Ok(());
        }
        let parent = self.rec.lock().expect("ours").name.clone();
        let name = self.proc.spawn_name(&parent, &self.run.spawnable[p]);
        shm.slot(s, slot::PARENT).store(self.me as u32 + 1, Relaxed);
        let prog = self.run.tasks.len() + p;
        if fork {
            self.fork(s, prog, name)?;
        } else {
            start(self.run, self.proc, s, prog, name, None).map_err(|e| format!("spawn: {e}"))?;
        }
        self.children.push_back(s);
        Ok(())
    }

    /// `fork(2)` from this task's thread: the child process (the next
    /// forked index) runs program `prog` in slot `s` on a thread of its
    /// own, under a manager that reports its records to this process over
    /// a pipe, as the scenario's processes report to the run ([`manage`]).
    /// (A child that ran its program on its one thread, as rt-tests'
    /// hackbench's do, made the same switches and took the same CPU time
    /// on this machine, and a stalled one could not be stopped: its
    /// manager is a thread of its own.) The child
    /// inherits this thread's affinity and nice, as a forked process does.
    fn fork(&mut self, s: usize, prog: usize, name: String) -> Result<i32, String> {
        let run = self.run;
        let index = run.procs + run.shm.ctl(ctl::FORKED).fetch_add(1, SeqCst) as usize;
        if index >= run.shm.layout.procs {
            // Counted as forked and done, so the run can still end.
            run.shm.ctl(ctl::PROCS_DONE).fetch_add(1, SeqCst);
            return Err(format!(
                "fork: more than {} processes",
                run.shm.layout.procs
            ));
        }
        let mut forked = self.proc.forked.lock().unwrap_or_else(|e| e.into_inner());
        let (r, w) = sys::pipe(65536).map_err(|e| format!("fork: pipe: {e}"))?;
        let me_pid = std::process::id() as i32;
        match sys::fork_task() {
            Err(e) => {
                sys::close(r);
                sys::close(w);
                // Counted as forked and done, so the run can still end.
                run.shm.ctl(ctl::PROCS_DONE).fetch_add(1, SeqCst);
                Err(format!("fork: {e}"))
            }
            Ok(None) => {
                // The child: the one thread left. Every descriptor it
                // inherited that is not its own goes (its parent's report,
                // its siblings' reports): a reader sees the end of a
                // report when its one writer ends.
                sys::close(r);
                sys::close(self.proc.report);
                for &(_, fd, _) in forked.iter() {
                    sys::close(fd);
                }
                let proc = Arc::new(Proc::new(index, name.clone(), w));
                if let Err(e) = start(run, &proc, s, prog, name.clone(), None) {
                    let _ =
                        run.shm
                            .ctl(ctl::FAULT)
                            .compare_exchange(0, s as u32 + 1, SeqCst, SeqCst);
                    eprintln!("schedlab: a real run could not start {name}: {e}");
                }
                manage(run, &proc, Some(me_pid))
            }
            Ok(Some(pid)) => {
                sys::close(w);
                forked.push((pid, r, index));
                Ok(pid)
            }
        }
    }

    /// `wait4(-1)`: reaps a child that has exited, waiting for one when
    /// none has; at once when there is no child.
    fn join_any(&mut self) -> Result<(), String> {
        let shm = &self.run.shm;
        let exits = shm.slot(self.me, slot::EXITS);
        let mut marked = false;
        while !self.children.is_empty() {
            let seen = exits.load(Acquire);
            if let Some(i) = self
                .children
                .iter()
                .position(|&c| State::of(shm.slot(c, slot::STATE).load(Acquire)) == State::Exited)
            {
                self.children.remove(i);
                break;
            }
            if !marked {
                self.objs.kernel_wait(self.me, self.me);
                marked = true;
            }
            sys::futex_wait(exits, seen, None);
        }
        self.objs.running(self.me);
        Ok(())
    }
}
