//! Unit tests of the Raft internals: config validation, the log, progress.

mod config;
mod log;
mod progress;
