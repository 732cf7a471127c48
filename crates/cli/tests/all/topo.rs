//! `schedlab topo` end to end: the binary's output and exit codes.

use std::path::Path;

use crate::common::schedlab;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../topology/tests/fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn amd_2x8_json_has_16_cpus_in_2_llcs_of_4_cores() {
    let (code, out, err) = schedlab(&["topo", "--preset", "amd-2x8", "--json"]);
    assert_eq!(code, 0, "stderr: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("topo --json prints JSON");
    assert_eq!(v["cpus"], 16);
    let llcs = v["nodes"][0]["llcs"].as_array().unwrap();
    assert_eq!(llcs.len(), 2, "expected 2 LLCs: {out}");
    assert_eq!(llcs[0]["index"], 0);
    assert_eq!(llcs[1]["index"], 8, "an LLC's index is its first CPU");
    for (l, llc) in llcs.iter().enumerate() {
        let cores = llc["cores"].as_array().unwrap();
        assert_eq!(cores.len(), 4, "LLC {l}: expected 4 cores");
        for (k, core) in cores.iter().enumerate() {
            let base = 8 * l + 2 * k;
            assert_eq!(
                core,
                &serde_json::json!([base, base + 1]),
                "siblings (2k, 2k+1)"
            );
        }
    }
}

#[test]
fn the_live_sysfs_is_the_default_source() {
    if !Path::new("/sys/devices/system/cpu/online").exists() {
        return;
    }
    let (code, out, err) = schedlab(&["topo", "--json"]);
    assert_eq!(code, 0, "stderr: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let n = schedlab_topology::parse_cpulist(&online).unwrap().weight();
    assert_eq!(v["cpus"], n, "expected this machine's {n} online CPUs");
}

#[test]
fn list_names_every_preset() {
    let (code, out, _) = schedlab(&["topo", "--list"]);
    assert_eq!(code, 0);
    for p in schedlab_topology::PRESETS {
        assert!(out.contains(p.name), "--list lacks {}", p.name);
    }
}

#[test]
fn bad_input_exits_2_naming_file_and_line() {
    let f = fixture("broken.lscpu");
    let (code, _, err) = schedlab(&["topo", "--lscpu", &f]);
    assert_eq!(code, 2, "stderr: {err}");
    assert!(
        err.contains("broken.lscpu:4:7: expected a node id"),
        "stderr: {err}"
    );
    assert!(!err.contains("panicked"), "a panic: {err}");

    let (code, _, err) = schedlab(&["topo", "--sysfs", &fixture("vm-l3-two-nodes")]);
    assert_eq!(code, 2);
    assert!(err.contains("node 0 and node 1"), "stderr: {err}");

    let (code, _, err) = schedlab(&["topo", "--file", &fixture("broken.toml")]);
    assert_eq!(code, 2);
    assert!(err.contains("broken.toml:5:10"), "stderr: {err}");

    let (code, _, err) = schedlab(&["topo", "--preset", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown topology \"nope\""), "stderr: {err}");

    let (code, _, err) = schedlab(&["topo", "--file", "/no/such/file.toml"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("/no/such/file.toml: cannot read"),
        "stderr: {err}"
    );
}

/// `topo` takes `--topology` as every other command does (`--preset` is
/// the same flag), with the same grammar.
#[test]
fn topo_takes_topology_as_every_command_does() {
    let (code, out, err) = schedlab(&["topo", "--topology", "genoa-96"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("genoa-96: 192 CPUs"), "{out}");
    let (code, same, _) = schedlab(&["topo", "--preset", "genoa-96"]);
    assert_eq!((code, same), (0, out), "--preset is --topology");
}
