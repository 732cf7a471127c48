//! The kernel objects programs share: ports (request/reply), pipes, futexes,
//! locks, condition variables, barriers and timers. Each is named in a program and gets a typed id once, when the
//! programs are compiled ([`Objects::port`] and the like); the engine then
//! addresses it by that id.
//!
//! Each operation's semantics is a method that changes the object and says
//! what follows: whether the caller must wait, and whom to wake. Charging
//! time and calling the scheduler are the interpreter's part.

use std::collections::{BTreeMap, VecDeque};

use schedlab_sched::TaskId;
use schedlab_topology::CpuId;

macro_rules! id {
    ($name:ident, $what:literal) => {
        #[doc = concat!("A ", $what, ", by its index among the run's ", $what, "s.")]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id!(PortId, "port");
id!(PipeId, "pipe");
id!(FutexId, "futex");
id!(LockId, "lock");
id!(CondId, "condition variable");
id!(BarrierId, "barrier");
id!(TimerId, "timer");

/// A request/reply port: requests wait in order; its server is told.
#[derive(Debug, Default)]
pub struct Port {
    /// (client, bytes, the CPU the request was written on).
    requests: VecDeque<(TaskId, u64, CpuId)>,
    /// The thread that serves the port: every request posts it a wake, as
    /// a watched port does (a flag when it is running, counted by no one).
    watcher: Option<TaskId>,
}

impl Port {
    /// A client's request: queued; the server to wake, if one watches.
    pub fn request(&mut self, client: TaskId, bytes: u64, cpu: CpuId) -> Option<TaskId> {
        self.requests.push_back((client, bytes, cpu));
        self.watcher
    }

    /// `server` takes the next request, if any, and watches the port from
    /// now on.
    /// The thread that serves it, once one has.
    pub fn server(&self) -> Option<TaskId> {
        self.watcher
    }

    pub fn serve(&mut self, server: TaskId) -> Option<(TaskId, u64, CpuId)> {
        self.watcher = Some(server);
        self.requests.pop_front()
    }
}

/// A pipe: bytes in flight, and who waits to read or write.
#[derive(Debug, Default)]
pub struct Pipe {
    bytes: u64,
    written_on: Option<CpuId>,
    readers: VecDeque<TaskId>,
    writers: VecDeque<TaskId>,
}

/// What a pipe operation asks of its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipeStep {
    /// Not now: the caller waits (it is queued to be woken).
    Wait,
    /// Done; wake this task, if any. A read also says where the bytes were
    /// written, for the hand-off cost.
    Done {
        wake: Option<TaskId>,
        from: Option<CpuId>,
    },
}

impl Pipe {
    /// Would `bytes` fit under `capacity` (a write larger than the
    /// capacity goes in alone)? If not, `writer` waits.
    pub fn room(&mut self, writer: TaskId, bytes: u64, capacity: u64) -> bool {
        if self.bytes + bytes > capacity.max(bytes) {
            if !self.writers.contains(&writer) {
                self.writers.push_back(writer);
            }
            return false;
        }
        true
    }

    /// `writer` writes `bytes` on `cpu`: a waiting reader wakes.
    pub fn write(&mut self, writer: TaskId, bytes: u64, cpu: CpuId) -> Option<TaskId> {
        self.bytes += bytes;
        self.written_on = Some(cpu);
        self.writers.retain(|&w| w != writer);
        self.readers.pop_front()
    }

    /// `reader` reads `bytes`, or waits for them.
    pub fn read(&mut self, reader: TaskId, bytes: u64) -> PipeStep {
        if self.bytes < bytes {
            if !self.readers.contains(&reader) {
                self.readers.push_back(reader);
            }
            return PipeStep::Wait;
        }
        self.bytes -= bytes;
        self.readers.retain(|&r| r != reader);
        PipeStep::Done {
            from: self.written_on,
            wake: self.writers.pop_front(),
        }
    }
}

/// A futex: a generation count and its waiters.
#[derive(Debug, Default)]
pub struct Futex {
    seq: u64,
    waiters: VecDeque<TaskId>,
}

impl Futex {
    /// `task`, which last saw generation `seen`, waits: `Some(seq)` when a
    /// wake came since (it goes on, having seen `seq`), `None` when it
    /// must wait (it is queued).
    pub fn wait(&mut self, task: TaskId, seen: u64) -> Option<u64> {
        if seen != self.seq {
            self.waiters.retain(|&w| w != task);
            return Some(self.seq);
        }
        if !self.waiters.contains(&task) {
            self.waiters.push_back(task);
        }
        None
    }

    /// A wake: the new generation, which every waiter that has not seen
    /// it will go on past.
    pub fn bump(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The next waiter to wake, first come first.
    pub fn next_waiter(&mut self) -> Option<TaskId> {
        self.waiters.pop_front()
    }
}

/// A lock handed off in order.
#[derive(Debug, Default)]
pub struct Lock {
    owner: Option<TaskId>,
    waiters: VecDeque<TaskId>,
}

impl Lock {
    /// `task` takes it (`true`) or waits for it (queued).
    pub fn acquire(&mut self, task: TaskId) -> bool {
        match self.owner {
            None => {
                self.owner = Some(task);
                true
            }
            Some(o) if o == task => {
                self.waiters.retain(|&w| w != task);
                true
            }
            Some(_) => {
                if !self.waiters.contains(&task) {
                    self.waiters.push_back(task);
                }
                false
            }
        }
    }

    /// Hand-off: the first waiter owns it now and is woken.
    pub fn release(&mut self) -> Option<TaskId> {
        self.owner = self.waiters.pop_front();
        self.owner
    }

    pub fn owner(&self) -> Option<TaskId> {
        self.owner
    }
}

/// A condition variable: its waiters in order of arrival. A signal picks
/// the first; a signal nobody waited for is lost, and only the last such
/// is remembered (for a stall report).
#[derive(Debug, Default)]
pub struct Cond {
    waiters: VecDeque<TaskId>,
    /// The last signal or broadcast that found nobody: when, by whom.
    lost: Option<(u64, TaskId)>,
}

impl Cond {
    /// `task` joins the waiters.
    pub fn enter(&mut self, task: TaskId) {
        if !self.waiters.contains(&task) {
            self.waiters.push_back(task);
        }
    }

    /// Still waiting: no signal has picked `task` yet.
    pub fn is_waiting(&self, task: TaskId) -> bool {
        self.waiters.contains(&task)
    }

    /// `pthread_cond_signal`: the waiter it picks, if any.
    pub fn signal(&mut self) -> Option<TaskId> {
        self.waiters.pop_front()
    }

    /// `pthread_cond_broadcast`: every waiter, first come first.
    pub fn broadcast(&mut self) -> Vec<TaskId> {
        self.waiters.drain(..).collect()
    }

    /// A signal or broadcast by `by` at `at` found nobody waiting.
    pub fn lose(&mut self, at: u64, by: TaskId) {
        self.lost = Some((at, by));
    }

    /// The last signal that found nobody waiting: when, by whom.
    pub fn lost(&self) -> Option<(u64, TaskId)> {
        self.lost
    }
}

/// A barrier of `n` arrivals: each round has a generation.
#[derive(Debug, Default)]
pub struct Barrier {
    arrived: u32,
    generation: u64,
    waiters: Vec<TaskId>,
}

/// What an arrival at a barrier asks of its caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Wait until the generation moves past this one.
    Wait(u64),
    /// The last arrival: wake these, and go on.
    Last(Vec<TaskId>),
}

impl Barrier {
    pub fn arrive(&mut self, task: TaskId, n: u32) -> Arrival {
        self.arrived += 1;
        if self.arrived >= n {
            self.arrived = 0;
            self.generation += 1;
            return Arrival::Last(std::mem::take(&mut self.waiters));
        }
        self.waiters.push(task);
        Arrival::Wait(self.generation)
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Arrivals of the current round.
    pub fn arrived(&self) -> u32 {
        self.arrived
    }
}

/// A periodic timer: when it next expires, once first used.
#[derive(Debug, Default)]
pub struct Timer {
    next: Option<u64>,
}

impl Timer {
    /// A use at `now`: `Ok(expiry)` to sleep until, or `Err(expiry)` when
    /// the expiry is already past (the timer then restarts from `now`,
    /// unless `absolute`).
    pub fn next(&mut self, now: u64, period: u64, absolute: bool) -> Result<u64, u64> {
        let at = self.next.unwrap_or(now) + period;
        if now < at {
            self.next = Some(at);
            return Ok(at);
        }
        self.next = Some(if absolute { at } else { now });
        Err(at)
    }
}

/// Every object of a run, and the names programs gave them.
#[derive(Debug, Default)]
pub struct Objects {
    pub ports: Vec<Port>,
    pub pipes: Vec<Pipe>,
    pub futexes: Vec<Futex>,
    pub locks: Vec<Lock>,
    pub conds: Vec<Cond>,
    pub barriers: Vec<Barrier>,
    pub timers: Vec<Timer>,
    names: [BTreeMap<String, u32>; 7],
}

fn intern<T: Default>(names: &mut BTreeMap<String, u32>, all: &mut Vec<T>, name: &str) -> u32 {
    if let Some(&i) = names.get(name) {
        return i;
    }
    all.push(T::default());
    let i = (all.len() - 1) as u32;
    names.insert(name.to_string(), i);
    i
}

impl Objects {
    pub fn port(&mut self, name: &str) -> PortId {
        PortId(intern(&mut self.names[0], &mut self.ports, name))
    }

    pub fn pipe(&mut self, name: &str) -> PipeId {
        PipeId(intern(&mut self.names[1], &mut self.pipes, name))
    }

    pub fn futex(&mut self, name: &str) -> FutexId {
        FutexId(intern(&mut self.names[2], &mut self.futexes, name))
    }

    pub fn lock(&mut self, name: &str) -> LockId {
        LockId(intern(&mut self.names[3], &mut self.locks, name))
    }

    pub fn cond(&mut self, name: &str) -> CondId {
        CondId(intern(&mut self.names[4], &mut self.conds, name))
    }

    pub fn barrier(&mut self, name: &str) -> BarrierId {
        BarrierId(intern(&mut self.names[5], &mut self.barriers, name))
    }

    pub fn timer(&mut self, name: &str) -> TimerId {
        TimerId(intern(&mut self.names[6], &mut self.timers, name))
    }

    /// The name programs gave object `i` of kind `k` (the order of
    /// `names`: port, pipe, futex, lock, cond, barrier, timer).
    fn name_of(&self, k: usize, i: u32) -> &str {
        self.names[k]
            .iter()
            .find(|(_, &v)| v == i)
            .map_or("?", |(n, _)| n.as_str())
    }

    pub fn port_name(&self, id: PortId) -> &str {
        self.name_of(0, id.0)
    }

    pub fn pipe_name(&self, id: PipeId) -> &str {
        self.name_of(1, id.0)
    }

    pub fn futex_name(&self, id: FutexId) -> &str {
        self.name_of(2, id.0)
    }

    pub fn lock_name(&self, id: LockId) -> &str {
        self.name_of(3, id.0)
    }

    pub fn cond_name(&self, id: CondId) -> &str {
        self.name_of(4, id.0)
    }

    pub fn barrier_name(&self, id: BarrierId) -> &str {
        self.name_of(5, id.0)
    }

    pub fn timer_name(&self, id: TimerId) -> &str {
        self.name_of(6, id.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(i: u32) -> TaskId {
        TaskId(i)
    }

    #[test]
    fn names_resolve_to_one_id_per_kind() {
        let mut o = Objects::default();
        let (a, b) = (o.port("x"), o.port("y"));
        assert_eq!((a, b, o.port("x")), (PortId(0), PortId(1), PortId(0)));
        assert_eq!(o.pipe("x"), PipeId(0), "kinds have their own names");
        assert_eq!(o.ports.len(), 2);
    }

    #[test]
    fn a_futex_wait_goes_on_after_a_wake_it_has_not_seen() {
        let mut f = Futex::default();
        assert_eq!(f.wait(t(1), 0), None, "no wake yet: wait");
        assert_eq!(f.wait(t(1), 0), None, "queued once");
        assert_eq!(f.bump(), 1);
        assert_eq!((f.next_waiter(), f.next_waiter()), (Some(t(1)), None));
        assert_eq!(f.wait(t(2), 0), Some(1), "a wake came since: go on");
        assert_eq!(f.wait(t(2), 1), None);
    }

    #[test]
    fn a_full_pipe_holds_the_writer_and_a_read_wakes_it() {
        let mut p = Pipe::default();
        let cpu = CpuId::new(3);
        assert!(p.room(t(1), 8, 10));
        assert_eq!(p.write(t(1), 8, cpu), None);
        assert!(!p.room(t(1), 8, 10), "16 > 10: wait");
        assert_eq!(
            p.read(t(2), 8),
            PipeStep::Done {
                wake: Some(t(1)),
                from: Some(cpu)
            }
        );
        assert_eq!(p.read(t(2), 1), PipeStep::Wait);
        assert!(
            p.room(t(1), 20, 10),
            "a write over the capacity goes in alone"
        );
    }

    #[test]
    fn a_signal_picks_the_first_waiter_and_is_lost_with_none() {
        let mut c = Cond::default();
        assert_eq!(c.signal(), None, "nobody waits: the signal is lost");
        c.enter(t(1));
        c.enter(t(2));
        assert_eq!(c.signal(), Some(t(1)));
        assert!(!c.is_waiting(t(1)) && c.is_waiting(t(2)));
        c.enter(t(3));
        assert_eq!(c.broadcast(), vec![t(2), t(3)]);
        assert!(!c.is_waiting(t(3)));
    }

    #[test]
    fn the_last_arrival_at_a_barrier_wakes_the_rest() {
        let mut b = Barrier::default();
        assert_eq!(b.arrive(t(1), 3), Arrival::Wait(0));
        assert_eq!(b.arrive(t(2), 3), Arrival::Wait(0));
        assert_eq!(b.arrive(t(3), 3), Arrival::Last(vec![t(1), t(2)]));
        assert_eq!(b.generation(), 1);
        assert_eq!(b.arrive(t(1), 3), Arrival::Wait(1), "the next round");
    }

    #[test]
    fn a_timer_keeps_its_period_and_restarts_when_overrun() {
        let mut r = Timer::default();
        assert_eq!(r.next(5, 19, false), Ok(24), "first use: one period on");
        assert_eq!(r.next(30, 19, false), Ok(43), "late by 6: still 43");
        assert_eq!(r.next(50, 19, false), Ok(62));
        assert_eq!(r.next(90, 19, false), Err(81), "missed 81: restart at 90");
        assert_eq!(r.next(95, 19, false), Ok(109));
        let mut a = Timer::default();
        assert_eq!(a.next(0, 20, true), Ok(20));
        assert_eq!(a.next(45, 20, true), Err(40), "absolute: 40 missed");
        assert_eq!(a.next(46, 20, true), Ok(60), "the phase is kept");
    }

    #[test]
    fn a_lock_is_handed_to_its_first_waiter() {
        let mut l = Lock::default();
        assert!(l.acquire(t(1)));
        assert!(!l.acquire(t(2)));
        assert!(!l.acquire(t(3)));
        assert_eq!(l.release(), Some(t(2)));
        assert!(l.acquire(t(2)), "the new owner's retry succeeds");
        assert_eq!(l.release(), Some(t(3)));
        assert_eq!(l.release(), None);
    }
}
