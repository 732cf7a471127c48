//! The memory every process of a real run shares: one anonymous
//! `MAP_SHARED` mapping made before the first fork, so the same words sit
//! at the same addresses in every process. It holds the run's control
//! words, a slot per task, the state of every object programs share
//! (locks, condition variables, barriers, ports, futexes, timers) and a
//! message buffer per task.
//!
//! Everything in it is an atomic word except the message buffers, whose
//! bytes are handed from one task to another by the wait protocol
//! (`objects.rs`): a writer fills a buffer before the release that
//! publishes it, the reader reads it after the acquire that sees it.
//!
//! Every object and every task slot has a 64-byte line of its own, so two
//! tasks touching two objects never share a cache line the scenario did
//! not ask them to share.

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// Words (u32) per task slot and per object: one cache line.
pub const LINE: usize = 16;

/// The run's control words, at the start of the mapping.
pub mod ctl {
    /// Set to 1 when the tasks may start (they wait on it).
    pub const GO: usize = 0;
    /// Set to 1 when the run must end (a deadline, a stall, Ctrl-C).
    pub const STOP: usize = 1;
    /// Tasks ready at their start CPU, waiting for `GO`.
    pub const READY: usize = 2;
    /// The next free task slot (spawns take one).
    pub const NEXT_SLOT: usize = 3;
    /// Processes whose tasks have all ended.
    pub const PROCS_DONE: usize = 4;
    /// A task could not do what its op asked (a syscall refused): the run
    /// is void. Holds the slot + 1 of the first.
    pub const FAULT: usize = 5;
    /// A spawn found no free slot (`max_tasks`): holds the slot + 1 of
    /// the spawner.
    pub const TABLE_FULL: usize = 6;
    /// Processes forked while the run goes on (`fork` ops): their indices
    /// follow the scenario's processes'.
    pub const FORKED: usize = 7;
    /// The first line of per-process words (`MANAGER`).
    pub const LINES: usize = 1;
}

/// The words of a task's slot.
pub mod slot {
    /// What the task is doing: [`super::State`].
    pub const STATE: usize = 0;
    /// How many waits it has begun (a stall is a state that stays put).
    pub const WAITS: usize = 1;
    /// The op it is at (an index into its compiled program).
    pub const PC: usize = 2;
    /// Its program: an initial task's index, or the task count plus a
    /// spawnable program's id.
    pub const PROG: usize = 3;
    /// The futex word its waits sleep on: 0 waiting, 1 woken.
    pub const WAKE: usize = 4;
    /// The next slot + 1 in the wait queue it is in (0: the last).
    pub const LINK: usize = 5;
    /// Its kernel thread id, once started.
    pub const TID: usize = 6;
    /// Bytes of its request on a port.
    pub const REQ_BYTES: usize = 7;
    /// Bytes of the reply to it.
    pub const REPLY_BYTES: usize = 8;
    /// Its parent's slot + 1 (a spawned task).
    pub const PARENT: usize = 9;
    /// Its children's exits so far (a futex word for `join_any`).
    pub const EXITS: usize = 10;
    /// The object its wait is on (its index among its kind).
    pub const WAIT_OBJ: usize = 11;
    /// Its process's index.
    pub const PROC: usize = 12;
}

/// A task slot's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum State {
    Free = 0,
    Running = 1,
    /// Blocked in an op that only another task can end.
    Waiting = 2,
    /// Blocked in an op that ends by itself (a sleep, a timer, a disk
    /// read): never part of a stall.
    Timed = 3,
    Exited = 4,
}

impl State {
    pub fn of(v: u32) -> State {
        match v {
            1 => State::Running,
            2 => State::Waiting,
            3 => State::Timed,
            4 => State::Exited,
            _ => State::Free,
        }
    }
}

/// Where each part of the mapping starts, in u32 words (`w64` in u64
/// words, `bytes` in bytes), for a run's counts.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub procs: usize,
    pub slots: usize,
    pub objects: usize,
    /// Bytes of each task's message buffer.
    pub buf: usize,
    slots_at: usize,
    objects_at: usize,
    w64_at: usize,
    bytes_at: usize,
    len: usize,
}

impl Layout {
    pub fn new(procs: usize, slots: usize, objects: usize, buf: usize) -> Layout {
        let slots_at = (ctl::LINES + procs) * LINE;
        let objects_at = slots_at + slots * LINE;
        let w32_end = objects_at + objects * LINE;
        // u64 words: one per slot (when it was last woken), one per
        // object, and the run's start.
        let w64_at = (w32_end * 4).div_ceil(64) * 64;
        let bytes_at = (w64_at + (slots + objects + 1) * 8).div_ceil(4096) * 4096;
        let buf = buf.div_ceil(64) * 64;
        Layout {
            procs,
            slots,
            objects,
            buf,
            slots_at,
            objects_at,
            w64_at,
            bytes_at,
            len: bytes_at + slots * buf.max(64),
        }
    }
}

/// The shared mapping.
pub struct Shm {
    base: *mut u8,
    pub layout: Layout,
}

// SAFETY: the mapping is only ever accessed through atomics, except the
// message buffers, whose accesses the wait protocol orders (module doc).
unsafe impl Send for Shm {}
// SAFETY: as above.
unsafe impl Sync for Shm {}

impl Shm {
    pub fn new(layout: Layout) -> io::Result<Shm> {
        // SAFETY: an anonymous shared mapping of `len` bytes; no file, no
        // fixed address. MAP_NORESERVE: message buffers are touched only
        // as far as the messages go.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                layout.len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Shm {
            base: p.cast(),
            layout,
        })
    }

    fn w32(&self, i: usize) -> &AtomicU32 {
        assert!(i * 4 + 4 <= self.layout.w64_at, "u32 word {i} out of range");
        // SAFETY: in bounds (asserted), 4-aligned (the mapping is
        // page-aligned), zero-initialized by mmap, and only ever accessed
        // atomically; it lives as long as `self`.
        unsafe { &*(self.base.add(i * 4) as *const AtomicU32) }
    }

    fn w64(&self, i: usize) -> &AtomicU64 {
        let off = self.layout.w64_at + i * 8;
        assert!(off + 8 <= self.layout.bytes_at, "u64 word {i} out of range");
        // SAFETY: in bounds (asserted), 8-aligned (w64_at is a multiple
        // of 64), only ever accessed atomically; lives as long as `self`.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    pub fn ctl(&self, w: usize) -> &AtomicU32 {
        self.w32(w)
    }

    /// Process `p`'s manager word: bumped when its tasks have all ended
    /// or the run stops.
    pub fn manager(&self, p: usize) -> &AtomicU32 {
        assert!(p < self.layout.procs);
        self.w32((ctl::LINES + p) * LINE)
    }

    /// Process `p`'s word set to 1 when its parent process reaps it: a
    /// forked process waits for it (or the run's stop) before it reports
    /// and exits, so its teardown falls outside the workload's time.
    pub fn reap_now(&self, p: usize) -> &AtomicU32 {
        assert!(p < self.layout.procs);
        self.w32((ctl::LINES + p) * LINE + 1)
    }

    pub fn slot(&self, s: usize, w: usize) -> &AtomicU32 {
        assert!(s < self.layout.slots && w < LINE, "slot {s} word {w}");
        self.w32(self.layout.slots_at + s * LINE + w)
    }

    /// When slot `s` was last posted a wake, `CLOCK_MONOTONIC` ns (0: never).
    pub fn woken_at(&self, s: usize) -> &AtomicU64 {
        assert!(s < self.layout.slots);
        self.w64(s)
    }

    pub fn obj(&self, o: usize, w: usize) -> &AtomicU32 {
        assert!(o < self.layout.objects && w < LINE, "object {o} word {w}");
        self.w32(self.layout.objects_at + o * LINE + w)
    }

    /// Object `o`'s 64-bit word (a futex's last wake, a timer's expiry).
    pub fn obj64(&self, o: usize) -> &AtomicU64 {
        assert!(o < self.layout.objects);
        self.w64(self.layout.slots + o)
    }

    /// When the run started (`GO`), `CLOCK_MONOTONIC` ns.
    pub fn t0(&self) -> &AtomicU64 {
        self.w64(self.layout.slots + self.layout.objects)
    }

    fn buf_ptr(&self, s: usize, n: usize) -> *mut u8 {
        assert!(
            s < self.layout.slots && n <= self.layout.buf,
            "buffer {s}: {n} bytes"
        );
        // SAFETY: in bounds of the mapping (asserted above).
        unsafe { self.base.add(self.layout.bytes_at + s * self.layout.buf) }
    }

    /// Writes `src` into slot `s`'s message buffer. The caller owns the
    /// buffer by the wait protocol (module doc).
    pub fn put(&self, s: usize, src: &[u8]) {
        let p = self.buf_ptr(s, src.len());
        // SAFETY: `p` has room for `src.len()` bytes (checked); no other
        // task touches the buffer until the release that follows.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) };
    }

    /// Reads slot `s`'s message buffer into `dst`, after the acquire that
    /// made it ours.
    pub fn get(&self, s: usize, dst: &mut [u8]) {
        let p = self.buf_ptr(s, dst.len());
        // SAFETY: as in `put`: in bounds, and ordered by the protocol.
        unsafe { std::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), dst.len()) };
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made; no reference into
        // it outlives `self` (they all borrow it).
        unsafe { libc::munmap(self.base.cast(), self.layout.len) };
    }
}
