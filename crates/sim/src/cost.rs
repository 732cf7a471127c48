//! The cost model: what each hardware event costs in virtual nanoseconds.
//!
//! One struct with named fields, a default calibrated once for every
//! scenario (never per scenario), and a TOML form (`[cost]` in a scenario
//! file, any field may be left out). Each field says where its default
//! comes from (docs/REFERENCES.md has the sources) or that it is an
//! estimate.
//!
//! Fields no `schedlab calibrate` measurement names keep their estimates
//! in a cost file it writes (`docs/VALIDATION.md`).
//!
//! Calibration (held by a test): on `amd-2x8`, `ipc.reqrep.8` split across
//! the LLCs reads 1.15–1.35× the pair in one LLC on two cores (the seed's
//! metal: 8.4–8.5 against 6.7–6.9 µs, about 1.25), and the pair on one
//! core's siblings 1.05–1.25× two cores (7.9–8.0 against 6.9, about 1.15).
//! The absolute numbers are the model's, not the metal's.

use schedlab_topology::Level;
use serde::{Deserialize, Serialize};

/// Costs by topological distance.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
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

#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostModel {
    /// One cache line moved between two CPUs, ns, by distance. `schedlab
    /// calibrate` sets each distance the machine has from two threads
    /// bouncing one word (half the round trip).
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
    /// Reading data that no LLC holds, from DRAM, bytes per ns (`calibrate`
    /// sets it from one thread's copy of 256 MiB): one
    /// stream's 8 GB/s, about the cross-socket figure above (an estimate).
    pub memory_bytes_per_ns: f64,
    /// Wake from idle, ns, for idle depths 0, 1, 2 (`calibrate` fits depth
    /// 0 to a futex ping-pong across CPUs, the wakee's idle; AMD acpi_idle: C1
    /// about 1 µs, C2 about 18 µs; a C6-like state: Intel C6 85–290 µs).
    pub wake_from_idle_ns: [u64; 3],
    /// An IPI from send to handler on an awake CPU (x86: 1.1–1.2 µs;
    /// `calibrate` fits it to a futex ping-pong whose wakee's CPU is busy).
    pub ipi_ns: u64,
    /// A context switch (x86: 1.1–1.5 µs; `calibrate` fits it to a pipe
    /// ping-pong on one CPU).
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
    /// reads 9–20 µs on x86 servers (`calibrate` fits it to spawn and join).
    pub spawn_ns: u64,
    /// How late a timer fires after its expiry (`calibrate` sets the
    /// minimum and mean of 1 ms sleeps' lateness): the scheduler tick and
    /// every hrtimer (a sleep's deadline), drawn per expiry. None on metal:
    /// the CPU's own deadline timer raises the interrupt, whose entry is
    /// `irq_ns`; we found no sourced distribution of metal expiry latency
    /// to add. The `guest` preset's is cited there.
    pub timer_late: Lateness,
}

/// A latency drawn per event: `min_ns` plus an exponential tail whose mean
/// brings the whole to `mean_ns` (a shifted exponential: the shape of a
/// fixed path plus a memoryless wait). `mean_ns == 0` is none, and draws
/// nothing from the run's RNG.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Lateness {
    pub min_ns: u64,
    pub mean_ns: u64,
}

impl Lateness {
    /// A KVM guest's timer expiry. A guest timer (its LAPIC deadline, on
    /// which its tick and hrtimers run) is an hrtimer of the host; when it
    /// fires, the vCPU exits on the host's interrupt and the timer is
    /// injected at re-entry. Wanpeng Li's KVM commit "KVM: LAPIC: Inject
    /// timer interrupt via posted interrupt" profiles those
    /// EXTERNAL_INTERRUPT exits on a Skylake server: min 0.47 µs, average
    /// 0.71 µs (max 106 µs over 42,916 exits: a tail this shape does not
    /// carry). Consistent with it, his "KVM: LAPIC: Tune
    /// lapic_timer_advance_ns automatically" measures the guest-observed
    /// deadline-timer latency (kvm-unit-tests `tscdeadline_latency`) at
    /// about 1,200 cycles with the advance tuned, 2,600 before, 5,700 on
    /// an upstream host without it (0.5–2.6 µs at 2.2 GHz). Chosen from
    /// the sources before any run, never by the IPI figure it gives.
    pub const GUEST: Lateness = Lateness {
        min_ns: 470,
        mean_ns: 710,
    };

    pub const NONE: Lateness = Lateness {
        min_ns: 0,
        mean_ns: 0,
    };

    pub fn is_none(&self) -> bool {
        self.mean_ns == 0
    }

    /// The latency at quantile `u` in [0, 1).
    pub fn at(&self, u: f64) -> u64 {
        if self.is_none() {
            return 0;
        }
        let tail = self.mean_ns.saturating_sub(self.min_ns) as f64;
        self.min_ns + (-tail * (1.0 - u).ln()) as u64
    }
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
            memory_bytes_per_ns: 8.0,
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
            timer_late: Lateness::NONE,
        }
    }
}

impl CostModel {
    /// The presets' names, for error messages.
    pub const PRESETS: &'static [&'static str] = &["default", "guest"];

    /// The named presets: `default`, the calibrated metal above; `guest`,
    /// the same costs in a KVM guest (the seed-004 selftest ran in a QEMU
    /// guest): vCPU ticks out of phase, and timers that fire late.
    pub fn preset(name: &str) -> Option<CostModel> {
        match name {
            "default" => Some(CostModel::default()),
            "guest" => Some(CostModel {
                tick_skew: true,
                timer_late: Lateness::GUEST,
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

    /// Reading cold data into an LLC: bytes from another LLC of the node,
    /// from another node's, and from memory, each at its bandwidth.
    pub fn fill_ns(&self, node: u64, machine: u64, memory: u64) -> u64 {
        (node as f64 / self.bytes_per_ns.node
            + machine as f64 / self.bytes_per_ns.machine
            + memory as f64 / self.memory_bytes_per_ns) as u64
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_lateness_has_its_cited_minimum_and_mean() {
        let l = Lateness::GUEST;
        assert_eq!(l.at(0.0), 470, "the fastest expiry is the cited minimum");
        let n = 100_000;
        let mean = (0..n)
            .map(|i| l.at((i as f64 + 0.5) / n as f64) as f64)
            .sum::<f64>()
            / n as f64;
        assert!(
            (mean - 710.0).abs() < 5.0,
            "the mean over the quantiles must be the cited 710 ns, was {mean:.1}"
        );
        assert!(l.at(0.999) > 2_000, "an exponential tail, not a bound");
    }

    #[test]
    fn metal_timers_are_exact_and_the_guest_preset_carries_the_lateness() {
        assert!(CostModel::default().timer_late.is_none());
        assert_eq!(Lateness::NONE.at(0.9), 0);
        let g = CostModel::preset("guest").expect("a preset");
        assert_eq!(g.timer_late, Lateness::GUEST);
    }
}
