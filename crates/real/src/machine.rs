//! The machine a real run ran on, and what such a run can measure.

use schedlab_sim::Figure;
use serde_json::{json, Value};

/// The machine a real run ran on, read from sysfs and procfs.
pub struct Machine {
    pub cpus: usize,
    pub llcs: usize,
    pub model: String,
    pub kernel: String,
}

impl Machine {
    pub fn read(topo: &schedlab_topology::Topology) -> Machine {
        let model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        Machine {
            cpus: topo.num_cpus(),
            llcs: topo.llcs().len(),
            model,
            kernel,
        }
    }

    pub fn json(&self) -> Value {
        json!({"cpus": self.cpus, "llcs": self.llcs, "cpu_model": self.model, "kernel": self.kernel})
    }
}

/// Whether a real run measures figure `f` (with the kernel's record or
/// without it).
pub fn measurable(f: &Figure, kernel: bool) -> bool {
    match f {
        Figure::Moves { .. } | Figure::LlcRefillMib { .. } | Figure::ColdStarts { .. } => false,
        Figure::Counter { name } | Figure::CounterPerCpuPerSecond { name, .. } => {
            kernel && name.starts_with("kernel.")
        }
        Figure::Migrations { .. } => kernel,
        _ => true,
    }
}
