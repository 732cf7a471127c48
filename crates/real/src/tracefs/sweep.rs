//! What runs killed outright left in tracefs, found by the pid in its
//! name and removed (the parent module's doc says why).

use std::path::{Path, PathBuf};

use crate::sys;

/// The pid of the run whose instance `name` is (`schedlab-PID-N`).
fn owner(name: &str) -> Option<i32> {
    let (pid, n) = name.strip_prefix("schedlab-")?.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

/// Where tracefs is mounted now, from `/proc/self/mounts`.
pub(super) fn tracefs_mounts() -> Vec<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_src, dir, ty) = (f.next()?, f.next()?, f.next()?);
            (ty == "tracefs").then(|| PathBuf::from(dir))
        })
        .collect()
}

/// The pid of the run whose own mount `dir` is (`schedlab-tracefs-PID`).
pub(super) fn run_mount_owner(dir: &Path) -> Option<i32> {
    let name = dir.file_name()?.to_str()?;
    name.strip_prefix("schedlab-tracefs-")?.parse().ok()
}

/// Whether process `pid` is there (a zombie counts: its pid is not free).
fn alive(pid: i32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes an instance: tracing off first, then the directory (retried: a
/// reader closing late keeps it busy).
pub(super) fn remove_instance(dir: &Path) -> bool {
    let _ = std::fs::write(dir.join("tracing_on"), "0");
    for _ in 0..50 {
        if std::fs::remove_dir(dir).is_ok() {
            return true;
        }
        sys::sleep_ns(10_000_000);
    }
    false
}

/// Removes what runs that are gone left in tracefs (mounted at `root`):
/// their instances, then their own mounts (every tracefs mount shows the
/// same instances, so they go through `root`). What was removed, in one
/// line for the run to print, or `None` when nothing was left.
pub fn sweep_stale(root: &Path) -> Option<String> {
    let mut gone: Vec<String> = Vec::new();
    if let Ok(dir) = std::fs::read_dir(root.join("instances")) {
        let mut stale: Vec<PathBuf> = dir
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                owner(name).is_some_and(|pid| !alive(pid))
            })
            .collect();
        stale.sort();
        for p in stale {
            if remove_instance(&p) {
                gone.push(format!("instance {}", p.display()));
            }
        }
    }
    for dir in tracefs_mounts() {
        let dead = run_mount_owner(&dir).is_some_and(|p| !alive(p));
        if dead && sys::umount(&dir).is_ok() {
            let _ = std::fs::remove_dir(&dir);
            gone.push(format!("mount {}", dir.display()));
        }
    }
    (!gone.is_empty()).then(|| {
        format!(
            "tracefs: removed what runs that are gone left: {}",
            gone.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leftovers_name_gives_the_pid_of_the_run_that_made_it() {
        assert_eq!(owner("schedlab-4242-0"), Some(4242), "an instance");
        assert_eq!(owner("schedlab-4242-17"), Some(4242));
        assert_eq!(
            run_mount_owner(Path::new("/tmp/schedlab-tracefs-99")),
            Some(99),
            "a mount"
        );
        assert_eq!(run_mount_owner(Path::new("/sys/kernel/tracing")), None);
        for other in [
            "schedlab-4242",
            "schedlab-x-0",
            "schedlab-1-x",
            "trace-cmd",
            "foo-1-2",
        ] {
            assert_eq!(owner(other), None, "{other:?} is not ours");
        }
        assert!(alive(std::process::id() as i32), "this process is alive");
    }
}
