//! The simulator's tests through its public API and its binary, as one test
//! target: one binary to build and link instead of one per file. Each module
//! is one file of this folder; `cargo test --release -p fencesim --test
//! integration cli::` runs one of them.

mod cli;
mod commands;
mod deploy;
mod explain;
mod explore;
mod load;
mod pasted_lines;
mod role_faults;
mod shards;
mod swarm;
mod tickless;
mod trace_view;
