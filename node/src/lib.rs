//! The fencelock lock service as real processes.
//!
//! `fencelock` (the sans-IO core) runs unchanged here under a real driver:
//! tokio for time and TCP, files with fsync for durable state, and the
//! protected resource in SQLite or PostgreSQL.
//!
//! Layers, bottom-up (no file imports one above it):
//! - `config` — the cluster file, validated once.
//! - `clock` — CLOCK_MONOTONIC and the local clock an admin can skew.
//! - `history` — JSON-lines histories in the simulator's vocabulary.
//! - `net` — what a TCP connection carries (`NodeFrame`: core's `Envelope`
//!   or an admin message) and the links between servers.
//! - `server` — one server process: `LockServer` under a tokio event loop.
//! - `client` — a tokio client over core's sans-IO `Client`, and the floor
//!   read a restored resource needs (`FloorReader`).
//! - `resource` — the protected resource in SQLite or PostgreSQL, one transaction per write.
//! - `storage` — a server's durable Raft state in checksummed, fsync'd files.
//! - `worker` — a workload worker as its own process, for `fencesim real`.
//! - `operator` — the operator's backups and restores of the resource, each a process of its own.
//! - `cli` — the `fencelock-node` command line (cluster up/down, lock, status, bench).

pub mod bench;
pub mod cli;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod history;
pub mod net;
pub mod operator;
pub mod resource;
pub mod server;
pub mod storage;
pub mod worker;
