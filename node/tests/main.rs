//! The node's tests, as one test target: one binary to build and link
//! instead of one per file, and one schedule for the machine. Each module
//! is one file of this folder (`in_process/` a folder of its own); they
//! share `common` (a cluster of processes, stopped by PID however the test
//! ends). The real runs, which mostly sleep, start with the binary's first
//! test and run in the background, and so does the load test's load; the
//! tests of `in_process` (the resource and the storage log in this process)
//! take the cores meanwhile; the B-1042 stories run beside them and beside
//! each other (`common::shared`), and a test that drives a cluster and
//! times it beside them but beside no other such test and not beside the
//! load (`common::serial`). `cargo test --release -p fencelock-node --test
//! integration real_run::` runs one module's tests.

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
