//! The tests that run the node's parts in this process: the protected
//! resource in SQLite and PostgreSQL, and the storage log. One test target,
//! one binary; each module is one file of this folder. `cargo test --release
//! -p fencelock-node --test in_process resource_differential::` runs one of them.

mod b1042_resource;
mod resource_concurrent;
mod resource_differential;
mod storage;
mod support;
