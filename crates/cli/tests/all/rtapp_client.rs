//! rt-app itself beside an rt-app file in `validate`. It runs alone, by
//! name (`.ci/run` runs it after the workspace's tests): rt-app calibrates
//! its loop on a quiet CPU, and a test running beside it (tests of one
//! binary run in parallel) stretches that from seconds to minutes.

use crate::common::schedlab;

/// An rt-app file is run by rt-app itself beside ours when it is
/// installed, its log's columns compared; when it is not, the skip names
/// the package.
#[test]
#[ignore = "runs rt-app itself, which needs a quiet CPU: alone, by name; cargo test -p schedlab --test all rtapp_client:: -- --ignored"]
fn rt_app_itself_runs_beside_an_rt_app_file() {
    let (code, out, err) = schedlab(&[
        "validate",
        "--only",
        "rt-app/producer_consumer.json",
        "--reps",
        "1",
        "--seeds",
        "1",
    ]);
    assert_eq!(code, 0, "{err}");
    let installed = std::process::Command::new("rt-app")
        .arg("--help")
        .output()
        .is_ok_and(|o| o.status.success());
    if installed {
        for f in [
            "consumer.run (rt-app's log)",
            "producer.period (rt-app's log)",
        ] {
            assert!(out.contains(f), "{f}: {out}");
        }
    } else {
        assert!(
            out.contains("rt-app is not installed (Debian package rt-app)"),
            "{out}"
        );
    }
}
