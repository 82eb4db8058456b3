//! The tests that start `fencelock-node` processes, as one test target: one
//! binary to build and link instead of one per file. Each module is one file
//! of this folder; they share `common` (a cluster of processes, stopped by
//! PID however the test ends); a test that drives a cluster takes the
//! machine alone (`common::serial`), while real runs and the B-1042
//! stories, which mostly sleep, run beside each other (`common::shared`). `cargo test --release -p fencelock-node --test
//! processes real_run::` runs one of them.

mod b1042_story;
mod bad_input;
mod cluster;
mod common;
mod floor_read;
mod real_restore;
mod real_run;
mod support;
