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

/// Gathers operations event by event.
#[derive(Debug, Default)]
pub(crate) struct OpLog {
    ops: Vec<Op>,
    /// Each operation's place in `ops`, while it may still be answered.
    open: BTreeMap<(ClientId, RequestId), usize>,
    restores_at_us: Vec<u64>,
}

impl OpLog {
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
                    key,
                    call,
                    answer: None,
                    inv_us: at_us,
                    resp_us: u64::MAX,
                    lease_end_min_us: 0,
                    queue_excuse: false,
                    clock_excuse: false,
                };
                self.open.insert((*client, *request), self.ops.len());
                self.ops.push(op);
            }
            EventKind::Answered { client, request, reply, .. } if settles(reply) => {
                if let Some(index) = self.open.remove(&(*client, *request)) {
                    self.ops[index].answer = Some(*reply);
                    self.ops[index].resp_us = at_us;
                }
            }
            EventKind::GaveUp { client, request, .. } => {
                self.open.remove(&(*client, *request));
            }
            EventKind::Crashed { actor: Actor::Client(client) } => {
                self.open.retain(|(c, _), _| c != client);
            }
            EventKind::ClusterRestored { .. } => self.restores_at_us.push(at_us),
            _ => {}
        }
    }

    /// The operations gathered so far, taken out of the log.
    pub fn take_ops(&mut self) -> Vec<Op> {
        std::mem::take(&mut self.ops)
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

/// Each key's operations (restores included), ordered by first send.
pub(crate) fn per_key(ops: Vec<Op>, restores_at_us: &[u64]) -> BTreeMap<Key, Vec<Op>> {
    let mut keys: BTreeMap<Key, Vec<Op>> = BTreeMap::new();
    for op in ops {
        match keys.get_mut(&op.key) {
            Some(list) => list.push(op),
            None => {
                keys.insert(op.key.clone(), vec![op]);
            }
        }
    }
    for (key, list) in keys.iter_mut() {
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
        mark_queue_excuses(list);
    }
    keys
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
