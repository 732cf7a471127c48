//! Work spread over the machine's cores: one queue of independent items
//! (a scenario on one seed), taken by `jobs` threads in turn. Each item's
//! result depends on the item alone, and results come back in item order,
//! so the output never depends on `jobs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Runs `f` on every item over `jobs` threads; results in item order.
/// `done` is called once per finished item (from the worker threads).
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync,
    done: impl Fn() + Sync,
) -> Vec<R> {
    let jobs = jobs.clamp(1, items.len().max(1));
    let next = AtomicUsize::new(0);
    let out: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                *out[i].lock().expect("no panic holds it") = Some(r);
                done();
            });
        }
    });
    out.into_iter()
        .map(|m| {
            m.into_inner()
                .expect("not poisoned")
                .expect("every item ran")
        })
        .collect()
}

/// The default number of worker threads: every core.
pub fn all_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
