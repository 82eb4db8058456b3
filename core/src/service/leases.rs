//! Lease timers on the leader's local clock: expiry and renew.
//!
//! Only the leader keeps timers. A lock's timer starts when the leader applies
//! its Grant (deadline = apply time + lease) or, for every lock already in the
//! state, when the leader takes office (a full lease from then). Because the
//! new leader's start of office is later in true time than anything its
//! predecessors did, it can only expire a lease *later* than they would have
//! (SCENARIOS.md 6).
//!
//! An expiry needs confirmed leadership (etcd 15247, SCENARIOS.md 5): when a
//! deadline passes, the leader asks Raft for a read-index round; only once a
//! majority confirms it and the deadline has still passed does it propose
//! `Expire { key, token }`, at most one per token. A stale leader stuck in a
//! partition never gets the confirmation, so it never expires anything.
//!
//! Renew needs no log entry. It is acknowledged only after a read-index round
//! confirms that this node was still leader after the request arrived; the new
//! deadline is `confirmation time + lease` on this leader's clock. Why that is
//! safe across leader changes, argued from the client's side (docs/SPEC.md §3,
//! "The client's lease belief"): the client's renewed belief counts from
//! the true instant `S` it first sent the renew. The confirming majority
//! acknowledged a heartbeat sent after the request arrived, so after `S`; any
//! later leader was elected by a majority that overlaps it, in a vote cast
//! after that acknowledgement, so the later leader takes office after `S` and
//! restarts the lease with a full lease from then. Either way the lock lasts
//! at least a lease (measured on some server clock) after `S`, which is what
//! the belief assumes. (The confirmation itself may be processed after a new
//! leader took office; the argument does not need it to be earlier.) A renew
//! lost with the old leader therefore never shortens a lease.

use super::{ClientReply, Expiry, Lease, LockServer, Output, ReadPurpose, ReadRound, CONFIRM_RETRY_TICKS, READS_MAX};
use crate::command::Command;
use crate::probe::Probe;
use crate::raft::ReadState;
use crate::types::{ClientId, Key, RequestId, Term, Token};
use crate::variant::Variant;

impl LockServer {
    /// On taking office: a timer for every lock in the state.
    pub(super) fn restart_leases(&mut self, now_local_ms: u64) {
        let locks: Vec<(Key, Token, u64)> =
            self.state.locks().map(|(key, lock)| (key.clone(), lock.token, lock.lease_ms)).collect();
        for (key, token, lease_ms) in locks {
            let start_local_ms = self.lease_start_on_taking_office(&key, token, now_local_ms);
            let deadline_local_ms = start_local_ms.saturating_add(lease_ms);
            self.leases.insert(key, Lease { token, lease_ms, deadline_local_ms, expiry: Expiry::Idle });
        }
    }

    /// When a new leader's timer for an existing lock starts. The safe rule is
    /// a full lease from taking office; `NoLeaseRestartOnNewLeader` starts it
    /// when this node applied the Grant, possibly long ago (and ignoring every
    /// renew acknowledged by the old leader).
    fn lease_start_on_taking_office(&self, key: &Key, token: Token, now_local_ms: u64) -> u64 {
        if self.config.variant != Variant::NoLeaseRestartOnNewLeader {
            return now_local_ms;
        }
        match self.applied_at_ms.get(key) {
            Some((applied_token, applied_local_ms)) if *applied_token == token => *applied_local_ms,
            _ => now_local_ms,
        }
    }

    /// After applying a command for `key`: keep this node's apply times and,
    /// at the leader, the timer in step with the lock the state now holds.
    pub(super) fn sync_lease(&mut self, key: &Key, now_local_ms: u64) {
        let lock = self.state.lock(key).map(|lock| (lock.token, lock.lease_ms));
        match lock {
            None => {
                self.applied_at_ms.remove(key);
                self.leases.remove(key);
            }
            Some((token, lease_ms)) => {
                if self.applied_at_ms.get(key).map(|(applied_token, _)| *applied_token) != Some(token) {
                    self.applied_at_ms.insert(key.clone(), (token, now_local_ms));
                }
                if self.office.is_some() && self.leases.get(key).map(|lease| lease.token) != Some(token) {
                    // A Grant applied at the leader: the lease starts now, after commit.
                    let deadline_local_ms = now_local_ms.saturating_add(lease_ms);
                    let lease = Lease { token, lease_ms, deadline_local_ms, expiry: Expiry::Idle };
                    self.leases.insert(key.clone(), lease);
                }
            }
        }
    }

    /// Asks for leadership confirmation for every lease past its deadline
    /// (one read round for all of them), and asks again for rounds that did
    /// not come back within about an election timeout.
    pub(super) fn check_lease_deadlines(&mut self, now_local_ms: u64) {
        let Some(office) = self.office else {
            return;
        };
        if !office.serving {
            return;
        }
        let retry_ms = CONFIRM_RETRY_TICKS.saturating_mul(self.config.tick_ms);
        let due: Vec<Key> = self
            .leases
            .iter()
            .filter(|(_, lease)| lease.deadline_local_ms <= now_local_ms)
            .filter(|(_, lease)| match lease.expiry {
                Expiry::Idle => true,
                Expiry::Confirming { since_local_ms, .. } => now_local_ms.saturating_sub(since_local_ms) >= retry_ms,
                Expiry::Proposed => false,
            })
            .map(|(key, _)| key.clone())
            .collect();
        if due.is_empty() || self.reads.len() >= READS_MAX {
            return;
        }
        let ctx = self.next_read_ctx();
        if self.raft.read_index(ctx).is_err() {
            return;
        }
        self.reads.insert(ctx, ReadRound { term: office.term, purpose: ReadPurpose::Expiry });
        for key in due {
            let lease = self.leases.get_mut(&key).expect("due keys were just listed");
            lease.expiry = Expiry::Confirming { ctx, since_local_ms: now_local_ms };
        }
    }

    /// Renew for the current holder only, answered after a read-index round
    /// confirms this node still leads: `Renewed` as much as `NotHeld`, which
    /// a leader that has missed its successor's grants would otherwise answer
    /// from a lock table that is no longer the cluster's (found by the
    /// `linearizable` checker: a leader paused for 2 s answered a renew
    /// `NotHeld` on resuming, 500 ms before the lease could have ended). The
    /// one place that consults `RenewWithoutLeadershipCheck`, which answers at
    /// once on a node that merely believes it is leader.
    pub(super) fn renew(&mut self, client: ClientId, request: RequestId, key: Key, token: Token, now_local_ms: u64) {
        if self.config.variant == Variant::RenewWithoutLeadershipCheck {
            let reply = if self.renewable(&key, token) {
                ClientReply::Renewed { lease_ms: self.extend_lease(&key, now_local_ms) }
            } else {
                ClientReply::NotHeld
            };
            self.reply(client, request, reply);
            return;
        }
        let duplicate = self.reads.values().any(|round| {
            matches!(&round.purpose, ReadPurpose::Renew { client: c, request: r, .. } if *c == client && *r == request)
        });
        if duplicate {
            return;
        }
        if self.reads.len() >= READS_MAX {
            self.reply(client, request, ClientReply::Unavailable);
            return;
        }
        let term = self.office.expect("only a leader renews").term;
        let ctx = self.next_read_ctx();
        if self.raft.read_index(ctx).is_err() {
            self.reply(client, request, ClientReply::Unavailable);
            return;
        }
        self.reads.insert(ctx, ReadRound { term, purpose: ReadPurpose::Renew { client, request, key, token } });
    }

    /// Starts the read-index round after which an applied Grant is answered
    /// (`decide_grant_reply`). If no round can start, the client gets no
    /// answer and retries with the same request id, which the state machine
    /// answers with the same token.
    pub(super) fn confirm_then_grant(
        &mut self,
        term: Term,
        client: ClientId,
        request: RequestId,
        key: Key,
        token: Token,
        now_local_ms: u64,
    ) {
        if self.reads.len() >= READS_MAX {
            return;
        }
        let ctx = self.next_read_ctx();
        if self.raft.read_index(ctx).is_ok() {
            let purpose = ReadPurpose::Grant { client, request, key, token, asked_local_ms: now_local_ms };
            self.reads.insert(ctx, ReadRound { term, purpose });
        }
    }

    /// How old (local ms) a leadership confirmation may be when a Grant is
    /// answered: half the minimum election timeout, leaving room for drift.
    pub(super) fn grant_confirmation_fresh_ms(&self) -> u64 {
        u64::from(self.raft.config().election_ticks_min) * self.config.tick_ms / 2
    }

    /// The lock on `key` is live with `token` and no Expire for it is in flight.
    /// The one place Variant::RenewIgnoresToken is consulted: any live lock on
    /// the key will do, so a holder whose lease ended renews its successor's.
    fn renewable(&self, key: &Key, token: Token) -> bool {
        let ignore_token = self.config.variant == Variant::RenewIgnoresToken;
        let live = self.state.lock(key).is_some_and(|lock| ignore_token || lock.token == token);
        live && (!self.expire_proposed(key, token) || self.config.variant == Variant::RenewWhileExpiring)
    }

    /// The lease of `token` on `key` has its Expire proposed (once it applies, the lease is gone).
    fn expire_proposed(&self, key: &Key, token: Token) -> bool {
        self.leases.get(key).is_some_and(|lease| lease.token == token && lease.expiry == Expiry::Proposed)
    }

    /// The lock on `key` is live with `token` and an Expire of it is proposed.
    fn expire_pending(&self, key: &Key, token: Token) -> bool {
        self.state.lock(key).is_some_and(|lock| lock.token == token) && self.expire_proposed(key, token)
    }

    /// A full lease from now; returns its length.
    fn extend_lease(&mut self, key: &Key, now_local_ms: u64) -> u64 {
        let lock = self.state.lock(key).expect("only a live lock is extended");
        let (token, lease_ms) = (lock.token, lock.lease_ms);
        let deadline_local_ms = now_local_ms.saturating_add(lease_ms);
        let lease = self.leases.entry(key.clone()).or_insert(Lease {
            token,
            lease_ms,
            deadline_local_ms,
            expiry: Expiry::Idle,
        });
        assert_eq!(lease.token, token, "the timer follows the live lock");
        lease.deadline_local_ms = lease.deadline_local_ms.max(deadline_local_ms);
        // A confirmation round already asked for this lease now finds the deadline ahead and lets it be.
        lease.expiry = Expiry::Idle;
        lease_ms
    }

    /// A read-index round came back: leadership was confirmed after it was asked.
    pub(super) fn on_read_state(&mut self, read: ReadState, now_local_ms: u64) {
        let Some(round) = self.reads.remove(&read.ctx) else {
            return;
        };
        if self.office.map(|office| office.term) != Some(round.term) {
            return;
        }
        match round.purpose {
            ReadPurpose::Expiry => self.expire_confirmed(read.ctx, now_local_ms),
            ReadPurpose::Floor { read: floor_read } => self.settle_floor(round.term, read.commit, floor_read),
            ReadPurpose::Grant { client, request, key, token, asked_local_ms } => {
                // The confirmation says this node led when the majority
                // answered; followers refuse other candidates for an election
                // timeout after hearing from it, so it still leads now only if
                // the round is fresh. A round that came back late (the node
                // stalled with the answers queued) proves nothing: ask again.
                // So does a clock that reads earlier than when the round was
                // asked: it was stepped back and cannot say how long the node
                // stalled (found by the hunt: a leader paused 1341 ms while
                // its clock stepped back 1537 ms). A step back of about the
                // stall's length still reads as fresh: this rule trusts the
                // clock not to step back by that much inside a stall.
                let elapsed_ms = now_local_ms.checked_sub(asked_local_ms);
                if elapsed_ms.is_none_or(|ms| ms > self.grant_confirmation_fresh_ms()) {
                    self.probe(Probe::GrantConfirmationStale);
                    tracing::debug!(
                        key = %key,
                        token = %token,
                        client = %client,
                        elapsed_ms = ?elapsed_ms,
                        fresh_ms = self.grant_confirmation_fresh_ms(),
                        "grant answer deferred: the leadership confirmation came back stale; asking again"
                    );
                    self.confirm_then_grant(round.term, client, request, key, token, now_local_ms);
                    return;
                }
                let reply = self.live_grant(&key, token).unwrap_or(ClientReply::NotHeld);
                if reply == ClientReply::NotHeld {
                    self.probe(Probe::GrantAnsweredNotHeld);
                }
                self.reply(client, request, reply);
            }
            ReadPurpose::Renew { client, request, key, token } => {
                if self.expire_pending(&key, token) && self.config.variant != Variant::RenewWhileExpiring {
                    // The lease's Expire is proposed, not committed: `NotHeld`
                    // now would tell the holder its lock is gone while the
                    // Expire can still be lost with this leader, and the next
                    // leader keep the lock (found by the hunt: swarm seed
                    // 7496, a renew held to the lease's end, the leader
                    // paused and cut off right after proposing, the key then
                    // refused to others for a lease the holder was told had
                    // ended). `Unavailable`: the client asks again and finds
                    // the Expire applied (`NotHeld`) or the next leader's table.
                    self.reply(client, request, ClientReply::Unavailable);
                    return;
                }
                if self.renewable(&key, token) {
                    if self.leases.get(&key).is_some_and(|lease| matches!(lease.expiry, Expiry::Confirming { .. })) {
                        self.probe(Probe::RenewConfirmedDuringExpiry);
                    }
                    let lease_ms = self.extend_lease(&key, now_local_ms);
                    self.reply(client, request, ClientReply::Renewed { lease_ms });
                } else {
                    self.reply(client, request, ClientReply::NotHeld);
                }
            }
        }
    }

    /// Proposes Expire for each lease of round `ctx` whose deadline has still passed.
    fn expire_confirmed(&mut self, ctx: u64, now_local_ms: u64) {
        let keys: Vec<Key> = self
            .leases
            .iter()
            .filter(|(_, lease)| matches!(lease.expiry, Expiry::Confirming { ctx: c, .. } if c == ctx))
            .map(|(key, _)| key.clone())
            .collect();
        for key in keys {
            let lease = self.leases.get(&key).expect("keys were just listed");
            let (token, deadline_local_ms) = (lease.token, lease.deadline_local_ms);
            if deadline_local_ms > now_local_ms {
                // Renewed while the round was out.
                tracing::debug!(key = %key, token = %token, "expire dropped: the lease was renewed while the round was out");
                self.leases.get_mut(&key).expect("listed").expiry = Expiry::Idle;
                continue;
            }
            let proposed = self.raft.propose(Command::Expire { key: key.clone(), token }).is_ok();
            tracing::debug!(
                key = %key,
                token = %token,
                deadline_local_ms,
                now_local_ms,
                proposed,
                "expire: the lease's deadline passed on this leader's clock and a read round confirmed it still leads"
            );
            self.leases.get_mut(&key).expect("listed").expiry = if proposed { Expiry::Proposed } else { Expiry::Idle };
            if proposed {
                let renewing = self.reads.values().any(|round| {
                    matches!(&round.purpose, ReadPurpose::Renew { key: k, token: t, .. } if *k == key && *t == token)
                });
                if renewing {
                    self.probe(Probe::ExpireWhileRenewInFlight);
                }
                self.push(Output::ExpireProposed { key, token });
            }
        }
    }
}
