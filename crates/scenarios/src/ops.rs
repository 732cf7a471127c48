//! Short constructors of the program ops the built-ins are written in
//! (`run(2_000)` for `Op::Run(2_000)`, `call("p", 8)` for a call on port
//! `p`), so a scenario reads as its program.

use schedlab_sim::Op;

pub fn run(ns: u64) -> Op {
    Op::Run(ns)
}

pub fn call(port: &str, bytes: u64) -> Op {
    Op::Call {
        port: port.into(),
        bytes,
    }
}

pub fn serve(port: &str) -> Op {
    Op::Serve { port: port.into() }
}

pub fn reply(bytes: u64) -> Op {
    Op::Reply { bytes }
}

pub fn lap(metric: &str) -> Op {
    Op::Lap {
        metric: metric.into(),
    }
}

pub fn repeat(n: u64, body: Vec<Op>) -> Op {
    Op::Loop { n, body }
}

pub fn futex_wait(f: &str) -> Op {
    Op::FutexWait { futex: f.into() }
}

pub fn futex_wake(f: &str, n: u32) -> Op {
    Op::FutexWake { futex: f.into(), n }
}

pub fn lap_start(metric: &str) -> Op {
    Op::LapStart {
        metric: metric.into(),
    }
}
