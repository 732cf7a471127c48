//! [`Builtin`]: the built-in balancer a config's [`BalanceKind`] names
//! (the seed's, Linux's, or Linux's with cache-aware scheduling), so a host
//! that runs every built-in has one balancer type.

use alloc::vec::Vec;

use schedlab_topology::{CpuId, Topology};

use crate::balance::Seed;
use crate::balancer::{Balancer, Cx, Requests};
use crate::config::{BalanceKind, Config};
use crate::effects::Counters;
use crate::linux::balance::LinuxLb;
use crate::linux::cache::LinuxCasLb;
use crate::task::{PolicyState, Task};

/// The built-in balancer the config's [`BalanceKind`] names.
#[derive(Clone, Debug)]
pub enum Builtin {
    Seed(Seed),
    Linux(LinuxLb),
    LinuxCas(LinuxCasLb),
}
/// A built-in balancer's message: Linux's (the seed's has none).
#[derive(Debug)]
pub struct BuiltinMsg(pub(crate) crate::linux::balance::LbMsg);

impl Balancer for Builtin {
    type Msg = BuiltinMsg;

    fn for_machine(topo: &Topology, config: &Config, max_tasks: usize) -> Vec<Builtin> {
        match config.balance.kind {
            BalanceKind::Seed => Seed::for_machine(topo, config, max_tasks)
                .into_iter()
                .map(Builtin::Seed)
                .collect(),
            BalanceKind::Linux => LinuxLb::for_machine(topo, config, max_tasks)
                .into_iter()
                .map(Builtin::Linux)
                .collect(),
            BalanceKind::LinuxCas(_) => LinuxCasLb::for_machine(topo, config, max_tasks)
                .into_iter()
                .map(Builtin::LinuxCas)
                .collect(),
            BalanceKind::Own => unreachable!(
                "balance = own runs the policy's own balancer type; a host built Builtin for it"
            ),
        }
    }

    fn name(&self) -> &str {
        match self {
            Builtin::Seed(b) => b.name(),
            Builtin::Linux(b) => b.name(),
            Builtin::LinuxCas(b) => b.name(),
        }
    }

    fn tick<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) -> Requests<BuiltinMsg> {
        match self {
            Builtin::Seed(b) => b.tick_as(cx, now),
            Builtin::Linux(b) => b.tick(cx, now).map(BuiltinMsg),
            Builtin::LinuxCas(b) => b.tick(cx, now).map(BuiltinMsg),
        }
    }

    fn newly_idle<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) -> Requests<BuiltinMsg> {
        match self {
            Builtin::Seed(b) => b.newly_idle_as(cx, now),
            Builtin::Linux(b) => b.newly_idle(cx, now).map(BuiltinMsg),
            Builtin::LinuxCas(b) => b.newly_idle(cx, now).map(BuiltinMsg),
        }
    }

    fn idle_ended<S: PolicyState>(&mut self, cx: &mut Cx<'_, S>, now: u64) {
        match self {
            Builtin::Seed(b) => b.idle_ended(cx, now),
            Builtin::Linux(b) => b.idle_ended(cx, now),
            Builtin::LinuxCas(b) => b.idle_ended(cx, now),
        }
    }

    fn handle<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        msg: BuiltinMsg,
        now: u64,
    ) -> Requests<BuiltinMsg> {
        match self {
            Builtin::Seed(_) => unreachable!("the seed's balancer posts no messages: {msg:?}"),
            Builtin::Linux(b) => b.handle(cx, msg.0, now).map(BuiltinMsg),
            Builtin::LinuxCas(b) => b.handle(cx, msg.0, now).map(BuiltinMsg),
        }
    }

    fn asked<S: PolicyState>(
        &mut self,
        cx: &mut Cx<'_, S>,
        thief: CpuId,
        now: u64,
    ) -> Requests<BuiltinMsg> {
        match self {
            Builtin::Seed(b) => b.asked_as(cx, thief, now),
            Builtin::Linux(b) => b.asked(cx, thief, now).map(BuiltinMsg),
            Builtin::LinuxCas(b) => b.asked(cx, thief, now).map(BuiltinMsg),
        }
    }

    fn tick_running<S: PolicyState>(
        &mut self,
        cpu: CpuId,
        topo: &Topology,
        counters: &mut Counters,
        task: &mut Task<S>,
        now: u64,
    ) {
        match self {
            Builtin::Seed(b) => b.tick_running(cpu, topo, counters, task, now),
            Builtin::Linux(b) => b.tick_running(cpu, topo, counters, task, now),
            Builtin::LinuxCas(b) => b.tick_running(cpu, topo, counters, task, now),
        }
    }

    fn ran<S: PolicyState>(&mut self, cpu: CpuId, topo: &Topology, task: &mut Task<S>, now: u64) {
        match self {
            Builtin::Seed(b) => b.ran(cpu, topo, task, now),
            Builtin::Linux(b) => b.ran(cpu, topo, task, now),
            Builtin::LinuxCas(b) => b.ran(cpu, topo, task, now),
        }
    }

    fn threads(&mut self, topo: &Topology, process: u32, delta: i32) {
        match self {
            Builtin::Seed(b) => b.threads(topo, process, delta),
            Builtin::Linux(b) => b.threads(topo, process, delta),
            Builtin::LinuxCas(b) => b.threads(topo, process, delta),
        }
    }

    fn publish<S: PolicyState>(&self, cx: &Cx<'_, S>) {
        match self {
            Builtin::Seed(b) => b.publish(cx),
            Builtin::Linux(b) => b.publish(cx),
            Builtin::LinuxCas(b) => b.publish(cx),
        }
    }

    fn newly_idle_reads_itself(&self) -> bool {
        match self {
            Builtin::Seed(b) => b.newly_idle_reads_itself(),
            Builtin::Linux(b) => b.newly_idle_reads_itself(),
            Builtin::LinuxCas(b) => b.newly_idle_reads_itself(),
        }
    }

    fn keeps_idle_tick(&self, config: &Config) -> bool {
        match self {
            Builtin::Seed(b) => b.keeps_idle_tick(config),
            Builtin::Linux(b) => b.keeps_idle_tick(config),
            Builtin::LinuxCas(b) => b.keeps_idle_tick(config),
        }
    }

    fn llc_stats(&self, llc: usize) -> Option<(u64, u64)> {
        match self {
            Builtin::Seed(b) => b.llc_stats(llc),
            Builtin::Linux(b) => b.llc_stats(llc),
            Builtin::LinuxCas(b) => b.llc_stats(llc),
        }
    }
}
