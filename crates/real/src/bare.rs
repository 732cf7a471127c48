//! Bare microbenchmarks: the system calls a benchmark nobody here wrote
//! makes, with nothing of the executor around them (no shared-memory
//! bookkeeping, no interpreter, no records), so that `calibrate` fits the
//! cost model to this machine rather than to the executor.
//!
//! | function | what it makes | as |
//! |---|---|---|
//! | [`pipe_round_trips`] | two processes, two pipes; one writes a 4-byte int and reads it back, the other reads and writes it back | `perf bench sched pipe`'s `worker_thread()` (tools/perf/bench/sched-pipe.c; processes, its default) |
//! | [`pipe_write_reads`] | one thread writes a 4-byte int into a pipe and reads it back: two system calls that wake nobody | the cost of a pipe's system calls alone, under perf's `sched pipe` |
//! | [`pipe_stream`] | a process on one CPU writes `bytes`-byte messages into a pipe of the kernel's default size that a process on another CPU reads, as a hackbench sender and receiver do | rt-tests' hackbench `sender()` and `receiver()` with one of each |
//! | [`futex_round_trips`] | two threads; `FUTEX_WAKE` and `FUTEX_WAIT` each way on two words, optionally with a spinner on the second thread's CPU | the executor's port hand-off without its bookkeeping |
//! | [`spawn_joins`] | `pthread_create` of a thread that spins 1 µs, then `pthread_join` | a C program's thread, glibc's defaults |
//! | [`sleep_lateness`] | `clock_nanosleep` of 1 ms; how late it returns | cyclictest's loop with `-r` (a relative timer), at nice 0 |
//!
//! Each returns one figure per round, ns. The timing side always runs on
//! a thread of its own, so the caller's CPU mask is left as it was.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::sys;

/// Where the two sides of a ping-pong run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pin {
    /// Both on this CPU (`taskset -c CPU perf bench sched pipe`).
    One(usize),
    /// The timing side on the first, the other on the second.
    Pair(usize, usize),
    /// Wherever the kernel puts them (`perf bench sched pipe`).
    Free,
}

impl Pin {
    fn sides(self) -> (Option<usize>, Option<usize>) {
        match self {
            Pin::One(c) => (Some(c), Some(c)),
            Pin::Pair(a, b) => (Some(a), Some(b)),
            Pin::Free => (None, None),
        }
    }
}

/// `f` on a thread of its own pinned to `cpu` (when given): the caller's
/// mask stays as it was.
fn on_thread<T: Send>(
    cpu: Option<usize>,
    f: impl FnOnce() -> io::Result<T> + Send,
) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(c) = cpu {
                sys::set_affinity(&[c])?;
            }
            f()
        })
        .join()
        .map_err(|_| io::Error::other("a benchmark thread panicked"))?
    })
}

/// The other side, forked process `pid`, after this side `ran`: killed
/// when this side failed, reaped either way; an error when either failed.
fn reap(pid: i32, ran: io::Result<()>, who: &str) -> io::Result<()> {
    if ran.is_err() {
        sys::kill(pid);
    }
    let status = sys::wait(pid)?;
    ran?;
    if status != 0 {
        return Err(io::Error::other(format!(
            "{who} ended with status {status}"
        )));
    }
    Ok(())
}

/// `rounds` round trips of perf's `sched pipe` (module doc): the time of
/// each, as the timing side sees it (perf prints their mean).
pub fn pipe_round_trips(pin: Pin, rounds: u64) -> io::Result<Vec<u64>> {
    // A pipe of the kernel's default size, as perf's `pipe()` makes.
    let (ping_r, ping_w) = sys::pipe(65536)?;
    let (pong_r, pong_w) = sys::pipe(65536)?;
    let (mine, other) = pin.sides();
    let laps = on_thread(mine, || {
        // The other side: a process of its own, as perf's default. It
        // makes system calls only (no allocation) and leaves by `_exit`.
        let child = sys::fork()?;
        let Some(pid) = child else {
            let ok = other.is_none_or(|c| sys::set_affinity(&[c]).is_ok());
            let mut m = [0u8; 4];
            for _ in 0..rounds {
                let read = sys::read_exact(ping_r, &mut m);
                if !ok || !matches!(read, Ok(true)) || sys::write_all(pong_w, &m).is_err() {
                    sys::exit_now(1);
                }
            }
            sys::exit_now(0)
        };
        let mut laps = Vec::with_capacity(rounds as usize);
        let mut m = [0u8; 4];
        let mut run = || -> io::Result<()> {
            for i in 0..rounds {
                m = (i as u32).to_ne_bytes();
                let t = sys::now();
                sys::write_all(ping_w, &m)?;
                if !sys::read_exact(pong_r, &mut m)? {
                    return Err(io::Error::other("the other side ended early"));
                }
                laps.push(sys::now() - t);
            }
            Ok(())
        };
        let ran = run();
        reap(pid, ran, "the other side of the pipe")?;
        Ok(laps)
    });
    for fd in [ping_r, ping_w, pong_r, pong_w] {
        sys::close(fd);
    }
    laps
}

/// `rounds` of a 4-byte write into a pipe and its read back by one thread
/// on `cpu` (module doc): the time of each pair of system calls.
pub fn pipe_write_reads(cpu: usize, rounds: u64) -> io::Result<Vec<u64>> {
    let (r, w) = sys::pipe(4096)?;
    let laps = on_thread(Some(cpu), || {
        let mut m = [0u8; 4];
        (0..rounds)
            .map(|_| {
                let t = sys::now();
                sys::write_all(w, &m)?;
                sys::read_exact(r, &mut m)?;
                Ok(sys::now() - t)
            })
            .collect()
    });
    sys::close(r);
    sys::close(w);
    laps
}

/// A stream of `batches` × `batch` messages of `bytes` (at most 4096)
/// from a process on `a` to a thread on `b` (module doc): the time of
/// each batch of reads, as the reader sees it.
pub fn pipe_stream(
    a: usize,
    b: usize,
    batches: u64,
    batch: u64,
    bytes: usize,
) -> io::Result<Vec<u64>> {
    let bytes = bytes.clamp(1, 4096);
    let (r, w) = sys::pipe(65536)?;
    let laps = on_thread(Some(b), || {
        // The writer: a process of its own on `a`, system calls only.
        let Some(pid) = sys::fork()? else {
            let buf = [0x5au8; 4096];
            if sys::set_affinity(&[a]).is_err() {
                sys::exit_now(1);
            }
            for _ in 0..batches * batch {
                if sys::write_all(w, &buf[..bytes]).is_err() {
                    sys::exit_now(1);
                }
            }
            sys::exit_now(0)
        };
        let mut buf = [0u8; 4096];
        let mut laps = Vec::with_capacity(batches as usize);
        let mut read = || -> io::Result<()> {
            for _ in 0..batches {
                let t = sys::now();
                for _ in 0..batch {
                    if !sys::read_exact(r, &mut buf[..bytes])? {
                        return Err(io::Error::other("the writer ended early"));
                    }
                }
                laps.push(sys::now() - t);
            }
            Ok(())
        };
        let ran = read();
        reap(pid, ran, "the writer")?;
        Ok(laps)
    });
    sys::close(r);
    sys::close(w);
    laps
}

/// `rounds` futex round trips between a thread on `a` and one on `b`
/// (module doc), with a thread spinning on `b` all along when `busy`.
pub fn futex_round_trips(a: usize, b: usize, rounds: u64, busy: bool) -> io::Result<Vec<u64>> {
    // Ping's word, pong's word, and the end of the run.
    let words = Arc::new([AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)]);
    let w = words.clone();
    let pong = std::thread::spawn(move || -> io::Result<()> {
        sys::set_affinity(&[b])?;
        for _ in 0..rounds {
            while w[0].load(Ordering::Acquire) == 0 {
                sys::futex_wait(&w[0], 0, None);
            }
            w[0].store(0, Ordering::Relaxed);
            w[1].store(1, Ordering::Release);
            sys::futex_wake(&w[1], 1);
        }
        Ok(())
    });
    let s = words.clone();
    let spinner = busy.then(|| {
        std::thread::spawn(move || {
            let _ = sys::set_affinity(&[b]);
            while s[2].load(Ordering::Relaxed) == 0 {
                std::hint::spin_loop();
            }
        })
    });
    let laps = on_thread(Some(a), || {
        let mut laps = Vec::with_capacity(rounds as usize);
        for _ in 0..rounds {
            let t = sys::now();
            words[0].store(1, Ordering::Release);
            sys::futex_wake(&words[0], 1);
            while words[1].load(Ordering::Acquire) == 0 {
                sys::futex_wait(&words[1], 0, None);
            }
            words[1].store(0, Ordering::Relaxed);
            laps.push(sys::now() - t);
        }
        Ok(laps)
    });
    words[2].store(1, Ordering::Relaxed);
    if let Some(h) = spinner {
        let _ = h.join();
    }
    pong.join()
        .map_err(|_| io::Error::other("the futex partner panicked"))??;
    laps
}

/// A thread's whole life: it spins 1 µs of `CLOCK_MONOTONIC`.
extern "C" fn spin_1us(_: *mut libc::c_void) -> *mut libc::c_void {
    let end = sys::now() + 1_000;
    while sys::now() < end {
        std::hint::spin_loop();
    }
    std::ptr::null_mut()
}

/// `rounds` thread creations and joins (module doc), on `cpu`.
pub fn spawn_joins(cpu: usize, rounds: u64) -> io::Result<Vec<u64>> {
    on_thread(Some(cpu), || {
        (0..rounds)
            .map(|_| {
                let t = sys::now();
                sys::pthread_run(spin_1us)?;
                Ok(sys::now() - t)
            })
            .collect()
    })
}

/// `rounds` sleeps of 1 ms on `cpu` (module doc): how late each returned.
pub fn sleep_lateness(cpu: usize, rounds: u64) -> io::Result<Vec<u64>> {
    on_thread(Some(cpu), || {
        Ok((0..rounds)
            .map(|_| {
                let t = sys::now();
                sys::sleep_ns(1_000_000);
                (sys::now() - t).saturating_sub(1_000_000)
            })
            .collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each benchmark makes the rounds it was asked for, and a round
    /// trip takes at least a system call each way.
    #[test]
    fn each_bench_times_every_round() {
        let p = pipe_round_trips(Pin::One(0), 50).expect("a pipe ping-pong");
        assert_eq!(p.len(), 50, "one lap per round trip");
        assert!(p.iter().all(|&l| l > 0), "laps: {p:?}");
        let st = pipe_stream(0, 0, 4, 100, 100).expect("a pipe stream");
        assert_eq!(st.len(), 4, "one lap per batch");
        let w = pipe_write_reads(0, 30).expect("a pipe's system calls");
        assert_eq!(w.len(), 30);
        let f = futex_round_trips(0, 0, 20, false).expect("a futex ping-pong");
        assert_eq!(f.len(), 20);
        let s = spawn_joins(0, 10).expect("spawns");
        assert!(
            s.iter().all(|&l| l >= 1_000),
            "a spawn waits for its 1 us: {s:?}"
        );
        let z = sleep_lateness(0, 3).expect("sleeps");
        assert_eq!(z.len(), 3);
    }

    /// The caller's mask is left alone: a pinned benchmark runs on a
    /// thread of its own.
    #[test]
    fn the_callers_mask_is_left_as_it_was() {
        let before = std::fs::read_to_string("/proc/thread-self/status")
            .unwrap()
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .map(str::to_string);
        pipe_round_trips(Pin::One(0), 5).unwrap();
        let after = std::fs::read_to_string("/proc/thread-self/status")
            .unwrap()
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .map(str::to_string);
        assert_eq!(before, after);
    }
}
