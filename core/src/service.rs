//! The lock service between clients and the replicated state machine.
//! Stub of the client-facing types; the logic comes with issue 5.

use crate::types::{Key, NodeId, Token};
use serde::{Deserialize, Serialize};

/// What a client asks a server. Carried with the client id and request id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientRequest {
    /// Try to acquire `key`; with `wait_ms > 0`, wait in a bounded queue at most that long.
    Acquire { key: Key, lease_ms: u64, wait_ms: u64 },
    /// Extend the lease of the current holder of `token`.
    Renew { key: Key, token: Token },
    /// Owner-safe release.
    Release { key: Key, token: Token },
    /// The client gives up on an earlier request (same request id): if it was
    /// granted, the grant is a ghost and the leader releases it.
    Cancel,
}

/// A server's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientReply {
    Granted {
        token: Token,
        lease_ms: u64,
    },
    /// The key is held; the holder's lease runs at most this much longer (leader's local clock).
    Busy {
        remaining_ms: u64,
    },
    Renewed {
        lease_ms: u64,
    },
    Released,
    /// The token is not the current holder's (renew or release of a lost lock).
    NotHeld,
    /// This server is not the leader; try the one named, if any.
    NotLeader {
        leader: Option<NodeId>,
    },
    /// The wait deadline passed before the key was free.
    TimedOut,
    /// The leader could not serve the request now (not yet confirmed, queue full); retry.
    Unavailable,
}
