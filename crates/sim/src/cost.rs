//! The cost model: what each hardware event costs in virtual nanoseconds.
//!
//! One struct with named fields, a default calibrated once for every
//! scenario (never per scenario), and a TOML form (`[cost]` in a scenario
//! file, any field may be left out). Each field says where its default
//! comes from (docs/REFERENCES.md has the sources) or that it is an
//! estimate.
//!
//! Calibration (held by a test): on `amd-2x8`, `ipc.reqrep.8` split across
//! the LLCs reads 1.15–1.35× the pair in one LLC on two cores (the seed's
//! metal: 8.4–8.5 against 6.7–6.9 µs, about 1.25), and the pair on one
//! core's siblings 1.05–1.25× two cores (7.9–8.0 against 6.9, about 1.15).
//! The absolute numbers are the model's, not the metal's.

use schedlab_topology::Level;
use serde::Deserialize;

/// Costs by topological distance.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ByLevel {
    pub smt: f64,
    pub llc: f64,
    pub node: f64,
    pub machine: f64,
}

impl ByLevel {
    pub fn at(&self, level: Level) -> f64 {
        match level {
            Level::Same | Level::Smt => self.smt,
            Level::Llc => self.llc,
            Level::Node => self.node,
            Level::Machine => self.machine,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostModel {
    /// One cache line moved between two CPUs, ns, by distance
    /// (nviennot/core-to-core-latency: SMT 5–13, same CCX on Zen 3/4 16–27,
    /// across CCX 73–127, across sockets 190–300 on EPYC).
    pub line_ns: ByLevel,
    /// Lines a hand-off touches: the message, the wait queue, the woken
    /// task's state and run-queue lines, the park word and the mailbox.
    /// An estimate (a futex wake touches 6–12 lines in Linux), not measured.
    pub lines_per_handoff: f64,
    /// Payload bandwidth, bytes per ns, by distance: about 20 GB/s inside a
    /// CCX, 10 across CCXs, 8 across sockets for one stream (STREAM-like
    /// single-thread copies on Zen 3/4; an estimate).
    pub bytes_per_ns: ByLevel,
    /// Wake from idle, ns, for idle depths 0, 1, 2 (AMD acpi_idle: C1
    /// about 1 µs, C2 about 18 µs; a C6-like state: Intel C6 85–290 µs).
    pub wake_from_idle_ns: [u64; 3],
    /// An IPI from send to handler on an awake CPU (x86: 1.1–1.2 µs).
    pub ipi_ns: u64,
    /// A context switch (x86: 1.1–1.5 µs).
    pub context_switch_ns: u64,
    /// Entering the kernel and posting a wake or a message. An estimate,
    /// not measured.
    pub syscall_ns: u64,
    /// A thread's way from deciding to block to giving up the CPU (the
    /// futex_wait/poll path before schedule()). An estimate, not measured.
    pub block_ns: u64,
    /// The scheduler pass that handles a kick (drain, decide). An
    /// estimate, not measured.
    pub pass_ns: u64,
    /// How much slower a thread runs while its SMT sibling is busy
    /// (2 threads on one core give about 1.2–1.3x one thread's throughput,
    /// so each runs at about 0.6: 1.6x slower). An estimate from that
    /// common rule of thumb, not measured on the seed's machine.
    pub smt_slowdown: f64,
    /// Refill after a migration: the working set is re-read at the
    /// bandwidth of the distance moved, at most this many bytes. An
    /// estimate.
    pub refill_cap_bytes: u64,
    /// The bytes of a task's private-cache footprint (L1/L2 lines its path
    /// touches between runs) that another task sharing the core (the same
    /// CPU, or its SMT sibling) evicts: re-read from the LLC when the task
    /// runs again after another used the core. An estimate (L1d is 32 KiB
    /// per core on Zen 3/4, shared by its two threads), calibrated with the
    /// pair-on-siblings ratio.
    pub core_footprint_bytes: u64,
    /// Latencies of kicks and context switches vary by up to this fraction
    /// either way, drawn from the run's seeded RNG: real wake-ups vary
    /// (timer and cache state), and it lets a sweep over seeds explore
    /// timings, not only tie orders. 0 makes the costs exact. An estimate
    /// of the spread, not measured.
    pub jitter: f64,
    /// Each CPU's tick has its own phase, drawn from the seed, instead of
    /// all CPUs ticking on the same boundary. Off on metal (Linux's default
    /// `skew_tick=0` aligns the ticks). On in the `guest` preset: the guest
    /// aligns its ticks in guest time too, but each vCPU's timer is an
    /// emulated LAPIC timer the host fires and injects on its own, so
    /// where each lands is a property of the run (an assumption, not a
    /// measurement: with aligned ticks `cs_spinners` shows no storm, which
    /// the seed's guest did).
    pub tick_skew: bool,
    /// An interrupt's entry and exit on the CPU that takes it. An
    /// estimate, not measured.
    pub irq_ns: u64,
    /// Creating a thread (clone + setup) on the parent's CPU; spawn + join
    /// reads 9–20 µs on x86 servers.
    pub spawn_ns: u64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            line_ns: ByLevel {
                smt: 8.0,
                llc: 22.0,
                node: 90.0,
                machine: 250.0,
            },
            lines_per_handoff: 10.0,
            bytes_per_ns: ByLevel {
                smt: 24.0,
                llc: 20.0,
                node: 10.0,
                machine: 8.0,
            },
            wake_from_idle_ns: [1_200, 18_000, 120_000],
            ipi_ns: 1_150,
            context_switch_ns: 1_200,
            syscall_ns: 600,
            block_ns: 200,
            pass_ns: 150,
            smt_slowdown: 1.6,
            refill_cap_bytes: 1 << 20,
            core_footprint_bytes: 8 * 1024,
            jitter: 0.1,
            tick_skew: false,
            irq_ns: 500,
            spawn_ns: 6_000,
        }
    }
}

impl CostModel {
    /// The presets' names, for error messages.
    pub const PRESETS: &'static [&'static str] = &["default", "guest"];

    /// The named presets: `default`, the calibrated metal above; `guest`,
    /// the same costs in a VM whose vCPU ticks are out of phase (the
    /// seed-004 selftest ran in a QEMU guest).
    pub fn preset(name: &str) -> Option<CostModel> {
        match name {
            "default" => Some(CostModel::default()),
            "guest" => Some(CostModel {
                tick_skew: true,
                ..CostModel::default()
            }),
            _ => None,
        }
    }

    /// A message or wake hand-off of `bytes` between CPUs `level` apart.
    pub fn handoff_ns(&self, level: Level, bytes: u64) -> u64 {
        if level == Level::Same {
            return (bytes as f64 / self.bytes_per_ns.smt) as u64;
        }
        (self.lines_per_handoff * self.line_ns.at(level)
            + bytes as f64 / self.bytes_per_ns.at(level)) as u64
    }

    /// Re-reading `working_set` bytes after moving `level` away.
    pub fn refill_ns(&self, level: Level, working_set: u64) -> u64 {
        if level == Level::Same {
            return 0;
        }
        let b = working_set.min(self.refill_cap_bytes);
        (b as f64 / self.bytes_per_ns.at(level)) as u64
    }

    pub fn wake_from_idle(&self, depth: u8) -> u64 {
        let d = (depth as usize).min(self.wake_from_idle_ns.len().saturating_sub(1));
        self.wake_from_idle_ns
            .get(d)
            .copied()
            .unwrap_or(self.ipi_ns)
    }
}
