//! The readers on the fixture trees: the right groups from real shapes, and
//! errors that name file and line from broken ones.

use std::path::{Path, PathBuf};

use schedlab_topology::read::{from_lscpu_file, from_sysfs, from_toml, from_toml_file};
use schedlab_topology::{parse_cpulist, preset, CpuId, CpuSet, Level, Topology};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn set(text: &str) -> CpuSet {
    parse_cpulist(text).unwrap()
}

fn llc_sets(t: &Topology) -> Vec<CpuSet> {
    t.llcs().iter().map(|l| l.cpus).collect()
}

#[test]
fn ryzen_two_ccx_sysfs_has_n_and_n_plus_8_siblings() {
    let t = from_sysfs(&fixture("ryzen-2ccx")).unwrap();
    assert_eq!(t.num_cpus(), 16);
    assert_eq!(
        llc_sets(&t),
        [set("0-3,8-11"), set("4-7,12-15")],
        "expected the two CCXs as LLCs"
    );
    for c in 0..8 {
        assert_eq!(
            t.core_cpus(CpuId::new(c)),
            &CpuSet::from_iter([CpuId::new(c), CpuId::new(c + 8)]),
            "cpu{c}'s siblings"
        );
    }
    assert_eq!(t.level_between(CpuId::new(3), CpuId::new(11)), Level::Smt);
    assert_eq!(t.level_between(CpuId::new(3), CpuId::new(4)), Level::Node);
    assert_eq!(
        t.llcs()[1].id.index(),
        4,
        "an LLC is named by its first CPU"
    );
    for l in t.llcs() {
        assert_eq!(l.bytes, 16 << 20, "each CCX's L3 reads 16384K from sysfs");
    }
}

#[test]
fn the_lscpu_form_of_the_ryzen_matches_its_sysfs_form() {
    let a = from_sysfs(&fixture("ryzen-2ccx")).unwrap();
    let b = from_lscpu_file(&fixture("ryzen-2ccx.lscpu")).unwrap();
    assert_eq!(a.cores(), b.cores());
    assert_eq!(llc_sets(&a), llc_sets(&b));
    assert!(
        b.llcs()
            .iter()
            .all(|l| l.bytes == schedlab_topology::DEFAULT_LLC_BYTES),
        "lscpu -p gives no sizes: the default"
    );
}

#[test]
fn a_toml_machine_takes_its_llc_size() {
    let t = from_toml(
        "llc_bytes = 8388608\n[shape]\nnodes = 1\nllcs_per_node = 2\ncores_per_llc = 2\nthreads_per_core = 1\n",
        Path::new("m.toml"),
    )
    .unwrap();
    assert!(t.llcs().iter().all(|l| l.bytes == 8 << 20));
    let e = from_toml(
        "llc_bytes = 0\n[shape]\nnodes = 1\nllcs_per_node = 1\ncores_per_llc = 1\nthreads_per_core = 1\n",
        Path::new("m.toml"),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "m.toml:1:13: expected llc_bytes of 1 or more, found 0"
    );
}

#[test]
fn sparse_l3_ids_in_lscpu_group_by_id() {
    let t = from_lscpu_file(&fixture("epyc-sparse-l3.lscpu")).unwrap();
    assert_eq!(
        llc_sets(&t),
        [
            set("0-1,8-9"),
            set("2-3,10-11"),
            set("4-5,12-13"),
            set("6-7,14-15")
        ]
    );
    assert_eq!(t.core_cpus(CpuId::new(2)), &set("2,10"));
}

#[test]
fn an_arm_part_with_no_l3_uses_its_highest_cache() {
    let t = from_sysfs(&fixture("arm-no-l3")).unwrap();
    assert_eq!(t.num_cpus(), 8);
    assert_eq!(t.cores().len(), 8, "no SMT: one CPU per core");
    assert_eq!(
        llc_sets(&t),
        [set("0-1"), set("2-3"), set("4-5"), set("6-7")],
        "the shared L2 is the LLC"
    );
    assert_eq!(t.nodes().len(), 2);
    assert_eq!(t.nodes()[1].cpus, set("4-7"));
}

#[test]
fn a_vm_whose_l3_spans_two_nodes_is_refused_naming_both() {
    let e = from_sysfs(&fixture("vm-l3-two-nodes")).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("node 0") && msg.contains("node 1"),
        "expected both nodes named, got: {msg}"
    );
    assert!(
        e.file.ends_with("node/node1/cpulist"),
        "expected the error to name node1's cpulist, got {}",
        e.file.display()
    );
    assert!(
        msg.contains("index3/shared_cpu_list"),
        "expected the L3's file named, got: {msg}"
    );
}

#[test]
fn this_machine_shape() {
    let t = from_sysfs(&fixture("this-machine")).unwrap();
    assert_eq!((t.num_cpus(), t.cores().len(), t.llcs().len()), (2, 2, 1));
    let l = from_lscpu_file(&fixture("this-machine.lscpu")).unwrap();
    assert_eq!(t.cores(), l.cores());
}

#[test]
fn a_broken_cpulist_names_file_line_and_column() {
    let e = from_sysfs(&fixture("broken-cpulist")).unwrap_err();
    assert!(
        e.file.ends_with("cpu2/cache/index0/shared_cpu_list"),
        "expected cpu2's shared_cpu_list, got {}",
        e.file.display()
    );
    assert_eq!((e.line, e.column), (Some(1), Some(5)), "{e}");
    assert!(
        e.to_string().contains("expected a CPU number, found 'x'"),
        "{e}"
    );
}

#[test]
fn a_broken_lscpu_names_line_and_column() {
    let e = from_lscpu_file(&fixture("broken.lscpu")).unwrap_err();
    assert_eq!((e.line, e.column), (Some(4), Some(7)), "{e}");
    assert!(
        e.to_string()
            .contains("broken.lscpu:4:7: expected a node id"),
        "{e}"
    );
}

#[test]
fn toml_tree_equals_the_preset_and_a_broken_one_points_at_the_core() {
    let t = from_toml_file(&fixture("two-llc.toml")).unwrap();
    let p = preset("amd-2x8").unwrap();
    assert_eq!((t.cores(), llc_sets(&t)), (p.cores(), llc_sets(&p)));
    let e = from_toml_file(&fixture("broken.toml")).unwrap_err();
    assert_eq!((e.line, e.column), (Some(5), Some(10)), "{e}");
    assert!(e.message.contains("cpu3 listed in two"), "{e}");
}

#[test]
fn a_missing_tree_is_an_error_not_a_panic() {
    let e = from_sysfs(&fixture("no-such-tree")).unwrap_err();
    assert!(e.message.contains("expected a sysfs tree"), "{e}");
}

/// The machine this runs on, when it has a sysfs: whatever its shape, it
/// must read, and hold every CPU `online` names.
#[test]
fn the_live_sysfs_reads_when_present() {
    let online = Path::new("/sys/devices/system/cpu/online");
    let Ok(text) = std::fs::read_to_string(online) else {
        eprintln!("no /sys here; nothing to check");
        return;
    };
    let t = from_sysfs(Path::new("/")).unwrap_or_else(|e| panic!("live sysfs did not read: {e}"));
    assert_eq!(*t.cpus(), parse_cpulist(&text).unwrap());
}

/// A scratch root of a kernel's files, removed when dropped.
struct Root(PathBuf);

impl Root {
    fn new(tag: &str) -> Root {
        let p = std::env::temp_dir().join(format!("schedlab-hz-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join("proc/sys/kernel")).unwrap();
        std::fs::create_dir_all(p.join("boot")).unwrap();
        Root(p)
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_kernel_s_hz_is_read_from_its_boot_config_else_from_proc_config_gz() {
    use schedlab_topology::read::kernel_hz;
    let r = Root::new("boot");
    std::fs::write(r.0.join("proc/sys/kernel/osrelease"), "6.18.44-test\n").unwrap();
    std::fs::write(
        r.0.join("boot/config-6.18.44-test"),
        "# CONFIG_HZ_1000 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n",
    )
    .unwrap();
    assert_eq!(
        kernel_hz(&r.0).map(|(hz, _)| hz),
        Some(250),
        "CONFIG_HZ=250 in boot/config-RELEASE"
    );
    let g = Root::new("gz");
    let gz = std::fs::File::create(g.0.join("proc/config.gz")).unwrap();
    let mut enc = flate2::write::GzEncoder::new(gz, flate2::Compression::default());
    std::io::Write::write_all(&mut enc, b"CONFIG_HZ_300=y\nCONFIG_HZ=300\n").unwrap();
    enc.finish().unwrap();
    let (hz, from) = kernel_hz(&g.0).expect("read from proc/config.gz");
    assert_eq!(hz, 300);
    assert!(from.ends_with("proc/config.gz"), "{}", from.display());
    assert_eq!(
        kernel_hz(&fixture("ryzen-2ccx")),
        None,
        "a tree of sysfs alone says nothing"
    );
    assert_eq!(
        from_sysfs(&fixture("ryzen-2ccx")).unwrap().hz(),
        schedlab_topology::DEFAULT_HZ,
        "nor does its machine: the default tick"
    );
}

#[test]
fn a_toml_machine_may_name_its_kernel_s_hz() {
    let f = Path::new("hz.toml");
    let t = from_toml("hz = 250\n[shape]\nnodes = 1\nllcs_per_node = 1\ncores_per_llc = 2\nthreads_per_core = 1\n", f)
        .unwrap();
    assert_eq!(t.hz(), 250);
    let e = from_toml(
        "hz = 0\n[shape]\nnodes = 1\nllcs_per_node = 1\ncores_per_llc = 2\nthreads_per_core = 1\n",
        f,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("hz.toml:1:6: expected hz (CONFIG_HZ) from 1 to 10000, found 0"),
        "{e}"
    );
    assert_eq!(
        preset("amd-2x8").unwrap().hz(),
        1000,
        "the presets: x86_64_defconfig's HZ_1000"
    );
}
