//! CPU topology for schedlab.
//!
//! * [`CpuId`] and [`CpuSet`]: ids below [`MAX_CPUS`] and a fixed bitset of
//!   them, with Linux's cpulist text form both ways.
//! * [`Topology`]: for every CPU its SMT core, its LLC and its NUMA node,
//!   validated once and shared read-only by every CPU of the scheduler.
//! * [`presets`]: the named machines the suite runs on.
//! * `read` (feature `std`): readers for a Linux sysfs tree, the text of
//!   `lscpu -p`, and a TOML file, whose errors name file, line and column.
//!
//! The crate is `no_std` + `alloc` without the `std` feature, so the
//! scheduler core can use it in a kernel.

#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
// Errors carry the CPU sets they are about (128 bytes each). They are built
// once, when a machine is loaded, never on a scheduling path.
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

extern crate alloc;

pub mod cpuset;
pub mod presets;
#[cfg(feature = "std")]
pub mod read;
pub mod topology;

pub use cpuset::{parse_cpulist, CpuId, CpuSet, CpulistError, MAX_CPUS};
pub use presets::{preset, Preset, DEFAULT_PRESET, PRESETS};
pub use topology::{
    CpuPlace, Level, Llc, LlcId, Node, Shape, Siblings, Topology, TopologyError, DEFAULT_HZ,
    DEFAULT_LLC_BYTES,
};
