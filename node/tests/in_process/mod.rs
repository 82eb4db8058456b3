//! The node's parts run in this process: the protected resource in SQLite
//! and PostgreSQL, and the storage log. They start no process and sleep on
//! nothing, so they take the cores while the real runs sleep between their
//! faults (this module's name sorts before the real runs' tests, which wait
//! for the runs to end). In a run of every test the differential runs, the
//! longest, start in the background with the binary's first test
//! (`resource_differential::play_all`).

mod b1042_resource;
mod resource_concurrent;
pub mod resource_differential;
mod storage;
