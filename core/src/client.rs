//! The client library of the lock service, sans-IO: the caller passes in
//! replies and the client's *local* clock in microseconds, and sends the
//! [`Outgoing`] requests it hands back.
//!
//! It follows `NotLeader` redirects, retries a request with the same request
//! id (so the server's session answers a retried acquire with the original
//! token), and keeps a conservative belief per key: "I hold this until my
//! local time T", with T = (local time the first attempt was sent) +
//! lease × (1 − ρ)/(1 + ρ). The derivation is in docs/SPEC.md §3,
//! "The client's lease belief".
//!
//! One request is pending at a time: a new request replaces the old one,
//! whose late answers are then ignored.

use crate::service::{ClientReply, ClientRequest};
use crate::types::{ClientId, Key, NodeId, RequestId, Token};
use crate::variant::Variant;
use std::collections::BTreeMap;

/// Redirects and `Unavailable` retries followed per attempt before waiting for
/// the timeout; bounds a ping-pong between two servers that name each other.
pub const REDIRECTS_MAX: u32 = 16;
/// Keys a client may believe it holds at once.
pub const BELIEFS_MAX: usize = 1_024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    pub id: ClientId,
    /// Servers are `NodeId(0) .. NodeId(nodes)`.
    pub nodes: u8,
    /// The drift bound of every clock, parts per million.
    pub drift_ppm_max: u64,
    /// How long to wait for an answer before retrying at the next server.
    pub request_timeout_us: u64,
    /// Request ids start above this; a client that restarts passes a higher
    /// base so a new life never reuses an old life's ids (the lock sessions
    /// and the resource's dedup table assume ids only go up per client).
    pub first_request: RequestId,
    /// The protocol variant; only `BeliefFromArrival` changes the client.
    pub variant: Variant,
}

/// A request to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub to: NodeId,
    pub request: RequestId,
    pub body: ClientRequest,
}

/// What a reply (or a timeout) meant to the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    /// A request was (re)sent; the caller delivers it.
    Sent(Outgoing),
    Granted {
        key: Key,
        token: Token,
        until_local_us: u64,
    },
    Renewed {
        key: Key,
        token: Token,
        until_local_us: u64,
    },
    Released {
        key: Key,
    },
    Busy {
        remaining_ms: u64,
    },
    TimedOut,
    /// The server says the lock is not ours (`NotHeld`): the belief is dropped.
    Lost {
        key: Key,
    },
    /// The reply was stale or changed nothing.
    Nothing,
}

/// The request waiting for an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PendingRequest {
    request: RequestId,
    body: ClientRequest,
    /// When the first attempt left: the belief counts from here, never from a retry.
    first_sent_local_us: u64,
    to: NodeId,
    deadline_local_us: u64,
    redirects: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Belief {
    token: Token,
    until_local_us: u64,
}

pub struct Client {
    config: ClientConfig,
    request_last: RequestId,
    leader_guess: NodeId,
    pending: Option<PendingRequest>,
    beliefs: BTreeMap<Key, Belief>,
}

/// How long a lease of `lease_ms` on the server's clock is safe on ours:
/// lease × (1 − ρ)/(1 + ρ) in µs, rounded down, with ρ = `drift_ppm_max` / 1e6.
pub fn believed_lease_us(lease_ms: u64, drift_ppm_max: u64) -> u64 {
    assert!(drift_ppm_max < 1_000_000, "a drift bound of 100% or more leaves no safe lease");
    let lease_us = u128::from(lease_ms) * 1_000;
    let slow = 1_000_000 - u128::from(drift_ppm_max);
    let fast = 1_000_000 + u128::from(drift_ppm_max);
    let believed = lease_us * slow / fast;
    assert!(believed <= lease_us, "the belief never outlasts the lease");
    u64::try_from(believed).expect("a lease in µs fits u64")
}

impl Client {
    pub fn new(config: ClientConfig) -> Client {
        assert!(config.nodes > 0, "client config `nodes` must be positive");
        assert!(config.request_timeout_us > 0, "client config `request_timeout_us` must be positive");
        assert!(config.drift_ppm_max < 1_000_000, "client config `drift_ppm_max` must be below 1e6");
        Client {
            request_last: config.first_request,
            config,
            leader_guess: NodeId(0),
            pending: None,
            beliefs: BTreeMap::new(),
        }
    }

    pub fn id(&self) -> ClientId {
        self.config.id
    }

    /// Asks for `key` (try-lock when `wait_ms == 0`), with a new request id.
    pub fn acquire(&mut self, key: Key, lease_ms: u64, wait_ms: u64, now_local_us: u64) -> Outgoing {
        self.start(ClientRequest::Acquire { key, lease_ms, wait_ms }, now_local_us)
    }

    /// Asks to extend the lease on `key`, if we believe we hold it (even if the belief has run out).
    pub fn renew(&mut self, key: &Key, now_local_us: u64) -> Option<Outgoing> {
        let token = self.beliefs.get(key)?.token;
        Some(self.start(ClientRequest::Renew { key: key.clone(), token }, now_local_us))
    }

    /// Releases `key`. The belief ends at once, before any answer: from now on
    /// the client must not act on the lock.
    pub fn release(&mut self, key: &Key, now_local_us: u64) -> Option<Outgoing> {
        let token = self.beliefs.remove(key)?.token;
        Some(self.start(ClientRequest::Release { key: key.clone(), token }, now_local_us))
    }

    /// Revokes our own lease on `key` by token (drops the belief at once);
    /// answered like a release.
    pub fn revoke(&mut self, key: &Key, now_local_us: u64) -> Option<Outgoing> {
        let token = self.beliefs.remove(key)?.token;
        Some(self.start(ClientRequest::Revoke { key: key.clone(), token }, now_local_us))
    }

    /// Revokes the lease of any `token` on `key` (an operator's tool, or a
    /// cleanup job holding a token it recorded earlier); beliefs are untouched.
    pub fn revoke_token(&mut self, key: &Key, token: Token, now_local_us: u64) -> Outgoing {
        self.start(ClientRequest::Revoke { key: key.clone(), token }, now_local_us)
    }

    /// Gives up the pending request. For an acquire this tells the server to
    /// release the lock if it was (or will be) granted: a ghost lock.
    pub fn cancel(&mut self, now_local_us: u64) -> Option<Outgoing> {
        let _ = now_local_us;
        let pending = self.pending.take()?;
        Some(Outgoing { to: pending.to, request: pending.request, body: ClientRequest::Cancel })
    }

    /// When the pending request should be retried, on our local clock.
    pub fn pending_deadline_local_us(&self) -> Option<u64> {
        self.pending.as_ref().map(|pending| pending.deadline_local_us)
    }

    /// The pending request's id, if any.
    pub fn pending_request(&self) -> Option<RequestId> {
        self.pending.as_ref().map(|pending| pending.request)
    }

    /// The token we may act on now: held, and `now` before the belief's end.
    pub fn belief(&self, key: &Key, now_local_us: u64) -> Option<Token> {
        let belief = self.beliefs.get(key)?;
        (now_local_us < belief.until_local_us).then_some(belief.token)
    }

    /// The local time the belief on `key` ends, if any.
    pub fn belief_until_local_us(&self, key: &Key) -> Option<u64> {
        self.beliefs.get(key).map(|belief| belief.until_local_us)
    }

    /// The token of the last grant on `key`, whether or not the belief has run out.
    pub fn token_of(&self, key: &Key) -> Option<Token> {
        self.beliefs.get(key).map(|belief| belief.token)
    }

    /// Takes over a lock granted to another life of this holder (a command-line
    /// `renew` or `release` with a token printed by an earlier `acquire`): the
    /// client knows the token but not when its lease began, so the belief
    /// starts already run out. `renew` then works as for a lock of its own,
    /// and only the renewal's answer lets the caller act on the lock again.
    pub fn adopt(&mut self, key: Key, token: Token) {
        self.beliefs.insert(key, Belief { token, until_local_us: 0 });
        assert!(self.beliefs.len() <= BELIEFS_MAX, "more than {BELIEFS_MAX} locks believed at once");
    }

    /// Drops the belief on `key` (the caller saw it run out); returns its token.
    pub fn forget(&mut self, key: &Key) -> Option<Token> {
        self.beliefs.remove(key).map(|belief| belief.token)
    }

    /// Retries the pending request at the next server, with the same request
    /// id, if its deadline has passed.
    pub fn on_timeout(&mut self, now_local_us: u64) -> Option<Outgoing> {
        let pending = self.pending.as_ref()?;
        if now_local_us < pending.deadline_local_us {
            return None;
        }
        let next = NodeId((pending.to.0 + 1) % self.config.nodes);
        Some(self.resend(next, now_local_us, false))
    }

    /// Handles an answer. Answers to anything but the pending request are ignored.
    pub fn on_reply(
        &mut self,
        from: NodeId,
        request: RequestId,
        reply: ClientReply,
        now_local_us: u64,
    ) -> Vec<ClientEvent> {
        let Some(pending) = self.pending.as_ref() else {
            return vec![ClientEvent::Nothing];
        };
        if pending.request != request {
            return vec![ClientEvent::Nothing];
        }
        match reply {
            ClientReply::NotLeader { leader } => {
                let to = match leader {
                    Some(leader) if leader != from && leader.0 < self.config.nodes => leader,
                    _ => NodeId((from.0 + 1) % self.config.nodes),
                };
                self.redirect(to, now_local_us)
            }
            ClientReply::Unavailable => self.redirect(from, now_local_us),
            reply => {
                self.leader_guess = from;
                let pending = self.pending.take().expect("checked above");
                vec![self.conclude(pending, reply, now_local_us)]
            }
        }
    }

    fn redirect(&mut self, to: NodeId, now_local_us: u64) -> Vec<ClientEvent> {
        let pending = self.pending.as_ref().expect("only the pending request is redirected");
        if pending.redirects >= REDIRECTS_MAX {
            // Wait for the timeout instead of bouncing between servers at network speed.
            return vec![ClientEvent::Nothing];
        }
        vec![ClientEvent::Sent(self.resend(to, now_local_us, true))]
    }

    /// The final answer to `pending`, arriving at `now_local_us`.
    fn conclude(&mut self, pending: PendingRequest, reply: ClientReply, now_local_us: u64) -> ClientEvent {
        // The one place Variant::BeliefFromArrival is consulted: the server's
        // lease may have started at any time after the first send, so the
        // belief counts from there; the arrival of the answer is too late.
        let belief_start_local_us =
            if self.config.variant == Variant::BeliefFromArrival { now_local_us } else { pending.first_sent_local_us };
        match (pending.body, reply) {
            (ClientRequest::Acquire { key, .. }, ClientReply::Granted { token, lease_ms }) => {
                let until_local_us = self.believe(&key, token, lease_ms, belief_start_local_us);
                ClientEvent::Granted { key, token, until_local_us }
            }
            (ClientRequest::Renew { key, token }, ClientReply::Renewed { lease_ms }) => {
                if self.token_of(&key) != Some(token) {
                    // Released or replaced meanwhile: a renewal does not bring it back.
                    return ClientEvent::Nothing;
                }
                let until_local_us = self.believe(&key, token, lease_ms, belief_start_local_us);
                ClientEvent::Renewed { key, token, until_local_us }
            }
            (ClientRequest::Release { key, .. } | ClientRequest::Revoke { key, .. }, ClientReply::Released) => {
                ClientEvent::Released { key }
            }
            (ClientRequest::Acquire { key, .. }, ClientReply::NotHeld)
            | (ClientRequest::Release { key, .. } | ClientRequest::Revoke { key, .. }, ClientReply::NotHeld) => {
                ClientEvent::Lost { key }
            }
            (ClientRequest::Renew { key, token }, ClientReply::NotHeld) => {
                if self.token_of(&key) == Some(token) {
                    self.beliefs.remove(&key);
                }
                ClientEvent::Lost { key }
            }
            (_, ClientReply::Busy { remaining_ms }) => ClientEvent::Busy { remaining_ms },
            (_, ClientReply::TimedOut) => ClientEvent::TimedOut,
            // An answer that does not fit the request (a server bug); change nothing.
            _ => ClientEvent::Nothing,
        }
    }

    /// Records the belief for `token` on `key`, counted from `start_local_us`
    /// (the first send).
    fn believe(&mut self, key: &Key, token: Token, lease_ms: u64, start_local_us: u64) -> u64 {
        let until_local_us = start_local_us.saturating_add(believed_lease_us(lease_ms, self.config.drift_ppm_max));
        let belief = self.beliefs.entry(key.clone()).or_insert(Belief { token, until_local_us });
        if belief.token == token {
            // A renewal acknowledged late can only extend the belief, never cut it short:
            // the earlier grant or renewal still bounds the server's deadline from below.
            belief.until_local_us = belief.until_local_us.max(until_local_us);
        } else {
            *belief = Belief { token, until_local_us };
        }
        assert!(self.beliefs.len() <= BELIEFS_MAX, "more than {BELIEFS_MAX} locks believed at once");
        self.beliefs[key].until_local_us
    }

    fn start(&mut self, body: ClientRequest, now_local_us: u64) -> Outgoing {
        self.request_last = RequestId(self.request_last.0.checked_add(1).expect("request ids exhausted"));
        let request = self.request_last;
        let wait_us = match &body {
            ClientRequest::Acquire { wait_ms, .. } => wait_ms.saturating_mul(1_000),
            _ => 0,
        };
        let to = self.leader_guess;
        let deadline_local_us = now_local_us.saturating_add(self.config.request_timeout_us).saturating_add(wait_us);
        self.pending = Some(PendingRequest {
            request,
            body: body.clone(),
            first_sent_local_us: now_local_us,
            to,
            deadline_local_us,
            redirects: 0,
        });
        Outgoing { to, request, body }
    }

    /// Sends the pending request again, same id and body, to `to`.
    fn resend(&mut self, to: NodeId, now_local_us: u64, redirected: bool) -> Outgoing {
        let timeout_us = self.config.request_timeout_us;
        let pending = self.pending.as_mut().expect("only the pending request is resent");
        let wait_us = match &pending.body {
            ClientRequest::Acquire { wait_ms, .. } => wait_ms.saturating_mul(1_000),
            _ => 0,
        };
        pending.to = to;
        pending.deadline_local_us = now_local_us.saturating_add(timeout_us).saturating_add(wait_us);
        pending.redirects = if redirected { pending.redirects + 1 } else { 0 };
        self.leader_guess = to;
        Outgoing { to, request: pending.request, body: pending.body.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE_MS: u64 = 2_000;

    fn client() -> Client {
        Client::new(ClientConfig {
            id: ClientId(7),
            nodes: 3,
            drift_ppm_max: 500,
            request_timeout_us: 100_000,
            first_request: RequestId(0),
            variant: Variant::Default,
        })
    }

    fn key() -> Key {
        Key::new("invoice/B-1042")
    }

    fn sent(events: &[ClientEvent]) -> &Outgoing {
        match events {
            [ClientEvent::Sent(outgoing)] => outgoing,
            other => panic!("expected one Sent, got {other:?}"),
        }
    }

    #[test]
    fn an_adopted_lock_is_not_believed_until_renewed() {
        let mut client = client();
        client.adopt(key(), Token(41));
        assert_eq!(client.belief(&key(), 0), None, "adopted means run out");
        let out = client.renew(&key(), 1_000).expect("an adopted lock can be renewed");
        assert_eq!(out.body, ClientRequest::Renew { key: key(), token: Token(41) });
        let events = client.on_reply(out.to, out.request, ClientReply::Renewed { lease_ms: LEASE_MS }, 5_000);
        assert!(matches!(events[..], [ClientEvent::Renewed { token: Token(41), .. }]), "{events:?}");
        assert_eq!(client.belief(&key(), 5_000), Some(Token(41)));
    }

    #[test]
    fn belief_formula_numbers() {
        // 2 s at 500 ppm: 2_000_000 · 0.9995 / 1.0005 = 1_998_000.9995 µs, rounded down.
        assert_eq!(believed_lease_us(2_000, 500), 1_998_000);
        assert_eq!(believed_lease_us(2_000, 0), 2_000_000);
        // 10 % drift: 1 s · 0.9 / 1.1 = 818_181.8 µs.
        assert_eq!(believed_lease_us(1_000, 100_000), 818_181);
        assert_eq!(believed_lease_us(0, 500), 0);
    }

    #[test]
    fn redirect_follows_the_named_leader_with_the_same_request_id() {
        let mut c = client();
        let first = c.acquire(key(), LEASE_MS, 0, 1_000);
        assert_eq!(first.to, NodeId(0));
        let events = c.on_reply(NodeId(0), first.request, ClientReply::NotLeader { leader: Some(NodeId(2)) }, 2_000);
        let second = sent(&events);
        assert_eq!(second.to, NodeId(2));
        assert_eq!(second.request, first.request);
        assert_eq!(second.body, first.body);
        // A redirect without a known leader tries the next server.
        let events = c.on_reply(NodeId(2), first.request, ClientReply::NotLeader { leader: None }, 3_000);
        assert_eq!(sent(&events).to, NodeId(0));
        // The next request goes to the last server tried.
        let events = c.on_reply(NodeId(0), first.request, ClientReply::Busy { remaining_ms: 5 }, 4_000);
        assert_eq!(events, vec![ClientEvent::Busy { remaining_ms: 5 }]);
        assert_eq!(c.acquire(key(), LEASE_MS, 0, 5_000).to, NodeId(0));
    }

    #[test]
    fn a_redirect_naming_the_sender_or_an_unknown_server_tries_the_next_one() {
        // Following such a hint would ask the same server again or a server
        // that does not exist; the client moves on round the cluster instead.
        let mut c = client();
        assert_eq!(c.id(), ClientId(7));
        let first = c.acquire(key(), LEASE_MS, 0, 1_000);
        let events = c.on_reply(NodeId(0), first.request, ClientReply::NotLeader { leader: Some(NodeId(0)) }, 2_000);
        assert_eq!(sent(&events).to, NodeId(1), "not back to the server that refused");
        let events = c.on_reply(NodeId(1), first.request, ClientReply::NotLeader { leader: Some(NodeId(3)) }, 3_000);
        assert_eq!(sent(&events).to, NodeId(2), "servers are NodeId(0) .. NodeId(nodes)");
        let events = c.on_reply(NodeId(2), first.request, ClientReply::NotLeader { leader: Some(NodeId(1)) }, 4_000);
        assert_eq!(sent(&events).to, NodeId(1), "a valid hint is followed");
    }

    #[test]
    fn redirects_are_bounded_per_attempt() {
        let mut c = client();
        let out = c.acquire(key(), LEASE_MS, 0, 0);
        let mut sends = 0;
        for step in 0..100 {
            let events = c.on_reply(NodeId(1), out.request, ClientReply::Unavailable, step);
            if matches!(events.as_slice(), [ClientEvent::Sent(_)]) {
                sends += 1;
            }
        }
        assert_eq!(sends, REDIRECTS_MAX);
        // The timeout still retries.
        assert!(c.on_timeout(200_000).is_some());
    }

    #[test]
    fn timeout_retries_at_the_next_server_with_the_same_request_id() {
        let mut c = client();
        let first = c.acquire(key(), LEASE_MS, 50, 1_000);
        // The deadline covers the request timeout plus the wait the server may take.
        assert_eq!(c.pending_deadline_local_us(), Some(1_000 + 100_000 + 50_000));
        assert_eq!(c.on_timeout(151_000 - 1), None);
        let retry = c.on_timeout(151_000).expect("deadline passed");
        assert_eq!((retry.to, retry.request, &retry.body), (NodeId(1), first.request, &first.body));
        assert_eq!(c.pending_deadline_local_us(), Some(151_000 + 150_000));
    }

    #[test]
    fn belief_counts_from_the_first_attempt_not_the_retry() {
        let mut c = client();
        let first = c.acquire(key(), LEASE_MS, 0, 10_000);
        c.on_timeout(200_000).expect("retry");
        let granted = ClientReply::Granted { token: Token(41), lease_ms: LEASE_MS };
        let events = c.on_reply(NodeId(1), first.request, granted, 250_000);
        let until_local_us = 10_000 + 1_998_000;
        assert_eq!(events, vec![ClientEvent::Granted { key: key(), token: Token(41), until_local_us }]);
        assert_eq!(c.belief(&key(), until_local_us - 1), Some(Token(41)));
        // The belief ends at T: not at T, not after.
        assert_eq!(c.belief(&key(), until_local_us), None);
        assert_eq!(c.token_of(&key()), Some(Token(41)));
    }

    #[test]
    fn belief_from_arrival_counts_from_the_late_answer_and_outlives_the_lease() {
        let mut c = Client::new(ClientConfig { variant: Variant::BeliefFromArrival, ..client().config });
        let first = c.acquire(key(), LEASE_MS, 0, 10_000);
        c.on_timeout(200_000).expect("retry");
        let granted = ClientReply::Granted { token: Token(41), lease_ms: LEASE_MS };
        let events = c.on_reply(NodeId(1), first.request, granted, 250_000);
        // The server's lease may have started just after the first send: this
        // belief ends 240 ms after a full lease from there.
        let until_local_us = 250_000 + 1_998_000;
        assert_eq!(events, vec![ClientEvent::Granted { key: key(), token: Token(41), until_local_us }]);
        assert!(until_local_us > 10_000 + LEASE_MS * 1_000);
    }

    #[test]
    fn belief_until_is_the_first_instant_the_token_may_not_be_used() {
        let mut c = client();
        assert_eq!(c.belief_until_local_us(&key()), None);
        let acquire = c.acquire(key(), LEASE_MS, 0, 10_000);
        c.on_reply(NodeId(0), acquire.request, ClientReply::Granted { token: Token(5), lease_ms: LEASE_MS }, 20_000);
        let until_local_us = c.belief_until_local_us(&key()).expect("believed");
        assert_eq!(until_local_us, 10_000 + believed_lease_us(LEASE_MS, 500));
        assert_eq!(c.belief(&key(), until_local_us - 1), Some(Token(5)));
        assert_eq!(c.belief(&key(), until_local_us), None);
    }

    #[test]
    fn forget_drops_the_belief_and_nothing_can_be_renewed() {
        let mut c = client();
        let acquire = c.acquire(key(), LEASE_MS, 0, 0);
        c.on_reply(NodeId(0), acquire.request, ClientReply::Granted { token: Token(5), lease_ms: LEASE_MS }, 5);
        assert_eq!(c.forget(&key()), Some(Token(5)));
        assert_eq!((c.token_of(&key()), c.belief_until_local_us(&key()), c.belief(&key(), 10)), (None, None, None));
        assert_eq!(c.renew(&key(), 20), None);
        assert_eq!(c.forget(&key()), None);
    }

    #[test]
    fn stale_request_ids_are_ignored() {
        let mut c = client();
        let first = c.acquire(key(), LEASE_MS, 0, 0);
        let second = c.acquire(Key::new("other"), LEASE_MS, 0, 10);
        assert_ne!(first.request, second.request);
        let granted = ClientReply::Granted { token: Token(9), lease_ms: LEASE_MS };
        assert_eq!(c.on_reply(NodeId(0), first.request, granted, 20), vec![ClientEvent::Nothing]);
        assert_eq!(c.token_of(&key()), None);
        assert_eq!(c.pending_request(), Some(second.request));
    }

    #[test]
    fn renew_extends_from_its_first_send_and_not_held_ends_the_belief() {
        let mut c = client();
        let acquire = c.acquire(key(), LEASE_MS, 0, 0);
        c.on_reply(NodeId(0), acquire.request, ClientReply::Granted { token: Token(5), lease_ms: LEASE_MS }, 5);
        let renew = c.renew(&key(), 1_000_000).expect("held");
        assert_eq!(renew.body, ClientRequest::Renew { key: key(), token: Token(5) });
        let events = c.on_reply(NodeId(0), renew.request, ClientReply::Renewed { lease_ms: LEASE_MS }, 1_100_000);
        let until_local_us = 1_000_000 + 1_998_000;
        assert_eq!(events, vec![ClientEvent::Renewed { key: key(), token: Token(5), until_local_us }]);
        let renew = c.renew(&key(), 2_000_000).expect("held");
        let events = c.on_reply(NodeId(0), renew.request, ClientReply::NotHeld, 2_000_100);
        assert_eq!(events, vec![ClientEvent::Lost { key: key() }]);
        assert_eq!(c.belief(&key(), 2_000_200), None);
        assert_eq!(c.renew(&key(), 2_000_300), None);
    }

    #[test]
    fn a_new_grant_replaces_the_old_token_and_a_late_renewal_never_shortens_the_belief() {
        let mut c = client();
        let first = c.acquire(key(), LEASE_MS, 0, 0);
        c.on_reply(NodeId(0), first.request, ClientReply::Granted { token: Token(5), lease_ms: LEASE_MS }, 5);
        // The belief on 5 ran out unnoticed and the key was granted again, with 9:
        // every later write must carry 9, and the belief counts from the new request.
        let second = c.acquire(key(), LEASE_MS, 0, 3_000_000);
        let events =
            c.on_reply(NodeId(0), second.request, ClientReply::Granted { token: Token(9), lease_ms: 500 }, 3_000_010);
        let until_local_us = 3_000_000 + believed_lease_us(500, 500);
        assert_eq!(events, vec![ClientEvent::Granted { key: key(), token: Token(9), until_local_us }]);
        assert_eq!((c.token_of(&key()), c.belief(&key(), 3_000_020)), (Some(Token(9)), Some(Token(9))));
        // A renewal of 9 whose belief would end sooner (here a shorter lease) does
        // not pull the end earlier: the grant still bounds the server's deadline.
        let renew = c.renew(&key(), 3_000_020).expect("held");
        let events = c.on_reply(NodeId(0), renew.request, ClientReply::Renewed { lease_ms: 100 }, 3_000_030);
        assert_eq!(events, vec![ClientEvent::Renewed { key: key(), token: Token(9), until_local_us }]);
        assert_eq!(c.belief_until_local_us(&key()), Some(until_local_us));
    }

    #[test]
    fn release_drops_the_belief_before_the_answer() {
        let mut c = client();
        let acquire = c.acquire(key(), LEASE_MS, 0, 0);
        c.on_reply(NodeId(0), acquire.request, ClientReply::Granted { token: Token(5), lease_ms: LEASE_MS }, 5);
        let release = c.release(&key(), 10).expect("held");
        assert_eq!(release.body, ClientRequest::Release { key: key(), token: Token(5) });
        assert_eq!(c.belief(&key(), 11), None);
        let events = c.on_reply(NodeId(0), release.request, ClientReply::Released, 20);
        assert_eq!(events, vec![ClientEvent::Released { key: key() }]);
        assert_eq!(c.release(&key(), 30), None);
    }

    #[test]
    fn revoke_of_our_own_lease_drops_the_belief_before_the_answer() {
        let mut c = client();
        let acquire = c.acquire(key(), LEASE_MS, 0, 0);
        c.on_reply(NodeId(0), acquire.request, ClientReply::Granted { token: Token(5), lease_ms: LEASE_MS }, 5);
        let revoke = c.revoke(&key(), 10).expect("held");
        assert_eq!(revoke.body, ClientRequest::Revoke { key: key(), token: Token(5) });
        assert_eq!((c.belief(&key(), 11), c.token_of(&key())), (None, None));
        let events = c.on_reply(NodeId(0), revoke.request, ClientReply::Released, 20);
        assert_eq!(events, vec![ClientEvent::Released { key: key() }]);
        assert_eq!(c.revoke(&key(), 30), None, "nothing left to revoke");
    }

    #[test]
    fn not_held_for_a_release_or_an_acquire_reports_the_lock_lost() {
        let mut c = client();
        let acquire = c.acquire(key(), LEASE_MS, 0, 0);
        c.on_reply(NodeId(0), acquire.request, ClientReply::Granted { token: Token(5), lease_ms: LEASE_MS }, 5);
        let release = c.release(&key(), 10).expect("held");
        let events = c.on_reply(NodeId(0), release.request, ClientReply::NotHeld, 20);
        assert_eq!(events, vec![ClientEvent::Lost { key: key() }], "the lease ran out before the release");
        let acquire = c.acquire(key(), LEASE_MS, 0, 30);
        let events = c.on_reply(NodeId(0), acquire.request, ClientReply::NotHeld, 40);
        assert_eq!(events, vec![ClientEvent::Lost { key: key() }]);
        assert_eq!(c.token_of(&key()), None);
    }

    #[test]
    fn a_wait_that_ran_out_at_the_server_is_reported_timed_out() {
        let mut c = client();
        let acquire = c.acquire(key(), LEASE_MS, 500, 0);
        let events = c.on_reply(NodeId(0), acquire.request, ClientReply::TimedOut, 500_000);
        assert_eq!(events, vec![ClientEvent::TimedOut]);
        assert_eq!((c.pending_request(), c.token_of(&key())), (None, None), "the request is over, nothing held");
    }

    #[test]
    fn cancel_names_the_pending_request_and_later_answers_are_ignored() {
        let mut c = client();
        let acquire = c.acquire(key(), LEASE_MS, 0, 0);
        let cancel = c.cancel(10).expect("pending");
        assert_eq!((cancel.to, cancel.request, cancel.body), (acquire.to, acquire.request, ClientRequest::Cancel));
        assert_eq!(c.cancel(11), None);
        let granted = ClientReply::Granted { token: Token(5), lease_ms: LEASE_MS };
        assert_eq!(c.on_reply(NodeId(0), acquire.request, granted, 20), vec![ClientEvent::Nothing]);
        assert_eq!(c.token_of(&key()), None);
    }
}
