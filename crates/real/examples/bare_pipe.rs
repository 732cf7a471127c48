//! perf's `sched pipe`, bare (`schedlab_real::bare`), from a small
//! process: `cargo run --release -p schedlab-real --example bare_pipe --
//! [LOOPS] [CPU|none]`; prints the mean round trip, µs, as perf does.

use schedlab_real::bare::{pipe_round_trips, Pin};

fn main() {
    let mut args = std::env::args().skip(1);
    let loops: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let pin = match args.next().as_deref() {
        None | Some("none") => Pin::Free,
        Some(c) => Pin::One(c.parse().expect("a CPU number or none")),
    };
    let t = std::time::Instant::now();
    let laps = pipe_round_trips(pin, loops).expect("a pipe ping-pong");
    let total = t.elapsed().as_nanos() as f64;
    let mean = laps.iter().sum::<u64>() as f64 / laps.len() as f64;
    println!(
        "{:.3} usecs/op (mean of {loops} round trips; {:.3} the whole run over its loops, as perf)",
        mean / 1e3,
        total / loops as f64 / 1e3
    );
}
