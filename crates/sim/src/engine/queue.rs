//! The event queue: events ordered by `(time, tie, seq)`.
//!
//! `tie` (24 bits) is drawn from the run's tie-break stream (so sweeping
//! seeds explores the orderings of simultaneous events), or 0 in
//! fixed-order mode; `seq` (40 bits) is insertion order, so no two keys
//! are equal and the order is total.

use rand::RngCore;
use rand_chacha::ChaCha8Rng;
use std::collections::BinaryHeap;

use super::Ev;

/// A queued event: `when` is its time in the high 64 bits and its order
/// key in the low ones, unique per event, so one comparison orders two
/// events (earliest first: the heap is a max-heap, so the order is
/// reversed).
#[derive(Debug)]
pub(super) struct Queued {
    pub(super) when: u128,
    pub(super) ev: Ev,
}

impl Queued {
    /// The event's time.
    pub(super) fn at(&self) -> u64 {
        (self.when >> 64) as u64
    }
}

impl PartialEq for Queued {
    fn eq(&self, other: &Queued) -> bool {
        self.when == other.when
    }
}

impl Eq for Queued {}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Queued) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Queued {
    fn cmp(&self, other: &Queued) -> std::cmp::Ordering {
        other.when.cmp(&self.when)
    }
}

/// The mark for "no event" in [`Queue::next`]: no event is queued at the
/// end of time with every order bit set.
const NONE_WHEN: u128 = u128::MAX;

const NONE: Queued = Queued {
    when: NONE_WHEN,
    ev: Ev::Tick {
        cpu: schedlab_topology::CpuId::new(0),
    },
};

/// Bits of an event's order key that count insertions (2^40 events).
const SEQ_BITS: u32 = 40;

/// The pending events, earliest first.
pub(super) struct Queue {
    /// A binary heap. (A 4-ary heap measured no faster on either bench
    /// case, a radix heap slower.)
    heap: BinaryHeap<Queued>,
    /// The earliest event pushed since the last pop that took it, kept out
    /// of the heap: most events are pushed just before they are popped,
    /// and those never pay the heap's push and pop. Pops take the earlier
    /// of it and the heap's top, so the order is the heap's alone.
    /// (`NONE_WHEN`: none waits there; not an `Option`, so a push or pop
    /// moves one event, not an option of one.)
    next: Queued,
    seq: u64,
    /// Tie-breaks among simultaneous events; `None` in fixed-order mode.
    ties: Option<ChaCha8Rng>,
}

impl Queue {
    pub(super) fn new(ties: Option<ChaCha8Rng>) -> Queue {
        Queue {
            heap: BinaryHeap::new(),
            next: NONE,
            seq: 0,
            ties,
        }
    }

    /// Queues `ev` at `at`. Among events of one time the order key
    /// decides: its top 24 bits drawn from the tie-break stream (0 in
    /// fixed-order mode), its low 40 the insertion count.
    pub(super) fn push(&mut self, at: u64, ev: Ev) {
        self.enqueue(at, ev);
    }

    /// [`Queue::push`], returning the event's full order (`when`).
    fn enqueue(&mut self, at: u64, ev: Ev) -> u128 {
        let tie = match &mut self.ties {
            Some(r) => r.next_u32() as u64 >> 8,
            None => 0,
        };
        self.seq += 1;
        let key = tie << SEQ_BITS | (self.seq & ((1 << SEQ_BITS) - 1));
        let when = (at as u128) << 64 | key as u128;
        let q = Queued { when, ev };
        if self.next.when == NONE_WHEN {
            self.next = q;
        } else if q.when < self.next.when {
            let n = std::mem::replace(&mut self.next, q);
            self.heap.push(n);
        } else {
            self.heap.push(q);
        }
        when
    }

    /// Takes the earliest event.
    pub(super) fn pop(&mut self) -> Option<Queued> {
        let n = self.next.when;
        if n != NONE_WHEN && self.heap.peek().is_none_or(|h| n < h.when) {
            Some(std::mem::replace(&mut self.next, NONE))
        } else {
            self.heap.pop()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use schedlab_topology::CpuId;

    fn kick(c: usize) -> Ev {
        Ev::Kick { cpu: CpuId::new(c) }
    }

    #[test]
    fn events_leave_in_time_then_insertion_order_in_fixed_order_mode() {
        let mut q = Queue::new(None);
        for (at, c) in [(5, 0), (3, 1), (5, 2), (1, 3), (3, 4), (9, 5)] {
            q.push(at, kick(c));
        }
        let mut got = Vec::new();
        while let Some(e) = q.pop() {
            got.push((e.at(), e.ev));
        }
        let want = [(1, 3), (3, 1), (3, 4), (5, 0), (5, 2), (9, 5)].map(|(a, c)| (a, kick(c)));
        assert_eq!(got, want, "expected time order, ties by insertion");
    }

    #[test]
    fn the_slot_beside_the_heap_never_changes_the_order() {
        // Interleaved pushes and pops, each pop checked against the least
        // pending key of a sorted reference.
        let mut q = Queue::new(Some(ChaCha8Rng::seed_from_u64(7)));
        let mut reference = std::collections::BTreeSet::new();
        let mut r = ChaCha8Rng::seed_from_u64(8);
        let mut now = 0;
        for i in 0..2000 {
            reference.insert(q.enqueue(now + r.next_u64() % 4, kick(i % 7)));
            if r.next_u32() % 3 == 0 {
                let e = q.pop().expect("an event was pushed");
                let least = reference.pop_first().expect("the reference holds it");
                assert_eq!(
                    e.when, least,
                    "pop {i} took an event that is not the earliest"
                );
                now = e.at();
            }
        }
        while let Some(e) = q.pop() {
            assert_eq!(Some(e.when), reference.pop_first(), "draining out of order");
        }
        assert!(
            reference.is_empty(),
            "{} events never left",
            reference.len()
        );
    }
}
