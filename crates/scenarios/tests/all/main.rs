//! The crate's integration tests, one module per former test file, in one
//! binary: one link instead of one per file (the workspace's tests were
//! 37 binaries, most of a fresh `cargo test --workspace` spent linking
//! them). Run one module with `cargo test -p PACKAGE --test all MODULE::`.

mod balance;
mod core_sched;
mod field;
mod loader_fuzz;
mod pinned;
mod precedence;
mod programs;
mod random_sim;
mod rtapp;
mod scenario_fuzz;
mod seed;
mod warmth;
