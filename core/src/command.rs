//! The replicated commands of SPEC.md and their applied results.

use crate::types::{Holder, Key, Token};
use serde::{Deserialize, Serialize};
use std::fmt;

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

/// `grant k to c1 (lease 2000 ms)`, `release k tok41 by c1`, `expire k tok41`.
impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Grant { key, lease_ms, holder } => {
                write!(f, "grant {key} to {} (lease {lease_ms} ms)", holder.client)
            }
            Command::Release { key, token, holder } => write!(f, "release {key} {token} by {}", holder.client),
            Command::Expire { key, token } => write!(f, "expire {key} {token}"),
        }
    }
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

/// `granted tok41`, `expired`, `expired (gone already)`, …
impl fmt::Display for ApplyResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyResult::Granted { token } => write!(f, "granted {token}"),
            ApplyResult::GrantRejected => f.write_str("grant rejected"),
            ApplyResult::Released => f.write_str("released"),
            ApplyResult::NotFound => f.write_str("not found"),
            ApplyResult::Expired { existed: true } => f.write_str("expired"),
            ApplyResult::Expired { existed: false } => f.write_str("expired (gone already)"),
            ApplyResult::Noop => f.write_str("no-op"),
        }
    }
}
