//! Property tests: the parsers take arbitrary text and answer `Ok` or an
//! error, never a panic; what parses prints back to itself.

use std::path::Path;

use proptest::prelude::*;
use schedlab_topology::read::{from_lscpu, from_toml};
use schedlab_topology::{parse_cpulist, CpuSet};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn cpulist_never_panics(text in "\\PC{0,40}") {
        let _ = parse_cpulist(&text);
    }

    #[test]
    fn cpulist_near_misses_never_panic(text in "[0-9,\\- \n]{0,30}") {
        if let Err(e) = parse_cpulist(&text) {
            prop_assert!(e.column >= 1 && e.column <= text.chars().count() + 1, "column {} of {:?}", e.column, text);
        }
    }

    #[test]
    fn cpulist_round_trips(ids in proptest::collection::btree_set(0usize..1024, 0..64)) {
        let set: CpuSet = ids.iter().map(|&i| schedlab_topology::CpuId::new(i)).collect();
        let text = set.to_string();
        prop_assert_eq!(parse_cpulist(&text).unwrap(), set);
    }

    #[test]
    fn lscpu_never_panics(text in "\\PC{0,200}") {
        let _ = from_lscpu(&text, Path::new("fuzz"));
    }

    #[test]
    fn lscpu_near_misses_never_panic(
        rows in proptest::collection::vec("[0-9]{1,4},[0-9x]{0,2},[0-9]?,[0-9]{0,1},,[0-9]?,[0-9]?,[0-9]?,[0-9:]{0,3}", 0..12),
        header in prop_oneof![Just("# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n"), Just("# CPU,Core,L2\n"), Just("")],
    ) {
        let text = format!("{header}{}", rows.join("\n"));
        if let Err(e) = from_lscpu(&text, Path::new("fuzz")) {
            prop_assert!(!e.message.is_empty());
        }
    }

    #[test]
    fn toml_never_panics(text in "\\PC{0,120}") {
        let _ = from_toml(&text, Path::new("fuzz.toml"));
    }

    #[test]
    fn toml_trees_never_panic(cores in proptest::collection::vec("[0-9,\\-]{0,6}", 0..6), split in 0usize..6) {
        let quoted: Vec<String> = cores.iter().map(|c| format!("{c:?}")).collect();
        let (a, b) = quoted.split_at(split.min(quoted.len()));
        let text = format!("[[node]]\n[[node.llc]]\ncores = [{}]\n[[node.llc]]\ncores = [{}]\n", a.join(","), b.join(","));
        let _ = from_toml(&text, Path::new("fuzz.toml"));
    }
}
