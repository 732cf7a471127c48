//! What CPUs share: the read-only topology and config, and the doors into
//! each CPU (mailbox, doorbell, published load) and each task (park word,
//! join list, and the parked entity). Nothing here is owned by one CPU;
//! everything is an atomic or a small per-object lock.
//!
//! `S` is the placement policy's per-task state: it travels inside the
//! tasks that messages and parked slots hold.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::any::Any;

use schedlab_topology::{CpuId, CpuSet, Topology};

use crate::config::Config;
use crate::coresched::CoreState;
use crate::doorbell::Doorbell;
use crate::effects::{Kick, KickWhy, PlaceReason, WakeCause};
use crate::park::{Delivery, ParkWord, TaskState, Word};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Mutex, Ordering};
use crate::task::{PolicyState, Task, TaskId};

/// A message between CPUs. The only way one CPU asks another to act on a
/// task it owns.
#[derive(Debug)]
pub(crate) enum Msg<S> {
    Wake {
        task: TaskId,
        cause: WakeCause,
    },
    /// Put this task, delayed here (`DELAY_DEQUEUE`), back among the
    /// runnable where it waited: a wake won it (`Delayed -> Waking`).
    Requeue {
        task: TaskId,
        cause: WakeCause,
    },
    /// Take ownership of this task (`sync`: placed by a sync wake).
    Adopt {
        task: Task<S>,
        reason: PlaceReason,
        sync: bool,
    },
    Kill {
        task: TaskId,
    },
    Stop {
        task: TaskId,
    },
    Continue {
        task: TaskId,
    },
    SetMask {
        task: TaskId,
        /// Boxed: a set is 128 bytes, and every message of a mailbox is
        /// as large as its largest kind (rare, unlike wakes).
        mask: alloc::boxed::Box<CpuSet>,
    },
    /// A newly idle CPU asks for a queued task; a CPU forced idle by core
    /// scheduling asks for one of the core's cookie.
    StealRequest {
        thief: CpuId,
        cookie: Option<u64>,
    },
    /// The balancer's own message ([`crate::balancer`]), boxed: its type
    /// is the balancer's.
    Balance(Boxed),
}

impl<S> Msg<S> {
    /// The task a per-task message is about (`None` for a steal request).
    pub(crate) fn task(&self) -> Option<TaskId> {
        match self {
            Msg::Wake { task, .. }
            | Msg::Requeue { task, .. }
            | Msg::Kill { task }
            | Msg::Stop { task }
            | Msg::Continue { task }
            | Msg::SetMask { task, .. } => Some(*task),
            Msg::Adopt { task, .. } => Some(task.id),
            Msg::StealRequest { .. } | Msg::Balance(_) => None,
        }
    }
}

/// The doors into one CPU that any CPU may read (the mailbox is apart: it
/// holds tasks, so it has their type).
#[derive(Debug)]
pub struct Doors {
    pub(crate) doorbell: Doorbell,
    /// Running + queued tasks, published by the owner for balancing.
    pub(crate) load: AtomicU32,
    /// The fair queue's PELT `util_avg`, `load_avg` and `runnable_avg`, as
    /// last published.
    pub(crate) util: AtomicU32,
    pub(crate) load_avg: AtomicU32,
    pub(crate) runnable_avg: AtomicU32,
    /// Fair tasks running or queued (`rq->cfs.h_nr_runnable`).
    pub(crate) h_nr: AtomicU32,
    /// TIF_NEED_RESCHED: set by whoever asks this CPU to reschedule, cleared
    /// by its pass. A remote ask sends an IPI only when it sets the flag.
    pub(crate) resched: AtomicBool,
}

impl Doors {
    pub(crate) fn load(&self) -> u32 {
        self.load.load(Ordering::Relaxed)
    }
}

/// A task's shared slot.
#[derive(Debug)]
pub(crate) struct TaskSlot<S> {
    pub(crate) park: ParkWord,
    pub(crate) join: Mutex<JoinState>,
    /// The task's entity while it is parked (or waking): whoever the park
    /// word makes its holder takes it out (the `wake` module's protocol).
    pub(crate) parked: Mutex<Option<Task<S>>>,
}

#[derive(Debug, Default)]
pub(crate) struct JoinState {
    pub(crate) exited: bool,
    pub(crate) joiners: Vec<TaskId>,
}

/// Why a task could not be created.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SpawnError {
    /// The task table (fixed at boot) is full.
    TableFull { capacity: usize },
    /// The mask names no CPU of this machine.
    EmptyMask,
}

/// Everything the CPUs share.
#[derive(Debug)]
pub struct Shared<S> {
    topo: Topology,
    config: Config,
    cpus: Vec<Doors>,
    mailboxes: Vec<Mutex<VecDeque<Msg<S>>>>,
    tasks: Vec<TaskSlot<S>>,
    next_task: AtomicU32,
    /// The CPUs with a task waiting behind the running one, a bit each. A
    /// newly idle CPU looks for work only when one is set, as Linux's
    /// `sched_balance_newidle()` skips when `rd->overloaded` is clear, and
    /// looks only at those: an atomic hint, not a lock, and never wrong for
    /// long.
    overloaded: Vec<AtomicU64>,
    /// Per SMT core (by ordinal), its shared state.
    cores: Vec<Mutex<CoreState>>,
}

impl<S: PolicyState> Shared<S> {
    /// A machine with room for `max_tasks` tasks over its life (ids are not
    /// reused: a kernel would recycle slots; a simulation does not need to).
    pub fn new(topo: Topology, config: Config, max_tasks: usize) -> Shared<S> {
        let n = topo.num_cpus();
        let mailboxes = topo
            .cpu_ids()
            .map(|_| Mutex::new(VecDeque::new()))
            .collect();
        let cpus = topo
            .cpu_ids()
            .map(|_| Doors {
                doorbell: Doorbell::new(),
                load: AtomicU32::new(0),
                util: AtomicU32::new(0),
                load_avg: AtomicU32::new(0),
                runnable_avg: AtomicU32::new(0),
                h_nr: AtomicU32::new(0),
                resched: AtomicBool::new(false),
            })
            .collect();
        let cores = topo
            .cores()
            .iter()
            .map(|c| Mutex::new(CoreState::new(c.iter())))
            .collect();
        let tasks = (0..max_tasks)
            .map(|_| TaskSlot {
                park: ParkWord::new(TaskState::Dead, CpuId::new(0)),
                join: Mutex::new(JoinState::default()),
                parked: Mutex::new(None),
            })
            .collect();
        Shared {
            cpus,
            mailboxes,
            tasks,
            next_task: AtomicU32::new(0),
            overloaded: (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            cores,
            topo,
            config,
        }
    }

    /// Bytes of shared state per CPU (mailbox, doorbell, load), not
    /// counting messages in flight.
    pub const BYTES_PER_CPU: usize =
        core::mem::size_of::<Doors>() + core::mem::size_of::<Mutex<VecDeque<Msg<S>>>>();
    /// Bytes of shared state per task slot (park word, join list head, the
    /// parked entity's place).
    pub const BYTES_PER_TASK_SLOT: usize = core::mem::size_of::<TaskSlot<S>>();

    /// The read-only view a policy decides with, for a decision on `cpu`.
    pub fn machine(&self, cpu: CpuId, now: u64) -> Machine<'_> {
        Machine {
            topo: &self.topo,
            config: &self.config,
            doors: &self.cpus,
            llcs: None,
            cpu,
            now,
        }
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn doorbell(&self, cpu: CpuId) -> &Doorbell {
        &self.cpus[cpu.index()].doorbell
    }

    /// The task's park word, decoded.
    pub fn task_word(&self, task: TaskId) -> Word {
        self.tasks[task.index()].park.load()
    }

    pub fn is_killed(&self, task: TaskId) -> bool {
        self.tasks[task.index()].park.killed()
    }

    pub fn task_capacity(&self) -> usize {
        self.tasks.len()
    }

    /// How many tasks were ever created.
    pub fn tasks_created(&self) -> usize {
        (self.next_task.load(Ordering::Acquire) as usize).min(self.tasks.len())
    }

    pub fn load(&self, cpu: CpuId) -> u32 {
        self.cpus[cpu.index()].load()
    }

    /// Shows `cpu` idle (asleep, nothing rung) or busy (awake), as a host
    /// that rebuilds another scheduler's state sets it for a policy to read
    /// (the shadow of a kernel's record); a CPU's own passes do this
    /// through its doorbell.
    pub fn show_idle(&self, cpu: CpuId, idle: bool) {
        let d = self.doorbell(cpu);
        if idle {
            d.answer();
            d.sleep(0);
        } else {
            d.answer();
        }
    }

    /// Publishes a CPU's numbers for other CPUs to read, in one go: its
    /// load (running + queued), its fair tasks, its PELT averages.
    #[inline]
    pub fn publish_cpu(&self, cpu: CpuId, load: u32, fair_nr: u32, avg: &crate::pelt::SchedAvg) {
        self.set_load(cpu, load);
        self.cpus[cpu.index()]
            .h_nr
            .store(fair_nr, Ordering::Relaxed);
        self.set_pelt(cpu, avg);
    }

    /// Publishes a CPU's fair PELT averages for other CPUs to read.
    #[inline]
    pub(crate) fn set_pelt(&self, cpu: CpuId, avg: &crate::pelt::SchedAvg) {
        let d = &self.cpus[cpu.index()];
        d.util
            .store(avg.util_avg.min(u32::MAX as u64) as u32, Ordering::Relaxed);
        d.load_avg
            .store(avg.load_avg.min(u32::MAX as u64) as u32, Ordering::Relaxed);
        d.runnable_avg.store(
            avg.runnable_avg.min(u32::MAX as u64) as u32,
            Ordering::Relaxed,
        );
    }

    /// Fair tasks running or queued on `cpu`, as last published.
    pub fn fair_nr(&self, cpu: CpuId) -> u32 {
        self.cpus[cpu.index()].h_nr.load(Ordering::Relaxed)
    }

    pub(crate) fn set_load(&self, cpu: CpuId, load: u32) {
        let old = self.cpus[cpu.index()].load.swap(load, Ordering::Relaxed);
        let (word, bit) = (
            &self.overloaded[cpu.index() / 64],
            1u64 << (cpu.index() % 64),
        );
        match (old >= 2, load >= 2) {
            (false, true) => {
                word.fetch_or(bit, Ordering::Relaxed);
            }
            (true, false) => {
                word.fetch_and(!bit, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Some CPU has a task waiting behind its running one.
    pub fn overloaded(&self) -> bool {
        self.overloaded
            .iter()
            .any(|w| w.load(Ordering::Relaxed) != 0)
    }

    /// Some CPU other than `cpu` has a task waiting, as last published
    /// (read word by word: no set is built when none has).
    pub fn overloaded_besides(&self, cpu: CpuId) -> bool {
        let (mine, bit) = (cpu.index() / 64, 1u64 << (cpu.index() % 64));
        self.overloaded.iter().enumerate().any(|(i, w)| {
            let w = w.load(Ordering::Relaxed);
            (if i == mine { w & !bit } else { w }) != 0
        })
    }

    /// The CPUs with a task waiting, as last published.
    pub fn overloaded_cpus(&self) -> CpuSet {
        CpuSet::from_words(self.overloaded.iter().map(|w| w.load(Ordering::Relaxed)))
    }

    pub(crate) fn core(&self, cpu: CpuId) -> &Mutex<CoreState> {
        &self.cores[self.topo.place(cpu).core as usize]
    }

    /// `__resched_curr()` for another CPU: set its flag, and send a
    /// reschedule IPI only if the flag was clear. A CPU that sleeps is
    /// woken through its doorbell instead (its idle exit is the cost), and
    /// not at all when a kick is on its way already.
    pub(crate) fn resched_remote(&self, cpu: CpuId) -> Option<Kick> {
        let remote = &self.cpus[cpu.index()];
        if remote.resched.swap(true, Ordering::AcqRel) {
            return None;
        }
        let kind = if remote.doorbell.asleep() {
            remote.doorbell.ring()?
        } else {
            crate::doorbell::KickKind::Ipi
        };
        Some(Kick {
            cpu,
            kind,
            why: KickWhy::Resched,
        })
    }

    /// The CPU's pass takes its reschedule flag.
    pub(crate) fn take_resched(&self, cpu: CpuId) -> bool {
        self.cpus[cpu.index()].resched.swap(false, Ordering::AcqRel)
    }

    /// Whether a reschedule of `cpu` is pending.
    pub fn resched_pending(&self, cpu: CpuId) -> bool {
        self.cpus[cpu.index()].resched.load(Ordering::Acquire)
    }

    pub(crate) fn slot(&self, task: TaskId) -> &TaskSlot<S> {
        &self.tasks[task.index()]
    }

    pub(crate) fn alloc_task(&self, state: TaskState, owner: CpuId) -> Result<TaskId, SpawnError> {
        let id = self.next_task.fetch_add(1, Ordering::AcqRel);
        if id as usize >= self.tasks.len() {
            return Err(SpawnError::TableFull {
                capacity: self.tasks.len(),
            });
        }
        let slot = &self.tasks[id as usize];
        slot.park.reset(state, owner);
        Ok(TaskId(id))
    }

    /// Pushes `msg` into `to`'s mailbox, then rings its doorbell. A kick is
    /// returned when one must be sent; never for a CPU posting to itself
    /// (it drains its own mailbox before it sleeps).
    #[inline]
    pub(crate) fn post(&self, from: Option<CpuId>, to: CpuId, msg: Msg<S>) -> Option<Kick> {
        self.mailboxes[to.index()].lock().push_back(msg);
        if from == Some(to) {
            return None;
        }
        self.cpus[to.index()].doorbell.ring().map(|kind| Kick {
            cpu: to,
            kind,
            why: KickWhy::Message,
        })
    }

    #[cfg(feature = "testhost")]
    pub(crate) fn take_mail(&self, cpu: CpuId) -> VecDeque<Msg<S>> {
        core::mem::take(&mut *self.mailboxes[cpu.index()].lock())
    }

    /// Takes the mailbox's messages into `buf` (empty), leaving `buf`'s
    /// storage as the mailbox.
    pub(crate) fn swap_mail(&self, cpu: CpuId, buf: &mut VecDeque<Msg<S>>) {
        debug_assert!(buf.is_empty());
        core::mem::swap(&mut *self.mailboxes[cpu.index()].lock(), buf);
    }

    pub(crate) fn has_mail(&self, cpu: CpuId) -> bool {
        !self.mailboxes[cpu.index()].lock().is_empty()
    }

    /// Benchmarks only: step 2 of a wake and its `Wake` message to the
    /// owner, with no effects gathered (the owner's half is timed apart).
    #[cfg(feature = "testhost")]
    pub fn post_wake_for_bench(&self, task: TaskId, cause: WakeCause, from: CpuId) -> Delivery {
        let d = self.deliver_from(task, None);
        if let Delivery::Post { owner } = d {
            let _ = self.post(Some(from), owner, Msg::Wake { task, cause });
        }
        d
    }

    /// A copy of `task`'s entity if it is parked (or waking with its wake
    /// still on the way to its owner): for hosts and invariant checks.
    pub fn parked_task(&self, task: TaskId) -> Option<Task<S>> {
        self.slot(task).parked.lock().clone()
    }

    /// The park word's half of the one wake path (the `wake` module's
    /// step 2): flag a task that is not parked (recording `waker_llc` with
    /// the flag, for a policy that counts flagged wakes); for one that is,
    /// report the owner, whose parked entity the caller now holds the right
    /// to place. Only `CpuSched`'s wake code calls it.
    pub(crate) fn deliver_from(&self, task: TaskId, waker_llc: Option<u16>) -> Delivery {
        self.slot(task).park.deliver_from(waker_llc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::doorbell::KickKind;
    use schedlab_topology::preset;

    #[test]
    fn a_remote_reschedule_sends_an_ipi_only_when_the_flag_was_clear() {
        let topo = preset("smt-2x2").unwrap();
        let sh = Shared::<()>::new(topo.clone(), Config::for_topology(&topo), 4);
        let cpu = CpuId::new(1);
        sh.doorbell(cpu).answer(); // awake
        let k = sh.resched_remote(cpu);
        assert_eq!(
            k.map(|k| k.kind),
            Some(KickKind::Ipi),
            "the first ask to an awake CPU sends an IPI"
        );
        assert!(
            sh.resched_remote(cpu).is_none(),
            "an ask while the flag is set sends nothing"
        );
        assert!(sh.take_resched(cpu), "the pass takes the flag");
        assert!(
            sh.resched_remote(cpu).is_some(),
            "after the pass, a new ask sends one again"
        );
    }

    #[test]
    fn a_reschedule_of_a_sleeping_cpu_wakes_it_through_its_doorbell() {
        let topo = preset("smt-2x2").unwrap();
        let sh = Shared::<()>::new(topo.clone(), Config::for_topology(&topo), 4);
        let cpu = CpuId::new(1);
        sh.doorbell(cpu).sleep(1);
        let k = sh.resched_remote(cpu);
        assert_eq!(
            k.map(|k| k.kind),
            Some(KickKind::WakeFromIdle { depth: 1 }),
            "a sleeping CPU is woken from its idle state"
        );
        assert!(sh.take_resched(cpu));
        assert!(
            sh.resched_remote(cpu).is_none(),
            "a kick is already on its way (the doorbell is rung): no second one"
        );
    }
}

/// The machine as a policy may see it: read-only.
#[derive(Clone, Copy)]
pub struct Machine<'a> {
    pub(crate) topo: &'a Topology,
    pub(crate) config: &'a Config,
    pub(crate) doors: &'a [Doors],
    /// The balancer's record of each LLC's utilization and capacity, when
    /// it keeps one (cache-aware scheduling).
    pub(crate) llcs: Option<&'a dyn LlcStats>,
    /// The CPU deciding.
    pub(crate) cpu: CpuId,
    pub(crate) now: u64,
}

impl<'a> Machine<'a> {
    pub fn topology(&self) -> &'a Topology {
        self.topo
    }

    pub fn config(&self) -> &'a Config {
        self.config
    }

    /// The CPU this decision runs on.
    pub fn cpu(&self) -> CpuId {
        self.cpu
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn doorbell(&self, cpu: CpuId) -> &'a Doorbell {
        &self.doors[cpu.index()].doorbell
    }

    /// Running + queued tasks on `cpu`, as it last published them.
    pub fn load(&self, cpu: CpuId) -> u32 {
        self.doors[cpu.index()].load()
    }

    /// The CPU's fair `util_avg` (PELT, 0..=1024 per CPU), as it last
    /// published it.
    pub fn util(&self, cpu: CpuId) -> u32 {
        self.doors[cpu.index()].util.load(Ordering::Relaxed)
    }

    /// The CPU's fair `load_avg` (PELT, weight-scaled), as last published.
    pub fn load_avg(&self, cpu: CpuId) -> u32 {
        self.doors[cpu.index()].load_avg.load(Ordering::Relaxed)
    }

    /// The CPU's fair `runnable_avg` (PELT, 0..=1024 per runnable task), as
    /// last published.
    pub fn runnable_avg(&self, cpu: CpuId) -> u32 {
        self.doors[cpu.index()].runnable_avg.load(Ordering::Relaxed)
    }

    /// LLC `llc`'s (utilization, capacity) as periodic balancing last
    /// recorded them (`sd_llc_shared->util_avg`, `->capacity`): what a wake
    /// sees of an LLC's load, as stale as the last balance; `(0, 0)` without
    /// cache-aware scheduling.
    pub fn llc_stats(&self, llc: usize) -> (u64, u64) {
        self.llcs.and_then(|l| l.recorded(llc)).unwrap_or((0, 0))
    }

    /// The same view with the balancer's record of the LLCs.
    pub(crate) fn with_llcs(self, llcs: &'a dyn LlcStats) -> Machine<'a> {
        Machine {
            llcs: Some(llcs),
            ..self
        }
    }

    /// Asleep with no kick on its way: the test every idle search uses, so
    /// a burst of moves spreads over several CPUs.
    pub fn sleeping_unrung(&self, cpu: CpuId) -> bool {
        self.doorbell(cpu).sleeping_unrung()
    }
}

/// What a balancer records of each LLC for the wake path to read
/// ([`Machine::llc_stats`]).
pub trait LlcStats {
    /// LLC `llc`'s (utilization, capacity), if recorded.
    fn recorded(&self, llc: usize) -> Option<(u64, u64)>;
}

/// A balancer's message as a mailbox carries it: boxed and typed away, so
/// the mailbox's type does not depend on the balancer's (a CPU's mailbox
/// holds only its own balancer's messages, so the unboxing cannot fail).
pub(crate) type Boxed = Box<dyn Any + Send>;

pub(crate) fn unbox<M: 'static>(b: Boxed) -> M {
    *b.downcast::<M>()
        .unwrap_or_else(|_| unreachable!("a mailbox holds its own balancer's messages"))
}
