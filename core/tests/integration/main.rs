//! `core`'s integration tests, as one test target: one binary to build and
//! link instead of one per file, which is most of what a cargo-mutants mutant
//! costs (docs/TESTING.md, "Mutation testing"). Each module is one former test file;
//! `cargo test -p fencelock --test integration raft_paper::` runs one of them.

mod lock_random;
mod raft_election;
mod raft_harness;
mod raft_paper;
mod raft_random;
mod raft_read_index;
mod raft_replication;
mod raft_restart_answers;
mod raft_restore;
mod raft_restore_commit_lag;
mod raft_stuck_follower;
