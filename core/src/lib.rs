//! `fencelock`: the sans-IO heart of fencesim.
//!
//! The lock state machine, the Raft layer that replicates it, the lock service
//! rules (leases on an injected local clock, expiry, renew, ghost locks), the
//! client library's lease belief, and the protected resource's token check.
//! Nothing here reads a clock, draws from entropy or does I/O: the caller
//! passes time in and carries messages out.

pub mod client;
pub mod command;
pub mod lock;
pub mod probe;
pub mod property;
pub mod raft;
pub mod resource;
pub mod service;
pub mod types;
pub mod variant;
pub mod wire;

pub use command::{ApplyResult, Command, Decline};
pub use lock::{Lock, LockState};
pub use probe::{Probe, ProbeSet};
pub use property::Property;
pub use resource::{ResourceState, Write, WritePath, WriteVerdict};
pub use types::{ClientId, Holder, Key, LogIndex, NodeId, RequestId, Term, Token};
pub use variant::{Variant, VariantInfo, VARIANTS};
