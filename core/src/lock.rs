//! The lock state machine (SPEC.md, "Replicated commands"). Stub: see issue 2.

use crate::command::{ApplyResult, Command};
use crate::types::{ClientId, Holder, Key, RequestId, Token};
use crate::variant::Variant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A held lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    pub token: Token,
    pub holder: Holder,
    pub lease_ms: u64,
}

/// The last request each client got answered, so a retried Grant gets the original token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub request: RequestId,
    pub result: ApplyResult,
}

/// The whole replicated state: serializable for snapshots, never reads a clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockState {
    locks: BTreeMap<Key, Lock>,
    token_last: Token,
    sessions: BTreeMap<ClientId, Session>,
}

impl LockState {
    /// A fresh state whose first grant is `token_floor + 1`.
    pub fn new(token_floor: Token) -> LockState {
        LockState { locks: BTreeMap::new(), token_last: token_floor, sessions: BTreeMap::new() }
    }

    /// Applies one committed command. `variant` selects the unsafe designs.
    pub fn apply(&mut self, command: &Command, variant: Variant) -> ApplyResult {
        let _ = (command, variant);
        todo!("lock: apply")
    }

    pub fn lock(&self, key: &Key) -> Option<&Lock> {
        self.locks.get(key)
    }

    pub fn locks(&self) -> impl Iterator<Item = (&Key, &Lock)> {
        self.locks.iter()
    }

    /// The highest token ever issued (or the floor).
    pub fn token_last(&self) -> Token {
        self.token_last
    }

    /// Moves the token floor up (whole-cluster restore); never moves it down.
    pub fn raise_token_floor(&mut self, floor: Token) {
        self.token_last = self.token_last.max(floor);
    }
}
