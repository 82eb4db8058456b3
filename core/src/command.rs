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
    /// An acquire answered without a lock: a try-lock that found `key` held
    /// (`Busy`) or a wait whose deadline passed (`TimedOut`). Recorded in the
    /// client's session, so no leader grants that request afterwards.
    Decline { key: Key, holder: Holder, reason: Decline },
}

/// Why an acquire is declined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decline {
    /// A try-lock found the key held.
    Busy,
    /// A wait's deadline passed before the key was free.
    TimedOut,
}

/// `busy`, `timed out`.
impl fmt::Display for Decline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Decline::Busy => "busy",
            Decline::TimedOut => "timed out",
        })
    }
}

/// `grant k to c1 (lease 2000 ms)`, `release k tok41 by c1`, `expire k tok41`,
/// `decline k to c1 (busy)`.
impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Grant { key, lease_ms, holder } => {
                write!(f, "grant {key} to {} (lease {lease_ms} ms)", holder.client)
            }
            Command::Release { key, token, holder } => write!(f, "release {key} {token} by {}", holder.client),
            Command::Expire { key, token } => write!(f, "expire {key} {token}"),
            Command::Decline { key, holder, reason } => write!(f, "decline {key} to {} ({reason})", holder.client),
        }
    }
}

impl Command {
    pub fn key(&self) -> &Key {
        match self {
            Command::Grant { key, .. }
            | Command::Release { key, .. }
            | Command::Expire { key, .. }
            | Command::Decline { key, .. } => key,
        }
    }
}

/// What applying a command did, as reported by the state machine to the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApplyResult {
    Granted {
        token: Token,
    },
    GrantRejected,
    Released,
    NotFound,
    Expired {
        existed: bool,
    },
    /// A Decline recorded in its client's session.
    Declined {
        reason: Decline,
    },
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
            ApplyResult::Declined { reason } => write!(f, "declined: {reason}"),
            ApplyResult::Noop => f.write_str("no-op"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ApplyResult, Command, Decline};
    use crate::types::{ClientId, Holder, Key, RequestId, Token};

    /// Commands and their results are told in traces as the doc comments above show.
    #[test]
    fn commands_and_results_read_as_the_trace_tells_them() {
        let (key, holder) = (Key::new("invoice/B-1042"), Holder { client: ClientId(1), request: RequestId(7) });
        let shown = |command: Command| command.to_string();
        assert_eq!(
            shown(Command::Grant { key: key.clone(), lease_ms: 2000, holder }),
            "grant invoice/B-1042 to c1 (lease 2000 ms)"
        );
        assert_eq!(
            shown(Command::Release { key: key.clone(), token: Token(41), holder }),
            "release invoice/B-1042 tok41 by c1"
        );
        assert_eq!(shown(Command::Expire { key: key.clone(), token: Token(41) }), "expire invoice/B-1042 tok41");
        assert_eq!(
            shown(Command::Decline { key: key.clone(), holder, reason: Decline::Busy }),
            "decline invoice/B-1042 to c1 (busy)"
        );
        assert_eq!(
            shown(Command::Decline { key, holder, reason: Decline::TimedOut }),
            "decline invoice/B-1042 to c1 (timed out)"
        );
        let results = [
            (ApplyResult::Granted { token: Token(41) }, "granted tok41"),
            (ApplyResult::GrantRejected, "grant rejected"),
            (ApplyResult::Released, "released"),
            (ApplyResult::NotFound, "not found"),
            (ApplyResult::Expired { existed: true }, "expired"),
            (ApplyResult::Expired { existed: false }, "expired (gone already)"),
            (ApplyResult::Declined { reason: Decline::Busy }, "declined: busy"),
            (ApplyResult::Declined { reason: Decline::TimedOut }, "declined: timed out"),
            (ApplyResult::Noop, "no-op"),
        ];
        for (result, text) in results {
            assert_eq!(result.to_string(), text);
        }
    }
}
