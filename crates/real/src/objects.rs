//! The objects programs share, in shared memory, with the simulator's
//! semantics (`schedlab_sim::objects`) and the kernel's wakes.
//!
//! ## The wait protocol
//!
//! Every object but a futex and a pipe keeps its state (an owner, a count,
//! a FIFO of waiting tasks) in its own line of the shared mapping, under a
//! *guard*: a word taken by compare-and-swap, spun on and yielded to when
//! taken, never slept on. The guard is held for a few dozen instructions,
//! and because nobody sleeps on it, **every futex wake a run makes is a
//! wake the scenario asked for**: the kernel's record shows no wake that
//! the simulator would not post.
//!
//! A task that must wait:
//!
//! 1. under the guard, sets its slot's `WAKE` word to 0 and joins the
//!    object's queue (its slot's `LINK` word chains the queue);
//! 2. releases the guard, then sleeps in `FUTEX_WAIT` on `WAKE` while it
//!    reads 0.
//!
//! A task that ends a wait (an unlock handing the lock on, a signal, a
//! barrier's last arrival, a request, a reply):
//!
//! 1. under the guard, takes the waiter off the queue (and hands it what it
//!    waited for: the lock, the request);
//! 2. releases the guard, stores when it posted the wake (for `wake_lap`),
//!    stores 1 into the waiter's `WAKE` (release) and calls `FUTEX_WAKE`.
//!
//! A wake that comes between steps 1 and 2 of the waiter finds `WAKE` at 1
//! and the waiter does not sleep (the futex compares the word in the
//! kernel): no wake is lost, as the simulator's park word guarantees. A
//! wake posted on the waker's thread names that thread in the kernel's
//! `sched_waking` (its `common_pid`): the attribution the simulator's wake
//! carries.
//!
//! A futex op is the futex syscall itself on a generation word, and a pipe
//! is a kernel pipe (`exec::ipc`).

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::shm::{slot, Shm, State};
use crate::sys;

/// Where each kind's objects start among the run's objects.
#[derive(Clone, Copy, Debug, Default)]
pub struct Kinds {
    pub ports: usize,
    pub locks: usize,
    pub conds: usize,
    pub barriers: usize,
    pub futexes: usize,
    pub timers: usize,
    pub total: usize,
}

impl Kinds {
    pub fn new(o: &schedlab_sim::objects::Objects) -> Kinds {
        let mut k = Kinds::default();
        let mut at = 0;
        for (field, n) in [
            (&mut k.ports, o.ports.len()),
            (&mut k.locks, o.locks.len()),
            (&mut k.conds, o.conds.len()),
            (&mut k.barriers, o.barriers.len()),
            (&mut k.futexes, o.futexes.len()),
            (&mut k.timers, o.timers.len()),
        ] {
            *field = at;
            at += n;
        }
        k.total = at;
        k
    }
}

/// The words of an object's line.
pub mod word {
    pub const GUARD: usize = 0;
    /// Queue of waiting tasks: first and last slot + 1 (0: empty).
    pub const HEAD: usize = 1;
    pub const TAIL: usize = 2;
    /// A lock's owner, slot + 1.
    pub const OWNER: usize = 3;
    /// A barrier's arrivals this round.
    pub const ARRIVED: usize = 3;
    /// A port's server waiting for a request, slot + 1.
    pub const SERVER_WAITING: usize = 3;
    /// A port's server (the last task to serve it), slot + 1.
    pub const WATCHER: usize = 4;
    /// A futex's generation (the word its waiters sleep on).
    pub const FUTEX: usize = 5;
    /// Who sent the wake that found nobody waiting, slot + 1 (0: none),
    /// its time the object's 64-bit word: for a condition, its last such
    /// signal (kept, as the simulator's `Cond` keeps it); for a futex, its
    /// last wake when that woke nobody (cleared by one that woke some).
    pub const LOST_BY: usize = 6;
}

/// The shared objects of one run, seen from one process.
pub struct Objects<'a> {
    pub shm: &'a Shm,
    pub k: Kinds,
}

/// The guard of object `o`, held until dropped.
struct Guard<'a>(&'a std::sync::atomic::AtomicU32);

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.0.store(0, Release);
    }
}

impl<'a> Objects<'a> {
    fn guard(&self, o: usize) -> Guard<'a> {
        let g = self.shm.obj(o, word::GUARD);
        let mut spins = 0u32;
        while g.compare_exchange_weak(0, 1, Acquire, Relaxed).is_err() {
            spins += 1;
            if spins % 64 == 0 {
                // The holder may have been preempted: let it run.
                sys::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        Guard(g)
    }

    fn push(&self, o: usize, s: usize) {
        self.shm.slot(s, slot::LINK).store(0, Relaxed);
        let tail = self.shm.obj(o, word::TAIL).load(Relaxed) as usize;
        if tail == 0 {
            self.shm.obj(o, word::HEAD).store(s as u32 + 1, Relaxed);
        } else {
            self.shm
                .slot(tail - 1, slot::LINK)
                .store(s as u32 + 1, Relaxed);
        }
        self.shm.obj(o, word::TAIL).store(s as u32 + 1, Relaxed);
    }

    fn pop(&self, o: usize) -> Option<usize> {
        let head = self.shm.obj(o, word::HEAD).load(Relaxed) as usize;
        if head == 0 {
            return None;
        }
        let next = self.shm.slot(head - 1, slot::LINK).load(Relaxed);
        self.shm.obj(o, word::HEAD).store(next, Relaxed);
        if next == 0 {
            self.shm.obj(o, word::TAIL).store(0, Relaxed);
        }
        Some(head - 1)
    }

    /// Step 1 of a wait, under the guard: `me` joins `o`'s queue.
    fn enqueue(&self, o: usize, me: usize) {
        self.shm.slot(me, slot::WAKE).store(0, Relaxed);
        self.push(o, me);
    }

    /// Step 2 of a wait: sleep until posted.
    pub fn block(&self, me: usize) {
        let w = self.shm.slot(me, slot::WAKE);
        while w.load(Acquire) == 0 {
            sys::futex_wait(w, 0, None);
        }
    }

    /// Ends `target`'s wait (step 2 of a wake).
    pub fn post(&self, target: usize) {
        self.shm.woken_at(target).store(sys::now(), Relaxed);
        let w = self.shm.slot(target, slot::WAKE);
        w.store(1, Release);
        sys::futex_wake(w, 1);
    }

    /// Marks `me` as waiting on object `obj` (for the stall report).
    pub fn waiting(&self, me: usize, obj: usize, state: State) {
        self.shm.slot(me, slot::WAIT_OBJ).store(obj as u32, Relaxed);
        // Only the task itself writes its count: a plain add, no locked
        // instruction on every wait (the stall watch only reads it).
        let waits = self.shm.slot(me, slot::WAITS);
        waits.store(waits.load(Relaxed).wrapping_add(1), Relaxed);
        self.shm.slot(me, slot::STATE).store(state as u32, Release);
    }

    /// Marks `me` as waiting in the kernel (a pipe, a futex op, a join),
    /// where no post of ours ends the wait: its `WAKE` stays 0, so the
    /// stall watch cannot tell it was woken until it runs.
    pub fn kernel_wait(&self, me: usize, obj: usize) {
        self.shm.slot(me, slot::WAKE).store(0, Relaxed);
        self.waiting(me, obj, State::Waiting);
    }

    pub fn running(&self, me: usize) {
        self.shm
            .slot(me, slot::STATE)
            .store(State::Running as u32, Release);
    }

    /// Takes lock `l` (FIFO hand-off, as the simulator's `Lock`): at once
    /// when free or already ours, else after the holder hands it over.
    pub fn lock(&self, l: usize, me: usize) {
        let o = self.k.locks + l;
        {
            let _g = self.guard(o);
            let owner = self.shm.obj(o, word::OWNER);
            match owner.load(Relaxed) as usize {
                0 => {
                    owner.store(me as u32 + 1, Relaxed);
                    return;
                }
                // A relock: a default pthread mutex deadlocks; nothing
                // posts this wait, and the stall report names it.
                h if h == me + 1 => {}
                _ => self.enqueue(o, me),
            }
        }
        self.waiting(me, o, State::Waiting);
        self.block(me);
        self.running(me);
    }

    /// Releases lock `l`: its first waiter owns it now and is woken.
    pub fn unlock(&self, l: usize) {
        let o = self.k.locks + l;
        let next = {
            let _g = self.guard(o);
            let next = self.pop(o);
            self.shm
                .obj(o, word::OWNER)
                .store(next.map_or(0, |n| n as u32 + 1), Relaxed);
            next
        };
        if let Some(n) = next {
            self.post(n);
        }
    }

    /// Lock `l`'s holder.
    pub fn owner(&self, l: usize) -> Option<usize> {
        match self.shm.obj(self.k.locks + l, word::OWNER).load(Acquire) {
            0 => None,
            h => Some(h as usize - 1),
        }
    }

    /// `pthread_cond_wait`: join `c`'s waiters, release `lock` when we
    /// hold it, sleep until a signal picks us, take `lock` again.
    pub fn cond_wait(&self, c: usize, lock: Option<usize>, me: usize) {
        let o = self.k.conds + c;
        {
            let _g = self.guard(o);
            self.enqueue(o, me);
        }
        if let Some(l) = lock.filter(|&l| self.owner(l) == Some(me)) {
            self.unlock(l);
        }
        self.waiting(me, o, State::Waiting);
        self.block(me);
        self.running(me);
        if let Some(l) = lock {
            self.lock(l, me);
        }
    }

    /// `pthread_cond_signal` (`all`: broadcast) by `me`. A signal nobody
    /// waits for is lost, and remembered for a stall report.
    pub fn cond_signal(&self, c: usize, all: bool, me: usize) {
        let o = self.k.conds + c;
        let mut woken = Vec::new();
        {
            let _g = self.guard(o);
            while let Some(w) = self.pop(o) {
                woken.push(w);
                if !all {
                    break;
                }
            }
            if woken.is_empty() {
                self.shm.obj64(o).store(sys::now(), Relaxed);
                self.shm.obj(o, word::LOST_BY).store(me as u32 + 1, Relaxed);
            }
        }
        for w in woken {
            self.post(w);
        }
    }

    /// An arrival at barrier `b` of `n`: the last wakes the rest.
    pub fn barrier(&self, b: usize, n: u32, me: usize) {
        let o = self.k.barriers + b;
        let mut woken = Vec::new();
        let last = {
            let _g = self.guard(o);
            let arrived = self.shm.obj(o, word::ARRIVED);
            let a = arrived.load(Relaxed) + 1;
            if a >= n {
                arrived.store(0, Relaxed);
                while let Some(w) = self.pop(o) {
                    woken.push(w);
                }
            } else {
                arrived.store(a, Relaxed);
                self.enqueue(o, me);
            }
            a >= n
        };
        if !last {
            self.waiting(me, o, State::Waiting);
            self.block(me);
            self.running(me);
            return;
        }
        for w in woken {
            self.post(w);
        }
    }

    /// Arrivals at barrier `b` this round (for the stall report).
    pub fn arrived(&self, b: usize) -> u32 {
        self.shm
            .obj(self.k.barriers + b, word::ARRIVED)
            .load(Acquire)
    }

    /// A call on port `p`: `me`'s request (its bytes already in its
    /// buffer) is queued, the server woken if it waits; then `me` sleeps
    /// until the reply.
    pub fn call(&self, p: usize, bytes: u64, me: usize) {
        let o = self.k.ports + p;
        self.shm
            .slot(me, slot::REQ_BYTES)
            .store(bytes as u32, Relaxed);
        let server = {
            let _g = self.guard(o);
            self.enqueue(o, me);
            let w = self.shm.obj(o, word::SERVER_WAITING);
            let s = w.load(Relaxed);
            w.store(0, Relaxed);
            s
        };
        if server != 0 {
            self.post(server as usize - 1);
        }
        self.waiting(me, o, State::Waiting);
        self.block(me);
        self.running(me);
    }

    /// Serve port `p`: the next request's client, waiting for one if none.
    pub fn serve(&self, p: usize, me: usize) -> usize {
        let o = self.k.ports + p;
        loop {
            {
                let _g = self.guard(o);
                self.shm.obj(o, word::WATCHER).store(me as u32 + 1, Relaxed);
                if let Some(c) = self.pop(o) {
                    return c;
                }
                self.shm.slot(me, slot::WAKE).store(0, Relaxed);
                self.shm
                    .obj(o, word::SERVER_WAITING)
                    .store(me as u32 + 1, Relaxed);
            }
            self.waiting(me, o, State::Waiting);
            self.block(me);
            self.running(me);
        }
    }

    /// Port `p`'s server, once one has served it.
    pub fn server(&self, p: usize) -> Option<usize> {
        match self.shm.obj(self.k.ports + p, word::WATCHER).load(Acquire) {
            0 => None,
            s => Some(s as usize - 1),
        }
    }

    /// Futex `f`'s generation word.
    pub fn futex(&self, f: usize) -> &'a std::sync::atomic::AtomicU32 {
        self.shm.obj(self.k.futexes + f, word::FUTEX)
    }

    /// Futex `f`'s last wake by `me` woke `woke` tasks: none, and it is
    /// remembered as lost (for a stall report); some, and it is forgotten.
    pub fn futex_woke(&self, f: usize, me: usize, woke: usize) {
        let by = if woke == 0 { me as u32 + 1 } else { 0 };
        self.shm
            .obj(self.k.futexes + f, word::LOST_BY)
            .store(by, Relaxed);
    }

    /// A condition's or futex's (object `o`'s) last signal or wake that
    /// found nobody waiting: (when, absolute ns; by whom, a slot).
    pub fn lost(&self, o: usize) -> Option<(u64, usize)> {
        match self.shm.obj(o, word::LOST_BY).load(Relaxed) {
            0 => None,
            by => Some((self.shm.obj64(o).load(Relaxed), by as usize - 1)),
        }
    }

    /// When futex `f` was last woken.
    pub fn futex_woken_at(&self, f: usize) -> &'a std::sync::atomic::AtomicU64 {
        self.shm.obj64(self.k.futexes + f)
    }

    /// A use of timer `t` at `now` (ns since the run began), as the
    /// simulator's `Timer::next`: `Ok(expiry)` to sleep until, or
    /// `Err(expiry)` when it has passed (the timer restarts from `now`
    /// unless `absolute`). The expiry is kept + 1 (0: never used).
    pub fn timer_next(&self, t: usize, now: u64, period: u64, absolute: bool) -> Result<u64, u64> {
        let o = self.k.timers + t;
        let _g = self.guard(o);
        let next = self.shm.obj64(o);
        let at = match next.load(Relaxed) {
            0 => now,
            n => n - 1,
        } + period;
        if now < at {
            next.store(at + 1, Relaxed);
            return Ok(at);
        }
        next.store(if absolute { at } else { now } + 1, Relaxed);
        Err(at)
    }
}
