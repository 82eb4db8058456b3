//! The client-visible operations of a run, read from its history.
//!
//! An operation is one request id of one client: it is invoked at its first
//! `Requested` and completes at the first `Answered` that settles it (a
//! redirect, `NotLeader` or `Unavailable`, does not: the client sends it
//! again). One that never settles — the client gave up, crashed, or the run
//! ended — may have taken effect or not. `Cancel` is not an operation: it is
//! the client walking away from one. A whole-cluster restore is a fixed-time
//! step on every key (`Call::Restore`): the lock table becomes the backup's.
//! The backup also predates the sessions that make a retry take effect once,
//! so an operation still open across a restore may take effect twice: once
//! before the restore (lost with it, its answer never sent) and once after,
//! the one it is answered for. The first is a copy of the operation without
//! an answer that must take effect before the restore (`searched`).
//!
//! Each key's operations are cut into segments as they come: a cut falls
//! before a request sent when every operation of the key is settled and
//! strictly after the last answer (or restore); `carry.rs` says why each
//! segment can then be judged on its own.

use super::tokens::{TokenChecks, Told};
use crate::history::{Actor, EventKind};
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ClientId, Key, RequestId, Token};
use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    Acquire {
        lease_ms: u64,
        wait_ms: u64,
    },
    Renew {
        token: Token,
    },
    Release {
        token: Token,
    },
    Revoke {
        token: Token,
    },
    /// A whole-cluster restore (not a client's).
    Restore,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Op {
    pub client: ClientId,
    pub request: RequestId,
    pub key: Key,
    pub call: Call,
    /// The settling answer; `None` if it never came.
    pub answer: Option<ClientReply>,
    /// The first send (true µs).
    pub inv_us: u64,
    /// The settling answer's arrival; `u64::MAX` without one.
    pub resp_us: u64,
    /// The earliest true instant at which a lease this operation grants or
    /// renews can have ended (see `LinearizableChecker::lease_end_min_us`).
    pub lease_end_min_us: u64,
    /// `Busy { remaining_ms: 0 }` or `TimedOut` may be answered for a free
    /// key: another acquire waited in the key's queue meanwhile, and a
    /// newcomer does not overtake the queue.
    pub queue_excuse: bool,
    /// A server clock was stepped or beyond the drift bound shortly before or
    /// during this operation: a leader's `Busy { remaining_ms }` may then
    /// exceed a lease (its deadline was set on the clock before a step back).
    pub clock_excuse: bool,
}

impl Op {
    pub fn answered(&self) -> bool {
        self.answer.is_some()
    }
}

/// Whether a reply settles a request, or only sends the client elsewhere.
pub(crate) fn settles(reply: &ClientReply) -> bool {
    !matches!(reply, ClientReply::NotLeader { .. } | ClientReply::Unavailable)
}

/// Gathers operations event by event, each key's apart and cut into
/// segments (`carry.rs` says why a segment can be judged on its own).
#[derive(Debug)]
pub(crate) struct OpLog {
    keys: BTreeMap<Key, KeyOps>,
    /// Each operation's key and number, while it may still be answered.
    open: BTreeMap<(ClientId, RequestId), (Key, u64)>,
    restores_at_us: Vec<u64>,
    /// Operations so far: the next one's number, in history order across keys.
    count: u64,
    /// The most client operations a segment's search takes (`Limits::ops_per_search_max`).
    ops_per_search_max: usize,
    /// The lease of a renewal not answered with one.
    lease_ms: u64,
    /// The token checks across keys, fed every operation as it is sent and settled.
    tokens: TokenChecks,
    /// The earliest instant after which a closed segment may be judged.
    ready_after_us: u64,
    /// Whether keys are cut into segments (a test judges whole keys too).
    cuts: bool,
    /// A key's closed segments wait until it holds more operations than
    /// this (or the run ends, when they are judged as one: a search that
    /// may stop at the first linearization costs less than one that finds
    /// where each segment can end).
    held_max: usize,
}

/// The operations a key holds before its closed segments are judged. Fewer
/// would mean more searches that must find every end a segment can have;
/// more holds memory that grows with a run's busiest stretch: at 512, a
/// 4-hour run's peak heap held about 0.5 MB more, and the instructions of
/// a run of 40 simulated seconds or of an hour are the same at 128, where
/// 64 costs 3.5 % more.
pub(crate) const HELD_OPS_MAX: usize = 128;

/// One key's operations: the segments closed and not yet taken, and the one being gathered.
#[derive(Debug)]
pub(crate) struct KeyOps {
    pub closed: VecDeque<Segment>,
    /// The operations of the closed segments.
    closed_ops: usize,
    pub current: Segment,
    /// Client operations, with the copies of those answered across a
    /// whole-cluster restore (`lost_in_restores`): what the searches of the key place.
    pub client_ops: u64,
}

/// Operations of one key between two cuts: every one sent before the cut is
/// settled by then, and the first one after it is sent after the last answer.
#[derive(Debug, Default)]
pub(crate) struct Segment {
    /// By number (the order of their first sends). Past the search's bound
    /// only those never answered (or not yet) are kept.
    pub ops: BTreeMap<u64, Op>,
    /// The whole-cluster restores inside it.
    pub restores_at_us: Vec<u64>,
    /// Client operations, with restore copies: what its search would place.
    pub client_ops: u64,
    /// Past the bound, the operations answered are gone and the search is not run.
    pub trimmed: bool,
    /// Operations not settled yet.
    open: usize,
    /// The latest answer or restore.
    last_us: u64,
    /// Until when a lease one of its operations asks for may run: what its
    /// judgment reads of the clocks (`LinearizableChecker::set_lease_end`).
    lease_until_us: u64,
    /// The first send after the cut that closed it.
    pub next_us: Option<u64>,
    /// The key's first segment only: the last whole-cluster restore before
    /// it, which leaves the key unknown.
    pub restored_before_us: Option<u64>,
}

impl Segment {
    /// Counts `n` more operations; just past the bound, what was answered goes.
    fn count(&mut self, n: u64, ops_per_search_max: usize) {
        self.client_ops += n;
        if !self.trimmed && self.client_ops > ops_per_search_max as u64 {
            self.trimmed = true;
            self.ops.retain(|_, op| op.resp_us == u64::MAX);
        }
    }

    /// Whether it may be judged once the history has passed `at_us`: closed,
    /// and every clock reading its leases need is in.
    fn ready(&self, at_us: u64) -> bool {
        self.next_us.is_some() && self.judged_after_us() < at_us
    }

    /// The instant the history must pass before it may be judged.
    fn judged_after_us(&self) -> u64 {
        self.lease_until_us.max(self.last_us)
    }

    /// Consecutive segments as one.
    pub fn joined(segments: impl IntoIterator<Item = Segment>) -> Segment {
        let mut segments = segments.into_iter();
        let mut whole = segments.next().unwrap_or_default();
        for segment in segments {
            whole.ops.extend(segment.ops);
            whole.restores_at_us.extend(segment.restores_at_us);
            whole.client_ops += segment.client_ops;
            whole.trimmed |= segment.trimmed;
            whole.open = segment.open;
            whole.last_us = whole.last_us.max(segment.last_us);
            whole.lease_until_us = whole.lease_until_us.max(segment.lease_until_us);
            whole.next_us = segment.next_us;
        }
        whole
    }
}

impl KeyOps {
    /// When its oldest closed segment may be judged, if the key holds more
    /// than `held_max` operations.
    fn ready_after_us(&self, held_max: usize) -> Option<u64> {
        let held = self.closed_ops + self.current.ops.len();
        self.closed.front().filter(|_| held > held_max).map(Segment::judged_after_us)
    }

    /// Its segments not judged yet, oldest first.
    pub fn segments(self) -> impl Iterator<Item = Segment> {
        self.closed.into_iter().chain([self.current])
    }
}

impl OpLog {
    pub fn new(ops_per_search_max: usize, lease_ms: u64) -> OpLog {
        OpLog {
            keys: BTreeMap::new(),
            open: BTreeMap::new(),
            restores_at_us: Vec::new(),
            count: 0,
            ops_per_search_max,
            lease_ms,
            tokens: TokenChecks::default(),
            ready_after_us: u64::MAX,
            cuts: true,
            held_max: HELD_OPS_MAX,
        }
    }

    /// A log whose closed segments are judged as soon as they may be (a test's).
    #[cfg(test)]
    pub fn eager(ops_per_search_max: usize, lease_ms: u64) -> OpLog {
        OpLog { held_max: 0, ..OpLog::new(ops_per_search_max, lease_ms) }
    }

    /// A log that keeps each key whole, one segment (a test's yardstick).
    #[cfg(test)]
    pub fn uncut(ops_per_search_max: usize, lease_ms: u64) -> OpLog {
        OpLog { cuts: false, ..OpLog::new(ops_per_search_max, lease_ms) }
    }

    pub fn observe(&mut self, at_us: u64, kind: &EventKind) {
        match kind {
            EventKind::Requested { client, request, body, .. } => {
                let Some((key, call)) = call_of(body) else {
                    return;
                };
                // A resend: the client sends a request again only while it waits for it.
                if self.open.contains_key(&(*client, *request)) {
                    return;
                }
                let lease_ms = match call {
                    Call::Acquire { lease_ms, .. } => lease_ms.max(self.lease_ms),
                    _ => self.lease_ms,
                };
                let op = Op {
                    client: *client,
                    request: *request,
                    key: key.clone(),
                    call,
                    answer: None,
                    inv_us: at_us,
                    resp_us: u64::MAX,
                    lease_end_min_us: 0,
                    queue_excuse: false,
                    clock_excuse: false,
                };
                let number = self.count;
                self.count += 1;
                self.tokens.sent(number, at_us);
                let restored_before_us = self.restores_at_us.last().copied();
                let ops = self.keys.entry(key.clone()).or_insert_with(|| KeyOps {
                    closed: VecDeque::new(),
                    closed_ops: 0,
                    current: Segment { restored_before_us, ..Segment::default() },
                    client_ops: 0,
                });
                let current = &mut ops.current;
                if self.cuts && current.open == 0 && !current.ops.is_empty() && current.last_us < at_us {
                    current.next_us = Some(at_us);
                    ops.closed_ops += current.ops.len();
                    ops.closed.push_back(std::mem::take(current));
                    if let Some(after_us) = ops.ready_after_us(self.held_max) {
                        self.ready_after_us = self.ready_after_us.min(after_us);
                    }
                }
                let current = &mut ops.current;
                current.ops.insert(number, op);
                current.open += 1;
                current.lease_until_us = current.lease_until_us.max(at_us.saturating_add(lease_ms * 1_000));
                current.count(1, self.ops_per_search_max);
                ops.client_ops += 1;
                self.open.insert((*client, *request), (key, number));
            }
            EventKind::Answered { client, request, reply, .. } if settles(reply) => {
                if let Some((key, number)) = self.open.remove(&(*client, *request)) {
                    self.settle(&key, number, Some((*reply, at_us)));
                }
            }
            EventKind::GaveUp { client, request, .. } => {
                if let Some((key, number)) = self.open.remove(&(*client, *request)) {
                    self.settle(&key, number, None);
                }
            }
            EventKind::Crashed { actor: Actor::Client(client) } => {
                let crashed: Vec<(Key, u64)> = self
                    .open
                    .range((*client, RequestId(0))..=(*client, RequestId(u64::MAX)))
                    .map(|(_, open)| open.clone())
                    .collect();
                self.open.retain(|(c, _), _| c != client);
                for (key, number) in crashed {
                    self.settle(&key, number, None);
                }
            }
            EventKind::ClusterRestored { .. } => {
                self.restores_at_us.push(at_us);
                for ops in self.keys.values_mut() {
                    ops.current.restores_at_us.push(at_us);
                    ops.current.last_us = ops.current.last_us.max(at_us);
                }
            }
            _ => {}
        }
    }

    /// Operation `number` of `key` is answered, or never will be (`None`).
    /// An operation still open is in its key's current segment: no cut passes an open one.
    fn settle(&mut self, key: &Key, number: u64, answer: Option<(ClientReply, u64)>) {
        let Some(ops) = self.keys.get_mut(key) else {
            self.tokens.settled(number);
            return;
        };
        let segment = &mut ops.current;
        segment.open -= 1;
        let Some(op) = segment.ops.get_mut(&number) else {
            self.tokens.settled(number);
            return;
        };
        if let Some((reply, at_us)) = answer {
            op.answer = Some(reply);
            op.resp_us = at_us;
            segment.last_us = segment.last_us.max(at_us);
            if let ClientReply::Renewed { lease_ms } = reply {
                segment.lease_until_us = segment.lease_until_us.max(op.inv_us.saturating_add(lease_ms * 1_000));
            }
        }
        if let Some(ClientReply::Granted { token, .. }) = op.answer {
            let key = self.tokens.key_number(&op.key);
            let told =
                Told { client: op.client, request: op.request, key, token, inv_us: op.inv_us, resp_us: op.resp_us };
            self.tokens.granted(number, told);
        } else {
            self.tokens.settled(number);
        }
        let copies = lost_in_restores(op, &self.restores_at_us).count() as u64;
        let answered = op.resp_us != u64::MAX;
        segment.count(copies, self.ops_per_search_max);
        ops.client_ops += copies;
        if segment.trimmed && answered {
            segment.ops.remove(&number);
        }
    }

    /// The segments that may be judged once the history has passed `at_us`,
    /// oldest first for each key.
    pub fn take_ready(&mut self, at_us: u64) -> Vec<(Key, Segment)> {
        if self.ready_after_us >= at_us {
            return Vec::new();
        }
        let mut ready = Vec::new();
        let mut after_us = u64::MAX;
        for (key, ops) in &mut self.keys {
            if ops.ready_after_us(self.held_max).is_none() {
                continue;
            }
            while let Some(segment) = ops.closed.pop_front() {
                if segment.ready(at_us) {
                    ops.closed_ops -= segment.ops.len();
                    ready.push((key.clone(), segment));
                } else {
                    after_us = after_us.min(segment.judged_after_us());
                    ops.closed.push_front(segment);
                    break;
                }
            }
        }
        self.ready_after_us = after_us;
        ready
    }

    /// Each key's operations gathered so far, taken out of the log.
    pub fn take_keys(&mut self) -> BTreeMap<Key, KeyOps> {
        std::mem::take(&mut self.keys)
    }

    /// The first send of the earliest operation a segment not taken yet holds:
    /// no operation judged from now on was sent before it.
    pub fn earliest_held_us(&self) -> Option<u64> {
        let first_of = |ops: &KeyOps| {
            let mut segments = ops.closed.iter().chain([&ops.current]);
            segments.find_map(|segment| segment.ops.values().next()).map(|op| op.inv_us)
        };
        self.keys.values().filter_map(first_of).min()
    }

    /// The operations of segments not taken yet.
    #[cfg(test)]
    pub fn ops_held(&self) -> usize {
        let segments = self.keys.values().flat_map(|ops| ops.closed.iter().chain([&ops.current]));
        segments.map(|segment| segment.ops.len()).sum()
    }

    /// The token checks across keys.
    pub fn tokens(&mut self) -> &mut TokenChecks {
        &mut self.tokens
    }
}

fn call_of(body: &ClientRequest) -> Option<(Key, Call)> {
    match body {
        ClientRequest::Acquire { key, lease_ms, wait_ms } => {
            Some((key.clone(), Call::Acquire { lease_ms: *lease_ms, wait_ms: *wait_ms }))
        }
        ClientRequest::Renew { key, token } => Some((key.clone(), Call::Renew { token: *token })),
        ClientRequest::Release { key, token } => Some((key.clone(), Call::Release { token: *token })),
        ClientRequest::Revoke { key, token } => Some((key.clone(), Call::Revoke { token: *token })),
        ClientRequest::Cancel => None,
    }
}

/// One segment's operations (its restores included), ordered by first send,
/// as the search reads them. `waiter_before`: an acquire that waits was
/// never answered in an earlier segment of the key (it overlaps every later
/// operation, see `mark_queue_excuses`).
pub(crate) fn searched(key: &Key, ops: Vec<Op>, restores_at_us: &[u64], waiter_before: bool) -> Vec<Op> {
    let mut list = ops;
    let copies: Vec<Op> = list.iter().flat_map(|op| lost_in_restores(op, restores_at_us)).collect();
    list.extend(copies);
    for at_us in restores_at_us {
        list.push(Op {
            client: ClientId(0),
            request: RequestId(0),
            key: key.clone(),
            call: Call::Restore,
            answer: None,
            inv_us: *at_us,
            resp_us: *at_us,
            lease_end_min_us: 0,
            queue_excuse: false,
            clock_excuse: false,
        });
    }
    // Stable: ops invoked at one instant keep history order.
    list.sort_by_key(|op| op.inv_us);
    mark_queue_excuses(&mut list, waiter_before);
    list
}

/// For each restore strictly inside `op`'s interval, an unanswered copy of
/// `op` that must take effect before that restore, if at all: the effect of
/// an attempt the restore rolled back (its session went with it, so the
/// retry after the restore took effect again). An operation never answered
/// may already take effect at any time and needs no copy.
fn lost_in_restores<'a>(op: &'a Op, restores_at_us: &'a [u64]) -> impl Iterator<Item = Op> + 'a {
    restores_at_us
        .iter()
        .filter(move |at_us| op.answered() && op.inv_us < **at_us && **at_us < op.resp_us)
        .map(move |at_us| Op { answer: None, resp_us: at_us - 1, ..op.clone() })
}

/// Marks the `Busy { 0 }` and `TimedOut` answers that a waiting acquire on the key excuses.
/// An acquire never answered counts as waiting from its first send on.
fn mark_queue_excuses(list: &mut [Op], waiter_before: bool) {
    let waiters: Vec<(u64, u64, RequestId, ClientId)> = list
        .iter()
        .filter(|op| matches!(op.call, Call::Acquire { wait_ms, .. } if wait_ms > 0))
        .map(|op| (op.inv_us, op.resp_us, op.request, op.client))
        .collect();
    for op in list.iter_mut() {
        let may_be_excused =
            matches!(op.answer, Some(ClientReply::Busy { remaining_ms: 0 }) | Some(ClientReply::TimedOut));
        if !may_be_excused {
            continue;
        }
        op.queue_excuse = waiter_before
            || waiters.iter().any(|(inv_us, resp_us, request, client)| {
                (*client, *request) != (op.client, op.request) && *inv_us <= op.resp_us && *resp_us >= op.inv_us
            });
    }
}
