//! The workloads `validate` runs, a fixed list: the suite's rows that fit
//! this machine (under `linux`, on `sysfs`); perf's `sched pipe` pinned to
//! CPU 0 and unpinned, with perf itself beside it; rt-tests' hackbench in
//! pipe mode, in process and in thread mode at 1 to 4 groups, with
//! rt-tests' own `hackbench` and perf's `sched messaging` (hackbench's
//! descendant) given the same arguments; schbench at its defaults; the
//! rt-app files under `scenarios/rt-app/`, with rt-app itself as their
//! client.

use std::path::{Path, PathBuf};

use schedlab_scenarios::rows::ROWS;
use schedlab_scenarios::{catalog, Params, Scenario};
use schedlab_sim::Registry;

use crate::Error;

/// How a workload is built on this machine.
pub type Build = Box<dyn Fn(&Registry) -> Result<Scenario, Error>>;

/// A real tool that runs the same workload.
pub enum Client {
    /// rt-tests' hackbench, with these arguments.
    Hackbench(Vec<String>),
    /// `perf bench sched messaging`, with these arguments.
    PerfMessaging(Vec<String>),
    /// `perf bench sched pipe`, started on this CPU (`taskset -c`) or
    /// anywhere, with this many loops.
    PerfPipe { cpu: Option<usize>, loops: u64 },
    /// rt-app itself, on this file.
    RtApp(PathBuf),
}

/// One workload: a name and how to build it on this machine.
pub struct Workload {
    pub name: String,
    pub build: Build,
    /// The real tools run beside it, each its own figure.
    pub clients: Vec<Client>,
}

fn params(pairs: &[(&str, String)], reg: &Registry) -> Params {
    Params::new(pairs.iter().map(|(k, v)| (k.to_string(), v.clone()))).with_registry(reg.clone())
}

/// The fixed list (module doc), in its order.
pub fn workloads() -> Vec<Workload> {
    let mut w: Vec<Workload> = ROWS.iter().map(|r| catalog_entry(r.name, r.name)).collect();
    w.push(sched_pipe(Some(0)));
    w.push(sched_pipe(None));
    for mode in ["process", "thread"] {
        for groups in 1u64..=4 {
            w.push(hackbench(mode, groups));
        }
    }
    w.push(catalog_entry("schbench", "schbench"));
    for f in ["periodic", "producer_consumer", "barrier"] {
        w.push(rtapp_file(f));
    }
    w
}

/// Catalog entry `entry` on this machine under `linux`, at its defaults.
fn catalog_entry(name: &'static str, entry: &'static str) -> Workload {
    Workload {
        name: name.to_string(),
        build: Box::new(move |reg| {
            catalog::build(
                entry,
                Some("sysfs"),
                params(&[("policy", "linux".into())], reg),
            )
            .map_err(|e| Error::Input(e.0))
        }),
        clients: Vec::new(),
    }
}

/// perf's `sched pipe` of 20,000 loops, on `cpu` or anywhere, with perf
/// itself beside it.
fn sched_pipe(cpu: Option<usize>) -> Workload {
    let loops = 20_000u64;
    let at = cpu.map_or("none".to_string(), |c| c.to_string());
    Workload {
        name: match cpu {
            Some(c) => format!("sched_pipe.cpu{c}"),
            None => "sched_pipe.anywhere".into(),
        },
        build: Box::new(move |reg| {
            let p = params(
                &[
                    ("policy", "linux".into()),
                    ("loops", loops.to_string()),
                    ("cpu", at.clone()),
                ],
                reg,
            );
            catalog::build("sched_pipe", Some("sysfs"), p).map_err(|e| Error::Input(e.0))
        }),
        clients: vec![Client::PerfPipe { cpu, loops }],
    }
}

/// hackbench in pipe mode, `mode` (process or thread), `groups` groups of
/// 20 fds, 50 loops of 100-byte messages; rt-tests' `hackbench` and perf's
/// `sched messaging` with the same arguments beside it (perf spells
/// threads `-t`, and its fds and message size are hackbench's defaults,
/// fixed).
fn hackbench(mode: &'static str, groups: u64) -> Workload {
    let loops = 50u64;
    let mut client = vec!["-p".to_string()];
    if mode == "thread" {
        client.push("-T".into());
    }
    client.extend(
        [
            "-g",
            &groups.to_string(),
            "-f",
            "20",
            "-l",
            &loops.to_string(),
            "-s",
            "100",
        ]
        .map(String::from),
    );
    // perf's messaging has hackbench's 20 fds and 100-byte messages fixed.
    let mut perf = vec!["-p".to_string()];
    if mode == "thread" {
        perf.push("-t".into());
    }
    perf.extend(["-g", &groups.to_string(), "-l", &loops.to_string()].map(String::from));
    Workload {
        name: format!("hackbench.{mode}.g{groups}"),
        build: Box::new(move |reg| {
            let p = params(
                &[
                    ("policy", "linux".into()),
                    ("mode", mode.into()),
                    ("groups", groups.to_string()),
                    ("loops", loops.to_string()),
                ],
                reg,
            );
            catalog::build("hackbench", Some("sysfs"), p).map_err(|e| Error::Input(e.0))
        }),
        clients: vec![Client::Hackbench(client), Client::PerfMessaging(perf)],
    }
}

/// The rt-app file `scenarios/rt-app/{f}.json` (from the workspace, else
/// from the working directory), with rt-app itself beside it.
fn rtapp_file(f: &str) -> Workload {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../scenarios/rt-app/{f}.json"));
    let path = if path.exists() {
        path
    } else {
        PathBuf::from(format!("scenarios/rt-app/{f}.json"))
    };
    let file = path.clone();
    Workload {
        name: format!("rt-app/{f}.json"),
        build: Box::new(move |reg| {
            let topo = schedlab_scenarios::topology("sysfs").map_err(|e| Error::Input(e.0))?;
            schedlab_scenarios::rtapp::load(&path, topo, params(&[("policy", "linux".into())], reg))
                .map_err(|e| Error::Input(e.to_string()))
        }),
        clients: vec![Client::RtApp(file)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rt-tests' hackbench runs what the simulated one does: the same
    /// groups, loops and mode, in pipe mode.
    #[test]
    fn each_hackbench_runs_rt_tests_hackbench_with_the_same_arguments() {
        for w in workloads() {
            let Some(Client::Hackbench(args)) = w.clients.first() else {
                continue;
            };
            let groups = w.name.rsplit_once(".g").expect("hackbench.MODE.gN").1;
            let after = |flag: &str| {
                let i = args.iter().position(|a| a == flag);
                i.and_then(|i| args.get(i + 1)).cloned()
            };
            assert_eq!(after("-g").as_deref(), Some(groups), "{}: {args:?}", w.name);
            assert_eq!(after("-l").as_deref(), Some("50"), "{}: {args:?}", w.name);
            assert!(
                args.contains(&"-p".into()),
                "{}: pipe mode, {args:?}",
                w.name
            );
            assert_eq!(
                args.contains(&"-T".into()),
                w.name.contains(".thread."),
                "{}: thread mode exactly when the workload's is, {args:?}",
                w.name
            );
        }
    }

    #[test]
    fn the_names_are_unique() {
        let names: Vec<String> = workloads().into_iter().map(|w| w.name).collect();
        let set: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(set.len(), names.len(), "{names:?}");
    }
}
