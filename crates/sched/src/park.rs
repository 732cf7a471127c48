//! The park word: one atomic per task, the door between a task's wakers and
//! its owner CPU.
//!
//! ## Layout
//!
//! ```text
//!  63      43  42       41..32    31     16 15      5   4       3        2..0
//! [ unused ][flag llc?][flag llc][  owner  ][ unused ][killed][pending][ state ]
//! ```
//!
//! The flag's LLC (11 bits: a valid bit and the ten-bit LLC id, below
//! 1024) is what a policy that counts flagged wakes asks the deliverer to
//! record with the pending flag: the LLC of the first waker that flagged
//! the task since the flag was last consumed. It is written in the same
//! CAS that sets `pending` and cleared in the CAS that consumes it, so it
//! changes nothing in the protocol below (`tests/loom.rs` checks it too).
//!
//! ## Protocol
//!
//! Only the task's holder changes `state` and `owner`: the owner, except
//! that a waker makes `Parked -> Waking`, and the one waker whose CAS made
//! it holds the task after it (for a policy that decides on the waker; for
//! one that decides on the owner, it hands the task back with a message).
//! Wakers may also set `pending`. Every change is a compare-and-swap on the
//! whole word, so the two never lose each other's bits.
//!
//! 1. *Park* (owner, its current task): `Running -> Committing` when the task
//!    decides to block; then `Committing -> Parked` only if `pending` is
//!    clear. If it is set, the owner clears it and the task goes back to
//!    `Running`: the park returns at once.
//! 2. *Deliver* (any CPU): on `Running`, `Committing`, `Queued` or `Moving`
//!    set `pending` and stop: the task is not asleep, so nothing is queued and
//!    the wake's cause is seen by no one (it is **not counted**). On `Parked`,
//!    CAS to `Waking`; the one deliverer whose CAS succeeds either posts
//!    `Wake { task, cause }` to `owner`'s mailbox or places the task itself
//!    (the `wake` module says which). On `Waking` the wake is already on
//!    its way: coalesce. On `Dead`, drop it.
//! 3. *Handle* (whoever decides): `Waking -> Queued` (placed on the deciding
//!    CPU, which becomes the owner in the same CAS) or `Waking -> Moving`
//!    with the new owner written in the same CAS (sent to another CPU), and
//!    the adopter makes `Moving -> Queued`.
//!
//! 4. *Delayed* (`DELAY_DEQUEUE`): a task that blocks while not eligible
//!    parks `Committing -> Delayed` instead, its entity kept in the owner's
//!    run queue, not in its slot. A wake's CAS makes `Delayed -> Waking`
//!    and the winner asks the owner to requeue it where it is
//!    ([`Delivery::Requeue`]; no placement decision, as Linux's
//!    `ttwu_runnable()` makes none); the owner, whose pick lands on it
//!    first, makes `Delayed -> Parked` and stores the entity in the slot,
//!    after which it is an ordinary parked task. The two CASes decide which
//!    came first; an owner that loses waits for the winner's message.
//!
//! The lost wake-up (a wake slipping between "decide to block" and "park")
//! cannot happen: a wake in that window finds `Committing`, sets `pending`,
//! and step 1's CAS sees it. A task cannot be queued twice: only the one CAS
//! out of `Parked` posts a message. The loom model (tests/loom.rs) checks
//! both.

use schedlab_topology::CpuId;

use crate::sync::{AtomicU64, Ordering};

/// Where a task is, as its park word says.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum TaskState {
    /// On a CPU.
    Running = 0,
    /// Decided to block; not parked yet.
    Committing = 1,
    /// Blocked; its owner holds its entity.
    Parked = 2,
    /// A wake is in its owner's mailbox.
    Waking = 3,
    /// Runnable, in a run queue (or held stopped).
    Queued = 4,
    /// In a mailbox between owners.
    Moving = 5,
    /// Exited.
    Dead = 6,
    /// Blocked, its entity kept competing in its owner's run queue
    /// (`DELAY_DEQUEUE`, `se->sched_delayed`).
    Delayed = 7,
}

impl TaskState {
    fn from_bits(b: u64) -> TaskState {
        match b & STATE_MASK {
            0 => TaskState::Running,
            1 => TaskState::Committing,
            2 => TaskState::Parked,
            3 => TaskState::Waking,
            4 => TaskState::Queued,
            5 => TaskState::Moving,
            6 => TaskState::Dead,
            _ => TaskState::Delayed,
        }
    }
}

const STATE_MASK: u64 = 0b111;
const PENDING: u64 = 1 << 3;
const KILLED: u64 = 1 << 4;
const OWNER_SHIFT: u32 = 16;
const OWNER_MASK: u64 = 0xffff << OWNER_SHIFT;
const FLAG_LLC_SHIFT: u32 = 32;
const FLAG_LLC_MASK: u64 = 0x3ff << FLAG_LLC_SHIFT;
const FLAG_LLC_VALID: u64 = 1 << 42;

/// The flag's LLC field of `w`, if set.
fn flag_llc(w: u64) -> Option<u16> {
    (w & FLAG_LLC_VALID != 0).then_some(((w & FLAG_LLC_MASK) >> FLAG_LLC_SHIFT) as u16)
}

/// What a delivery did.
#[must_use = "a delivery that posts must be followed by its kick and the owner's pass"]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Delivery {
    /// The task was not parked: its pending flag is set. Not counted.
    Flagged,
    /// The task was parked: a `Wake` must go to `owner`.
    Post { owner: CpuId },
    /// The task was delayed on `owner` (`DELAY_DEQUEUE`): `owner` must
    /// requeue it where it is.
    Requeue { owner: CpuId },
    /// A wake was already on its way.
    Coalesced,
    /// The task has exited.
    Dead,
}

/// What `finish_park` did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Parked {
    Yes,
    /// A wake had flagged it: it runs on; `waker_llc` is what the first
    /// flagging waker recorded.
    FlagConsumed {
        waker_llc: Option<u16>,
    },
}

/// A decoded park word.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Word {
    pub state: TaskState,
    pub pending: bool,
    pub killed: bool,
    pub owner: CpuId,
}

fn decode(w: u64) -> Word {
    Word {
        state: TaskState::from_bits(w),
        pending: w & PENDING != 0,
        killed: w & KILLED != 0,
        owner: CpuId::new(((w & OWNER_MASK) >> OWNER_SHIFT) as usize),
    }
}

fn encode_state(w: u64, state: TaskState) -> u64 {
    (w & !STATE_MASK) | state as u64
}

fn encode_owner(w: u64, owner: CpuId) -> u64 {
    (w & !OWNER_MASK) | ((owner.index() as u64) << OWNER_SHIFT)
}

/// The atomic word itself.
#[derive(Debug)]
pub struct ParkWord(AtomicU64);

impl ParkWord {
    pub(crate) fn new(state: TaskState, owner: CpuId) -> ParkWord {
        ParkWord(AtomicU64::new(encode_owner(state as u64, owner)))
    }

    /// A fresh slot's word (the slot was never used).
    pub(crate) fn reset(&self, state: TaskState, owner: CpuId) {
        self.0
            .store(encode_owner(state as u64, owner), Ordering::Release);
    }

    /// Whether the task was killed: one load and one bit (a host asks
    /// before every step of a task's program).
    pub fn killed(&self) -> bool {
        self.0.load(Ordering::Acquire) & KILLED != 0
    }

    pub fn load(&self) -> Word {
        decode(self.0.load(Ordering::Acquire))
    }

    /// Applies `f` until the CAS holds; returns the old and new words.
    fn update(&self, mut f: impl FnMut(u64) -> Option<u64>) -> Result<(u64, u64), u64> {
        let mut cur = self.0.load(Ordering::Acquire);
        loop {
            let Some(next) = f(cur) else { return Err(cur) };
            match self
                .0
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok((cur, next)),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Step 2: a wake from anyone.
    pub fn deliver(&self) -> Delivery {
        self.deliver_from(None)
    }

    /// Step 2, recording `waker_llc` (an LLC id below 1024) with the
    /// pending flag when the wake flags the task and no flag is pending
    /// yet.
    pub fn deliver_from(&self, waker_llc: Option<u16>) -> Delivery {
        let mut outcome = Delivery::Dead;
        let _ = self.update(|w| match TaskState::from_bits(w) {
            TaskState::Parked => {
                outcome = Delivery::Post {
                    owner: decode(w).owner,
                };
                Some(encode_state(w, TaskState::Waking))
            }
            TaskState::Delayed => {
                outcome = Delivery::Requeue {
                    owner: decode(w).owner,
                };
                Some(encode_state(w, TaskState::Waking))
            }
            TaskState::Waking => {
                outcome = Delivery::Coalesced;
                None
            }
            TaskState::Dead => {
                outcome = Delivery::Dead;
                None
            }
            _ => {
                outcome = Delivery::Flagged;
                if w & PENDING != 0 {
                    None
                } else {
                    let llc = waker_llc.map_or(0, |l| {
                        FLAG_LLC_VALID | ((l as u64 & 0x3ff) << FLAG_LLC_SHIFT)
                    });
                    Some(w | PENDING | llc)
                }
            }
        });
        outcome
    }

    /// Step 1a (owner): the current task decides to block.
    pub(crate) fn commit(&self) {
        let r = self.update(|w| {
            debug_assert_eq!(
                TaskState::from_bits(w),
                TaskState::Running,
                "commit from {:?}",
                decode(w)
            );
            Some(encode_state(w, TaskState::Committing))
        });
        debug_assert!(r.is_ok());
    }

    /// Step 1b (owner): park, unless a wake came in since `commit`. Returns
    /// `Parked` when parked, else the consumed flag (and the LLC its first
    /// waker recorded, if any): the task runs on.
    pub fn finish_park(&self) -> Parked {
        self.finish_park_as(TaskState::Parked)
    }

    /// Step 1b, parking as `to` (`Parked`, or `Delayed` when the owner's
    /// run queue keeps the entity: step 4).
    pub(crate) fn finish_park_as(&self, to: TaskState) -> Parked {
        let (old, new) = self
            .update(|w| {
                debug_assert_eq!(TaskState::from_bits(w), TaskState::Committing);
                if w & PENDING != 0 {
                    let cleared = w & !(PENDING | FLAG_LLC_MASK | FLAG_LLC_VALID);
                    Some(encode_state(cleared, TaskState::Running))
                } else {
                    Some(encode_state(w, to))
                }
            })
            .expect("the update never declines");
        if TaskState::from_bits(new) == to {
            Parked::Yes
        } else {
            Parked::FlagConsumed {
                waker_llc: flag_llc(old),
            }
        }
    }

    /// Step 4 (owner): a delayed task leaves its run queue for good,
    /// `Delayed -> Parked`, unless a wake won it first (`false`: it is
    /// `Waking`, and the winner's requeue is on its way to the owner).
    pub fn settle_delayed(&self) -> bool {
        self.update(|w| {
            (TaskState::from_bits(w) == TaskState::Delayed)
                .then(|| encode_state(w, TaskState::Parked))
        })
        .is_ok()
    }

    /// An owner transition `from -> to`, keeping the flags.
    pub(crate) fn set(&self, from: TaskState, to: TaskState) {
        let r = self.update(|w| {
            debug_assert_eq!(
                TaskState::from_bits(w),
                from,
                "park word: expected {from:?} before {to:?}, found {:?}",
                decode(w)
            );
            Some(encode_state(w, to))
        });
        debug_assert!(r.is_ok());
    }

    /// `from -> to` with `owner` as the new owner, in one CAS: a waker that
    /// decided on itself takes the task it won.
    pub(crate) fn set_owned(&self, from: TaskState, to: TaskState, owner: CpuId) {
        let r = self.update(|w| {
            debug_assert_eq!(TaskState::from_bits(w), from, "set_owned: {:?}", decode(w));
            Some(encode_owner(encode_state(w, to), owner))
        });
        debug_assert!(r.is_ok());
    }

    /// The owner hands the task to `owner` (`from -> Moving`).
    pub(crate) fn send(&self, from: TaskState, owner: CpuId) {
        let r = self.update(|w| {
            debug_assert_eq!(TaskState::from_bits(w), from, "send: {:?}", decode(w));
            Some(encode_owner(encode_state(w, TaskState::Moving), owner))
        });
        debug_assert!(r.is_ok());
    }

    /// Marks the task killed (anyone may).
    pub(crate) fn kill(&self) -> Word {
        let (old, _) = self.update(|w| Some(w | KILLED)).expect("never declines");
        decode(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_carries_its_first_waker_s_llc_to_the_consumer() {
        let p = ParkWord::new(TaskState::Running, CpuId::new(3));
        assert_eq!(p.deliver_from(Some(8)), Delivery::Flagged);
        assert_eq!(
            p.deliver_from(Some(0)),
            Delivery::Flagged,
            "already pending"
        );
        p.commit();
        assert_eq!(
            p.finish_park(),
            Parked::FlagConsumed { waker_llc: Some(8) },
            "the first waker's"
        );
        p.commit();
        assert_eq!(
            p.finish_park(),
            Parked::Yes,
            "consumed: the next park parks"
        );
        assert_eq!(p.load().owner, CpuId::new(3), "the owner is untouched");
        let q = ParkWord::new(TaskState::Running, CpuId::new(1023));
        assert_eq!(q.deliver_from(Some(1016)), Delivery::Flagged);
        q.commit();
        assert_eq!(
            q.finish_park(),
            Parked::FlagConsumed {
                waker_llc: Some(1016)
            },
            "the largest ids fit"
        );
    }

    #[test]
    fn a_wake_while_committing_makes_the_park_return() {
        let p = ParkWord::new(TaskState::Running, CpuId::new(3));
        p.commit();
        assert_eq!(p.deliver(), Delivery::Flagged);
        assert_eq!(
            p.finish_park(),
            Parked::FlagConsumed { waker_llc: None },
            "the pending flag must make the park return at once"
        );
        assert_eq!(p.load().state, TaskState::Running);
        assert!(!p.load().pending, "the flag is consumed");
    }

    #[test]
    fn a_delayed_task_is_won_once_by_a_wake_or_by_its_owner() {
        let p = ParkWord::new(TaskState::Running, CpuId::new(2));
        p.commit();
        assert_eq!(p.finish_park_as(TaskState::Delayed), Parked::Yes);
        assert_eq!(p.load().state, TaskState::Delayed);
        assert_eq!(
            p.deliver(),
            Delivery::Requeue {
                owner: CpuId::new(2)
            },
            "the first wake asks the owner to requeue it"
        );
        assert_eq!(p.deliver(), Delivery::Coalesced, "the second coalesces");
        assert!(!p.settle_delayed(), "the owner lost: the wake came first");
        let q = ParkWord::new(TaskState::Running, CpuId::new(2));
        q.commit();
        let _ = q.finish_park_as(TaskState::Delayed);
        assert!(q.settle_delayed(), "the owner's pick came first");
        assert_eq!(
            q.deliver(),
            Delivery::Post {
                owner: CpuId::new(2)
            },
            "then it is an ordinary parked task"
        );
    }

    #[test]
    fn only_one_wake_posts_for_a_parked_task() {
        let p = ParkWord::new(TaskState::Running, CpuId::new(5));
        p.commit();
        assert_eq!(p.finish_park(), Parked::Yes);
        assert_eq!(
            p.deliver(),
            Delivery::Post {
                owner: CpuId::new(5)
            }
        );
        assert_eq!(p.deliver(), Delivery::Coalesced);
        p.send(TaskState::Waking, CpuId::new(9));
        assert_eq!(p.load().owner, CpuId::new(9));
        assert_eq!(
            p.deliver(),
            Delivery::Flagged,
            "a moving task is runnable: flag"
        );
    }
}
