//! The replicated commands of SPEC.md and their applied results.

use crate::types::{Holder, Key, Token};
use serde::{Deserialize, Serialize};

/// A lock state change, carried in a log entry and applied by every node in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Acquire `key`. The token is assigned at apply time, never carried here.
    Grant { key: Key, lease_ms: u64, holder: Holder },
    /// Owner-safe release: removes the lock only if `token` matches.
    Release { key: Key, token: Token, holder: Holder },
    /// Leader-driven lease expiry: removes the lock only if `token` matches.
    Expire { key: Key, token: Token },
}

impl Command {
    pub fn key(&self) -> &Key {
        match self {
            Command::Grant { key, .. } | Command::Release { key, .. } | Command::Expire { key, .. } => key,
        }
    }
}

/// What applying a command did, as reported by the state machine to the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApplyResult {
    Granted { token: Token },
    GrantRejected,
    Released,
    NotFound,
    Expired { existed: bool },
    Noop,
}
