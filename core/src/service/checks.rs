//! The answers that report a key's state without a log entry: a try-lock's
//! `Busy` and a wait's `TimedOut`.
//!
//! Both are reads of the lock table, so they follow the rule of every
//! linearizable read in Raft: answer only after a read-index round confirms
//! that this node still leads, and only from committed state. Without it the
//! `linearizable` checker found three wrong answers:
//! - a leader stalled in a pause, or cut off, that has not yet heard of its
//!   successor answers `TimedOut` from its old queue while the client's retry
//!   of the same request waits at the real leader and is granted: the client
//!   holds a lock it was told it did not get;
//! - the same stale leader answers a try-lock `Busy` for a lock its successor
//!   has since released;
//! - a try-lock is told `Busy` by a Grant still in flight, which is lost with
//!   the leader's term and never holds the key.
//!
//! So a check is asked when the answer is decided (`start_check`), settled
//! when its round comes back (`settle_check`): a Grant this leader has in
//! flight for the key is waited for (the check is parked until it applies),
//! and a try-lock is judged again on the state as it is then. A deposed
//! leader's checks never settle: its clients are sent on (`redirect_checks`).
//!
//! A copy of a request that arrives after its `Busy` or `TimedOut` was sent
//! (a resend overtaken by the answer) must not be served afresh: queued or
//! granted, it would lock the key for a client that has moved on. The node
//! remembers the last such answer per client and repeats it.

use super::{Check, CheckKind, ClientReply, LockServer, ParkedCheck, ReadPurpose, ReadRound, ANSWERED_MAX, READS_MAX};
use crate::types::{Holder, LogIndex, Term};

impl LockServer {
    /// Starts the read-index round after which `check` is answered.
    pub(super) fn start_check(&mut self, check: Check) {
        let Some(office) = self.office else {
            let reply = self.not_leader_reply();
            self.reply(check.holder.client, check.holder.request, reply);
            return;
        };
        if self.reads.len() >= READS_MAX {
            self.reply(check.holder.client, check.holder.request, ClientReply::Unavailable);
            return;
        }
        let ctx = self.next_read_ctx();
        if self.raft.read_index(ctx).is_err() {
            self.reply(check.holder.client, check.holder.request, ClientReply::Unavailable);
            return;
        }
        self.reads.insert(ctx, ReadRound { term: office.term, purpose: ReadPurpose::Check(check) });
    }

    /// Leadership in `term` was confirmed with the log committed up to
    /// `after`: answer once that much is applied and no Grant is in flight
    /// for the key (other than the asker's own, which a check never meets).
    pub(super) fn settle_check(&mut self, term: Term, after: LogIndex, check: Check, now_local_ms: u64) {
        if !self.still_leader_of(term) {
            return;
        }
        let inflight = self.inflight_grant_index(&check.key).unwrap_or(LogIndex(0));
        let after = after.max(inflight);
        if self.applied_index < after {
            if self.checks_parked.len() >= READS_MAX {
                self.reply(check.holder.client, check.holder.request, ClientReply::Unavailable);
                return;
            }
            self.checks_parked.push(ParkedCheck { term, after, check });
            return;
        }
        let reply = match check.kind {
            CheckKind::WaitEnded => ClientReply::TimedOut,
            CheckKind::TryLock => match self.key_status(&check.key, check.holder, now_local_ms) {
                super::requests::KeyStatus::Busy { remaining_ms } => ClientReply::Busy { remaining_ms },
                // The key freed while leadership was being confirmed. Granting
                // it now could lock it for a client that has moved on; the
                // client asks again instead.
                _ => {
                    self.reply(check.holder.client, check.holder.request, ClientReply::Unavailable);
                    return;
                }
            },
        };
        self.answer_check(check.holder, reply);
    }

    /// After an applied batch: settles the parked checks whose wait is over.
    pub(super) fn settle_parked_checks(&mut self, now_local_ms: u64) {
        if self.checks_parked.is_empty() {
            return;
        }
        let due = Self::take_applied(self.applied_index, &mut self.checks_parked, |parked| parked.after);
        for parked in due {
            self.settle_check(parked.term, parked.after, parked.check, now_local_ms);
        }
    }

    /// Whether a check for this very request is under way (a resend meanwhile is a duplicate).
    pub(super) fn check_in_flight(&self, holder: Holder) -> bool {
        let in_round = self
            .reads
            .values()
            .any(|round| matches!(&round.purpose, ReadPurpose::Check(check) if check.holder == holder));
        in_round || self.checks_parked.iter().any(|parked| parked.check.holder == holder)
    }

    /// Whether an acquire was settled here by `Busy` or `TimedOut` already:
    /// `None` if not, `Some(Some(reply))` for a copy of the answered request
    /// (the answer is repeated), `Some(None)` for an older request (nothing).
    pub(super) fn answered_before(&self, holder: Holder) -> Option<Option<ClientReply>> {
        let (request, reply) = self.answered.get(&holder.client)?;
        if *request == holder.request {
            Some(Some(*reply))
        } else if *request > holder.request {
            Some(None)
        } else {
            None
        }
    }

    /// On losing office (or term): the clients of unsettled checks go to the new leader.
    pub(super) fn redirect_checks(&mut self) {
        let mut holders: Vec<Holder> = self
            .reads
            .values()
            .filter_map(|round| match &round.purpose {
                ReadPurpose::Check(check) => Some(check.holder),
                _ => None,
            })
            .collect();
        holders.extend(self.checks_parked.drain(..).map(|parked| parked.check.holder));
        if holders.is_empty() {
            return;
        }
        let reply = self.not_leader_reply();
        for holder in holders {
            self.reply(holder.client, holder.request, reply);
        }
    }

    fn answer_check(&mut self, holder: Holder, reply: ClientReply) {
        let newer_known = self.answered.get(&holder.client).is_some_and(|(request, _)| *request > holder.request);
        if !newer_known {
            if !self.answered.contains_key(&holder.client) && self.answered.len() >= ANSWERED_MAX {
                self.answered.pop_first();
            }
            self.answered.insert(holder.client, (holder.request, reply));
        }
        self.reply(holder.client, holder.request, reply);
    }
}
