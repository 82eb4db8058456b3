//! The node's tests, as one test target: one binary to build and link
//! instead of one per file, and one schedule for the machine. Each module
//! is one file of this folder (`in_process/` a folder of its own); they
//! share `common` (a cluster of processes, stopped by PID however the test
//! ends). In a whole run of the binary the real runs (which mostly sleep),
//! the load test's load and the differential runs against the databases
//! start with its first test, in the background, and each of their tests
//! takes its run's report (`common::start_background`); the other tests of
//! `in_process` (the storage log, the resource's stories) take the cores
//! meanwhile; the B-1042 stories run beside them and beside each other, and
//! a test that drives a cluster and times it beside them but beside no
//! other such test and not beside the load (`common::serial`). `cargo test
//! --release -p fencelock-node --test integration real_run::` runs one
//! module's tests, and each test then plays its own run.

mod b1042_story;
mod bad_input;
mod cluster;
mod common;
mod floor_read;
mod in_process;
mod real_restore;
mod real_run;
mod support;
mod throughput;
