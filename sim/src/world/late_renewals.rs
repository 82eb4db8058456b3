//! Late renewals at run time ([`crate::faults::Fault::LateRenewals`],
//! planned in `faults/late_renewals.rs`): while an episode lasts, the
//! supervisor reads from the history each lease a server gives a client
//! (`Granted` and `Renewed` answers: the lease ends `lease_ms` after the
//! answer on that server's clock, taken here as `lease_ms` of true time:
//! drift within the bound moves it by about a millisecond; a clock step of
//! the leader moves it more, and that hold misses the expiry) and each renew
//! a client sends. In the instant a renew
//! is recorded, it holds a renew bound for the live leader
//! that gave the sender its current lease on the wire (with whatever else
//! the client sends that leader) until `after_ms` past that lease's end. The
//! renew then arrives as the leader decides the expiry: just before it asks
//! its expiry round (the renewal's own round goes first) or while that round
//! is out (the Expire is proposed with the renewal waiting for its round).
//!
//! The same hold serves a waiter's retry of a Grant it never heard: a
//! leader that applies a client's Grant without answering it (the leader
//! that queued the request was paused or crashed as it proposed it, and a
//! successor committed it) holds a lease nobody knows of, and expires it
//! `lease_ms` after the apply. The client still retries its acquire; held
//! until `after_ms` past that end, the retry reaches the leader as it
//! decides the expiry, so the Grant it finds in the log (the session
//! table's answer) may be gone by the time the answer would leave, which
//! must then say `NotHeld` (`grant-answered-not-held`).
//!
//! One held message at a time; no draws at run time. The hold is the net's
//! (`Net::hold_link`), so a heal ends it for what is sent afterwards, not for
//! what is already on the wire. Every hold is in the history
//! (`ChurnEvent::RenewalHeld`).

use super::churn::Cluster;
use crate::faults::{ChurnEvent, Fault};
use crate::history::{Event, EventKind, Reader};
use crate::machine::net::Addr;
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ApplyResult, ClientId, Command, NodeId, RequestId, Term};
use std::collections::BTreeMap;

/// A message the supervisor may hold: `client`'s renew (or, with `retry`,
/// its retry of an acquire granted without an answer) sent to `to` at
/// `sent_us`, about a lease that ends there at `lease_end_us`.
struct Holdable {
    client: ClientId,
    to: NodeId,
    sent_us: u64,
    lease_end_us: u64,
    retry: bool,
}

/// What the late renewals read of the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RenewTraffic {
    /// `node` gave `client` a lease of `lease_ms`, answering at `at_us`.
    Leased { node: NodeId, client: ClientId, lease_ms: u64, at_us: u64 },
    /// `client` sent a renew to `to` at `at_us`.
    Renewing { client: ClientId, to: NodeId, at_us: u64 },
    /// `node` applied a Grant of a lease of `lease_ms` to `client`'s `request` at `at_us`.
    GrantApplied { node: NodeId, client: ClientId, request: RequestId, lease_ms: u64, at_us: u64 },
    /// `client` sent `request`, an acquire, to `to` at `at_us`.
    Acquiring { client: ClientId, request: RequestId, to: NodeId, at_us: u64 },
}

impl RenewTraffic {
    fn of(event: &Event) -> Option<RenewTraffic> {
        match &event.kind {
            EventKind::Replied {
                node,
                client,
                reply: ClientReply::Granted { lease_ms, .. } | ClientReply::Renewed { lease_ms },
                ..
            } => Some(RenewTraffic::Leased { node: *node, client: *client, lease_ms: *lease_ms, at_us: event.at_us }),
            EventKind::Requested { client, to, body: ClientRequest::Renew { .. }, .. } => {
                Some(RenewTraffic::Renewing { client: *client, to: *to, at_us: event.at_us })
            }
            EventKind::Requested { client, request, to, body: ClientRequest::Acquire { .. } } => {
                Some(RenewTraffic::Acquiring { client: *client, request: *request, to: *to, at_us: event.at_us })
            }
            EventKind::Applied {
                node,
                command: Command::Grant { lease_ms, holder, .. },
                result: ApplyResult::Granted { .. },
                ..
            } => Some(RenewTraffic::GrantApplied {
                node: *node,
                client: holder.client,
                request: holder.request,
                lease_ms: *lease_ms,
                at_us: event.at_us,
            }),
            _ => None,
        }
    }
}

pub(super) struct LateRenewal {
    /// The episode lasts until this true instant (0: none started).
    until_us: u64,
    strikes_left: u64,
    after_ms: u64,
    /// The true instant each client's current lease ends at the server that gave it.
    leases: BTreeMap<ClientId, (NodeId, u64)>,
    /// Each client's last Grant applied by a server that did not answer it
    /// (yet): the server, the request and the true instant its lease ends there.
    unanswered: BTreeMap<ClientId, (NodeId, RequestId, u64)>,
    /// The true instant the renewal held last arrives: no other is held before it.
    held_until_us: u64,
}

impl LateRenewal {
    pub(super) fn new() -> LateRenewal {
        LateRenewal {
            until_us: 0,
            strikes_left: 0,
            after_ms: 0,
            leases: BTreeMap::new(),
            unanswered: BTreeMap::new(),
            held_until_us: 0,
        }
    }

    fn watching(&self, now_us: u64) -> bool {
        now_us < self.until_us && self.strikes_left > 0
    }

    /// Whether the family reads every event as it is recorded (an episode is on).
    pub(super) fn listens(&self, now_us: u64) -> bool {
        self.watching(now_us)
    }

    /// The next instant the family must act whatever is recorded: the
    /// episode's end (it stops following the history).
    pub(super) fn next_wake_us(&self, now_us: u64) -> Option<u64> {
        self.watching(now_us).then_some(self.until_us)
    }

    /// Starts an episode: leases and renewals from now on are read.
    pub(super) fn start(&mut self, now_us: u64, fault: &Fault, cluster: &impl Cluster) {
        let Fault::LateRenewals { for_ms, strikes, after_ms } = *fault else {
            unreachable!("a late-renewal episode starts from its fault")
        };
        self.until_us = now_us + for_ms * 1_000;
        self.strikes_left = strikes;
        self.after_ms = after_ms;
        self.leases.clear();
        self.unanswered.clear();
        cluster.follow_history(Reader::LateRenewals);
    }

    /// Reads the history since the last step and holds the first renew
    /// bound for the leader that gave its sender the lease it renews, or
    /// the first retry of an acquire bound for a leader that granted it
    /// without an answer.
    pub(super) fn step(&mut self, now_us: u64, cluster: &mut impl Cluster) {
        if !self.watching(now_us) {
            // Leases given before the next episode are read afresh by it.
            cluster.unfollow_history(Reader::LateRenewals);
            return;
        }
        let read = cluster.read_history(Reader::LateRenewals, RenewTraffic::of);
        if read.is_empty() {
            return;
        }
        let leaders = cluster.live_leaders();
        for traffic in read {
            match traffic {
                RenewTraffic::Leased { node, client, lease_ms, at_us } => {
                    self.leases.insert(client, (node, at_us + lease_ms * 1_000));
                    self.unanswered.remove(&client);
                }
                RenewTraffic::GrantApplied { node, client, request, lease_ms, at_us } => {
                    // Every server applies it; the one that leads now is the one that expires it.
                    if leaders.iter().any(|(leader, _)| *leader == node) {
                        self.unanswered.insert(client, (node, request, at_us + lease_ms * 1_000));
                    }
                }
                RenewTraffic::Renewing { client, to, at_us } => {
                    let Some(&(node, lease_end_us)) = self.leases.get(&client) else { continue };
                    if node == to {
                        let renew = Holdable { client, to, sent_us: at_us, lease_end_us, retry: false };
                        self.hold(now_us, cluster, &leaders, renew);
                    }
                }
                RenewTraffic::Acquiring { client, request, to, at_us } => {
                    let Some(&(node, granted, lease_end_us)) = self.unanswered.get(&client) else { continue };
                    if node == to && granted == request {
                        let retry = Holdable { client, to, sent_us: at_us, lease_end_us, retry: true };
                        self.hold(now_us, cluster, &leaders, retry);
                    }
                }
            }
        }
    }

    /// Holds the message's link, if it goes to a live leader, until
    /// `after_ms` past its lease's end, when no other hold is on and a
    /// strike is left.
    fn hold(&mut self, now_us: u64, cluster: &mut impl Cluster, leaders: &[(NodeId, Term)], message: Holdable) {
        let Holdable { client, to, sent_us, lease_end_us, retry } = message;
        let Some(&(_, term)) = leaders.iter().find(|(leader, _)| *leader == to) else { return };
        let until_us = lease_end_us + self.after_ms * 1_000;
        if until_us <= now_us || self.strikes_left == 0 || self.held_until_us > now_us {
            return;
        }
        let held_ms = (until_us - now_us) / 1_000;
        let after_us = now_us - sent_us;
        cluster.note(ChurnEvent::RenewalHeld { node: to, client, term, after_us, held_ms, retry });
        cluster.hold_link(Addr::Client(client), Addr::Server(to), until_us);
        self.held_until_us = until_us;
        self.strikes_left -= 1;
    }
}
