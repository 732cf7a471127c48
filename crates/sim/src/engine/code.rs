//! Programs compiled once, when a run is built: loops become
//! counted jumps, and every name (port, pipe, futex, lock, condition
//! variable, barrier, timer, spawned
//! program, metric) becomes a typed id. The simulator's interpreter and
//! the real executor (`schedlab-real`) run the same compiled code: one
//! program, two interpreters.

use std::collections::BTreeMap;
use std::rc::Rc;

use schedlab_topology::{CpuId, CpuSet};

use crate::objects::{BarrierId, CondId, FutexId, LockId, Objects, PipeId, PortId, TimerId};
use crate::program::Op;

/// A spawnable program, by its index among the spec's programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgId(pub u32);

/// A lap or count metric, by its index among the run's metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricId(pub u32);

/// One compiled instruction: an op with its names resolved, or a loop's
/// jump.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Instr {
    Run(u64),
    Call {
        port: PortId,
        bytes: u64,
    },
    Serve(PortId),
    Reply {
        bytes: u64,
    },
    PipeWrite {
        pipe: PipeId,
        bytes: u64,
    },
    PipeRead {
        pipe: PipeId,
        bytes: u64,
    },
    FutexWait(FutexId),
    FutexWake {
        futex: FutexId,
        n: u32,
    },
    CondWait {
        cond: CondId,
        lock: Option<LockId>,
    },
    CondSignal(CondId),
    CondBroadcast(CondId),
    Barrier {
        barrier: BarrierId,
        n: u32,
    },
    Timer {
        timer: TimerId,
        period: u64,
        absolute: bool,
        stamp: Option<MetricId>,
    },
    RunFor(u64),
    WakeLap(MetricId),
    Lock(LockId),
    Unlock(LockId),
    Sleep(u64),
    RandomSleep {
        min: u64,
        max: u64,
    },
    ExpSleep {
        mean: u64,
    },
    Io(u64),
    Spawn(ProgId),
    /// A spawn into a process of the child's own.
    Fork(ProgId),
    Join,
    JoinAny,
    Exit,
    Yield,
    Leave,
    Lap(MetricId),
    LapStart(MetricId),
    Stamp(MetricId),
    /// Set this task's mask to [`Code::masks`]`[i]`.
    Affinity(u32),
    Count {
        metric: MetricId,
        n: u64,
    },
    /// Start of a loop running `n` times; its end is at `end`.
    LoopStart {
        n: u64,
        end: usize,
    },
    /// End of a loop whose start is at `start`.
    LoopEnd {
        start: usize,
    },
}

/// Every program of a run, compiled, and the names behind the ids.
#[derive(Debug, Default)]
pub struct Code {
    /// Spawnable programs by [`ProgId`]: (name, code).
    pub programs: Vec<(String, Rc<[Instr]>)>,
    /// Metric names by [`MetricId`].
    pub metrics: Vec<String>,
    /// The masks `affinity` ops set, by index (an `Instr` stays small).
    pub masks: Vec<CpuSet>,
    metric_ids: BTreeMap<String, u32>,
    program_ids: BTreeMap<String, u32>,
}

impl Code {
    /// Compiles the spawnable programs, resolving names into `objects`.
    pub fn new(programs: &BTreeMap<String, Vec<Op>>, objects: &mut Objects) -> Code {
        let mut code = Code::default();
        for (i, name) in programs.keys().enumerate() {
            code.program_ids.insert(name.clone(), i as u32);
        }
        for (name, ops) in programs {
            let c = code.compile(ops, objects);
            code.programs.push((name.clone(), c));
        }
        code
    }

    fn metric(&mut self, name: &str) -> MetricId {
        if let Some(&i) = self.metric_ids.get(name) {
            return MetricId(i);
        }
        self.metrics.push(name.to_string());
        let i = (self.metrics.len() - 1) as u32;
        self.metric_ids.insert(name.to_string(), i);
        MetricId(i)
    }

    /// A program compiled: loops flattened, names resolved. A spawn of a
    /// program the spec does not have runs an empty one (the loaders
    /// reject such programs first).
    pub fn compile(&mut self, ops: &[Op], objects: &mut Objects) -> Rc<[Instr]> {
        let mut out = Vec::new();
        self.flatten(ops, objects, &mut out);
        out.into()
    }

    /// The id of the program named `program`; one nobody defined is an
    /// empty program under that name.
    fn program_id(&mut self, program: &str) -> ProgId {
        if let Some(&i) = self.program_ids.get(program) {
            return ProgId(i);
        }
        let i = self.programs.len() as u32;
        self.program_ids.insert(program.to_string(), i);
        self.programs
            .push((program.to_string(), Rc::from(Vec::new())));
        ProgId(i)
    }

    /// An `affinity` op's mask, by its index among the masks.
    fn mask(&mut self, cpus: &[usize]) -> u32 {
        let mut set = CpuSet::new();
        for &c in cpus {
            set.insert(CpuId::new(c));
        }
        self.masks.push(set);
        self.masks.len() as u32 - 1
    }

    fn flatten(&mut self, ops: &[Op], o: &mut Objects, out: &mut Vec<Instr>) {
        for op in ops {
            let i = match op {
                Op::Loop { n, body } => {
                    let start = out.len();
                    out.push(Instr::LoopStart { n: *n, end: 0 });
                    self.flatten(body, o, out);
                    let end = out.len();
                    out.push(Instr::LoopEnd { start });
                    out[start] = Instr::LoopStart { n: *n, end };
                    continue;
                }
                Op::Run(ns) => Instr::Run(*ns),
                Op::Call { port, bytes } => Instr::Call {
                    port: o.port(port),
                    bytes: *bytes,
                },
                Op::Serve { port } => Instr::Serve(o.port(port)),
                Op::Reply { bytes } => Instr::Reply { bytes: *bytes },
                Op::PipeWrite { pipe, bytes } => Instr::PipeWrite {
                    pipe: o.pipe(pipe),
                    bytes: *bytes,
                },
                Op::PipeRead { pipe, bytes } => Instr::PipeRead {
                    pipe: o.pipe(pipe),
                    bytes: *bytes,
                },
                Op::FutexWait { .. }
                | Op::FutexWake { .. }
                | Op::CondWait { .. }
                | Op::CondSignal { .. }
                | Op::CondBroadcast { .. }
                | Op::Barrier { .. } => sync_instr(op, o),
                Op::Timer {
                    timer,
                    period,
                    absolute,
                    stamp,
                } => Instr::Timer {
                    timer: o.timer(timer),
                    period: *period,
                    absolute: *absolute,
                    stamp: stamp.as_deref().map(|m| self.metric(m)),
                },
                Op::RunFor(ns) => Instr::RunFor(*ns),
                Op::WakeLap { metric } => Instr::WakeLap(self.metric(metric)),
                Op::Lock { lock } => Instr::Lock(o.lock(lock)),
                Op::Unlock { lock } => Instr::Unlock(o.lock(lock)),
                Op::Sleep(ns) => Instr::Sleep(*ns),
                Op::RandomSleep { min, max } => Instr::RandomSleep {
                    min: *min,
                    max: *max,
                },
                Op::ExpSleep { mean } => Instr::ExpSleep { mean: *mean },
                Op::Io(ns) => Instr::Io(*ns),
                Op::Spawn { program } => Instr::Spawn(self.program_id(program)),
                Op::Fork { program } => Instr::Fork(self.program_id(program)),
                Op::Join => Instr::Join,
                Op::JoinAny => Instr::JoinAny,
                Op::Exit => Instr::Exit,
                Op::Yield => Instr::Yield,
                Op::Leave => Instr::Leave,
                Op::Lap { metric } => Instr::Lap(self.metric(metric)),
                Op::LapStart { metric } => Instr::LapStart(self.metric(metric)),
                Op::Stamp { metric } => Instr::Stamp(self.metric(metric)),
                Op::Affinity { cpus } => Instr::Affinity(self.mask(cpus)),
                Op::Count { metric, n } => Instr::Count {
                    metric: self.metric(metric),
                    n: *n,
                },
            };
            out.push(i);
        }
    }
}

/// The synchronization ops, their objects resolved to typed ids.
fn sync_instr(op: &Op, o: &mut Objects) -> Instr {
    match op {
        Op::FutexWait { futex } => Instr::FutexWait(o.futex(futex)),
        Op::FutexWake { futex, n } => Instr::FutexWake {
            futex: o.futex(futex),
            n: *n,
        },
        Op::CondWait { cond, lock } => Instr::CondWait {
            cond: o.cond(cond),
            lock: lock.as_ref().map(|l| o.lock(l)),
        },
        Op::CondSignal { cond } => Instr::CondSignal(o.cond(cond)),
        Op::CondBroadcast { cond } => Instr::CondBroadcast(o.cond(cond)),
        Op::Barrier { barrier, n } => Instr::Barrier {
            barrier: o.barrier(barrier),
            n: *n,
        },
        _ => unreachable!("not a synchronization op"),
    }
}
