//! The doorbell: one atomic per CPU saying whether it is awake, how deep it
//! sleeps, and whether a kick is on its way to it ("rung").
//!
//! ## Protocol
//!
//! * A poster pushes its message into the CPU's mailbox, *then* rings. The
//!   ring sets `rung` and, if `rung` was clear, the poster must send a kick:
//!   an IPI when the CPU is awake, a wake from idle at its depth when it
//!   sleeps. A ring on a rung bell sends nothing: one kick is enough.
//! * The CPU answers at the start of its pass (awake, `rung` cleared),
//!   *then* drains its mailbox: a message pushed after the drain rings again.
//! * Going idle, the CPU sets asleep *then* looks at its mailbox once more,
//!   so it does not sleep on a message that came after its drain. Safety
//!   does not rest on that look: the first ring after the CPU answered
//!   always sends a kick, and a kick (an IPI included) wakes a sleeping CPU,
//!   so no message sleeps unseen either way (the loom model checks this).
//!
//! `sleeping_unrung` (asleep, no kick on its way) is the test every idle
//! search uses, so a burst of moves spreads over several CPUs: the first
//! move rings its target and the next one skips it.

use crate::sync::{AtomicU32, Ordering};

const AWAKE: u32 = 1;
const RUNG: u32 = 1 << 1;
const DEPTH_SHIFT: u32 = 2;
const DEPTH_MASK: u32 = 0xff << DEPTH_SHIFT;

/// An idle state's index: 0 is the shallowest (C1), larger is deeper.
pub type IdleDepth = u8;

/// What a ring asks the poster to send.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KickKind {
    /// The CPU is awake: an inter-processor interrupt.
    Ipi,
    /// The CPU sleeps at `depth`: a wake from idle.
    WakeFromIdle { depth: IdleDepth },
}

#[derive(Debug)]
pub struct Doorbell(AtomicU32);

/// A decoded doorbell.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Bell {
    pub awake: bool,
    pub rung: bool,
    pub depth: IdleDepth,
}

impl Doorbell {
    /// A CPU starts asleep at the shallowest depth, with nothing rung.
    pub(crate) fn new() -> Doorbell {
        Doorbell(AtomicU32::new(0))
    }

    pub fn load(&self) -> Bell {
        let b = self.0.load(Ordering::Acquire);
        Bell {
            awake: b & AWAKE != 0,
            rung: b & RUNG != 0,
            depth: ((b & DEPTH_MASK) >> DEPTH_SHIFT) as IdleDepth,
        }
    }

    /// Asleep with no kick on its way: a CPU an idle search may choose.
    pub fn sleeping_unrung(&self) -> bool {
        self.0.load(Ordering::Acquire) & (AWAKE | RUNG) == 0
    }

    pub fn asleep(&self) -> bool {
        self.0.load(Ordering::Acquire) & AWAKE == 0
    }

    /// Rings; `Some` when this ring must be carried by a kick.
    pub(crate) fn ring(&self) -> Option<KickKind> {
        let old = self.0.fetch_or(RUNG, Ordering::AcqRel);
        if old & RUNG != 0 {
            return None;
        }
        Some(if old & AWAKE != 0 {
            KickKind::Ipi
        } else {
            KickKind::WakeFromIdle {
                depth: ((old & DEPTH_MASK) >> DEPTH_SHIFT) as IdleDepth,
            }
        })
    }

    /// The CPU's pass begins: awake, kick answered.
    pub(crate) fn answer(&self) {
        self.0.store(AWAKE, Ordering::Release);
    }

    /// The CPU goes to sleep at `depth`, keeping a kick that is on its way.
    pub(crate) fn sleep(&self, depth: IdleDepth) {
        let mut cur = self.0.load(Ordering::Acquire);
        loop {
            let next = (cur & RUNG) | ((depth as u32) << DEPTH_SHIFT);
            match self
                .0
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(a) => cur = a,
            }
        }
    }

    /// The CPU left idle because its mailbox was not empty after all.
    pub(crate) fn wake_self(&self) {
        self.0.fetch_or(AWAKE, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_kick_per_ring_until_answered() {
        let d = Doorbell::new();
        d.sleep(2);
        assert!(d.sleeping_unrung());
        assert_eq!(d.ring(), Some(KickKind::WakeFromIdle { depth: 2 }));
        assert!(!d.sleeping_unrung(), "a rung CPU is not a candidate");
        assert_eq!(d.ring(), None, "a second ring sends nothing");
        d.answer();
        assert_eq!(d.ring(), Some(KickKind::Ipi));
        d.sleep(0);
        assert!(d.load().rung, "going to sleep keeps the kick on its way");
    }
}
