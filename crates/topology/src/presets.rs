//! Named machine shapes. Each stands for a real machine (or, for
//! `max-1024`, the library's limit), and says which in its doc line.

use crate::topology::{Shape, Siblings, Topology};

/// A named shape and the machine it stands for.
#[derive(Clone, Copy, Debug)]
pub struct Preset {
    pub name: &'static str,
    pub doc: &'static str,
    pub shape: Shape,
    /// Each LLC's size, and where it is from.
    pub llc_bytes: u64,
    pub llc_source: &'static str,
}

const MIB: u64 = 1 << 20;

const fn shape(
    nodes: usize,
    llcs_per_node: usize,
    cores_per_llc: usize,
    threads_per_core: usize,
    siblings: Siblings,
) -> Shape {
    Shape {
        nodes,
        llcs_per_node,
        cores_per_llc,
        threads_per_core,
        siblings,
    }
}

/// The preset every command uses when none is named.
pub const DEFAULT_PRESET: &str = "amd-2x8";

/// Every preset, in the order `schedlab topo --list` prints them.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "amd-2x8",
        doc: "the seed's AMD bench: 16 CPUs, 2 LLCs (CCXs) of 4 cores x 2 threads, LLC 0 = cpu0-7, siblings 2k and 2k+1",
        shape: shape(1, 2, 4, 2, Siblings::Adjacent),
        llc_bytes: 16 * MIB,
        llc_source: "a Zen 2 CCX of 4 cores holds 16 MiB of L3 (AMD Ryzen 7 3700X: 32 MB L3 over its 2 CCXs, AMD's product page); the seed names no model, the shape is Zen 2's",
    },
    Preset {
        name: "t14",
        doc: "the seed's Lenovo T14 laptop: one LLC, 8 cores x 2 threads, siblings 2k and 2k+1",
        shape: shape(1, 1, 8, 2, Siblings::Adjacent),
        llc_bytes: 16 * MIB,
        llc_source: "a ThinkPad T14 Gen 3 AMD (Ryzen 7 PRO 6850U, one CCX of 8 cores): 16 MB L3 (AMD's product page); which T14 the seed used is an assumption",
    },
    Preset {
        name: "smt-2x2",
        doc: "the seed-004 QEMU guest (-smp 4,sockets=1,cores=2,threads=2): one LLC, 2 cores x 2 threads",
        shape: shape(1, 1, 2, 2, Siblings::Adjacent),
        llc_bytes: 16 * MIB,
        llc_source: "QEMU's legacy x86 cache description gives guests a 16 MiB L3 (target/i386/cpu.c, legacy_l3_cache); an assumption about the seed's guest",
    },
    Preset {
        name: "genoa-96",
        doc: "AMD EPYC 9654 (Genoa), one socket in NPS1: 12 CCDs of 8 cores x 2 threads, 192 CPUs, siblings N and N+96",
        shape: shape(1, 12, 8, 2, Siblings::Split),
        llc_bytes: 32 * MIB,
        llc_source: "EPYC 9654: 384 MB L3 over 12 CCDs, 32 MiB each (AMD's product page)",
    },
    Preset {
        name: "epyc-2s-384",
        doc: "two-socket AMD EPYC 9654: 2 nodes x 12 CCDs x 8 cores x 2 threads, 384 CPUs, siblings N and N+192",
        shape: shape(2, 12, 8, 2, Siblings::Split),
        llc_bytes: 32 * MIB,
        llc_source: "EPYC 9654: 32 MiB per CCD (AMD's product page)",
    },
    Preset {
        name: "spr-2s",
        doc: "two-socket Intel Xeon 8480+ (Sapphire Rapids): 2 nodes, one mesh LLC each of 56 cores x 2 threads, 224 CPUs, siblings N and N+112",
        shape: shape(2, 1, 56, 2, Siblings::Split),
        llc_bytes: 105 * MIB,
        llc_source: "Xeon Platinum 8480+: 105 MB L3 per socket, 1.875 MiB per core (Intel ARK)",
    },
    Preset {
        name: "milan-4n-128",
        doc: "the AMD Milan a reply in the cache-aware scheduling RFC v3 thread (LKML, June 2025) measured hackbench on: 4 nodes x 4 CCXs x 8 CPUs, 128 CPUs, taken as 8 cores with SMT off",
        shape: shape(4, 4, 8, 1, Siblings::Split),
        llc_bytes: 32 * MIB,
        llc_source: "Zen 3 (Milan): one 32 MB L3 per 8-core CCX (AMD's EPYC 7003 product pages); the reply names the shape, not the model, and 8 CPUs per CCX reads as SMT off",
    },
    Preset {
        name: "genoa-4n-128",
        doc: "the AMD Genoa of the cache-aware scheduling v1 cover (LKML, October 2025): 4 nodes x 2 CCXs x 16 CPUs, 128 CPUs, taken as 8 cores x 2 threads per CCX, siblings N and N+64",
        shape: shape(4, 2, 8, 2, Siblings::Split),
        llc_bytes: 32 * MIB,
        llc_source: "Zen 4 (EPYC 9004): one 32 MB L3 per 8-core CCD (AMD's product pages); the cover names the shape (\"4 Nodes and 32 CPUs per node. Each node has 2 CCXs and each CCX has 16 CPUs\"), not the model; 16 CPUs per 8-core CCD reads as SMT on",
    },
    Preset {
        name: "epyc-9t24-vm",
        doc: "the AMD EPYC 9T24 VM of an LKML report in the cache-aware scheduling threads (an 8-thread simulator process gathered into one CCX): 8 CCXs x 16 vCPUs, 128 vCPUs, taken as 8 cores x 2 threads, one node",
        shape: shape(1, 8, 8, 2, Siblings::Adjacent),
        llc_bytes: 32 * MIB,
        llc_source: "Zen 4 (EPYC 9004 family): 32 MB L3 per CCD (AMD's product pages); the guest's SMT layout and single node are assumptions",
    },
    Preset {
        name: "max-1024",
        doc: "the library's limit, no real machine: 4 nodes x 16 LLCs x 8 cores x 2 threads = 1024 CPUs, Genoa-sized LLCs, siblings N and N+512",
        shape: shape(4, 16, 8, 2, Siblings::Split),
        llc_bytes: 32 * MIB,
        llc_source: "no real machine: Genoa-sized LLCs, 32 MiB",
    },
];

/// The preset named `name`, built.
pub fn preset(name: &str) -> Option<Topology> {
    let p = PRESETS.iter().find(|p| p.name == name)?;
    Some(
        p.shape
            .build(p.name)
            .expect("every preset is a valid shape (tested)")
            .with_llc_bytes(p.llc_bytes),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuset::{parse_cpulist, CpuId};

    #[test]
    fn every_preset_builds_with_the_size_its_doc_names() {
        let want = [
            ("amd-2x8", 16, 2, 1),
            ("t14", 16, 1, 1),
            ("smt-2x2", 4, 1, 1),
            ("genoa-96", 192, 12, 1),
            ("epyc-2s-384", 384, 24, 2),
            ("spr-2s", 224, 2, 2),
            ("milan-4n-128", 128, 16, 4),
            ("genoa-4n-128", 128, 8, 4),
            ("epyc-9t24-vm", 128, 8, 1),
            ("max-1024", 1024, 64, 4),
        ];
        assert_eq!(PRESETS.len(), want.len(), "a preset without a size check");
        for (name, cpus, llcs, nodes) in want {
            let t = preset(name).unwrap_or_else(|| panic!("preset {name} missing"));
            assert_eq!(
                (t.num_cpus(), t.llcs().len(), t.nodes().len()),
                (cpus, llcs, nodes),
                "{name}: expected (cpus, llcs, nodes)"
            );
        }
        assert!(preset("nope").is_none());
    }

    #[test]
    fn amd_2x8_is_the_seed_bench() {
        let t = preset("amd-2x8").unwrap();
        assert_eq!(t.llcs()[0].cpus, parse_cpulist("0-7").unwrap());
        assert_eq!(t.llcs()[1].cpus, parse_cpulist("8-15").unwrap());
        for k in 0..8 {
            assert_eq!(
                t.core_cpus(CpuId::new(2 * k)),
                &parse_cpulist(&alloc::format!("{}-{}", 2 * k, 2 * k + 1)).unwrap(),
                "core of cpu{}",
                2 * k
            );
        }
    }
}
