//! Grant strikes at run time ([`crate::faults::Fault::GrantStrikes`],
//! planned in `faults/grants.rs`): the supervisor follows, from the
//! history, which client waits for which key at which server (an acquire
//! with `wait_ms` above 0, until it is answered or the client asks
//! something else). While an episode lasts, when a server that leads frees
//! a key (applies a Release or an Expire that removed the lock) that a
//! client waits for there, the supervisor pauses it `pause_ms` in the
//! instant the free is recorded: the leader proposed the waiter's Grant as it
//! applied the free and sent it to its followers at once, so they hold the
//! entry and the leader has not applied it.
//!
//! What follows: the followers elect a successor, which commits the Grant
//! with its first entry and tells nobody (only the leader that queued the
//! request answers it); the waiter hears nothing, so it never renews, and
//! the successor expires the lock a lease later. The victim wakes after
//! all that and catches up on the Grant and the Expire. A server that
//! answers `Granted` as it applies a Grant, whether or not the lock is
//! still live and it still leads (`grant-after-expired-wait`, etcd issue
//! 11456), tells the waiter it holds a lock the cluster removed.
//!
//! One victim at a time, no draws at run time: the first free of a waited
//! key by a live leader is struck. Every strike is in the history
//! (`ChurnEvent::GrantStruck`); the pause is an ordinary pause.

use super::churn::Cluster;
use crate::faults::{ChurnEvent, Fault};
use crate::history::{Event, EventKind, Reader};
use fencelock::service::ClientRequest;
use fencelock::{ApplyResult, ClientId, Command, Key, NodeId, RequestId};
use std::collections::BTreeMap;

/// What the grant strikes read of the history: client requests that wait,
/// their ends, and keys freed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum LockTraffic {
    /// `client` sent `request`, an acquire of `key` that waits, to `node`.
    Waits { client: ClientId, request: RequestId, node: NodeId, key: Key },
    /// `client` sent `request`, which does not wait for a key.
    Asks { client: ClientId, request: RequestId },
    /// `client` had an answer to `request`, or gave it up.
    Ends { client: ClientId, request: RequestId },
    /// `node` applied a command that removed the lock on `key`, at `at_us`.
    Freed { node: NodeId, key: Key, at_us: u64 },
}

impl LockTraffic {
    /// What `event` tells the grant strikes, if anything.
    fn of(event: &Event) -> Option<LockTraffic> {
        match &event.kind {
            EventKind::Requested { client, request, to, body } => Some(match body {
                ClientRequest::Acquire { key, wait_ms, .. } if *wait_ms > 0 => {
                    LockTraffic::Waits { client: *client, request: *request, node: *to, key: key.clone() }
                }
                _ => LockTraffic::Asks { client: *client, request: *request },
            }),
            EventKind::Answered { client, request, .. } | EventKind::GaveUp { client, request, .. } => {
                Some(LockTraffic::Ends { client: *client, request: *request })
            }
            EventKind::Applied {
                node,
                command: Command::Release { key, .. } | Command::Expire { key, .. },
                result: ApplyResult::Released | ApplyResult::Expired { existed: true },
                ..
            } => Some(LockTraffic::Freed { node: *node, key: key.clone(), at_us: event.at_us }),
            _ => None,
        }
    }
}

/// A request waiting for a key at a server, as the history tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Waiting {
    request: RequestId,
    node: NodeId,
    key: Key,
}

pub(super) struct GrantStrike {
    /// The episode lasts until this true instant (0: none started).
    until_us: u64,
    strikes_left: u64,
    pause_ms: u64,
    /// Whether it follows the history (from the start of the run, so waits
    /// older than an episode are known): when the run may strike.
    follows: bool,
    /// Each client's request that waits for a key, while it waits.
    waiting: BTreeMap<ClientId, Waiting>,
    /// The true instant the last victim wakes: no other strike before.
    busy_until_us: u64,
}

impl GrantStrike {
    /// The family of a run that `follows` the history from its start (see [`Reader`]).
    pub(super) fn new(follows: bool) -> GrantStrike {
        GrantStrike { until_us: 0, strikes_left: 0, pause_ms: 0, follows, waiting: BTreeMap::new(), busy_until_us: 0 }
    }

    fn watching(&self, now_us: u64) -> bool {
        now_us < self.until_us && self.strikes_left > 0
    }

    /// Whether the family reads every event as it is recorded (an episode
    /// is on). It has no instant of its own to act at: a strike answers an
    /// event, and `busy_until_us` only holds back the strikes of events
    /// recorded before it.
    pub(super) fn listens(&self, now_us: u64) -> bool {
        self.watching(now_us)
    }

    /// Starts an episode: keys freed from now on are watched.
    pub(super) fn start(&mut self, now_us: u64, fault: &Fault, cluster: &impl Cluster) {
        let Fault::GrantStrikes { for_ms, strikes, pause_ms } = *fault else {
            unreachable!("a grant-strike episode starts from its fault")
        };
        self.until_us = now_us + for_ms * 1_000;
        self.strikes_left = strikes;
        self.pause_ms = pause_ms;
        assert!(self.follows, "a run that may strike follows the history from its start");
        for event in cluster.read_history(Reader::GrantStrikes, LockTraffic::of) {
            self.follow(&event);
        }
    }

    /// Reads the history since the last step (every step, so that what it
    /// keeps is little) and, during an episode, pauses the first live
    /// leader that freed a key a client waits for there.
    pub(super) fn step(&mut self, now_us: u64, cluster: &mut impl Cluster) {
        if !self.follows {
            return;
        }
        let watching = self.watching(now_us);
        for event in cluster.read_history(Reader::GrantStrikes, LockTraffic::of) {
            if let LockTraffic::Freed { node, ref key, at_us } = event {
                if watching && self.strikes_left > 0 && now_us >= self.busy_until_us {
                    self.strike(now_us, node, key, at_us, cluster);
                }
            }
            self.follow(&event);
        }
    }

    /// Pauses `node` if it still leads and a client waits for `key` there.
    fn strike(&mut self, now_us: u64, node: NodeId, key: &Key, at_us: u64, cluster: &mut impl Cluster) {
        let Some(client) = self.waiting.iter().find(|(_, w)| w.node == node && w.key == *key).map(|(c, _)| *c) else {
            return;
        };
        let Some(term) = cluster.live_leaders().into_iter().find(|(n, _)| *n == node).map(|(_, term)| term) else {
            return;
        };
        let (pause_ms, after_us) = (self.pause_ms, now_us - at_us);
        cluster.note(ChurnEvent::GrantStruck { node, client, key: key.clone(), term, after_us, pause_ms });
        cluster.pause(node, pause_ms);
        self.busy_until_us = now_us + pause_ms * 1_000;
        self.strikes_left -= 1;
    }

    /// Keeps `waiting` up to date with one event.
    fn follow(&mut self, event: &LockTraffic) {
        match event {
            LockTraffic::Waits { client, request, node, key } => {
                self.waiting.insert(*client, Waiting { request: *request, node: *node, key: key.clone() });
            }
            LockTraffic::Asks { client, .. } => {
                self.waiting.remove(client);
            }
            LockTraffic::Ends { client, request } => {
                if self.waiting.get(client).is_some_and(|w| w.request == *request) {
                    self.waiting.remove(client);
                }
            }
            LockTraffic::Freed { .. } => {}
        }
    }
}
