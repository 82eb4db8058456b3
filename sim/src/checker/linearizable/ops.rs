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
//! an answer that must take effect before the restore (`per_key`).

use crate::history::{Actor, EventKind};
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ClientId, Key, RequestId, Token};
use std::collections::BTreeMap;

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

/// Gathers operations event by event, each key's apart.
#[derive(Debug)]
pub(crate) struct OpLog {
    keys: BTreeMap<Key, KeyOps>,
    /// Each operation's key and number, while it may still be answered.
    open: BTreeMap<(ClientId, RequestId), (Key, u64)>,
    restores_at_us: Vec<u64>,
    /// Operations so far: the next one's number, in history order across keys.
    count: u64,
    /// The most client operations a key's search takes (`Limits::ops_per_key_max`).
    ops_per_key_max: usize,
}

/// One key's operations.
#[derive(Debug, Default)]
pub(crate) struct KeyOps {
    /// By number (the order of their first sends). Past the search's bound
    /// only the grants and the operations still open are kept.
    pub ops: BTreeMap<u64, Op>,
    /// Client operations, kept or not, with the copies of those answered
    /// across a whole-cluster restore (`lost_in_restores`): what the search
    /// of the key would place.
    pub client_ops: u64,
    /// Past the bound, the operations settled without a grant are gone.
    trimmed: bool,
}

impl KeyOps {
    /// More operations than the search takes: the key is unknown whatever
    /// they are, and only its grants matter still (to the token checks).
    pub fn past_bound(&self, ops_per_key_max: usize) -> bool {
        self.client_ops > ops_per_key_max as u64
    }

    /// Counts `n` more operations; just past the bound, what is settled and no grant goes.
    fn count(&mut self, n: u64, ops_per_key_max: usize) {
        self.client_ops += n;
        if !self.trimmed && self.past_bound(ops_per_key_max) {
            self.trimmed = true;
            self.ops.retain(|_, op| op.resp_us == u64::MAX || granted(op));
        }
    }
}

/// Whether an operation is read by the token checks: a grant.
pub(crate) fn granted(op: &Op) -> bool {
    matches!(op.answer, Some(ClientReply::Granted { .. }))
}

impl OpLog {
    pub fn new(ops_per_key_max: usize) -> OpLog {
        OpLog { keys: BTreeMap::new(), open: BTreeMap::new(), restores_at_us: Vec::new(), count: 0, ops_per_key_max }
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
                let ops = self.keys.entry(key.clone()).or_default();
                ops.ops.insert(number, op);
                ops.count(1, self.ops_per_key_max);
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
            EventKind::ClusterRestored { .. } => self.restores_at_us.push(at_us),
            _ => {}
        }
    }

    /// Operation `number` of `key` is answered, or never will be (`None`);
    /// past the bound it is kept only if it is a grant.
    fn settle(&mut self, key: &Key, number: u64, answer: Option<(ClientReply, u64)>) {
        let Some(ops) = self.keys.get_mut(key) else { return };
        let Some(op) = ops.ops.get_mut(&number) else { return };
        if let Some((reply, at_us)) = answer {
            op.answer = Some(reply);
            op.resp_us = at_us;
        }
        let (copies, kept) = (lost_in_restores(op, &self.restores_at_us).count() as u64, granted(op));
        ops.count(copies, self.ops_per_key_max);
        if ops.trimmed && !kept {
            ops.ops.remove(&number);
        }
    }

    /// Each key's operations gathered so far, taken out of the log.
    pub fn take_keys(&mut self) -> BTreeMap<Key, KeyOps> {
        std::mem::take(&mut self.keys)
    }

    pub fn restores_at_us(&self) -> &[u64] {
        &self.restores_at_us
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

/// One key's operations (restores included), ordered by first send, as the search reads them.
pub(crate) fn searched(key: &Key, ops: Vec<Op>, restores_at_us: &[u64]) -> Vec<Op> {
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
    mark_queue_excuses(&mut list);
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
fn mark_queue_excuses(list: &mut [Op]) {
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
        op.queue_excuse = waiters.iter().any(|(inv_us, resp_us, request, client)| {
            (*client, *request) != (op.client, op.request) && *inv_us <= op.resp_us && *resp_us >= op.inv_us
        });
    }
}
