//! The executor's ops of one kind: measurements: laps, stamps and counts.

use super::*;

impl Task<'_> {
    pub(super) fn measure(&mut self, op: Instr) -> Result<(), String> {
        let me = self.me;
        let shm = &self.run.shm;
        match op {
            Instr::LapStart(m) => {
                self.lap(m.0, sys::now());
            }
            Instr::Lap(m) => {
                let now = sys::now();
                if let Some(prev) = self.lap(m.0, now) {
                    self.push_lap(m.0, now - prev);
                }
            }
            Instr::WakeLap(m) => {
                let at = shm.woken_at(me).swap(0, Relaxed);
                if at != 0 {
                    self.push_lap(m.0, sys::now().saturating_sub(at));
                }
            }
            Instr::Stamp(m) => {
                let now = sys::now().saturating_sub(shm.t0().load(Acquire));
                self.rec.lock().expect("ours").stamps.push((m.0, now));
            }
            Instr::Count { metric, n } => {
                *self
                    .rec
                    .lock()
                    .expect("ours")
                    .counts
                    .entry(metric.0)
                    .or_default() += n;
            }
            other => unreachable!("{other:?} is not a measure op"),
        }
        Ok(())
    }

    fn lap(&mut self, m: u32, now: u64) -> Option<u64> {
        match self.lap_at.iter_mut().find(|(k, _)| *k == m) {
            Some((_, at)) => Some(std::mem::replace(at, now)),
            None => {
                self.lap_at.push((m, now));
                None
            }
        }
    }

    fn push_lap(&self, m: u32, d: u64) {
        let mut r = self.rec.lock().expect("ours");
        r.laps.entry(m).or_default().push(d);
    }
}
