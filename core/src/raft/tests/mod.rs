//! Unit tests of the Raft internals: config validation, the log, progress,
//! elections, a leader and restores on one node, the Ready.

mod config;
mod election;
mod leader;
mod log;
mod progress;
mod ready;
mod recovery;
