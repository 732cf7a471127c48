//! The schedlab simulator: hosts `schedlab-sched` unchanged on a simulated
//! machine. Filled by the simulator issue; for now it only fixes the crate's
//! place in the layering (it depends on `sched` and `topology`, never the
//! other way).

#![forbid(unsafe_code)]

pub use schedlab_sched as sched;
