//! A recorded schedule made into programs that replay it
//! (`schedlab record`): one program per recorded thread, rebuilt from the
//! kernel's events in time order.
//!
//! * **Run bursts.** A thread's time on a CPU, from each `sched_switch`
//!   that runs it to the one that takes it off, summed while it is only
//!   preempted (switched out runnable), is `run` work, emitted where the
//!   thread blocks, wakes another thread, forks or exits.
//! * **A block** (switched out not runnable) ends with the wake that makes
//!   it runnable again (its first `sched_waking` after the block):
//!   - posted by another recorded thread W: a wake edge. The blocked
//!     thread's program reads one byte from a pipe, and W's program writes
//!     one byte to it at the same point of its own sequence (its burst
//!     split there). The pipe is the woken thread's own (`to>T`, its
//!     inbox: [`Edges::Inbox`], the default), so any of its recorded
//!     wakers' bytes ends any of its waits; or the pair's (`W>T`:
//!     [`Edges::Pair`]), so each wait waits for the one waker the kernel
//!     saw. A pipe counts: each wake is one byte, each wait takes one, so
//!     a wake that comes first lets the later wait pass and no wake is
//!     lost when several come before a wait (a futex's generation would
//!     fold them into one, and the replay would wait for ever);
//!   - posted from an interrupt or by a thread outside the recording (a
//!     timer, a device, the shell): a `sleep` of the time it was blocked.
//!
//!   A wake of a thread that has not blocked yet (the kernel traces
//!   `sched_waking` for a thread between `set_current_state()` and
//!   `schedule()`) is left out on both sides: a byte with no wait to
//!   match would let a later, unrelated wait pass.
//! * **A fork or clone** (`task_newtask`): the parent's program writes a
//!   byte to a pipe (`fork>C`) at that point, and the child's program
//!   begins by reading it. Every thread is a task of its own recorded process
//!   from the run's start, so the new thread's first placement replays as
//!   a wake's placement, not a fork's (`select_task_rq()` with `WF_FORK`).
//! * **An exit** ends the program; a thread still alive when the recording
//!   stops ends there too.
//!
//! After each such wait the program records a lap of
//! [`WAKE_TO_RUN`] (`wake_lap`: from the wake posted to it to running), so
//! a replay reports its wake-to-run latency as the recording's summary
//! does. Nothing is folded into loops: a program is the recording's
//! sequence.

use std::collections::BTreeMap;

use schedlab_sim::sched::TaskId;
use schedlab_sim::{Event, EventKind, Op, PrevState};

/// The metric of a replay's wake-to-run laps.
pub const WAKE_TO_RUN: &str = "wake_to_run";

/// A wait for a byte in pipe `f`, and the lap of its wake-to-run latency.
fn wait_on(f: String) -> [Op; 2] {
    [
        Op::PipeRead { pipe: f, bytes: 1 },
        Op::WakeLap {
            metric: WAKE_TO_RUN.into(),
        },
    ]
}

/// The wake of a wait on pipe `f`: one byte.
fn wake_of(f: String) -> Op {
    Op::PipeWrite { pipe: f, bytes: 1 }
}

/// What the kernel recorded beside the scheduler's events: forks (time,
/// parent, child) and exits (time, thread).
#[derive(Clone, Debug, Default)]
pub struct Life {
    pub forks: Vec<(u64, TaskId, TaskId)>,
    pub exits: Vec<(u64, TaskId)>,
}

/// One recorded thread, replayable.
#[derive(Clone, Debug, PartialEq)]
pub struct Replayed {
    pub program: Vec<Op>,
    /// The CPU it first ran on.
    pub start_cpu: Option<usize>,
    /// Its CPU time in the recording, ns.
    pub cpu_ns: u64,
}

/// The recording made into programs, and what the making kept and left.
#[derive(Clone, Debug, Default)]
pub struct Converted {
    pub threads: BTreeMap<TaskId, Replayed>,
    /// Wake edges kept: (waker, wakee) -> wakes.
    pub edges: BTreeMap<(TaskId, TaskId), u64>,
    /// Blocks ended by an interrupt or a thread outside the recording,
    /// replayed as sleeps.
    pub sleeps: u64,
    /// Wakes of a thread that had not blocked, left out.
    pub early_wakes: u64,
}

#[derive(Default)]
struct Thread {
    program: Vec<Op>,
    running_since: Option<u64>,
    /// CPU time not yet emitted as `run`.
    burst: u64,
    blocked_at: Option<u64>,
    start_cpu: Option<usize>,
    cpu_ns: u64,
    done: bool,
}

impl Thread {
    /// Time on the CPU up to `at` counted; the thread goes on running.
    fn account(&mut self, at: u64) {
        if let Some(s) = self.running_since {
            let d = at.saturating_sub(s);
            self.burst += d;
            self.cpu_ns += d;
            self.running_since = Some(at);
        }
    }

    /// The burst so far, emitted as `run`.
    fn flush(&mut self, at: u64) {
        self.account(at);
        if self.burst > 0 {
            self.program.push(Op::Run(self.burst));
            self.burst = 0;
        }
    }
}

/// Which pipe a wake edge goes through (module doc).
///
/// A thread blocked on a socket or a pipe that many threads write is woken
/// by whichever writes first; the kernel's record names that one, but
/// another would have done. With a pipe per pair the replay makes the
/// woken thread wait for that one waker while the others' bytes pile up
/// in their own pipes, and every byte that is there before its wait is a
/// block, and a wake, lost: replaying one recording of `hackbench -g 2 -l
/// 50`, 1,540 of the 1,997 writes that woke no one found the receiver
/// waiting at another sender's pipe, and the replay kept a third of the
/// recorded wakes; with the woken thread's inbox it kept three quarters
/// (on three other recordings it gained less: docs/RECORD.md).
/// The inbox's cost: a wait that only one thread could end in the kernel
/// (a handoff, a join) may be ended early by another of its wakers' bytes;
/// `Pair` keeps each wait to its recorded waker. Both keep every edge's
/// two points and the number of wakes, and neither can deadlock: the
/// recording's own order satisfies every wait of either.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Edges {
    /// A pipe per woken thread: `to>T`.
    #[default]
    Inbox,
    /// A pipe per (waker, woken) pair: `W>T`.
    Pair,
}

/// The pipe a wake edge from `w` to `t` goes through under `edges`:
/// `to>T` or `W>T`, each thread by its thread id when its name ends in one
/// (`comm-TID`, as recordings name threads), else by its name. Tids keep a
/// replay of hundreds of thousands of edges small, and each still names
/// its threads.
pub fn pipe(edges: Edges, names: &BTreeMap<TaskId, String>, w: TaskId, t: TaskId) -> String {
    match edges {
        Edges::Inbox => format!("to>{}", short(names, t)),
        Edges::Pair => format!("{}>{}", short(names, w), short(names, t)),
    }
}

/// A thread's tid from its `comm-TID` name, or the whole name.
fn short(names: &BTreeMap<TaskId, String>, t: TaskId) -> String {
    let n = name(names, t);
    match n.rsplit_once('-') {
        Some((_, tid)) if !tid.is_empty() && tid.bytes().all(|b| b.is_ascii_digit()) => {
            tid.to_string()
        }
        _ => n,
    }
}

fn name(names: &BTreeMap<TaskId, String>, t: TaskId) -> String {
    names
        .get(&t)
        .cloned()
        .unwrap_or_else(|| format!("task{}", t.0))
}

enum Item<'a> {
    Ev(&'a Event),
    Fork(TaskId, TaskId),
    Exit(TaskId),
}

/// Converts the recording of the threads `names` lists (the recorded
/// command's) into programs (module doc); `end` is when it stopped.
pub fn convert(
    events: &[Event],
    life: &Life,
    names: &BTreeMap<TaskId, String>,
    end: u64,
    edges: Edges,
) -> Converted {
    let mut w = Walk {
        th: names.keys().map(|&t| (t, Thread::default())).collect(),
        out: Converted::default(),
        names,
        edges,
    };
    for (at, _, item) in timeline(events, life) {
        match item {
            Item::Ev(e) => match e.kind {
                EventKind::Switch {
                    cpu,
                    prev,
                    prev_state,
                    next,
                } => w.switch(at, cpu.index(), prev, prev_state, next),
                EventKind::Waking { task, waker, .. } => w.waking(at, task, waker),
                _ => {}
            },
            Item::Fork(p, c) => w.fork(at, p, c),
            Item::Exit(t) => w.exit(at, t),
        }
    }
    w.finish(end)
}

/// The first pass: the kernel's events, forks and exits on one timeline,
/// in time order; at one time, in the order recorded.
fn timeline<'e>(events: &'e [Event], life: &Life) -> Vec<(u64, usize, Item<'e>)> {
    let mut items: Vec<(u64, usize, Item)> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        items.push((e.at, i, Item::Ev(e)));
    }
    let n = events.len();
    for (k, &(at, p, c)) in life.forks.iter().enumerate() {
        items.push((at, n + k, Item::Fork(p, c)));
    }
    for (k, &(at, t)) in life.exits.iter().enumerate() {
        items.push((at, n + life.forks.len() + k, Item::Exit(t)));
    }
    items.sort_by_key(|(at, i, _)| (*at, *i));
    items
}

/// The second pass: the timeline walked, each recorded thread's program
/// built as it goes.
struct Walk<'n> {
    th: BTreeMap<TaskId, Thread>,
    out: Converted,
    names: &'n BTreeMap<TaskId, String>,
    edges: Edges,
}

impl Walk<'_> {
    /// A switch: the thread leaving is accounted and, blocked or exited,
    /// its burst flushed; the one coming in runs from here.
    fn switch(
        &mut self,
        at: u64,
        cpu: usize,
        prev: Option<TaskId>,
        prev_state: PrevState,
        next: Option<TaskId>,
    ) {
        if let Some(t) = prev.and_then(|p| self.th.get_mut(&p)) {
            t.account(at);
            t.running_since = None;
            match prev_state {
                PrevState::Runnable => {}
                PrevState::Blocked => {
                    t.flush(at);
                    t.blocked_at = Some(at);
                }
                PrevState::Exited => {
                    t.flush(at);
                    t.done = true;
                }
            }
        }
        if let Some(t) = next.and_then(|n| self.th.get_mut(&n)) {
            if !t.done {
                t.running_since = Some(at);
                t.start_cpu.get_or_insert(cpu);
            }
        }
    }

    /// A wake of a blocked thread: an edge from its waker when the waker
    /// is recorded, else a sleep as long as it was blocked. A wake of a
    /// thread that had not blocked is counted and left out.
    fn waking(&mut self, at: u64, task: TaskId, waker: Option<TaskId>) {
        let Some(blocked) = self.th.get(&task).map(|t| t.blocked_at) else {
            return;
        };
        let w = waker.filter(|w| *w != task && self.th.contains_key(w));
        let Some(b) = blocked else {
            self.out.early_wakes += 1;
            return;
        };
        match w {
            Some(w) => {
                let f = pipe(self.edges, self.names, w, task);
                let ws = self.th.get_mut(&w).expect("ours");
                ws.flush(at);
                ws.program.push(wake_of(f.clone()));
                self.th
                    .get_mut(&task)
                    .expect("ours")
                    .program
                    .extend(wait_on(f));
                *self.out.edges.entry((w, task)).or_default() += 1;
            }
            None => {
                self.th
                    .get_mut(&task)
                    .expect("ours")
                    .program
                    .push(Op::Sleep(at.saturating_sub(b).max(1)));
                self.out.sleeps += 1;
            }
        }
        self.th.get_mut(&task).expect("ours").blocked_at = None;
    }

    /// A fork between recorded threads: the child waits at its start for
    /// its parent's fork point.
    fn fork(&mut self, at: u64, p: TaskId, c: TaskId) {
        if !(self.th.contains_key(&p) && self.th.contains_key(&c)) {
            return;
        }
        let f = format!("fork>{}", short(self.names, c));
        let ps = self.th.get_mut(&p).expect("ours");
        ps.flush(at);
        ps.program.push(wake_of(f.clone()));
        self.th
            .get_mut(&c)
            .expect("ours")
            .program
            .splice(0..0, wait_on(f));
    }

    fn exit(&mut self, at: u64, t: TaskId) {
        if let Some(t) = self.th.get_mut(&t) {
            t.flush(at);
            t.running_since = None;
            t.done = true;
        }
    }

    /// The last pass: a thread still running at `end` is flushed there,
    /// and each thread's program is done.
    fn finish(mut self, end: u64) -> Converted {
        for (id, mut t) in self.th {
            if !t.done {
                t.flush(end);
            }
            self.out.threads.insert(
                id,
                Replayed {
                    program: t.program,
                    start_cpu: t.start_cpu,
                    cpu_ns: t.cpu_ns,
                },
            );
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_topology::CpuId;

    fn sw(at: u64, cpu: usize, prev: Option<u32>, st: PrevState, next: Option<u32>) -> Event {
        Event {
            at,
            kind: EventKind::Switch {
                cpu: CpuId::new(cpu),
                prev: prev.map(TaskId),
                prev_state: st,
                next: next.map(TaskId),
            },
        }
    }

    fn wake(at: u64, task: u32, waker: Option<u32>) -> Event {
        Event {
            at,
            kind: EventKind::Waking {
                cpu: CpuId::new(0),
                task: TaskId(task),
                waker: waker.map(TaskId),
                target: CpuId::new(0),
                parked: true,
            },
        }
    }

    fn names(n: &[(u32, &str)]) -> BTreeMap<TaskId, String> {
        n.iter().map(|(i, s)| (TaskId(*i), s.to_string())).collect()
    }

    use PrevState::{Blocked, Exited, Runnable};

    /// A ping-pong on one CPU, worked by hand: a runs 10, wakes b, blocks;
    /// b runs 20, wakes a, blocks; a runs 5 and exits.
    #[test]
    fn a_ping_pong_keeps_both_wake_edges() {
        let ev = [
            sw(0, 0, None, Runnable, Some(1)),
            wake(10, 2, Some(1)),
            sw(10, 0, Some(1), Blocked, None),
            sw(12, 0, None, Runnable, Some(2)),
            wake(32, 1, Some(2)),
            sw(32, 0, Some(2), Blocked, Some(1)),
            sw(37, 0, Some(1), Exited, None),
        ];
        // b had not blocked in the recording when a woke it (it was
        // runnable, waiting for the CPU): an early wake, left out.
        let n = names(&[(1, "a"), (2, "b")]);
        let c = convert(&ev, &Life::default(), &n, 100, Edges::Pair);
        assert_eq!(
            c.threads[&TaskId(1)].program,
            [
                vec![Op::Run(10)],
                wait_on("b>a".into()).to_vec(),
                vec![Op::Run(5)]
            ]
            .concat(),
            "a: its run, the wait b's wake ends, its last run"
        );
        assert_eq!(
            c.threads[&TaskId(2)].program,
            vec![Op::Run(20), wake_of("b>a".into())],
            "b: its run, split where it woke a"
        );
        assert_eq!(c.edges.get(&(TaskId(2), TaskId(1))), Some(&1));
        assert_eq!(c.early_wakes, 1, "a's wake of b, which had not blocked");
        assert_eq!(
            (c.threads[&TaskId(1)].cpu_ns, c.threads[&TaskId(2)].cpu_ns),
            (15, 20)
        );
        assert_eq!(c.threads[&TaskId(2)].start_cpu, Some(0));
    }

    /// A fan-out: d wakes three workers, each blocked; every edge is kept,
    /// and d's burst is split at each wake.
    #[test]
    fn a_fan_out_splits_the_wakers_burst_at_each_wake() {
        let mut ev = Vec::new();
        for (k, w) in [2u32, 3, 4].iter().enumerate() {
            ev.push(sw(0, k + 1, None, Runnable, Some(*w)));
            ev.push(sw(1, k + 1, Some(*w), Blocked, None));
        }
        ev.push(sw(0, 0, None, Runnable, Some(1)));
        ev.push(wake(10, 2, Some(1)));
        ev.push(wake(13, 3, Some(1)));
        ev.push(wake(20, 4, Some(1)));
        ev.push(sw(25, 0, Some(1), Exited, None));
        let n = names(&[(1, "d"), (2, "w0"), (3, "w1"), (4, "w2")]);
        let c = convert(&ev, &Life::default(), &n, 100, Edges::Pair);
        let wk = |f: &str| wake_of(f.into());
        assert_eq!(
            c.threads[&TaskId(1)].program,
            vec![
                Op::Run(10),
                wk("d>w0"),
                Op::Run(3),
                wk("d>w1"),
                Op::Run(7),
                wk("d>w2"),
                Op::Run(5)
            ]
        );
        for (w, name) in [(2, "d>w0"), (3, "d>w1"), (4, "d>w2")] {
            assert_eq!(
                c.threads[&TaskId(w)].program,
                [vec![Op::Run(1)], wait_on(name.into()).to_vec()].concat(),
                "worker {w}"
            );
        }
        assert_eq!(c.edges.len(), 3);
    }

    /// A fan-in: r blocks twice, woken first by a, then by b. In its inbox
    /// both wakes are bytes of one pipe, so either ends either wait; per
    /// pair, each wait is its recorded waker's.
    #[test]
    fn a_fan_in_goes_through_the_woken_threads_inbox() {
        let ev = [
            sw(0, 0, None, Runnable, Some(3)),
            sw(5, 0, Some(3), Blocked, None),
            sw(0, 1, None, Runnable, Some(1)),
            wake(10, 3, Some(1)),
            sw(12, 0, None, Runnable, Some(3)),
            sw(20, 0, Some(3), Blocked, Some(2)),
            wake(30, 3, Some(2)),
            sw(31, 0, Some(2), Exited, Some(3)),
        ];
        let n = names(&[(1, "a"), (2, "b"), (3, "r")]);
        let inbox = convert(&ev, &Life::default(), &n, 100, Edges::Inbox);
        let waits = |f: &str, g: &str| {
            [
                vec![Op::Run(5)],
                wait_on(f.into()).to_vec(),
                vec![Op::Run(8)],
                wait_on(g.into()).to_vec(),
                // From b's exit to the recording's end.
                vec![Op::Run(69)],
            ]
            .concat()
        };
        assert_eq!(inbox.threads[&TaskId(3)].program, waits("to>r", "to>r"));
        assert_eq!(inbox.threads[&TaskId(1)].program[1], wake_of("to>r".into()));
        assert_eq!(inbox.threads[&TaskId(2)].program[1], wake_of("to>r".into()));
        let pair = convert(&ev, &Life::default(), &n, 100, Edges::Pair);
        assert_eq!(pair.threads[&TaskId(3)].program, waits("a>r", "b>r"));
        assert_eq!(pair.threads[&TaskId(2)].program[1], wake_of("b>r".into()));
        for c in [&inbox, &pair] {
            assert_eq!(c.edges.len(), 2, "both edges counted, whatever the pipe");
        }
    }

    /// A fork and an exit: the child waits for its parent's fork point;
    /// the exit ends its program.
    #[test]
    fn a_fork_is_an_edge_from_the_parents_fork_point() {
        let ev = [
            sw(0, 0, None, Runnable, Some(1)),
            sw(40, 1, None, Runnable, Some(2)),
            sw(70, 1, Some(2), Exited, None),
            sw(90, 0, Some(1), Exited, None),
        ];
        let life = Life {
            forks: vec![(30, TaskId(1), TaskId(2))],
            exits: vec![(70, TaskId(2)), (90, TaskId(1))],
        };
        let n = names(&[(1, "p"), (2, "c")]);
        let c = convert(&ev, &life, &n, 100, Edges::default());
        assert_eq!(
            c.threads[&TaskId(1)].program,
            vec![Op::Run(30), wake_of("fork>c".into()), Op::Run(60)]
        );
        assert_eq!(
            c.threads[&TaskId(2)].program,
            [wait_on("fork>c".into()).to_vec(), vec![Op::Run(30)]].concat()
        );
    }

    /// A timer sleeper: blocks, and an interrupt wakes it; the block is a
    /// sleep of the time it lasted. A preemption is no block.
    #[test]
    fn a_timer_sleeper_sleeps_as_long_as_it_was_blocked() {
        let ev = [
            sw(0, 0, None, Runnable, Some(1)),
            sw(100, 0, Some(1), Runnable, Some(9)),
            sw(150, 0, Some(9), Blocked, Some(1)),
            sw(200, 0, Some(1), Blocked, None),
            wake(1_200, 1, None),
            sw(1_250, 0, None, Runnable, Some(1)),
            sw(1_300, 0, Some(1), Blocked, None),
        ];
        let n = names(&[(1, "s")]);
        let c = convert(&ev, &Life::default(), &n, 2_000, Edges::default());
        assert_eq!(
            c.threads[&TaskId(1)].program,
            vec![Op::Run(150), Op::Sleep(1_000), Op::Run(50)],
            "150 ns of CPU around a preemption by a thread outside, then a 1 µs sleep"
        );
        assert_eq!(c.sleeps, 1);
    }

    /// Events lost to a full buffer can leave a switch-in without its
    /// switch-out, or a wake with no block: the conversion keeps going and
    /// never counts time twice.
    #[test]
    fn lost_events_leave_a_consistent_program() {
        let ev = [
            sw(0, 0, None, Runnable, Some(1)),
            // The switch-out at 50 was lost; the thread shows up running
            // on cpu1 at 60.
            sw(60, 1, None, Runnable, Some(1)),
            sw(100, 1, Some(1), Blocked, None),
            wake(150, 1, Some(7)),
            wake(160, 1, Some(7)),
        ];
        let n = names(&[(1, "x")]);
        let c = convert(&ev, &Life::default(), &n, 200, Edges::default());
        let p = &c.threads[&TaskId(1)].program;
        let run: u64 = p
            .iter()
            .map(|o| if let Op::Run(n) = o { *n } else { 0 })
            .sum();
        assert!(run <= 100, "no more CPU than the wall time it spans: {p:?}");
        assert_eq!(c.sleeps, 1, "a waker outside the recording: a sleep");
        assert_eq!(c.early_wakes, 1, "the second wake found it not blocked");
    }
}
