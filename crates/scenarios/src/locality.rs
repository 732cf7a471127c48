//! The scenarios of LLC warmth (the simulator's `warmth` module): where
//! co-locating a process's threads pays, and where packing more hot data
//! into one LLC than it holds costs.
//!
//! * `shared_workers`: one dispatcher wakes a process of `workers` workers
//!   for each of `items` items; each worker computes `work_ns` on the
//!   process's `shared_bytes` of shared data (which its threads write, so
//!   a copy in one LLC goes cold in the others), then meets the others at
//!   a barrier. `placement`: `packed` (every worker allowed only LLC 0),
//!   `spread` (worker i allowed only LLC i mod 2) or `free` (anywhere: the
//!   policy decides). Figures: `item_us` (p50 of the dispatcher's item),
//!   `llc_refill_mib` and `cold_starts` of all threads.
//! * `llc_overflow`: two processes of `threads` threads, each with
//!   `shared_bytes` of shared data, whose threads compute `work_ns` and
//!   sleep `sleep_ns`, `rounds` times. `placement`: `packed` (all in
//!   LLC 0), `spread` (process a in LLC 0, b in LLC 1) or `free`. When the
//!   two processes' data exceeds an LLC, packed threads evict each other's.
//!   Figures: `round_us` (p50 of a round), `llc_refill_mib`, `cold_starts`.

use schedlab_sim::sched::TaskSpec;
use schedlab_sim::{Figure, Op};
use schedlab_topology::CpuSet;

use crate::catalog::{futex_wait, futex_wake, lap, repeat, run};
use crate::{Builder, Params, ScenarioError};

/// Where the threads may run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placement {
    Packed,
    Spread,
    Free,
}

fn placement(p: &mut Params) -> Result<Placement, ScenarioError> {
    let v: String = p.get("placement", "packed".to_string())?;
    match v.as_str() {
        "packed" => Ok(Placement::Packed),
        "spread" => Ok(Placement::Spread),
        "free" => Ok(Placement::Free),
        v => Err(ScenarioError(format!(
            "placement {v:?}: expected packed, spread or free"
        ))),
    }
}

/// The CPUs of LLC `k` (mod the machine's LLCs), and its first CPU.
fn llc(b: &Builder, k: usize) -> (CpuSet, usize) {
    let t = b.topology();
    let l = &t.llcs()[k % t.llcs().len()];
    (l.cpus, l.cpus.first().map_or(0, |c| c.index()))
}

fn two_llcs(b: &Builder, name: &str, pl: Placement) -> Result<(), ScenarioError> {
    if pl == Placement::Spread && b.topology().llcs().len() < 2 {
        return Err(ScenarioError(format!(
            "{name} with placement = spread needs two LLCs; {} has one",
            b.topology().name()
        )));
    }
    Ok(())
}

/// Where thread `i` of group `g` may run and starts.
fn mask(b: &Builder, pl: Placement, g: usize, i: u64) -> (Option<CpuSet>, usize, CpuSet) {
    let all = *b.topology().cpus();
    match pl {
        Placement::Packed => {
            let (set, first) = llc(b, 0);
            (Some(set), first, set)
        }
        Placement::Spread => {
            let (set, first) = llc(b, g);
            (Some(set), first, set)
        }
        Placement::Free => (None, (i as usize) % all.weight().max(1), all),
    }
}

fn refill_figures(b: &mut Builder, tasks: Vec<String>) {
    b.figure(
        "llc_refill_mib",
        Figure::LlcRefillMib {
            tasks: tasks.clone(),
        },
    );
    b.figure("cold_starts", Figure::ColdStarts { tasks });
}

pub(crate) fn shared_workers(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let workers: u64 = p.get("workers", 8)?;
    let shared: u64 = p.get("shared_bytes", 4 << 20)?;
    let items: u64 = p.get("items", 100)?;
    let work: u64 = p.get("work_ns", 200_000)?;
    let pl = placement(p)?;
    two_llcs(b, "shared_workers", pl)?;
    if workers == 0 || workers > 1000 {
        return Err(ScenarioError(format!(
            "shared_workers: workers = {workers}: expected 1 to 1000"
        )));
    }
    let n = u32::try_from(workers + 1).expect("bounded above");
    b.process("app", shared);
    let worker = vec![repeat(
        items,
        vec![
            futex_wait("go"),
            run(work),
            Op::Barrier {
                barrier: "done".into(),
                n,
            },
        ],
    )];
    for i in 0..workers {
        let (m, first, start) = mask(b, pl, (i % 2) as usize, i);
        b.task(
            &format!("worker{i}"),
            first,
            m,
            TaskSpec::fair(0),
            worker.clone(),
        )
        .start_in(start)
        .in_process("app");
    }
    let dispatcher = vec![repeat(
        items,
        vec![
            Op::LapStart {
                metric: "item".into(),
            },
            futex_wake("go", n - 1),
            Op::Barrier {
                barrier: "done".into(),
                n,
            },
            lap("item"),
        ],
    )];
    let (_, first) = llc(b, 0);
    b.task("dispatcher", first, None, TaskSpec::fair(0), dispatcher);
    b.run_ns(10_000_000_000);
    b.figure(
        "item_us",
        Figure::LapP50Us {
            metric: "item".into(),
        },
    );
    refill_figures(b, vec![]);
    Ok(())
}

pub(crate) fn llc_overflow(b: &mut Builder, p: &mut Params) -> Result<(), ScenarioError> {
    let threads: u64 = p.get("threads", 2)?;
    let shared: u64 = p.get("shared_bytes", 12 << 20)?;
    let rounds: u64 = p.get("rounds", 100)?;
    let work: u64 = p.get("work_ns", 200_000)?;
    let sleep: u64 = p.get("sleep_ns", 100_000)?;
    let pl = placement(p)?;
    two_llcs(b, "llc_overflow", pl)?;
    if threads == 0 || threads > 500 {
        return Err(ScenarioError(format!(
            "llc_overflow: threads = {threads}: expected 1 to 500"
        )));
    }
    let body = vec![repeat(
        rounds,
        vec![
            Op::LapStart {
                metric: "round".into(),
            },
            run(work),
            Op::Sleep(sleep),
            lap("round"),
        ],
    )];
    for (g, proc) in ["a", "b"].iter().enumerate() {
        b.process(proc, shared);
        for i in 0..threads {
            let (m, first, start) = mask(b, pl, g, g as u64 * threads + i);
            b.task(
                &format!("{proc}{i}"),
                first,
                m,
                TaskSpec::fair(0),
                body.clone(),
            )
            .start_in(start)
            .in_process(proc);
        }
    }
    b.run_ns(10_000_000_000);
    b.figure(
        "round_us",
        Figure::LapP50Us {
            metric: "round".into(),
        },
    );
    refill_figures(b, vec![]);
    Ok(())
}
