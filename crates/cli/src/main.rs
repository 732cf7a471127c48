//! `schedlab`: the command line with the built-in policies.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    schedlab::main()
}
