//! The waker streak: the one `u16` of per-task placement state.
//!
//! The low ten bits hold the LLC the task's last parked wakes came from (an
//! LLC is named by its first CPU, so the id is below 1024); the high six bits
//! hold how many such wakes came in a row, saturating at [`MAX_RUN`].
//! [`WakerStreak::observe`] is the whole update: a wake from the streak's LLC
//! counts one more, a wake from another LLC starts a new run of one. So a
//! wake from home breaks a far run.

use core::fmt;

use schedlab_topology::LlcId;

/// The longest run the six count bits hold.
pub const MAX_RUN: u8 = 63;

/// How many parked wakes in a row from one other LLC move a task there.
///
/// 8, from the seed's measurements (the seed kernel's "Why 8", docs/REFERENCES.md): a split
/// request/reply pair pays k split round trips once (about 1.7 µs each on the
/// AMD bench, so 14 µs at 8), while a shorter run makes a server with a
/// client in each LLC bounce: at 240 rounds over 40 seeds a run of 4 moved
/// the server 4 times in one run and 8 moved none more than once. Under
/// independent, even parked wakes from two LLCs a run of k moves the task on
/// 1 in 2^(k+1) - 2 of them: 1 in 510 at 8.
pub const WAKER_RUN: u8 = 8;

const LLC_BITS: u32 = 10;
const LLC_MASK: u16 = (1 << LLC_BITS) - 1;

// The LLC field must hold every LLC id and the count field MAX_RUN.
const _: () = assert!(LlcId::LIMIT <= 1 << LLC_BITS);
const _: () = assert!((MAX_RUN as u32) < (1 << (16 - LLC_BITS)));

/// `llc` in ten bits, `run` in six. A fresh task has run 0 (no LLC yet).
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct WakerStreak(u16);

impl WakerStreak {
    /// A streak of `run` wakes from `llc`. `None` if the LLC id does not fit
    /// in ten bits; `run` saturates at [`MAX_RUN`].
    pub fn new(llc: LlcId, run: u8) -> Option<WakerStreak> {
        if llc.index() > LLC_MASK as usize {
            return None;
        }
        let run = run.min(MAX_RUN) as u16;
        Some(WakerStreak((run << LLC_BITS) | llc.index() as u16))
    }

    /// The LLC id field, as it is stored (the first CPU of the LLC).
    pub fn llc_index(self) -> usize {
        (self.0 & LLC_MASK) as usize
    }

    pub fn run(self) -> u8 {
        (self.0 >> LLC_BITS) as u8
    }

    pub fn bits(self) -> u16 {
        self.0
    }

    /// Counts one parked wake named by a waker in `waker_llc`.
    pub fn observe(&mut self, waker_llc: LlcId) {
        assert!(
            waker_llc.index() <= LLC_MASK as usize,
            "an LLC id is the id of its first CPU, below 1024"
        );
        *self = if self.run() > 0 && self.llc_index() == waker_llc.index() {
            WakerStreak::new(waker_llc, self.run().saturating_add(1))
        } else {
            WakerStreak::new(waker_llc, 1)
        }
        .expect("checked above");
    }

    /// Whether a run this long from `waker_llc` asks to move a task whose
    /// CPU is in `home_llc`: the waker's LLC is another, and the run is at
    /// or past `waker_run`.
    pub fn asks_move(self, waker_llc: LlcId, home_llc: LlcId, waker_run: u8) -> bool {
        waker_llc != home_llc && self.llc_index() == waker_llc.index() && self.run() >= waker_run
    }
}

impl fmt::Debug for WakerStreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "llc={} run={}", self.llc_index(), self.run())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_topology::CpuId;

    fn llc(i: usize) -> LlcId {
        LlcId::of_first_cpu(CpuId::new(i))
    }

    #[test]
    fn every_llc_and_count_round_trips() {
        for l in 0..1024 {
            for run in 0..=MAX_RUN {
                let s = WakerStreak::new(llc(l), run).expect("fits");
                assert_eq!((s.llc_index(), s.run()), (l, run), "bits {:#06x}", s.bits());
            }
        }
    }

    #[test]
    fn the_count_saturates_at_63() {
        let mut s = WakerStreak::default();
        for _ in 0..200 {
            s.observe(llc(8));
        }
        assert_eq!(s.run(), MAX_RUN, "{s:?}");
        assert_eq!(s.llc_index(), 8);
        assert_eq!(WakerStreak::new(llc(3), 200).unwrap().run(), MAX_RUN);
    }

    #[test]
    fn an_llc_index_of_1024_or_more_is_refused() {
        assert!(WakerStreak::new(LlcId::from_raw(1023), 1).is_some());
        for raw in [1024u16, 1025, 4096, u16::MAX] {
            assert_eq!(
                WakerStreak::new(LlcId::from_raw(raw), 1),
                None,
                "llc index {raw} does not fit in ten bits and must be refused"
            );
        }
    }

    #[test]
    #[should_panic(expected = "below 1024")]
    fn observing_an_llc_index_of_1024_panics() {
        WakerStreak::default().observe(LlcId::from_raw(1024));
    }

    #[test]
    fn a_wake_from_another_llc_starts_a_run_of_one() {
        let mut s = WakerStreak::default();
        for _ in 0..5 {
            s.observe(llc(8));
        }
        s.observe(llc(0));
        assert_eq!(format!("{s:?}"), "llc=0 run=1");
        assert!(
            !s.asks_move(llc(0), llc(0), 1),
            "a wake from home never asks a move"
        );
    }

    #[test]
    fn debug_decodes() {
        let s = WakerStreak::new(llc(8), 5).unwrap();
        assert_eq!(format!("{s:?}"), "llc=8 run=5");
    }
}
