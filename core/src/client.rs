//! The client library of the lock service, sans-IO: the caller passes in
//! replies and the client's *local* clock in microseconds, and sends the
//! [`Outgoing`] requests it hands back.
//!
//! It follows `NotLeader` redirects, retries a request with the same request
//! id (so the server's session answers a retried acquire with the original
//! token), and keeps a conservative belief per key: "I hold this until my
//! local time T", with T = (local time the first attempt was sent) +
//! lease × (1 − ρ)/(1 + ρ). The derivation is in `CLIENT_BELIEF.md` beside
//! this file.
//!
//! One request is pending at a time: a new request replaces the old one,
//! whose late answers are then ignored.

use crate::service::{ClientReply, ClientRequest};
use crate::types::{ClientId, Key, NodeId, RequestId, Token};
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
        Client { config, request_last: RequestId(0), leader_guess: NodeId(0), pending: None, beliefs: BTreeMap::new() }
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
                vec![self.conclude(pending, reply)]
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

    /// The final answer to `pending`.
    fn conclude(&mut self, pending: PendingRequest, reply: ClientReply) -> ClientEvent {
        match (pending.body, reply) {
            (ClientRequest::Acquire { key, .. }, ClientReply::Granted { token, lease_ms }) => {
                let until_local_us = self.believe(&key, token, lease_ms, pending.first_sent_local_us);
                ClientEvent::Granted { key, token, until_local_us }
            }
            (ClientRequest::Renew { key, token }, ClientReply::Renewed { lease_ms }) => {
                if self.token_of(&key) != Some(token) {
                    // Released or replaced meanwhile: a renewal does not bring it back.
                    return ClientEvent::Nothing;
                }
                let until_local_us = self.believe(&key, token, lease_ms, pending.first_sent_local_us);
                ClientEvent::Renewed { key, token, until_local_us }
            }
            (ClientRequest::Release { key, .. }, ClientReply::Released) => ClientEvent::Released { key },
            (ClientRequest::Acquire { key, .. }, ClientReply::NotHeld)
            | (ClientRequest::Release { key, .. }, ClientReply::NotHeld) => ClientEvent::Lost { key },
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

    /// Records the belief for `token` on `key`, counted from the first send.
    fn believe(&mut self, key: &Key, token: Token, lease_ms: u64, first_sent_local_us: u64) -> u64 {
        let until_local_us = first_sent_local_us.saturating_add(believed_lease_us(lease_ms, self.config.drift_ppm_max));
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
