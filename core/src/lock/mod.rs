//! The lock state machine (SPEC.md, "Replicated commands").
//!
//! Every node applies the same committed commands in the same order and must
//! reach the same state and results, so `apply` is a pure function of the
//! state, the command and the protocol variant: it never reads a clock and
//! never draws randomness. Lease time is tracked by the service on each node's
//! local clock; here a lock only ends through a committed Release or Expire.
//!
//! Two deliberate refinements over the seed's commands:
//! - Release carries the holder's token and removes only a matching lock, the
//!   same guard that Expire has, so a late or retried release cannot delete
//!   the next holder's lock (`Variant::ReleaseIgnoresToken` is the seed's form).
//! - Each client has a session (its last acquire and the answer), so a Grant
//!   that is proposed twice (a client retry, a re-proposal by a new leader)
//!   takes effect once and the retry gets the original answer (exactly-once
//!   apply, Raft dissertation §6.3). This relies on each client numbering its
//!   requests upwards with one counter (a retry reuses an id, a new request
//!   never does), so a Grant older than the session's is a late duplicate and
//!   is answered `Noop` with no effect.
//! - An acquire answered without a lock (`Busy`, `TimedOut`) is a command too,
//!   a Decline, recorded in the session like a Grant's answer. Decided by one
//!   leader outside the log, that answer could meet a Grant of the same
//!   request by the next leader, which received a resend of it: the client
//!   would be told `TimedOut` for a lock it holds.

use crate::command::{ApplyResult, Command, Decline};
use crate::types::{ClientId, Holder, Key, RequestId, Token};
use crate::variant::Variant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[cfg(test)]
mod tests;

/// The most client sessions the state keeps: one per client. A simulated
/// run has a handful of clients, but a real cluster meets new clients for as
/// long as it runs, so past this many the session answered longest ago is
/// forgotten (`forget_oldest_session`) and the state stays bounded.
pub const SESSIONS_MAX: usize = 4_096;

/// A held lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    pub token: Token,
    pub holder: Holder,
    pub lease_ms: u64,
}

/// The last acquire each client got answered, so a retried Grant gets the
/// original token and a declined request is never granted later.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub request: RequestId,
    pub result: ApplyResult,
    /// When it was last answered, as a count of answers (`LockState::answers_total`):
    /// the order in which sessions are forgotten past `SESSIONS_MAX`.
    #[serde(default)]
    pub answered: u64,
}

/// The whole replicated state: serializable for snapshots, never reads a clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockState {
    locks: BTreeMap<Key, Lock>,
    token_last: Token,
    sessions: BTreeMap<ClientId, Session>,
    /// Acquires answered in sessions since the state began: a logical clock
    /// that every replica advances alike, never a real one.
    #[serde(default)]
    answers_total: u64,
}

impl LockState {
    /// A fresh state whose first grant is `token_floor + 1`.
    pub fn new(token_floor: Token) -> LockState {
        LockState { locks: BTreeMap::new(), token_last: token_floor, sessions: BTreeMap::new(), answers_total: 0 }
    }

    /// Applies one committed command. `variant` selects the unsafe designs.
    pub fn apply(&mut self, command: &Command, variant: Variant) -> ApplyResult {
        match command {
            Command::Grant { key, lease_ms, holder } => self.grant(key, *lease_ms, *holder),
            Command::Release { key, token, holder: _ } => {
                // The holder is carried for attribution (ghost-lock releases) only; the
                // token alone identifies the grant, because tokens are never reissued.
                let ignore_token = variant == Variant::ReleaseIgnoresToken;
                if self.remove_if_token(key, *token, ignore_token) {
                    ApplyResult::Released
                } else {
                    ApplyResult::NotFound
                }
            }
            Command::Expire { key, token } => {
                let ignore_token = variant == Variant::ExpireIgnoresToken;
                ApplyResult::Expired { existed: self.remove_if_token(key, *token, ignore_token) }
            }
            Command::Decline { key, holder, reason } => self.decline(key, *holder, *reason),
        }
    }

    pub fn lock(&self, key: &Key) -> Option<&Lock> {
        self.locks.get(key)
    }

    pub fn locks(&self) -> impl Iterator<Item = (&Key, &Lock)> {
        self.locks.iter()
    }

    /// Who holds `key`, if anyone.
    pub fn holder_of(&self, key: &Key) -> Option<Holder> {
        self.locks.get(key).map(|lock| lock.holder)
    }

    /// The highest token ever issued (or the floor).
    pub fn token_last(&self) -> Token {
        self.token_last
    }

    /// Moves the token floor up (whole-cluster restore); never moves it down.
    pub fn raise_token_floor(&mut self, floor: Token) {
        self.token_last = self.token_last.max(floor);
    }

    /// The answer `holder`'s acquire already has in its client's session (a
    /// Grant's or a Decline's): the original one for a retry (no new effect,
    /// even if the lock was released or expired since), `Noop` for a request
    /// older than the session's (its client numbers requests upwards and has
    /// moved on; granting it would create a lock no client believes it
    /// holds), `None` for a request not answered yet.
    pub fn session_result(&self, holder: Holder) -> Option<ApplyResult> {
        let session = self.sessions.get(&holder.client)?;
        if session.request == holder.request {
            Some(session.result)
        } else if session.request > holder.request {
            Some(ApplyResult::Noop)
        } else {
            None
        }
    }

    fn remember(&mut self, holder: Holder, result: ApplyResult) {
        self.answers_total += 1;
        let session = Session { request: holder.request, result, answered: self.answers_total };
        self.sessions.insert(holder.client, session);
        if self.sessions.len() > SESSIONS_MAX {
            self.forget_oldest_session();
        }
        assert!(self.sessions.len() <= SESSIONS_MAX, "more than {SESSIONS_MAX} client sessions");
    }

    /// Forgets the session answered longest ago, preferring a client that
    /// holds no lock. What a forgotten session costs is bounded: a late copy
    /// of that client's old acquire is no longer recognised as late and may
    /// be granted, a ghost lock its lease (or the ghost cleanup) frees and
    /// whose token the resource still orders; a retry by a client that holds
    /// its lock is still answered with its token (`grant`'s holder guard).
    /// Deterministic: every replica forgets the same session.
    fn forget_oldest_session(&mut self) {
        let holders: std::collections::BTreeSet<ClientId> =
            self.locks.values().map(|lock| lock.holder.client).collect();
        let oldest = |lockless: bool| {
            self.sessions
                .iter()
                .filter(|(client, _)| !lockless || !holders.contains(client))
                .min_by_key(|(_, session)| session.answered)
                .map(|(client, _)| *client)
        };
        if let Some(client) = oldest(true).or_else(|| oldest(false)) {
            self.sessions.remove(&client);
        }
    }

    fn grant(&mut self, key: &Key, lease_ms: u64, holder: Holder) -> ApplyResult {
        if let Some(result) = self.session_result(holder) {
            return result;
        }
        let result = match self.locks.get(key) {
            // Sessions answer retries above; this guard keeps a state restored
            // without its sessions from handing one request a second token.
            Some(lock) if lock.holder == holder => ApplyResult::Granted { token: lock.token },
            Some(_) => ApplyResult::GrantRejected,
            None => {
                let token = self.issue_token();
                self.locks.insert(key.clone(), Lock { token, holder, lease_ms });
                ApplyResult::Granted { token }
            }
        };
        self.remember(holder, result);
        result
    }

    /// Records that `holder`'s acquire was answered without a lock. A `Busy`
    /// needs the key held at this point of the log; on a free key nothing is
    /// recorded and the result is `NotFound` (the leader answers `Unavailable`
    /// and the client asks again). A request already granted keeps its grant.
    fn decline(&mut self, key: &Key, holder: Holder, reason: Decline) -> ApplyResult {
        if let Some(result) = self.session_result(holder) {
            return result;
        }
        let result = match self.locks.get(key) {
            Some(lock) if lock.holder == holder => ApplyResult::Granted { token: lock.token },
            None if reason == Decline::Busy => return ApplyResult::NotFound,
            _ => ApplyResult::Declined { reason },
        };
        self.remember(holder, result);
        result
    }

    /// The next token: strictly above every token issued before, and above the floor.
    fn issue_token(&mut self) -> Token {
        let next = self.token_last.0.checked_add(1).expect("token space exhausted");
        let token = Token(next);
        assert!(token > self.token_last, "tokens must strictly increase");
        self.token_last = token;
        token
    }

    /// Removes the lock on `key` if its token is `token` (or, for an unsafe
    /// variant, whatever its token). Returns whether a lock was removed.
    fn remove_if_token(&mut self, key: &Key, token: Token, ignore_token: bool) -> bool {
        let matches = match self.locks.get(key) {
            Some(lock) => ignore_token || lock.token == token,
            None => false,
        };
        if !matches {
            return false;
        }
        let removed = self.locks.remove(key).expect("the lock was just looked up");
        assert!(ignore_token || removed.token == token, "a safe removal must match the token");
        true
    }
}
