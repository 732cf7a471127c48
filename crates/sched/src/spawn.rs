//! The spawn rule a config names ([`MachineSpawn`]: `rotate`, `near` or
//! Linux's fork path), as one CPU keeps it.

use schedlab_topology::{CpuId, CpuSet};

use crate::config::SpawnPolicy;
use crate::linux::fork::LinuxFork;
use crate::policy::{Near, Rotate, SpawnRule};
use crate::shared::Machine;

/// The spawn rule a config names, as one CPU keeps it.
#[derive(Clone, Copy, Debug)]
pub enum MachineSpawn {
    Rotate(Rotate),
    Near(Near),
    Linux(LinuxFork),
}

impl MachineSpawn {
    pub fn new(p: SpawnPolicy, cpu: CpuId) -> MachineSpawn {
        match p {
            SpawnPolicy::Rotate => MachineSpawn::Rotate(Rotate {
                cursor: cpu.index() + 1,
            }),
            SpawnPolicy::Near => MachineSpawn::Near(Near),
            SpawnPolicy::Linux => MachineSpawn::Linux(LinuxFork),
        }
    }
}

impl SpawnRule for MachineSpawn {
    fn place_new(&mut self, m: &Machine<'_>, spawner: CpuId, mask: &CpuSet) -> Option<CpuId> {
        match self {
            MachineSpawn::Rotate(r) => r.place_new(m, spawner, mask),
            MachineSpawn::Near(n) => n.place_new(m, spawner, mask),
            MachineSpawn::Linux(l) => l.place_new(m, spawner, mask),
        }
    }
}
