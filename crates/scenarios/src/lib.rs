//! The scenario catalog (Rust builders) and scenario files (TOML). Filled by
//! the simulator issue; for now it only fixes the crate's place above `sim`.

#![forbid(unsafe_code)]

pub use schedlab_sim as sim;
