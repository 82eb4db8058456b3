//! The fencelock lock service as real processes.
//!
//! `fencelock` (the sans-IO core) runs unchanged here under a real driver:
//! tokio for time and TCP, files with fsync for durable state, and the
//! protected resource in SQLite or PostgreSQL.

pub mod resource;
pub mod storage;
