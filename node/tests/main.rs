//! The node's tests, as one test target: one binary to build and link, and
//! one run in which the tests that mostly wait overlap those that compute.
//! Each module is one file of this folder.
//!
//! - Real processes (`common`: a cluster started by the `fencelock-node`
//!   binary, stopped by PID however the test ends): the clusters the tests
//!   drive themselves (`cluster`, `floor_read`, `b1042_story`, `bad_input`),
//!   and the real runs of `fencesim real`'s library (`real_run`,
//!   `real_restore`), all started side by side by the first test that asks.
//! - In this process (`support`: where PostgreSQL is): the protected resource
//!   in SQLite and PostgreSQL (`resource_differential`, `resource_concurrent`,
//!   `b1042_resource`) and the storage log (`storage`).
//!
//! `cargo test --release -p fencelock-node --test integration real_run::` runs one file's tests.

mod b1042_resource;
mod b1042_story;
mod bad_input;
mod cluster;
mod common;
mod floor_read;
mod real_restore;
mod real_run;
mod resource_concurrent;
mod resource_differential;
mod storage;
mod support;
