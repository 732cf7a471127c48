//! The crate's integration tests, one module per former test file, in one
//! binary: one link instead of one per file (the workspace's tests were
//! 37 binaries, most of a fresh `cargo test --workspace` spent linking
//! them). Run one module with `cargo test -p PACKAGE --test all MODULE::`.

mod import;
mod real;
mod shadow;
