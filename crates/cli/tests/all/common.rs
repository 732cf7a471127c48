//! What the CLI tests share.

use std::process::Command;

/// Runs the binary: (exit code, stdout, stderr).
pub fn schedlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(args)
        .output()
        .expect("run schedlab");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A file a test writes, in a directory of its own that goes when this is
/// dropped: tests leave nothing in the temp directory. Reads as the file's
/// path (`&f` is a `&str`).
pub struct Scratch {
    _dir: tempfile::TempDir,
    path: String,
}

impl std::ops::Deref for Scratch {
    type Target = str;
    fn deref(&self) -> &str {
        &self.path
    }
}

/// Writes `text` to a file `name` in a fresh temp directory.
#[allow(dead_code)]
pub fn scratch_file(name: &str, text: &str) -> Scratch {
    let dir = tempfile::tempdir().expect("a temp dir");
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write");
    let path = p.to_string_lossy().into_owned();
    Scratch { _dir: dir, path }
}

/// The first tracefs mount this machine has (where instances show).
#[allow(dead_code)]
pub fn tracefs_root() -> std::path::PathBuf {
    let mounts = std::fs::read_to_string("/proc/self/mounts").expect("/proc/self/mounts");
    mounts
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"tracefs")).then(|| std::path::PathBuf::from(f[1]))
        })
        .unwrap_or_else(|| "/sys/kernel/tracing".into())
}

/// This process runs as root (its effective uid is 0).
#[allow(dead_code)]
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}
