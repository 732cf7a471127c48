//! Does recording change what it records? Runs rt-tests' `hackbench`
//! (default `-g 4 -l 200`; arguments after `--` replace them) 10 times
//! with the kernel's sched events captured and 10 times without,
//! alternating, and prints each side's `Time:` median and their ratio.
//! The capture is the real runs' own (`schedlab_real::tracefs`): an
//! instance filtered to this process and, through `event-fork`, the
//! hackbench it starts. Needs root and `hackbench` (Debian: rt-tests).
//!
//! ```sh
//! cargo run --release -p schedlab-real --example capture_overhead
//! ```

use std::process::Command;

use schedlab_real::tracefs::Capture;

fn hackbench(args: &[String]) -> f64 {
    let out = Command::new("hackbench")
        .args(args)
        .output()
        .expect("hackbench (Debian: apt-get install rt-tests)");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("Time:"))
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Time: in hackbench's output: {text}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip_while(|a| a != "--").skip(1).collect();
    if args.is_empty() {
        args = ["-g", "4", "-l", "200"].map(String::from).to_vec();
    }
    let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut events, mut lost) = (0, 0);
    for _ in 0..10 {
        without.push(hackbench(&args));
        let cap = Capture::new(ncpus).expect("a tracefs capture (root)");
        cap.start(&[std::process::id() as i32])
            .expect("start the capture");
        with.push(hackbench(&args));
        cap.stop().expect("stop the capture");
        let (evs, l) = cap.read().expect("read the capture");
        events += evs.len();
        lost += l;
    }
    let (a, b) = (median(without.clone()), median(with.clone()));
    println!("hackbench {}: 10 alternating runs each", args.join(" "));
    println!("  without capture: median {a:.3} s  {without:?}");
    println!(
        "  with capture:    median {b:.3} s  {with:?}  ({} events a run)",
        events / 10
    );
    println!(
        "  with / without: {:.3}; pages that lost events: {lost}",
        b / a
    );
}
