//! The answers that end an acquire without a lock: a try-lock's `Busy` and a
//! wait's `TimedOut`.
//!
//! Both are decided through the log, as a `Decline` command that the state
//! machine records in the client's session, and answered when it applies.
//! The `linearizable` checker found every way of deciding them outside the
//! log wrong:
//! - answered from the leader's own table, by a leader stalled in a pause or
//!   cut off that had not heard of its successor: its `TimedOut` met the
//!   successor's Grant of the client's resend, and its `Busy` a lock the
//!   successor had released;
//! - answered after a read-index round confirmed the leader, and remembered
//!   by that node only: the answer was lost, the client resent the request to
//!   the next leader, which granted it, and the first leader repeated its
//!   `TimedOut` to a late copy (seed 94867 of the 100,000-seed hunt), or told
//!   it `TimedOut` while the state machine already held its Grant (seed 29867).
//!
//! A committed Decline is the request's answer everywhere: a later Grant of
//! it returns the Decline, and a resend at any leader gets the same answer
//! from the session (`LockServer::acquire`). Its place in the log also orders
//! it after every Grant proposed before it, so a try-lock told `Busy` by a
//! Grant in flight is told so only once that Grant holds the key; on a key
//! free by then the state machine records nothing and the client asks again.

use super::requests::KeyStatus;
use super::{ClientReply, LockServer, Pending, PendingKind};
use crate::command::{ApplyResult, Command, Decline};
use crate::types::{Holder, Key};

impl LockServer {
    /// Proposes that `holder`'s acquire of `key` end without a lock.
    pub(super) fn propose_decline(&mut self, holder: Holder, key: Key, reason: Decline) {
        let command = Command::Decline { key: key.clone(), holder, reason };
        self.propose_for_client(holder.client, holder.request, command, PendingKind::Decline { key, reason });
    }

    /// Our Decline applied. Like a Release, it is answered only by the leader
    /// of the term that proposed it; any other node's client asks again and
    /// the session answers.
    pub(super) fn answer_decline(&mut self, pending: Pending, result: ApplyResult, now_local_ms: u64) {
        let PendingKind::Decline { key, .. } = &pending.kind else {
            unreachable!("answer_decline gets declines only");
        };
        if !self.still_leader_of(pending.term) {
            return;
        }
        let holder = Holder { client: pending.client, request: pending.request };
        let reply = match result {
            ApplyResult::Declined { reason } => self.decline_reply(key, holder, reason, now_local_ms),
            // A Busy that met a free key: nothing was recorded.
            ApplyResult::NotFound => ClientReply::Unavailable,
            // The request was granted before (its resend, at an earlier leader),
            // or is older than its client's last: its retry is answered by the
            // session (`acquire`).
            _ => return,
        };
        self.reply(pending.client, pending.request, reply);
    }

    /// The reply for a recorded Decline. `Busy` tells how long the key's
    /// lease runs at most, as this leader sees it now (0 if the key is free
    /// by now: a repeat of an earlier `Busy`).
    pub(super) fn decline_reply(&self, key: &Key, holder: Holder, reason: Decline, now_local_ms: u64) -> ClientReply {
        match reason {
            Decline::TimedOut => ClientReply::TimedOut,
            Decline::Busy => {
                let remaining_ms = match self.key_status(key, holder, now_local_ms) {
                    KeyStatus::Busy { remaining_ms } => remaining_ms,
                    _ => 0,
                };
                ClientReply::Busy { remaining_ms }
            }
        }
    }
}
