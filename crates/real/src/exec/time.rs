//! The executor's ops of one kind: time: work on the CPU, sleeps, timers
//! and I/O.

use super::*;

impl Task<'_> {
    pub(super) fn time(&mut self, op: Instr) -> Result<(), String> {
        let (me, objs) = (self.me, &self.objs);
        let shm = &self.run.shm;
        match op {
            Instr::Run(ns) => spin_cpu(ns, shm.ctl(ctl::STOP)),
            Instr::RunFor(ns) => {
                let end = sys::now() + ns;
                while sys::now() < end && shm.ctl(ctl::STOP).load(Relaxed) == 0 {
                    std::hint::spin_loop();
                }
            }
            Instr::Timer {
                timer,
                period,
                absolute,
                stamp,
            } => {
                let t0 = shm.t0().load(Acquire);
                let now = sys::now().saturating_sub(t0);
                let next = objs.timer_next(timer.index(), now, period, absolute);
                if let Some(m) = stamp {
                    let (Ok(at) | Err(at)) = next;
                    self.rec.lock().expect("ours").stamps.push((m.0, at));
                }
                if let Ok(at) = next {
                    self.timed(|| sys::sleep_until(t0 + at));
                }
            }
            Instr::Sleep(ns) => self.timed(|| sys::sleep_ns(ns)),
            Instr::RandomSleep { min, max } => {
                let ns = self.rng.gen_range(min..=max.max(min));
                self.timed(|| sys::sleep_ns(ns));
            }
            Instr::ExpSleep { mean } => {
                let u: f64 = self.rng.gen_range(f64::EPSILON..1.0);
                let ns = (-u.ln() * mean as f64) as u64;
                self.timed(|| sys::sleep_ns(ns));
            }
            Instr::Io(_) => {
                let (fd, size) = self.run.io_file.ok_or("io with no file")?;
                let at = self.rng.gen_range(0..size / 4096) * 4096;
                let mut page = [0u8; 4096];
                self.objs.waiting(me, 0, State::Timed);
                sys::pread(fd, &mut page, at).map_err(|e| format!("io: pread: {e}"))?;
                self.objs.running(me);
            }
            other => unreachable!("{other:?} is not a time op"),
        }
        Ok(())
    }

    /// Sleeps in an op that ends by itself.
    fn timed(&self, f: impl FnOnce()) {
        self.objs.waiting(self.me, 0, State::Timed);
        f();
        self.objs.running(self.me);
    }
}
