//! The sequential specification of one key of the lock service, in true time.
//!
//! A key is free, held, or unknown (after a whole-cluster restore, or at the
//! start of a window cut out of a longer history). A held lock records its
//! token when a client was told it, its lease and the earliest true instant
//! its lease can have ended. Not who holds it: the operation that took it is
//! placed, and only an operation not yet placed is ever asked about the lock. Tokens
//! on a key strictly increase (across keys the checker compares them in
//! real-time order separately, see `tokens.rs`).
//!
//! Ending a lock is a step the specification takes on its own, never forced:
//! an expiry no earlier than the lease's earliest end (the grant's or last
//! renewal's first send plus the lease shortened by the drift bound, or
//! earlier only where a server clock was stepped or ran beyond the bound), a
//! ghost-lock release of a holder that never heard `Granted` (at any time),
//! or the disappearance of an unknown lock. These steps are placed lazily,
//! right before the operation that observes the key free: a later end is
//! always at least as permitted as an earlier one.
//!
//! The state carries `now_us`, the earliest instant the last step can have
//! happened. Each operation takes effect at `max(now_us, its first send, the
//! end it waited for)`, which must not pass the answer of any operation not
//! yet placed (`bound_us`).

use super::ops::{Call, Op};
use fencelock::service::ClientReply;
use fencelock::Token;

/// One key's lock as the specification sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Slot {
    Free,
    /// Held by a lock the history does not show (a restore, a window's start):
    /// any token, any holder, and it may end at any time.
    Unknown,
    Held(Lock),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Lock {
    /// `None` when no client was told the token (a grant nobody heard of).
    pub token: Option<Token>,
    pub lease_ms: u64,
    /// The lease cannot have ended before this true instant (0 for an
    /// abandoned lock, which may end at any time).
    pub end_min_us: u64,
    /// The holder never heard `Granted`: the leader may release it at any time (a ghost lock).
    pub abandoned: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct State {
    /// The earliest instant at which the last step can have happened.
    pub now_us: u64,
    pub slot: Slot,
    /// The highest token a client was told for this key; `None` while unknown.
    pub token_last: Option<Token>,
}

impl State {
    pub fn free() -> State {
        State { now_us: 0, slot: Slot::Free, token_last: None }
    }

    pub fn unknown(now_us: u64) -> State {
        State { now_us, slot: Slot::Unknown, token_last: None }
    }

    /// The earliest instant the current lock can have ended; `None` when free.
    fn end_at_us(&self) -> Option<u64> {
        match self.slot {
            Slot::Free => None,
            Slot::Unknown => Some(self.now_us),
            Slot::Held(lock) if lock.abandoned => Some(self.now_us),
            Slot::Held(lock) => Some(self.now_us.max(lock.end_min_us)),
        }
    }

    /// Whether the current lock may be the one of `token`.
    fn may_hold(&self, token: Token) -> bool {
        match self.slot {
            Slot::Free => false,
            Slot::Unknown => true,
            Slot::Held(Lock { token: Some(held), .. }) => held == token,
            // An unheard grant's token is above every token told before it.
            Slot::Held(Lock { token: None, .. }) => self.token_last.is_none_or(|last| token > last),
        }
    }

    /// The lease of the lock held (by another operation than the one
    /// placed: the one that took it is placed already); `None` if free.
    fn held(&self) -> Option<Option<u64>> {
        match self.slot {
            Slot::Free => None,
            Slot::Unknown => Some(None),
            Slot::Held(lock) => Some(Some(lock.lease_ms)),
        }
    }
}

/// Whether an operation's answer says what it did (`Granted`, `Busy`,
/// `Released`…) or leaves it open: no answer at all, or an acquire answered
/// `NotHeld` (granted, then ended before the answer left).
pub(crate) fn is_ambiguous(op: &Op) -> bool {
    matches!((&op.call, op.answer), (_, None) | (Call::Acquire { .. }, Some(ClientReply::NotHeld)))
}

/// Every state `op` can lead to from `state`,
/// taking effect no later than `bound_us`. Empty: the answer is impossible here.
// An arm whose condition fails has no successor state; it must not fall
// through to a later arm, so the conditions stay inside the arms.
#[allow(clippy::collapsible_match)]
pub(crate) fn step(state: &State, op: &Op, bound_us: u64, out: &mut Vec<State>) {
    let mut emit = |effect_us: u64, slot: Slot, token_last: Option<Token>| {
        let now_us = state.now_us.max(op.inv_us).max(effect_us);
        // An unanswered operation cut short by a restore (`ops::lost_in_restores`)
        // has an answer time of its own; every other one is bounded by `bound_us`.
        if now_us <= bound_us && now_us <= op.resp_us {
            out.push(State { now_us, slot, token_last });
        }
    };
    // The key made free first, by whichever end the lock allows.
    let freed_at_us = state.end_at_us().unwrap_or(state.now_us);
    let ambiguous = is_ambiguous(op);
    match (&op.call, op.answer) {
        (Call::Restore, _) => emit(0, Slot::Unknown, state.token_last),
        (Call::Acquire { lease_ms, .. }, Some(ClientReply::Granted { token, .. })) => {
            if state.token_last.is_none_or(|last| token > last) {
                let lock =
                    Lock { token: Some(token), lease_ms: *lease_ms, end_min_us: op.lease_end_min_us, abandoned: false };
                emit(freed_at_us, Slot::Held(lock), Some(token));
            }
        }
        (Call::Acquire { .. }, Some(ClientReply::Busy { remaining_ms })) => {
            if let Some(lease_ms) = state.held() {
                if op.clock_excuse || lease_ms.is_none_or(|lease_ms| remaining_ms <= lease_ms) {
                    emit(0, state.slot, state.token_last);
                }
            } else if remaining_ms == 0 && op.queue_excuse {
                emit(0, state.slot, state.token_last);
            }
        }
        (Call::Acquire { .. }, Some(ClientReply::TimedOut)) => {
            if state.held().is_some() || op.queue_excuse {
                emit(0, state.slot, state.token_last);
            }
        }
        (Call::Acquire { lease_ms, .. }, _) if ambiguous => {
            if op.answer.is_some() {
                emit(0, state.slot, state.token_last);
            }
            let lock = Lock { token: None, lease_ms: *lease_ms, end_min_us: 0, abandoned: true };
            emit(freed_at_us, Slot::Held(lock), state.token_last);
        }
        (Call::Release { token } | Call::Revoke { token }, Some(ClientReply::Released) | None) => {
            if state.may_hold(*token) {
                emit(0, Slot::Free, state.token_last);
            }
        }
        (Call::Renew { token }, Some(ClientReply::Renewed { .. }) | None) => {
            if state.may_hold(*token) {
                let slot = match state.slot {
                    Slot::Held(lock) if !lock.abandoned => {
                        Slot::Held(Lock { end_min_us: lock.end_min_us.max(op.lease_end_min_us), ..lock })
                    }
                    other => other,
                };
                emit(0, slot, state.token_last);
            }
        }
        (Call::Release { token } | Call::Revoke { token } | Call::Renew { token }, Some(ClientReply::NotHeld)) => {
            let surely_ours = matches!(state.slot, Slot::Held(Lock { token: Some(held), .. }) if held == *token);
            if !surely_ours {
                emit(0, state.slot, state.token_last);
            }
            // A release or revoke retried after its first attempt removed the
            // lock is answered `NotHeld`: the state machine keeps no session
            // for removals, so the retry finds nothing to remove.
            let removes = matches!(op.call, Call::Release { .. } | Call::Revoke { .. });
            if removes && state.may_hold(*token) {
                emit(0, Slot::Free, state.token_last);
            }
            if state.slot != Slot::Free {
                emit(freed_at_us, Slot::Free, state.token_last);
            }
        }
        // An answer that does not fit the request: no state explains it.
        _ => {}
    }
}
