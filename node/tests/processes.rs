//! The tests that start `fencelock-node` processes, as one test target: one
//! binary to build and link instead of one per file. Each module is one file
//! of this folder; they share `common` (a cluster of processes, stopped by
//! PID however the test ends) and take one real cluster at a time
//! (`common::serial`). `cargo test --release -p fencelock-node --test
//! processes real_run::` runs one of them.

mod b1042_story;
mod bad_input;
mod cluster;
mod common;
mod floor_read;
mod real_restore;
mod real_run;
mod support;
