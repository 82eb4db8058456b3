//! Unit tests of the Raft internals: config validation, the log, progress,
//! pre-vote on one node.

mod config;
mod election;
mod log;
mod progress;
