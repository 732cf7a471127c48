//! The schedlab scheduler. `no_std` + `alloc`, no unsafe code.
//!
//! This crate is filled by the scheduler-core issue; for now it only fixes
//! the crate's boundary: it depends on `schedlab-topology` (without its `std`
//! readers) and on nothing else.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub use schedlab_topology as topology;
