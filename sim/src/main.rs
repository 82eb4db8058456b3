//! The `fencesim` binary: see `fencesim --help` and CLI.md.

fn main() -> std::process::ExitCode {
    fencesim::alloc::settle();
    fencesim::cli::main_with(std::env::args().collect())
}
