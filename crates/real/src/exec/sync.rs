//! The executor's ops of one kind: futexes, conditions, barriers and locks.

use super::*;

impl Task<'_> {
    pub(super) fn sync(&mut self, op: Instr) -> Result<(), String> {
        let (me, objs) = (self.me, &self.objs);
        let shm = &self.run.shm;
        match op {
            Instr::FutexWait(f) => {
                let (w, seen) = (objs.futex(f.index()), self.seen[f.index()]);
                objs.kernel_wait(me, self.run.kinds.futexes + f.index());
                loop {
                    let now = w.load(Acquire);
                    if now != seen {
                        self.seen[f.index()] = now;
                        break;
                    }
                    sys::futex_wait(w, seen, None);
                }
                let at = objs.futex_woken_at(f.index()).load(Relaxed);
                shm.woken_at(me).store(at, Relaxed);
                objs.running(me);
            }
            Instr::FutexWake { futex, n } => {
                let w = objs.futex(futex.index());
                // The waker has seen its own wake, as in the simulator: a
                // wait of its own after it waits for the next one.
                self.seen[futex.index()] = w.fetch_add(1, Release).wrapping_add(1);
                objs.futex_woken_at(futex.index())
                    .store(sys::now(), Relaxed);
                let woke = sys::futex_wake(w, n);
                objs.futex_woke(futex.index(), me, woke);
            }
            Instr::CondWait { cond, lock } => {
                objs.cond_wait(cond.index(), lock.map(|l| l.index()), me)
            }
            Instr::CondSignal(c) => objs.cond_signal(c.index(), false, me),
            Instr::CondBroadcast(c) => objs.cond_signal(c.index(), true, me),
            Instr::Barrier { barrier, n } => objs.barrier(barrier.index(), n, me),
            Instr::Lock(l) => objs.lock(l.index(), me),
            Instr::Unlock(l) => {
                if objs.owner(l.index()) != Some(me) {
                    return Err(format!(
                        "unlocked lock #{}, which it does not hold: undefined for a default mutex",
                        l.index()
                    ));
                }
                objs.unlock(l.index())
            }
            other => unreachable!("{other:?} is not a sync op"),
        }
        Ok(())
    }
}
