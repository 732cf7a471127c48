//! The real executor's own cost per op, on this machine (noisy; figures
//! in docs/REAL.md): a lap (two `CLOCK_MONOTONIC` reads), a futex round
//! trip between two threads with nothing else (`FUTEX_WAKE` and
//! `FUTEX_WAIT` each way, as a port's call and reply make), and a `run`
//! of 1 µs (spinning on `CLOCK_THREAD_CPUTIME_ID`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use schedlab_real::{exec, sys};

fn main() {
    divan::main();
}

#[divan::bench]
fn lap() -> u64 {
    let a = sys::now();
    divan::black_box(sys::now()) - a
}

#[divan::bench]
fn run_1us() {
    let stop = AtomicU32::new(0);
    exec::spin_cpu(1_000, &stop);
}

/// One round trip: ping's word to 1 and a wake, pong answers on its word.
#[divan::bench(sample_count = 20, sample_size = 200)]
fn futex_round_trip(b: divan::Bencher) {
    let words = Arc::new([AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)]);
    let w = words.clone();
    let pong = std::thread::spawn(move || loop {
        while w[0].load(Ordering::Acquire) == 0 {
            sys::futex_wait(&w[0], 0, None);
        }
        w[0].store(0, Ordering::Relaxed);
        if w[2].load(Ordering::Acquire) == 1 {
            return;
        }
        w[1].store(1, Ordering::Release);
        sys::futex_wake(&w[1], 1);
    });
    b.bench(|| {
        words[0].store(1, Ordering::Release);
        sys::futex_wake(&words[0], 1);
        while words[1].load(Ordering::Acquire) == 0 {
            sys::futex_wait(&words[1], 0, None);
        }
        words[1].store(0, Ordering::Relaxed);
    });
    words[2].store(1, Ordering::Release);
    words[0].store(1, Ordering::Release);
    sys::futex_wake(&words[0], 1);
    pong.join().unwrap();
}
