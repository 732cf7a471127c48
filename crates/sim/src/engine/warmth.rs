//! LLC warmth: how many bytes of each task's own working set and of each
//! process's shared data every LLC holds.
//!
//! The state is bytes per (LLC, task) and (LLC, process), never lines, so
//! it stays cheap. The rules:
//!
//! * a task that starts running in an LLC makes its working set (up to the
//!   cost model's `refill_cap_bytes`) and its process's shared data warm
//!   there; the bytes that were cold it pays for, read from the nearest
//!   LLC that holds them warm, else from memory ([`Warmth::fill`] says how
//!   many, and from where);
//! * an LLC holds at most its capacity: when what is warm exceeds it, the
//!   entries of the least recently run go first (a task's entry and its
//!   process's are stamped each time the task starts there), in part if
//!   that is enough. So a neighbour's data evicts a blocked task's, and
//!   more hot data than the LLC holds (over-aggregation) is refilled again
//!   and again;
//! * a task's own set stays warm in an LLC it has left until evicted there,
//!   so coming back to a warm LLC costs nothing;
//! * a process's shared data is written by its threads (write-invalidate):
//!   when a thread starts in an LLC, the copies other LLCs hold go cold
//!   there. So threads of one process in one LLC share one warm copy, and
//!   threads spread over LLCs pull it back and forth.
//!
//! Simplified: a refill makes the bytes warm at once (its cost is the time
//! the bandwidth takes); the LLC is one pool, its ways and sets are not
//! modelled.

use schedlab_sched::TaskId;
use schedlab_topology::{Level, Topology};

use crate::outcome::LlcOutcome;

/// Whose bytes an entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Owner {
    Task(TaskId),
    Process(u32),
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    owner: Owner,
    bytes: u64,
    /// When a task of it last started in this LLC.
    used: u64,
}

/// One LLC's warm bytes.
#[derive(Clone, Debug, Default)]
struct Llc {
    capacity: u64,
    total: u64,
    entries: Vec<Entry>,
    /// The most it held warm at once, what it evicted, and what starts
    /// read into it.
    peak: u64,
    evicted: u64,
    refilled: u64,
}

impl Llc {
    fn warm(&self, o: Owner) -> u64 {
        self.entries
            .iter()
            .find(|e| e.owner == o)
            .map_or(0, |e| e.bytes)
    }

    /// `o` holds `bytes` here now, stamped `now`; true if it held nothing
    /// here before (a new entry).
    fn set(&mut self, o: Owner, bytes: u64, now: u64) -> bool {
        match self.entries.iter_mut().find(|e| e.owner == o) {
            Some(e) => {
                self.total = self.total - e.bytes + bytes;
                e.bytes = bytes;
                e.used = now;
                false
            }
            None => {
                self.total += bytes;
                self.entries.push(Entry {
                    owner: o,
                    bytes,
                    used: now,
                });
                true
            }
        }
    }

    fn drop_owner(&mut self, o: Owner) {
        if let Some(i) = self.entries.iter().position(|e| e.owner == o) {
            self.total -= self.entries[i].bytes;
            self.entries.swap_remove(i);
        }
    }

    /// Evicts the least recently run until the total fits; ties go to the
    /// lower owner (a fixed order: determinism). Calls `gone` for each
    /// entry that goes whole.
    fn evict(&mut self, mut gone: impl FnMut(Owner)) {
        while self.total > self.capacity {
            let Some(i) = (0..self.entries.len()).min_by_key(|&i| {
                let e = &self.entries[i];
                (e.used, e.owner)
            }) else {
                return;
            };
            let over = self.total - self.capacity;
            let e = &mut self.entries[i];
            let cut = e.bytes.min(over);
            e.bytes -= cut;
            self.total -= cut;
            self.evicted += cut;
            if e.bytes == 0 {
                gone(e.owner);
                self.entries.swap_remove(i);
            }
        }
    }
}

/// Every LLC's warmth.
#[derive(Clone, Debug)]
pub(crate) struct Warmth {
    llcs: Vec<Llc>,
    /// Which LLCs hold each owner.
    at: Holders,
    /// The level between each pair of LLCs (by ordinal).
    level: Vec<Vec<Level>>,
}

/// Which LLCs hold an entry of each owner: a bit per LLC ordinal, by task
/// id and by process id. So a start looks for the nearest warm copy, a
/// write invalidates the other copies, and an exit drops its entries, in
/// the few LLCs that hold them, not in every LLC's list (a run may have
/// thousands of tasks over dozens of LLCs). On a machine of more than 64
/// LLCs every LLC is looked in.
#[derive(Clone, Debug, Default)]
struct Holders {
    exact: bool,
    tasks: Vec<u64>,
    procs: Vec<u64>,
}

impl Holders {
    fn word(&mut self, o: Owner) -> &mut u64 {
        let (v, i) = match o {
            Owner::Task(t) => (&mut self.tasks, t.index()),
            Owner::Process(p) => (&mut self.procs, p as usize),
        };
        if v.len() <= i {
            v.resize(i + 1, 0);
        }
        &mut v[i]
    }

    /// The LLCs (bits) that may hold `o`.
    fn of(&self, o: Owner) -> u64 {
        if !self.exact {
            return u64::MAX;
        }
        let (v, i) = match o {
            Owner::Task(t) => (&self.tasks, t.index()),
            Owner::Process(p) => (&self.procs, p as usize),
        };
        v.get(i).copied().unwrap_or(0)
    }

    fn mark(&mut self, o: Owner, l: usize) {
        if self.exact {
            *self.word(o) |= 1 << l;
        }
    }

    fn unmark(&mut self, o: Owner, l: usize) {
        if self.exact {
            *self.word(o) &= !(1 << l);
        }
    }
}

/// Serves `left` cold bytes from the other LLCs' copies, nearest first:
/// each `(level, warm bytes)` in `near` gives what it holds beyond the
/// `have` already warm here. Returns what is still cold (memory's part).
fn serve(mut near: Vec<(Level, u64)>, have: u64, mut left: u64, fill: &mut Fill) -> u64 {
    near.sort();
    for (lev, b) in near {
        let take = (b - have).min(left);
        match lev {
            Level::Machine => fill.machine += take,
            _ => fill.node += take,
        }
        left -= take;
        if left == 0 {
            break;
        }
    }
    left
}

/// The LLC ordinals below `n` whose bits are set in `bits`, in order.
fn ordinals(bits: u64, n: usize) -> impl Iterator<Item = usize> {
    (0..n.min(64))
        .filter(move |&k| bits & (1 << k) != 0)
        .chain(64..if bits == u64::MAX { n } else { 64 })
}

/// The bytes a start in an LLC reads, by where they come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fill {
    /// From another LLC of the same node.
    pub node: u64,
    /// From an LLC of another node.
    pub machine: u64,
    /// From memory: warm nowhere.
    pub memory: u64,
    /// The bytes of the task's own set that were already warm here.
    pub own_warm: u64,
}

impl Fill {
    /// Every byte read in.
    pub fn read(&self) -> u64 {
        self.node + self.machine + self.memory
    }
}

impl Warmth {
    pub fn new(topo: &Topology) -> Warmth {
        let llcs = topo
            .llcs()
            .iter()
            .map(|l| Llc {
                capacity: l.bytes,
                ..Llc::default()
            })
            .collect();
        let first: Vec<_> = topo
            .llcs()
            .iter()
            .map(|l| l.cpus.first().expect("an LLC has CPUs"))
            .collect();
        let level = first
            .iter()
            .map(|&a| first.iter().map(|&b| topo.level_between(a, b)).collect())
            .collect();
        let at = Holders {
            exact: topo.llcs().len() <= 64,
            ..Holders::default()
        };
        Warmth { llcs, at, level }
    }

    /// What `owner` holds warm in LLC `l`.
    #[cfg(test)]
    pub fn warm(&self, l: usize, owner: Owner) -> u64 {
        self.llcs[l].warm(owner)
    }

    /// `owner` starts in LLC `l` at `now` wanting `want` bytes warm: the
    /// cold part, read from the nearest LLC holding it (the most any other
    /// holds counts as there), else memory; then it is warm in `l`.
    /// Returns the bytes that were warm already.
    fn bring(&mut self, l: usize, owner: Owner, want: u64, now: u64, fill: &mut Fill) -> u64 {
        let want = want.min(self.llcs[l].capacity);
        let have = self.llcs[l].warm(owner);
        let cold = want.saturating_sub(have);
        if cold > 0 {
            // The nearest other LLC's warm bytes serve first.
            let near: Vec<(Level, u64)> = ordinals(self.at.of(owner), self.llcs.len())
                .filter(|&k| k != l)
                .map(|k| (self.level[l][k], self.llcs[k].warm(owner)))
                .filter(|&(_, b)| b > have)
                .collect();
            fill.memory += serve(near, have, cold, fill);
        }
        if self.llcs[l].set(owner, want.max(have), now) {
            self.at.mark(owner, l);
        }
        have.min(want)
    }

    /// A task starts in LLC `l`: its own set (`own` bytes) and its
    /// process's shared data (`shared` bytes) become warm there; returns
    /// what was read, by source, and how much of its own set was warm
    /// already. Then the LLC evicts down to its capacity.
    pub fn fill(
        &mut self,
        l: usize,
        task: TaskId,
        own: u64,
        process: u32,
        shared: u64,
        now: u64,
    ) -> Fill {
        let mut fill = Fill::default();
        fill.own_warm = self.bring(l, Owner::Task(task), own, now, &mut fill);
        if shared > 0 {
            let p = Owner::Process(process);
            let _ = self.bring(l, p, shared, now, &mut fill);
            self.drop_all(p, Some(l));
        }
        let at = &mut self.at;
        let llc = &mut self.llcs[l];
        llc.evict(|o| at.unmark(o, l));
        llc.peak = llc.peak.max(llc.total);
        llc.refilled += fill.read();
        fill
    }

    /// What LLC `l` holds warm now.
    pub fn total(&self, l: usize) -> u64 {
        self.llcs[l].total
    }

    /// Each LLC's warmth over the run, in the topology's order.
    pub fn outcome(&self) -> Vec<LlcOutcome> {
        self.llcs
            .iter()
            .map(|l| LlcOutcome {
                capacity_bytes: l.capacity,
                peak_warm_bytes: l.peak,
                evicted_bytes: l.evicted,
                refill_bytes: l.refilled,
            })
            .collect()
    }

    /// A task's own entries go (it exited).
    pub fn forget(&mut self, task: TaskId) {
        self.drop_all(Owner::Task(task), None);
    }

    /// `o`'s entries go from every LLC but `keep`.
    fn drop_all(&mut self, o: Owner, keep: Option<usize>) {
        for k in ordinals(self.at.of(o), self.llcs.len()) {
            if Some(k) != keep {
                self.llcs[k].drop_owner(o);
                self.at.unmark(o, k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_topology::preset;

    const MIB: u64 = 1 << 20;

    fn t(i: u32) -> TaskId {
        TaskId(i)
    }

    #[test]
    fn a_first_start_reads_from_memory_and_a_return_is_free() {
        let mut w = Warmth::new(&preset("amd-2x8").unwrap());
        let f = w.fill(0, t(1), 64 << 10, 0, 0, 0);
        assert_eq!(
            f,
            Fill {
                memory: 64 << 10,
                ..Fill::default()
            }
        );
        let f = w.fill(1, t(1), 64 << 10, 0, 0, 10);
        assert_eq!(
            f,
            Fill {
                node: 64 << 10,
                ..Fill::default()
            },
            "LLC 0 still holds it: read from there"
        );
        assert_eq!(
            w.fill(0, t(1), 64 << 10, 0, 0, 20),
            Fill {
                own_warm: 64 << 10,
                ..Fill::default()
            },
            "back to a warm LLC: nothing to read, all of it warm"
        );
    }

    #[test]
    fn a_process_s_shared_data_is_warm_for_its_other_threads() {
        let mut w = Warmth::new(&preset("amd-2x8").unwrap());
        let f = w.fill(0, t(1), 0, 7, 4 * MIB, 0);
        assert_eq!(f.memory, 4 * MIB);
        let f = w.fill(0, t(2), 0, 7, 4 * MIB, 5);
        assert_eq!(
            f,
            Fill::default(),
            "a thread of the same process finds it warm"
        );
        let f = w.fill(1, t(3), 0, 7, 4 * MIB, 9);
        assert_eq!(f.node, 4 * MIB, "in the other LLC it is read across");
        assert_eq!(
            w.warm(0, Owner::Process(7)),
            0,
            "and the written copy in LLC 0 is invalid now"
        );
        let f = w.fill(0, t(1), 0, 7, 4 * MIB, 12);
        assert_eq!(
            f.node,
            4 * MIB,
            "so a thread back in LLC 0 reads it across again"
        );
    }

    #[test]
    fn neighbours_evict_the_least_recently_run_first() {
        // amd-2x8's LLCs hold 16 MiB.
        let mut w = Warmth::new(&preset("amd-2x8").unwrap());
        w.fill(0, t(1), 6 * MIB, 1, 0, 0);
        w.fill(0, t(2), 6 * MIB, 2, 0, 1);
        w.fill(0, t(1), 6 * MIB, 1, 0, 2); // t1 runs again: t2 is older
        w.fill(0, t(3), 6 * MIB, 3, 0, 3); // 18 MiB: 2 MiB must go, t2's
        assert_eq!(
            w.warm(0, Owner::Task(t(2))),
            4 * MIB,
            "the least recently run loses the overflow"
        );
        assert_eq!(w.warm(0, Owner::Task(t(1))), 6 * MIB);
        let f = w.fill(0, t(2), 6 * MIB, 2, 0, 4);
        assert_eq!(
            f.memory,
            2 * MIB,
            "its evicted part is read again, from memory"
        );
        assert_eq!(
            w.warm(0, Owner::Task(t(1))),
            4 * MIB,
            "and now t1 is the oldest"
        );
    }

    /// The model the holder bits stand in for: every query looks in every
    /// LLC's list (the first version of this module).
    struct Scan {
        llcs: Vec<Llc>,
        level: Vec<Vec<Level>>,
    }

    impl Scan {
        fn fill(&mut self, l: usize, o: [Owner; 2], want: [u64; 2], now: u64) -> Fill {
            let mut fill = Fill::default();
            for (i, (o, want)) in o.into_iter().zip(want).enumerate() {
                if i == 1 && want == 0 {
                    break;
                }
                let want = want.min(self.llcs[l].capacity);
                let have = self.llcs[l].warm(o);
                let left = want.saturating_sub(have);
                let near: Vec<(Level, u64)> = (0..self.llcs.len())
                    .filter(|&k| k != l)
                    .map(|k| (self.level[l][k], self.llcs[k].warm(o)))
                    .filter(|&(_, b)| b > have)
                    .collect();
                fill.memory += serve(near, have, left, &mut fill);
                self.llcs[l].set(o, want.max(have), now);
                if i == 0 {
                    fill.own_warm = have.min(want);
                } else {
                    for (k, other) in self.llcs.iter_mut().enumerate() {
                        if k != l {
                            other.drop_owner(o);
                        }
                    }
                }
            }
            self.llcs[l].evict(|_| {});
            self.llcs[l].refilled += fill.read();
            fill
        }
    }

    #[test]
    fn the_holder_bits_read_what_a_scan_of_every_llc_reads() {
        use rand::{Rng, SeedableRng};
        let wide = schedlab_topology::Shape {
            nodes: 2,
            llcs_per_node: 40,
            cores_per_llc: 1,
            threads_per_core: 1,
            siblings: schedlab_topology::Siblings::Adjacent,
        }
        .build("80-llcs")
        .unwrap();
        for topo in [
            preset("amd-2x8").unwrap(),
            preset("genoa-96").unwrap(),
            wide,
        ] {
            let seed = 11;
            let topo = topo.with_llc_bytes(8 * MIB);
            let mut w = Warmth::new(&topo);
            let mut scan = Scan {
                llcs: w.llcs.clone(),
                level: w.level.clone(),
            };
            let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let n = w.llcs.len();
            for now in 0..4000 {
                let task = t(r.gen_range(0..40));
                if r.gen_range(0..20) == 0 {
                    w.forget(task);
                    for l in &mut scan.llcs {
                        l.drop_owner(Owner::Task(task));
                    }
                    continue;
                }
                let l = r.gen_range(0..n.min(6)) * (n / n.min(6));
                let own = r.gen_range(0..3 * MIB);
                let process = r.gen_range(0..5);
                let shared = [0, MIB, 5 * MIB][r.gen_range(0..3)];
                let got = w.fill(l, task, own, process, shared, now);
                let want = scan.fill(
                    l,
                    [Owner::Task(task), Owner::Process(process)],
                    [own, shared],
                    now,
                );
                assert_eq!(
                    got,
                    want,
                    "{} step {now} (seed {seed}): fill of {task:?} in LLC {l}",
                    topo.name()
                );
                for k in 0..n {
                    assert_eq!(
                        w.llcs[k].total,
                        scan.llcs[k].total,
                        "{} step {now} (seed {seed}): LLC {k}'s total",
                        topo.name()
                    );
                }
            }
        }
    }

    #[test]
    fn more_than_the_llc_holds_is_refilled_every_time() {
        let mut w = Warmth::new(&preset("amd-2x8").unwrap());
        // One process's 12 MiB shared plus two threads' 4 MiB: 20 > 16.
        w.fill(0, t(1), 4 * MIB, 9, 12 * MIB, 0);
        w.fill(0, t(2), 4 * MIB, 9, 12 * MIB, 1);
        let f = w.fill(0, t(1), 4 * MIB, 9, 12 * MIB, 2);
        assert!(
            f.memory > 0,
            "over-aggregated: each start refills what the other evicted ({f:?})"
        );
    }
}
