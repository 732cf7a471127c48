//! Linux's balancer with 7.2's cache-aware scheduling ([`LinuxCasLb`],
//! `balance = "linux-cas"`): Linux's balancer ([`LinuxLb`]) whose shared
//! part also keeps each process's occupancy per CPU and its preferred LLC
//! (`account_mm_sched()`, `task_cache_work()`), each LLC's recorded
//! utilization (`record_sg_llc_stats()`, written by the periodic balance),
//! and each CPU's count of tasks preferring each LLC; the balance passes
//! read them through `linux::lb`'s cache-aware rules, and the wake path of
//! `linux-cas-wake` through [`crate::policy::Machine::llc_stats`].
//!
//! The decisions are `linux::cas`'s; this is when they are made and what
//! they read and write.

use alloc::vec::Vec;

use schedlab_topology::{CpuId, Topology};

use super::balance::{LbMsg, LbShared, LinuxLb};
use super::cas::{self, LlcMig, ProcCache};
use crate::balancer::{Balancer, Cx, Requests};
use crate::config::{CasTunables, Config};
use crate::effects::Counters;
use crate::policy::PolicyState;
use crate::task::Task;

/// Linux's balancer with cache-aware scheduling, on one CPU.
#[derive(Clone, Debug)]
pub struct LinuxCasLb {
    lb: LinuxLb,
    tun: CasTunables,
}

impl Balancer for LinuxCasLb {
    type Msg = LbMsg;

    fn for_machine(topo: &Topology, config: &Config, max_tasks: usize) -> Vec<LinuxCasLb> {
        let tun = config.balance.kind.cas().unwrap_or_default();
        LinuxLb::machine(topo, config, Some(tun), max_tasks)
            .into_iter()
            .map(|lb| LinuxCasLb { lb, tun })
            .collect()
    }

    fn name(&self) -> &str {
        "linux-cas"
    }

    fn tick<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) -> Requests<LbMsg> {
        self.lb.tick(cx, now)
    }

    /// `task_tick_cache()` then `task_cache_work()` for the running task.
    fn tick_running<S: PolicyState>(
        &mut self,
        cpu: CpuId,
        topo: &Topology,
        counters: &mut Counters,
        t: &mut Task<S>,
        now: u64,
    ) {
        let sh = &self.lb.sh;
        let tun = self.tun;
        sh.account_cache(topo, tun, cpu, t, now);
        let Some(proc) = t.process.filter(|_| !t.is_rt()) else {
            return;
        };
        let epoch = now / tun.epoch_ns;
        {
            let mut g = sh.procs[proc as usize].lock();
            let Some(pc) = g.as_mut() else { return };
            if pc.epoch >= epoch {
                return;
            }
            pc.epoch = epoch;
        }
        match sh.task_cache_work(topo, tun, cpu, proc, now) {
            Some(true) => counters.cas_scans += 1,
            Some(false) => counters.cas_invalid += 1,
            None => {}
        }
    }

    fn newly_idle<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) -> Requests<LbMsg> {
        self.lb.newly_idle(cx, now)
    }

    fn idle_ended<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) {
        self.lb.idle_ended(cx, now)
    }

    fn handle<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        msg: LbMsg,
        now: u64,
    ) -> Requests<LbMsg> {
        self.lb.handle(cx, msg, now)
    }

    fn ran<S: PolicyState>(&mut self, cpu: CpuId, topo: &Topology, t: &mut Task<S>, now: u64) {
        self.lb.sh.account_cache(topo, self.tun, cpu, t, now);
    }

    /// A task of `proc` starts or ends (`get_nr_threads()`).
    fn threads(&mut self, topo: &Topology, proc: u32, delta: i32) {
        let Some(slot) = self.lb.sh.procs.get(proc as usize) else {
            return;
        };
        let mut g = slot.lock();
        let pc = g.get_or_insert_with(|| ProcCache::new(topo.num_cpus()));
        pc.nr_threads = (pc.nr_threads as i32 + delta).max(0) as u32;
    }

    /// Publishes what the cache-aware balancer reads of this CPU: tasks
    /// preferring each LLC, those in their preferred LLC, the running
    /// task's process.
    fn publish<S: PolicyState>(&self, cx: &Cx<'_, S>) {
        let own = cx.sh.topology().llc_ordinal(cx.cpu) as u16;
        let mut l = self.lb.sh.lb[cx.cpu.index()].lock();
        l.llc_counts.iter_mut().for_each(|c| *c = 0);
        let mut in_pref = 0;
        for t in cx.runnable().filter(|t| !t.is_rt()) {
            if let Some(p) = t.pref_llc {
                l.llc_counts[p as usize] += 1;
                in_pref += (p == own) as u32;
            }
        }
        l.nr_pref_llc_running = in_pref;
        l.curr_proc = cx.current().and_then(|t| t.process);
    }

    fn keeps_idle_tick(&self, config: &Config) -> bool {
        self.lb.keeps_idle_tick(config)
    }

    fn llc_stats(&self, llc: usize) -> Option<(u64, u64)> {
        (llc < self.lb.sh.llc_stats.len()).then(|| self.lb.sh.llc_stat(llc))
    }
}

impl LbShared {
    /// `can_migrate_llc_task()`.
    pub(crate) fn can_migrate_llc_task<S: PolicyState>(
        &self,
        topo: &Topology,
        tun: CasTunables,
        t: &Task<S>,
        src: CpuId,
        dst: CpuId,
    ) -> LlcMig {
        let Some(proc) = t.process else {
            return LlcMig::Unrestricted;
        };
        let (src_l, dst_l) = (topo.llc_ordinal(src), topo.llc_ordinal(dst));
        let pref = {
            let mut g = self.procs[proc as usize].lock();
            let Some(pc) = g.as_mut() else {
                return LlcMig::Unrestricted;
            };
            let Some(pcpu) = pc.cpu else {
                return LlcMig::Unrestricted;
            };
            if src_l == dst_l {
                return LlcMig::Unrestricted;
            }
            let smt = topo.max_threads_per_core() as u64;
            let llc = topo.llc_cpus(dst).weight() as u64;
            if cas::invalid_llc_nr(&tun, pc.nr_threads, pc.nr_running_avg, smt, llc) {
                pc.cpu = None;
                return LlcMig::Unrestricted;
            }
            topo.llc_ordinal(CpuId::new(pcpu as usize))
        };
        let to_pref = if dst_l == pref {
            true
        } else if src_l == pref {
            false
        } else {
            return LlcMig::Unrestricted;
        };
        let smt = topo.max_threads_per_core() as u64;
        let (s, d) = (self.llc_stat(src_l), self.llc_stat(dst_l));
        cas::can_migrate_llc(&tun, smt, s, d, t.avg.util_avg, to_pref)
    }

    /// `alb_break_llc()`: every task here is in its preferred LLC, and
    /// either it runs alone or moving it out is forbidden. False without
    /// cache-aware scheduling.
    pub(crate) fn alb_break_llc<S: PolicyState>(&self, cx: &Cx<'_, S>, dst: CpuId) -> bool {
        let Some(tun) = self.cas else {
            return false;
        };
        let (sh, me) = (cx.sh, cx.cpu);
        let topo = sh.topology();
        if topo.llc_ordinal(me) == topo.llc_ordinal(dst) {
            return false;
        }
        let pref = self.lb[me.index()].lock().nr_pref_llc_running;
        let h_nr = sh.fair_nr(me);
        if pref == 0 || pref != h_nr {
            return false;
        }
        if sh.load(me) <= 1 {
            return true;
        }
        let util = cx
            .current()
            .filter(|t| !t.is_rt())
            .map_or(0, |t| t.avg.util_avg);
        let stat = |c: CpuId| self.llc_stat(topo.llc_ordinal(c));
        let smt = topo.max_threads_per_core() as u64;
        cas::can_migrate_llc(&tun, smt, stat(me), stat(dst), util, false) == LlcMig::Forbid
    }

    /// `account_mm_sched()`: `t`'s time since it was last charged goes to
    /// its process's occupancy on `cpu`, and its preferred LLC is
    /// refreshed.
    fn account_cache<S: PolicyState>(
        &self,
        topo: &Topology,
        tun: CasTunables,
        cpu: CpuId,
        t: &mut Task<S>,
        now: u64,
    ) {
        let Some(proc) = t.process.filter(|_| !t.is_rt()) else {
            return;
        };
        let delta = t.fair.sum_exec.saturating_sub(t.cache_acct);
        t.cache_acct = t.fair.sum_exec;
        let epoch = now / tun.epoch_ns;
        {
            let mut l = self.lb[cpu.index()].lock();
            l.cpu_rt.bring_to(epoch);
            l.cpu_rt.runtime += delta;
        }
        let mut g = self.procs[proc as usize].lock();
        let pc = g.get_or_insert_with(|| ProcCache {
            epoch,
            ..ProcCache::new(topo.num_cpus())
        });
        pc.account(cpu.index(), epoch, delta);
        let smt = topo.max_threads_per_core() as u64;
        let llc = topo.llc_cpus(cpu).weight() as u64;
        if epoch.saturating_sub(pc.epoch) > tun.affinity_timeout
            || cas::invalid_llc_nr(&tun, pc.nr_threads, pc.nr_running_avg, smt, llc)
        {
            pc.cpu = None;
        }
        t.pref_llc = pc
            .cpu
            .map(|c| topo.llc_ordinal(CpuId::new(c as usize)) as u16);
        t.pref_cpu = pc.cpu;
    }

    /// `task_cache_work()`: the process's occupancy per LLC; the preferred
    /// CPU moves only to an LLC with more than twice the current one's.
    /// Whether it scanned: `Some(false)` when the process was found too
    /// wide for an LLC (no preference), `None` when it was not due.
    fn task_cache_work(
        &self,
        topo: &Topology,
        tun: CasTunables,
        cpu: CpuId,
        proc: u32,
        now: u64,
    ) -> Option<bool> {
        let epoch = now / tun.epoch_ns;
        let smt = topo.max_threads_per_core() as u64;
        let llc_size = topo.llc_cpus(cpu).weight() as u64;
        let snapshot = {
            let mut g = self.procs[proc as usize].lock();
            let pc = g.as_mut()?;
            if now < pc.next_scan {
                return None;
            }
            pc.next_scan = now + tun.epoch_ns;
            if cas::invalid_llc_nr(&tun, pc.nr_threads, pc.nr_running_avg, smt, llc_size) {
                pc.cpu = None;
                return Some(false);
            }
            pc.clone()
        };
        let mut llcs = Vec::with_capacity(topo.llcs().len());
        let mut nr_running = 0;
        for llc in topo.llcs() {
            let (mut a_occ, mut m_occ, mut m_cpu) = (0, 0, None);
            for c in llc.cpus.iter() {
                let (rt, curr) = {
                    let mut l = self.lb[c.index()].lock();
                    l.cpu_rt.bring_to(epoch);
                    (l.cpu_rt.runtime, l.curr_proc)
                };
                let occ = cas::fraction(snapshot.runtime_at(c.index(), epoch), rt);
                a_occ += occ;
                if occ > m_occ {
                    m_occ = occ;
                    m_cpu = Some(c.index() as u32);
                }
                nr_running += (curr == Some(proc)) as u64;
            }
            let first = llc.cpus.first().expect("an LLC has CPUs");
            llcs.push((topo.llc_ordinal(first) as u16, a_occ, m_cpu));
        }
        let cur_llc = snapshot
            .cpu
            .map(|c| topo.llc_ordinal(CpuId::new(c as usize)) as u16);
        let new = cas::choose_preferred(&llcs, cur_llc, snapshot.cpu);
        let mut g = self.procs[proc as usize].lock();
        if let Some(pc) = g.as_mut() {
            pc.cpu = new;
            cas::update_avg_scale(&mut pc.nr_running_avg, nr_running, llc_size);
        }
        Some(true)
    }
}
