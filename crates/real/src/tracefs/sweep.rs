//! What runs killed outright left in tracefs, found by the pid in its
//! name and removed (the parent module's doc says why).

use std::path::{Path, PathBuf};

use crate::sys;

/// The pid a leftover's name carries: `schedlab-PID-N` (an instance) or
/// `schedlab-tracefs-PID` (a mount's directory).
fn owner(name: &str) -> Option<i32> {
    if let Some(pid) = name.strip_prefix("schedlab-tracefs-") {
        return pid.parse().ok();
    }
    let (pid, n) = name.strip_prefix("schedlab-")?.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
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
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    for l in mounts.lines() {
        let mut f = l.split_whitespace();
        let (Some(_), Some(dir), Some("tracefs")) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let dir = Path::new(dir);
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let dead = name.starts_with("schedlab-tracefs-") && owner(name).is_some_and(|p| !alive(p));
        if dead && sys::umount(dir).is_ok() {
            let _ = std::fs::remove_dir(dir);
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
        assert_eq!(owner("schedlab-tracefs-99"), Some(99), "a mount");
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
