//! `schedlab sweep --shard I/N --out FILE` and `schedlab merge`: a sweep
//! split over shards and joined gives the unsharded table, text and JSON.

use crate::common::schedlab;

/// A directory of the test's own, gone when dropped.
fn dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temp dir")
}

const SWEEP: [&str; 7] = [
    "sweep",
    "server_two_llcs",
    "--param",
    "waker_run=2,4,8",
    "--seeds",
    "5",
    "--jobs=2",
];

fn shards(d: &std::path::Path, n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| {
            let out = d.join(format!("s{i}of{n}.json"));
            let shard = format!("{i}/{n}");
            let mut args = SWEEP.to_vec();
            args.extend(["--shard", &shard, "--out", out.to_str().unwrap()]);
            let (code, _, err) = schedlab(&args);
            assert_eq!(code, 0, "{err}");
            out.to_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn merged_shards_print_the_unsharded_table() {
    let d_tmp = dir();
    let d = d_tmp.path();
    let (code, whole, err) = schedlab(&SWEEP);
    assert_eq!(code, 0, "{err}");
    let (_, whole_json, _) = schedlab(&[&SWEEP[..], &["--json"]].concat());
    for n in [2, 4] {
        let files = shards(d, n);
        let mut args = vec!["merge"];
        args.extend(files.iter().map(String::as_str));
        let (code, merged, err) = schedlab(&args);
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            merged, whole,
            "{n} shards merged must print the unsharded table"
        );
        args.push("--json");
        let (_, merged_json, _) = schedlab(&args);
        assert_eq!(merged_json, whole_json, "{n} shards merged: the same JSON");
    }
}

#[test]
fn a_missing_or_foreign_shard_is_refused() {
    let d_tmp = dir();
    let d = d_tmp.path();
    let files = shards(d, 3);
    let (code, _, err) = schedlab(&["merge", &files[0], &files[2]]);
    assert_eq!(code, 2);
    assert!(err.contains("missing shards: 2/3"), "{err}");
    let (code, _, err) = schedlab(&["merge", &files[0], &files[0], &files[1], &files[2]]);
    assert_eq!(code, 2);
    assert!(err.contains("given twice"), "{err}");
    // A shard of another sweep (other seeds).
    let other = d.join("other.json");
    let (code, _, err) = schedlab(&[
        "sweep",
        "server_two_llcs",
        "--param",
        "waker_run=2,4,8",
        "--seeds",
        "4",
        "--shard",
        "2/3",
        "--out",
        other.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = schedlab(&["merge", &files[0], other.to_str().unwrap(), &files[2]]);
    assert_eq!(code, 2);
    assert!(err.contains("a shard of another sweep"), "{err}");
    // Not a shard file at all: file, line and column.
    let junk = d.join("junk.json");
    std::fs::write(&junk, "{\n  \"format\": 7\n}").unwrap();
    let (code, _, err) = schedlab(&["merge", junk.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("junk.json:2:"), "names the line: {err}");
    let (code, _, err) = schedlab(&[&SWEEP[..], &["--shard", "4/3", "--out", "x.json"]].concat());
    assert_eq!(code, 2);
    assert!(err.contains("expected I/N with 1 <= I <= N"), "{err}");
}
