//! The `fencesim` binary: see `fencesim --help` and CLI.md.

/// The system allocator, counting what `bench`'s long runs hold.
#[global_allocator]
static ALLOCATOR: fencesim::alloc::Counting = fencesim::alloc::Counting;

fn main() -> std::process::ExitCode {
    fencesim::alloc::settle();
    fencesim::cli::main_with(std::env::args().collect())
}
