//! The machine shape's rules: canonical groups, validation, the lookups
//! and the rings, on small machines written by hand and on the presets.

use super::*;
use crate::cpuset::parse_cpulist;

fn s(t: &str) -> CpuSet {
    parse_cpulist(t).unwrap()
}

#[test]
fn the_core_lists_and_the_rings_built_on_demand_are_the_sets() {
    for p in crate::presets::PRESETS {
        let t = crate::preset(p.name).expect("a preset builds");
        for cpu in t.cpu_ids() {
            let set: Vec<CpuId> = t.core_cpus(cpu).iter().collect();
            assert_eq!(t.core_siblings(cpu), &set[..], "{}: {cpu:?}'s core", p.name);
            let outward: Vec<CpuSet> = t.rings_outward(cpu).collect();
            assert_eq!(outward, t.rings(cpu), "{}: {cpu:?}'s rings", p.name);
        }
    }
}

#[test]
fn groups_are_canonical_whatever_the_source_order() {
    let a =
        Topology::from_groups("x", &[s("2-3"), s("0-1")], &[s("0-3")], &[(0, s("0-3"))]).unwrap();
    assert_eq!(a.cores(), &[s("0-1"), s("2-3")]);
    assert_eq!(a.llc_id(CpuId::new(3)), LlcId(0));
    assert_eq!(a.level_between(CpuId::new(0), CpuId::new(1)), Level::Smt);
    assert_eq!(a.level_between(CpuId::new(0), CpuId::new(2)), Level::Llc);
    assert_eq!(a.level_between(CpuId::new(2), CpuId::new(2)), Level::Same);
}

#[test]
fn validation_names_what_is_wrong() {
    let e = Topology::from_groups("x", &[s("0-1"), s("1-2")], &[s("0-2")], &[(0, s("0-2"))])
        .unwrap_err();
    assert_eq!(
        e,
        TopologyError::ListedTwice {
            level: "SMT core",
            cpu: CpuId::new(1)
        }
    );
    let e =
        Topology::from_groups("x", &[s("0"), s("2")], &[s("0,2")], &[(0, s("0,2"))]).unwrap_err();
    assert!(
        matches!(e, TopologyError::NotDense { missing, .. } if missing == CpuId::new(1)),
        "{e}"
    );
    let e =
        Topology::from_groups("x", &[s("0-1")], &[s("0"), s("1")], &[(0, s("0-1"))]).unwrap_err();
    assert!(matches!(e, TopologyError::CoreSpansLlcs { .. }), "{e}");
    let e = Topology::from_groups(
        "x",
        &[s("0"), s("1")],
        &[s("0-1")],
        &[(0, s("0")), (1, s("1"))],
    )
    .unwrap_err();
    assert_eq!(
        e,
        TopologyError::LlcSpansNodes {
            llc: s("0-1"),
            node_a: 0,
            node_b: 1,
            cpu_b: CpuId::new(1)
        },
        "{e}"
    );
    let e = Topology::from_groups("x", &[s("0"), s("1")], &[s("0")], &[(0, s("0-1"))]).unwrap_err();
    assert!(
        matches!(e, TopologyError::Uncovered { level: "LLC", .. }),
        "{e}"
    );
    let e = Topology::from_groups("x", &[], &[], &[]).unwrap_err();
    assert_eq!(e, TopologyError::NoCpus);
}

#[test]
fn split_and_adjacent_shapes() {
    let adj = Shape {
        nodes: 1,
        llcs_per_node: 2,
        cores_per_llc: 4,
        threads_per_core: 2,
        siblings: Siblings::Adjacent,
    }
    .build("a")
    .unwrap();
    assert_eq!(adj.core_cpus(CpuId::new(5)), &s("4-5"));
    assert_eq!(adj.llc_cpus(CpuId::new(9)), &s("8-15"));
    let split = Shape {
        siblings: Siblings::Split,
        ..Shape {
            nodes: 2,
            llcs_per_node: 1,
            cores_per_llc: 4,
            threads_per_core: 2,
            siblings: Siblings::Adjacent,
        }
    }
    .build("b")
    .unwrap();
    assert_eq!(split.core_cpus(CpuId::new(1)), &s("1,9"));
    assert_eq!(split.llc_cpus(CpuId::new(1)), &s("0-3,8-11"));
    assert_eq!(split.llc_id(CpuId::new(12)), LlcId(4));
    assert_eq!(
        split.level_between(CpuId::new(0), CpuId::new(4)),
        Level::Machine
    );
    assert_eq!(split.nodes()[1].llcs, [1]);
}
