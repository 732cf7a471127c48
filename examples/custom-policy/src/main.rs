//! `schedlab` with one more policy, `example`: every command.

fn main() -> std::process::ExitCode {
    schedlab::main_with(schedlab_example_policy::registry())
}
