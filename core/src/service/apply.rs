//! Applying committed entries, and the answers that wait for them.
//!
//! Replies to applied proposals are produced after the whole batch is applied
//! (and after Raft's `advance`), so "is this lock still held with this token"
//! is asked of the state as it is when the answer leaves, not as it was
//! half-way through the batch: a Grant followed in the same batch by its
//! Expire is not answered `Granted` (etcd 11456, SCENARIOS.md 2).
//!
//! Only the node that received a request answers it, and only if the entry at
//! the proposal's index carries the proposal's term (else it was overwritten)
//! and the node is still leader of that term. A leader leaving office
//! redirects the clients of its proposals (`LockServer::leave_office`), whose
//! resends then meet the outcome in the state machine's sessions; only
//! `GrantAfterExpiredWait` keeps a lost term's proposals, and those whose index
//! is applied with another entry are dropped silently.

use super::{ClientReply, LockServer, Output, Pending, PendingKind};
use crate::command::{ApplyResult, Command};
use crate::probe::Probe;
use crate::raft::{Entry, Payload, Ready, Snapshot};
use crate::types::{Holder, Key, LogIndex, Term, Token};
use crate::variant::Variant;

/// A decision deferred to the end of the batch.
enum AfterBatch {
    /// Our Grant applied: answer it (or release it, if its client is gone).
    Grant { pending: Pending, result: ApplyResult },
    /// Our Release applied: answer it.
    Release { pending: Pending, result: ApplyResult },
    /// Our Decline applied: answer it (`declines`).
    Decline { pending: Pending, result: ApplyResult },
}

impl LockServer {
    /// The driver has persisted and sent `ready` (taken from [`LockServer::ready`]).
    /// Its message buffers, drained, are reused for the next Ready's.
    pub fn apply_ready(&mut self, ready: Ready, now_local_ms: u64) {
        self.raft.recycle(ready.messages, ready.messages_after_persist);
        if let Some(snapshot) = ready.snapshot {
            self.install_snapshot(snapshot, now_local_ms);
        }
        let mut after_batch = Vec::new();
        for entry in ready.committed_entries {
            self.apply_entry(entry, now_local_ms, &mut after_batch);
        }
        self.raft.advance(self.applied_index);
        self.observe_role(now_local_ms);
        // Proposals only after `advance`: the Ready handed out is fully acknowledged.
        for after in after_batch {
            match after {
                AfterBatch::Grant { pending, result } => self.answer_grant(pending, result, now_local_ms),
                AfterBatch::Release { pending, result } => self.answer_release(pending, result),
                AfterBatch::Decline { pending, result } => self.answer_decline(pending, result, now_local_ms),
            }
        }
        for read in ready.read_states {
            self.on_read_state(read, now_local_ms);
        }
        self.settle_parked_floors();
        self.serve_waiters(now_local_ms);
        self.compact_if_due();
    }

    fn install_snapshot(&mut self, snapshot: Snapshot, now_local_ms: u64) {
        assert!(snapshot.index >= self.applied_index, "a snapshot never moves the applied index back");
        self.applied_index = snapshot.index;
        self.state = snapshot.state;
        // Only a follower installs a snapshot, and a leader leaving office
        // redirects the clients of its proposals; under
        // `GrantAfterExpiredWait`, which keeps them, those the snapshot
        // covers cannot be matched to their results and are dropped.
        self.pending.retain(|index, _| *index > snapshot.index);
        self.applied_at_ms.clear();
        let keys: Vec<Key> = self.state.locks().map(|(key, _)| key.clone()).collect();
        self.leases.retain(|key, _| keys.contains(key));
        for key in keys {
            self.sync_lease(&key, now_local_ms);
        }
    }

    fn apply_entry(&mut self, entry: Entry, now_local_ms: u64, after_batch: &mut Vec<AfterBatch>) {
        if entry.index <= self.applied_index {
            return;
        }
        assert_eq!(entry.index.0, self.applied_index.0 + 1, "committed entries apply in order without gaps");
        self.applied_index = entry.index;
        if let Some(office) = self.office.as_mut() {
            if entry.term == office.term {
                office.serving = true;
            }
        }
        // Stale leftovers (overwritten entries below this index; only under
        // `GrantAfterExpiredWait`, which keeps a lost term's proposals) are answered by nobody.
        let stale: Vec<LogIndex> = self.pending.range(..entry.index).map(|(index, _)| *index).collect();
        for index in stale {
            self.pending.remove(&index);
        }
        let ours = self.pending.remove(&entry.index).filter(|pending| pending.term == entry.term);
        let Payload::Command(command) = entry.payload else {
            // Recorded too: two nodes applying no-ops of different terms at one
            // index is a divergence only the history can show.
            self.push(Output::AppliedNoop { index: entry.index, term: entry.term });
            return;
        };
        let retried = match &command {
            Command::Grant { holder, .. } | Command::Decline { holder, .. } => {
                self.state.session_result(*holder).is_some_and(|result| result != crate::ApplyResult::Noop)
            }
            _ => false,
        };
        let result = self.state.apply(&command, self.config.variant);
        self.probe_applied(&command, result, retried);
        self.sync_lease(command.key(), now_local_ms);
        self.push(Output::Applied { index: entry.index, term: entry.term, command: command.clone(), result });
        let Some(pending) = ours else {
            return;
        };
        match pending.kind {
            PendingKind::Acquire { .. } => after_batch.push(AfterBatch::Grant { pending, result }),
            PendingKind::Release { .. } => after_batch.push(AfterBatch::Release { pending, result }),
            PendingKind::Decline { .. } => after_batch.push(AfterBatch::Decline { pending, result }),
        }
    }

    /// The probes an applied command reaches (`crate::probe`).
    fn probe_applied(&mut self, command: &Command, result: ApplyResult, retried: bool) {
        if retried {
            self.probe(Probe::RetryAnsweredFromSession);
        }
        match (command, result) {
            (Command::Expire { key, token }, ApplyResult::Expired { existed: false }) => {
                let replaced = self.state.lock(key).is_some_and(|lock| lock.token > *token);
                self.probe(if replaced { Probe::ExpireForReplacedToken } else { Probe::ExpireFoundNothing });
            }
            (Command::Release { .. }, ApplyResult::NotFound) => self.probe(Probe::ReleaseFoundNothing),
            _ => {}
        }
    }

    /// Our Grant applied: answer `Granted` if [`LockServer::decide_grant_reply`]
    /// allows it; if the client has gone (cancelled while in flight), release
    /// the ghost at once and send nothing.
    fn answer_grant(&mut self, pending: Pending, result: ApplyResult, now_local_ms: u64) {
        let PendingKind::Acquire { key, lease_ms } = &pending.kind else {
            unreachable!("answer_grant gets acquires only");
        };
        let holder = Holder { client: pending.client, request: pending.request };
        if self.ghosts.remove(&holder) {
            if let ApplyResult::Granted { token } = result {
                self.release_ghost(holder, Some(token));
            }
            return;
        }
        let reply = match result {
            ApplyResult::Granted { token } => match self.decide_grant_reply(pending.term, key, token, *lease_ms) {
                GrantDecision::Reply(reply) => {
                    if reply == ClientReply::NotHeld {
                        self.probe(Probe::GrantAnsweredNotHeld);
                    }
                    Some(reply)
                }
                GrantDecision::ConfirmFirst => {
                    let (client, request, key) = (pending.client, pending.request, key.clone());
                    self.confirm_then_grant(pending.term, client, request, key, token, now_local_ms);
                    None
                }
                GrantDecision::Silent => None,
            },
            // Defensive: the leader never proposes a Grant for a key it knows to be held.
            ApplyResult::GrantRejected => self.still_leader_of(pending.term).then(|| {
                let deadline_local_ms = self.leases.get(key).map_or(now_local_ms, |lease| lease.deadline_local_ms);
                ClientReply::Busy { remaining_ms: deadline_local_ms.saturating_sub(now_local_ms) }
            }),
            // A late duplicate of an older request: its client has moved on.
            _ => None,
        };
        if let Some(reply) = reply {
            self.reply(pending.client, pending.request, reply);
        }
    }

    /// The one function that decides whether `Granted { token }` may be sent
    /// for a Grant this node proposed in `term`. Safe rule: only while this
    /// node is still leader of that term (a deposed leader cannot know what
    /// happened since), only if `key` is held with `token` at the moment the
    /// reply is produced — a lock that already expired or was released is
    /// answered `NotHeld` (etcd 11456) — and only after a read-index round
    /// confirms this node still leads: a leader stalled between applying the
    /// Grant and answering (a GC pause) may have been deposed and the lock
    /// expired by its successor meanwhile. The confirmed round runs this
    /// check again (`grant_confirmed`).
    ///
    /// `GrantAfterExpiredWait` answers the way a naive server does: whoever
    /// received the request says `Granted` when it applies the Grant, leader or
    /// not, and whether or not the lock is still live, with the lease the
    /// Grant asked for.
    fn decide_grant_reply(&self, term: Term, key: &Key, token: Token, lease_ms: u64) -> GrantDecision {
        if self.config.variant == Variant::GrantAfterExpiredWait {
            return GrantDecision::Reply(ClientReply::Granted { token, lease_ms });
        }
        if !self.still_leader_of(term) {
            return GrantDecision::Silent;
        }
        match self.live_grant(key, token) {
            Some(_) => GrantDecision::ConfirmFirst,
            None => GrantDecision::Reply(ClientReply::NotHeld),
        }
    }

    /// `Granted` for `token` if `key` is held with it right now.
    pub(super) fn live_grant(&self, key: &Key, token: Token) -> Option<ClientReply> {
        match self.state.lock(key) {
            Some(lock) if lock.token == token => Some(ClientReply::Granted { token, lease_ms: lock.lease_ms }),
            _ => None,
        }
    }

    fn answer_release(&mut self, pending: Pending, result: ApplyResult) {
        if !self.still_leader_of(pending.term) {
            return;
        }
        let reply = match result {
            // A Release, or a revoke's Expire, that removed the lock.
            ApplyResult::Released | ApplyResult::Expired { existed: true } => ClientReply::Released,
            _ => ClientReply::NotHeld,
        };
        self.reply(pending.client, pending.request, reply);
    }

    pub(super) fn still_leader_of(&self, term: Term) -> bool {
        self.office.is_some_and(|office| office.term == term)
    }

    /// Compacts the log once Raft's `snapshot_threshold_entries` were applied
    /// past the last snapshot (one threshold, kept by Raft).
    fn compact_if_due(&mut self) {
        if !self.raft.snapshot_due() {
            return;
        }
        self.probe(Probe::Compacted);
        let snapshot = self.raft.compact(self.applied_index, self.state.clone());
        assert_eq!(snapshot.index, self.applied_index, "the snapshot covers exactly the applied log");
        self.push(Output::Compacted(snapshot));
    }
}

/// What [`LockServer::decide_grant_reply`] concluded.
enum GrantDecision {
    Reply(ClientReply),
    /// The lock is live: confirm leadership, then answer.
    ConfirmFirst,
    /// Not the leader of the Grant's term any more: no answer at all.
    Silent,
}
