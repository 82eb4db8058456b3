//! What each client request does on arrival.
//!
//! Only a leader that has applied an entry of its own term serves requests:
//! before that its copy of the state may miss committed grants, so "the key is
//! free" could be wrong. Followers redirect to the leader they know; a leader
//! not yet serving answers `Unavailable`.
//!
//! Acquire offers both forms etcd offers: `wait_ms == 0` is a try-lock that
//! answers `Busy { remaining_ms }` at once (what etcd's users asked for, and
//! what lets a worker move to other work), `wait_ms > 0` waits in a bounded
//! FIFO queue per key until the key frees (then a Grant is proposed for the
//! head of the queue) or the wait deadline on the leader's clock passes
//! (`TimedOut`). `Busy` and `TimedOut` are decided through the log, as a
//! Decline (`declines`).

use super::{
    ClientReply, ClientRequest, LockServer, Output, Pending, PendingKind, Waiter, PENDING_MAX, WAITING_KEYS_MAX,
    WAIT_MS_MAX,
};
use crate::command::{ApplyResult, Command, Decline};
use crate::probe::Probe;
use crate::raft::ProposeError;
use crate::types::{ClientId, Holder, Key, LogIndex, RequestId, Token};
use crate::variant::Variant;

/// Whether a key can be granted now, as the leader sees it.
pub(super) enum KeyStatus {
    /// No lock, no Grant in flight, nobody queued.
    Free,
    /// Held by, or being granted to, this very request: a retry.
    Ours,
    /// Held or being granted to someone else, or others wait first; the lease runs at most this long.
    Busy { remaining_ms: u64 },
}

impl LockServer {
    /// A client request arrives. Every answer is an [`Output::Reply`], now or later.
    pub fn on_client(&mut self, client: ClientId, request: RequestId, body: ClientRequest, now_local_ms: u64) {
        if body == ClientRequest::Cancel {
            self.cancel(Holder { client, request });
            return;
        }
        if self.office.is_none() {
            if self.config.variant == Variant::FollowerAnswersTryLock
                && self.busy_from_own_state(client, request, &body)
            {
                return;
            }
            let reply = self.not_leader_reply();
            self.reply(client, request, reply);
            return;
        }
        if !self.is_serving_leader() {
            self.probe(Probe::UnavailableBeforeServing);
            tracing::debug!(
                client = %client,
                request = %request,
                "request answered Unavailable: this leader has not yet committed an entry of its term"
            );
            self.reply(client, request, ClientReply::Unavailable);
            return;
        }
        self.drop_superseded_waiters(client, request);
        match body {
            ClientRequest::Acquire { key, lease_ms, wait_ms } => {
                self.acquire(Holder { client, request }, key, lease_ms, wait_ms, now_local_ms)
            }
            ClientRequest::Renew { key, token } => self.renew(client, request, key, token, now_local_ms),
            ClientRequest::Release { key, token } => self.release(client, request, key, token),
            ClientRequest::Revoke { key, token } => self.revoke(client, request, key, token),
            ClientRequest::Cancel => unreachable!("handled above"),
        }
    }

    /// A reply never reached its client (the client is gone). A lost `Granted`
    /// leaves a ghost lock that nobody will use or release, so the leader
    /// releases it at once instead of waiting a whole lease.
    pub fn on_bounced(&mut self, client: ClientId, request: RequestId, reply: ClientReply, now_local_ms: u64) {
        let _ = now_local_ms;
        if let ClientReply::Granted { token, .. } = reply {
            self.release_ghost(Holder { client, request }, Some(token));
        }
    }

    fn acquire(&mut self, holder: Holder, key: Key, lease_ms: u64, wait_ms: u64, now_local_ms: u64) {
        if self.pending_request_index(holder.client, holder.request).is_some() {
            // The same request is already in flight in this term: its apply answers
            // both attempts. A second Grant would be harmless to the state machine
            // (its session answers it) but is still a second proposal per retry.
            return;
        }
        if self.waiters.get(&key).is_some_and(|queue| queue.iter().any(|waiter| waiter.holder == holder)) {
            return;
        }
        match self.state.session_result(holder) {
            // A retry of a Grant already applied whose lock has ended since is
            // answered `NotHeld` at once, whoever holds the key now: answering
            // it `Busy` or queueing it would tell the client it never got a
            // lock it held for a lease (found by the `linearizable` checker: a
            // lost `Granted`, then a retry after the lease expired answered
            // `TimedOut`). Removals are committed, so this is final.
            Some(ApplyResult::Granted { token }) if self.live_grant(&key, token).is_none() => {
                self.probe(Probe::RetryOfLostGrant);
                self.reply(holder.client, holder.request, ClientReply::NotHeld);
                return;
            }
            // A copy of a request declined already, here or at another leader
            // (a resend overtaken by the answer): the same answer again, never
            // a place in the queue and a Grant for a client that has moved on.
            Some(ApplyResult::Declined { reason }) => {
                let reply = self.decline_reply(&key, holder, reason, now_local_ms);
                self.reply(holder.client, holder.request, reply);
                return;
            }
            // A late copy of a request older than the client's last answered
            // one: its client has moved on and waits for no answer.
            Some(ApplyResult::Noop) => return,
            _ => {}
        }
        match self.key_status(&key, holder, now_local_ms) {
            // A retry of a request that already applied is proposed again: the state
            // machine's session answers it with the original token, and the answer
            // goes through the same liveness check as the first one.
            KeyStatus::Free | KeyStatus::Ours => self.propose_grant(holder, key, lease_ms),
            KeyStatus::Busy { remaining_ms } if wait_ms == 0 => {
                tracing::debug!(
                    key = %key,
                    client = %holder.client,
                    remaining_ms,
                    "try-lock finds the key held or promised: Busy once a Decline commits"
                );
                self.propose_decline(holder, key, Decline::Busy)
            }
            KeyStatus::Busy { remaining_ms } => {
                self.follow_clock_back(now_local_ms);
                let deadline_local_ms = now_local_ms.saturating_add(wait_ms.min(WAIT_MS_MAX));
                tracing::debug!(
                    key = %key,
                    client = %holder.client,
                    remaining_ms,
                    deadline_local_ms,
                    "grant deferred: the key is held, promised or queued for; waiting in the key's queue"
                );
                self.enqueue(key, Waiter { holder, lease_ms, deadline_local_ms });
            }
        }
    }

    pub(super) fn key_status(&self, key: &Key, holder: Holder, now_local_ms: u64) -> KeyStatus {
        if let Some(lock) = self.state.lock(key) {
            if lock.holder == holder {
                return KeyStatus::Ours;
            }
            let remaining_ms = match self.leases.get(key) {
                Some(lease) if lease.token == lock.token => lease.deadline_local_ms.saturating_sub(now_local_ms),
                _ => lock.lease_ms,
            };
            return KeyStatus::Busy { remaining_ms };
        }
        if let Some(pending) = self.inflight_grant(key) {
            if pending.client == holder.client && pending.request == holder.request {
                return KeyStatus::Ours;
            }
            // Counting our own proposals in flight keeps GrantRejected purely defensive.
            // The Grant in flight will hold the key for a full lease once applied.
            let remaining_ms = match pending.kind {
                PendingKind::Acquire { lease_ms, .. } => lease_ms,
                PendingKind::Release { .. } | PendingKind::Decline { .. } => {
                    unreachable!("inflight_grant finds acquires only")
                }
            };
            return KeyStatus::Busy { remaining_ms };
        }
        if self.waiters.get(key).is_some_and(|queue| !queue.is_empty()) {
            // First come, first served: a newcomer does not overtake the queue.
            return KeyStatus::Busy { remaining_ms: 0 };
        }
        KeyStatus::Free
    }

    /// The Grant for `key` this leader proposed in its current term and has not applied yet.
    pub(super) fn inflight_grant(&self, key: &Key) -> Option<&Pending> {
        let term = self.office?.term;
        self.pending.values().find(|pending| {
            pending.term == term
                && matches!(&pending.kind, PendingKind::Acquire { key: pending_key, .. } if pending_key == key)
        })
    }

    /// The index of a proposal of this request made in the current term, if still unapplied.
    pub(super) fn pending_request_index(&self, client: ClientId, request: RequestId) -> Option<LogIndex> {
        let term = self.office?.term;
        self.pending
            .iter()
            .find(|(_, pending)| pending.term == term && pending.client == client && pending.request == request)
            .map(|(index, _)| *index)
    }

    fn enqueue(&mut self, key: Key, waiter: Waiter) {
        let holder = waiter.holder;
        let keys_full = !self.waiters.contains_key(&key) && self.waiters.len() >= WAITING_KEYS_MAX;
        let queue_full = self.waiters.get(&key).is_some_and(|queue| queue.len() >= self.config.wait_queue_max);
        if keys_full || queue_full {
            self.probe(Probe::WaitQueueFull);
            self.push(Output::TurnedAway { key, holder });
            self.reply(holder.client, holder.request, ClientReply::Unavailable);
            return;
        }
        self.waiters.entry(key).or_default().push_back(waiter);
    }

    /// Takes every waiter whose deadline passed out of its queue; each is
    /// answered `TimedOut` once its Decline commits (`declines`). The one
    /// place `WaitersNeverTimeOut` is consulted: it takes none, so a waiter
    /// stays queued past its deadline, unanswered, until the key frees and
    /// it is granted late (or its client gives up and cancels).
    pub(super) fn time_out_waiters(&mut self, now_local_ms: u64) {
        self.follow_clock_back(now_local_ms);
        if self.config.variant == Variant::WaitersNeverTimeOut || self.waiters.is_empty() {
            return;
        }
        let mut timed_out = Vec::new();
        for (key, queue) in self.waiters.iter_mut() {
            queue.retain(|waiter| {
                let alive = now_local_ms < waiter.deadline_local_ms;
                if !alive {
                    timed_out.push((waiter.holder, key.clone()));
                }
                alive
            });
        }
        self.waiters.retain(|_, queue| !queue.is_empty());
        for (holder, key) in timed_out {
            self.probe(Probe::WaiterTimedOut);
            self.propose_decline(holder, key, Decline::TimedOut);
        }
    }

    /// Moves every waiter's deadline back by as much as the local clock was
    /// stepped back since the last reading. A wait has no safety role (its
    /// end is a Decline through the log), so unlike a lease deadline, which
    /// a backward step may delay the safe way, it must not last the step
    /// longer: a waiter queued before a 3.9 s step was answered `TimedOut`
    /// 3.9 s late, and its client's retries were swallowed as duplicates
    /// meanwhile (found by the `answered` checker, swarm seed 39). The clock
    /// never runs backwards otherwise, so a reading below the last one is a
    /// step; what of it the time between two readings hides (about a tick)
    /// stays in the wait. Called before any deadline is taken or compared.
    fn follow_clock_back(&mut self, now_local_ms: u64) {
        let back_ms = self.now_local_ms_last.saturating_sub(now_local_ms);
        self.now_local_ms_last = now_local_ms;
        if back_ms == 0 {
            return;
        }
        if !self.waiters.is_empty() {
            self.probe(Probe::WaiterDeadlinesFollowedClockBack);
        }
        tracing::debug!(back_ms, "local clock stepped back: waiter deadlines move back as far");
        for waiter in self.waiters.values_mut().flatten() {
            waiter.deadline_local_ms = waiter.deadline_local_ms.saturating_sub(back_ms);
        }
    }

    /// Proposes a Grant for the head of each queue whose key is free. Called
    /// after every applied batch, when a Release or Expire may have freed keys.
    pub(super) fn serve_waiters(&mut self, now_local_ms: u64) {
        if !self.is_serving_leader() {
            return;
        }
        self.time_out_waiters(now_local_ms);
        let keys: Vec<Key> = self.waiters.keys().cloned().collect();
        for key in keys {
            let free = self.state.lock(&key).is_none() && self.inflight_grant(&key).is_none();
            if !free {
                continue;
            }
            let queue = self.waiters.get_mut(&key).expect("keys were just listed");
            let waiter = queue.pop_front().expect("empty queues are removed");
            if queue.is_empty() {
                self.waiters.remove(&key);
            }
            self.propose_grant(waiter.holder, key, waiter.lease_ms);
        }
    }

    fn propose_grant(&mut self, holder: Holder, key: Key, lease_ms: u64) {
        let command = Command::Grant { key: key.clone(), lease_ms, holder };
        self.propose_for_client(holder.client, holder.request, command, PendingKind::Acquire { key, lease_ms });
    }

    fn release(&mut self, client: ClientId, request: RequestId, key: Key, token: Token) {
        if self.pending_request_index(client, request).is_some() {
            return;
        }
        // The holder on a Release is for attribution only; name the lock's holder when the token is live.
        let holder = match self.state.lock(&key) {
            Some(lock) if lock.token == token => lock.holder,
            _ => Holder { client, request },
        };
        let command = Command::Release { key: key.clone(), token, holder };
        self.propose_for_client(client, request, command, PendingKind::Release { key });
        if self.config.variant == Variant::ReleasedBeforeCommit {
            self.reply(client, request, ClientReply::Released);
        }
    }

    /// `FollowerAnswersTryLock`: a follower that sees the key held in its own
    /// copy of the state answers a try-lock `Busy` itself. Returns whether it did.
    fn busy_from_own_state(&mut self, client: ClientId, request: RequestId, body: &ClientRequest) -> bool {
        let ClientRequest::Acquire { key, wait_ms: 0, .. } = body else {
            return false;
        };
        let Some(lock) = self.state.lock(key) else {
            return false;
        };
        let remaining_ms = lock.lease_ms;
        self.reply(client, request, ClientReply::Busy { remaining_ms });
        true
    }

    /// A revoke is an Expire proposed at once, answered like a release.
    fn revoke(&mut self, client: ClientId, request: RequestId, key: Key, token: Token) {
        if self.pending_request_index(client, request).is_some() {
            return;
        }
        let command = Command::Expire { key: key.clone(), token };
        self.propose_for_client(client, request, command, PendingKind::Release { key });
    }

    pub(super) fn propose_for_client(
        &mut self,
        client: ClientId,
        request: RequestId,
        command: Command,
        kind: PendingKind,
    ) {
        if self.pending.len() >= PENDING_MAX {
            self.reply(client, request, ClientReply::Unavailable);
            return;
        }
        match self.raft.propose(command) {
            Ok((index, term)) => {
                let office_term = self.office.expect("only a leader proposes").term;
                assert_eq!(term, office_term, "a proposal carries the leader's term");
                assert!(index > self.applied_index, "a new proposal lies beyond the applied log");
                let replaced = self.pending.insert(index, Pending { term, client, request, kind });
                // A leftover of an overwritten entry at this index (kept only
                // under `GrantAfterExpiredWait`) is answered by nobody.
                assert!(replaced.as_ref().map(|old| old.term < term) != Some(false), "one proposal per index and term");
            }
            Err(ProposeError::NotLeader { .. }) => {
                let reply = self.not_leader_reply();
                self.reply(client, request, reply);
            }
            Err(ProposeError::Busy) => self.reply(client, request, ClientReply::Unavailable),
        }
    }

    /// A client asks one thing at a time: a newer request means it has given
    /// up on any older one still queued here, whose answer would go nowhere.
    /// Granting that one later would lock the key for a holder nobody knows
    /// about (found by the `linearizable` checker: a client's own next
    /// try-lock told `Busy` by the lock its abandoned wait was granted).
    /// The session now also refuses such a Grant at apply, once the newer
    /// request's answer is in the log; dropping the wait here still frees its
    /// place in the bounded queue and spares the proposal.
    fn drop_superseded_waiters(&mut self, client: ClientId, request: RequestId) {
        for queue in self.waiters.values_mut() {
            queue.retain(|waiter| waiter.holder.client != client || waiter.holder.request >= request);
        }
        self.waiters.retain(|_, queue| !queue.is_empty());
    }

    /// The client cancelled request `holder.request`: drop it from the wait
    /// queue, or mark its in-flight Grant as a ghost, or release its lock.
    fn cancel(&mut self, holder: Holder) {
        if self.office.is_none() {
            return;
        }
        for queue in self.waiters.values_mut() {
            queue.retain(|waiter| waiter.holder != holder);
        }
        self.waiters.retain(|_, queue| !queue.is_empty());
        if let Some(index) = self.pending_request_index(holder.client, holder.request) {
            // Only an in-flight Grant can become a ghost lock.
            if matches!(self.pending[&index].kind, PendingKind::Acquire { .. }) {
                self.probe(Probe::CancelWhileGrantInFlight);
                self.ghosts.insert(holder);
            }
            return;
        }
        self.release_ghost(holder, None);
    }

    /// Proposes a Release for the live lock of `holder` (with `token`, when known).
    pub(super) fn release_ghost(&mut self, holder: Holder, token: Option<Token>) {
        if !self.is_serving_leader() {
            // Only a leader can propose; the lease frees the lock otherwise.
            return;
        }
        let lock = self
            .state
            .locks()
            .find(|(_, lock)| lock.holder == holder && token.map(|token| lock.token == token) != Some(false))
            .map(|(key, lock)| (key.clone(), lock.token));
        let Some((key, token)) = lock else {
            return;
        };
        let command = Command::Release { key: key.clone(), token, holder };
        if self.raft.propose(command).is_ok() {
            self.probe(Probe::GhostReleaseProposed);
            self.push(Output::GhostReleaseProposed { key, token, holder });
        }
    }
}
