//! `calibrate` and `validate` end to end, quickly: they run and print
//! their tables (no verdict asserted: that is a measurement, not a claim),
//! and a cost file they cannot use is refused with its place.

use crate::common::schedlab;

#[test]
fn calibrate_then_validate_one_workload() {
    let d_tmp = tempfile::tempdir().expect("a temp dir");
    let d = d_tmp.path().to_path_buf();
    let costs = d.join("costs.toml");
    let (code, out, err) = schedlab(&[
        "calibrate",
        "--rounds",
        "30",
        "--out",
        costs.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("context_switch_ns"),
        "names the fields it set: {out}"
    );
    let text = std::fs::read_to_string(&costs).unwrap();
    assert!(
        text.contains("[measured]") && text.contains("[cost]") && text.contains("[[measurement]]"),
        "{text}"
    );
    let svg = d.join("v.svg");
    let (code, out, err) = schedlab(&[
        "validate",
        "--costs",
        costs.to_str().unwrap(),
        "--only",
        "hackbench.thread.g1",
        "--reps",
        "1",
        "--seeds",
        "1",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("hackbench.thread.g1") && out.contains("figures within tolerance"),
        "{out}"
    );
    assert!(
        std::fs::read_to_string(&svg).unwrap().contains("<svg"),
        "the plot is written"
    );
    // The same file with a field taken out: refused where it should be.
    let broken = d.join("broken.toml");
    std::fs::write(
        &broken,
        text.lines()
            .filter(|l| !l.starts_with("ipi_ns"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let (code, _, err) = schedlab(&[
        "run",
        "reqrep",
        "--topology",
        "sysfs",
        "--costs",
        broken.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "a cost file missing a field is bad input: {err}");
    assert!(
        err.contains("broken.toml:") && err.contains("ipi_ns"),
        "{err}"
    );
    // On a machine of another shape, refused unless told.
    let (code, _, err) = schedlab(&[
        "run",
        "reqrep",
        "--topology",
        "amd-2x8",
        "--costs",
        costs.to_str().unwrap(),
    ]);
    if code == 2 {
        assert!(err.contains("--costs-any-shape"), "{err}");
        let (code, _, err) = schedlab(&[
            "run",
            "reqrep",
            "--topology",
            "amd-2x8",
            "--costs",
            costs.to_str().unwrap(),
            "--costs-any-shape",
        ]);
        assert_eq!(code, 0, "told to: {err}");
    }
}
