//! The client lanes and the key lanes: requests from first send to answer,
//! beliefs ("I hold it until T", ended by the client's own clock), writes
//! with their verdicts; per key, the committed holder and the stretches in
//! which two clients believed they held it.

use super::layout::{short_key, Item, Style};
use super::servers::{verdict_word, LocalClock, Open};
use crate::history::{Actor, Event, EventKind};
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ApplyResult, ClientId, Command, Key, LogIndex, RequestId, Token};
use std::collections::{BTreeMap, BTreeSet};

/// A request from its first send to its last answer.
struct Request {
    first: Open,
    retries: u64,
    is_acquire: bool,
    answer: Option<(u64, ClientReply, String)>,
    gave_up: Option<(u64, String)>,
}

/// A belief as the client announced it; its end is decided at the end of the run.
struct Belief {
    client: ClientId,
    key: Key,
    token: Token,
    start: Open,
    until_local_us: u64,
    ended: Option<(u64, String)>,
}

#[derive(Default)]
pub struct ClientLane {
    pub requests: Vec<Item>,
    pub beliefs: Vec<Item>,
    pub writes: Vec<Item>,
    pub backgrounds: Vec<Item>,
    clock: LocalClock,
    paused: Option<Open>,
    down: Option<Open>,
}

#[derive(Default)]
pub struct KeyLane {
    pub holders: Vec<Item>,
    pub overlaps: Vec<Item>,
    holder: Option<(Token, Open)>,
}

#[derive(Default)]
pub struct Clients {
    pub lanes: BTreeMap<ClientId, ClientLane>,
    pub keys: BTreeMap<Key, KeyLane>,
    requests: BTreeMap<(ClientId, RequestId), Request>,
    beliefs: Vec<Belief>,
    writes: BTreeMap<(ClientId, RequestId), Open>,
    /// Log indexes applied so far (in this restore epoch): the first node to apply one speaks for all.
    applied: BTreeSet<LogIndex>,
}

impl Clients {
    pub fn observe(&mut self, event: &Event) {
        let at = event.at_us;
        let line = || super::trace_line(event);
        match &event.kind {
            EventKind::Requested { client, request, body, .. } => {
                self.lanes.entry(*client).or_default();
                if let Some(known) = self.requests.get_mut(&(*client, *request)) {
                    known.retries += 1;
                } else {
                    let (label, is_acquire) = request_word(body);
                    let first = Open::new(event, Style::Request, label);
                    let entry = Request { first, retries: 0, is_acquire, answer: None, gave_up: None };
                    self.requests.insert((*client, *request), entry);
                }
            }
            EventKind::Answered { client, request, reply, .. } => {
                if let Some(known) = self.requests.get_mut(&(*client, *request)) {
                    known.answer = Some((at, *reply, line()));
                }
            }
            EventKind::GaveUp { client, request, .. } => {
                if let Some(known) = self.requests.get_mut(&(*client, *request)) {
                    known.gave_up = Some((at, line()));
                }
            }
            EventKind::BeliefStart { client, key, token, until_local_us } => {
                self.keys.entry(key.clone()).or_default();
                let label = format!("{token} {}", short_key(key));
                self.beliefs.push(Belief {
                    client: *client,
                    key: key.clone(),
                    token: *token,
                    start: Open::new(event, Style::Belief, label),
                    until_local_us: *until_local_us,
                    ended: None,
                });
            }
            EventKind::BeliefEnd { client, key, token } => {
                let open = self
                    .beliefs
                    .iter_mut()
                    .rev()
                    .find(|b| b.client == *client && b.key == *key && b.token == *token && b.ended.is_none());
                if let Some(belief) = open {
                    belief.ended = Some((at, line()));
                }
            }
            EventKind::Crashed { actor: Actor::Client(client) } => {
                for belief in self.beliefs.iter_mut().filter(|b| b.client == *client && b.ended.is_none()) {
                    belief.ended = Some((at, line()));
                }
                self.lanes.entry(*client).or_default().down = Some(Open::new(event, Style::Down, "down".into()));
            }
            EventKind::Restarted { actor: Actor::Client(client) } => {
                let lane = self.lanes.entry(*client).or_default();
                if let Some(open) = lane.down.take() {
                    lane.backgrounds.push(open.close(at, Some(line())));
                }
            }
            EventKind::Paused { actor: Actor::Client(client) } => {
                let open = Open::new(event, Style::Paused, "paused".into());
                self.lanes.entry(*client).or_default().paused = Some(open);
            }
            EventKind::Stalled { client, .. }
            | EventKind::StalledUntilOvertaken { client, .. }
            | EventKind::StalledOnGrant { client, .. } => {
                let open = Open::new(event, Style::Paused, "stalled".into());
                self.lanes.entry(*client).or_default().paused = Some(open);
            }
            EventKind::Resumed { actor: Actor::Client(client) } => {
                let lane = self.lanes.entry(*client).or_default();
                if let Some(open) = lane.paused.take() {
                    lane.backgrounds.push(open.close(at, Some(line())));
                }
            }
            EventKind::Clock { actor: Actor::Client(client), local_us, rate_ppm, .. } => {
                self.lanes.entry(*client).or_default().clock.set(at, *local_us, *rate_ppm);
            }
            EventKind::Fault { fault: crate::faults::Fault::ClockStep { actor: Actor::Client(client), delta_ms } } => {
                let item = Item::mark(at, Style::ClockStep, format!("clock {delta_ms:+}ms"), line());
                self.lanes.entry(*client).or_default().writes.push(item);
            }
            EventKind::WriteSent { client, request, key, token, path } => {
                let label = format!("{path} {token}");
                let _ = key;
                self.writes.insert((*client, *request), Open::new(event, Style::WriteUnanswered, label));
            }
            EventKind::WriteDone { client, request, verdict, .. } => {
                if let Some(mut open) = self.writes.remove(&(*client, *request)) {
                    open.style =
                        if verdict_word(verdict) == "ok" { Style::WriteAccepted } else { Style::WriteRejected };
                    open.label = format!("{} {}", open.label, verdict_word(verdict));
                    self.lanes.entry(*client).or_default().writes.push(open.close(at, Some(line())));
                }
            }
            EventKind::ClusterRestored { .. } => {
                self.applied.clear();
                for lane in self.keys.values_mut() {
                    if let Some((_, open)) = lane.holder.take() {
                        lane.holders.push(open.close(at, Some(line())));
                    }
                }
            }
            EventKind::Applied { index, command, result, .. } if self.applied.insert(*index) => {
                self.applied_once(event, command, result);
            }
            _ => {}
        }
    }

    /// The committed lock table changes as the first node to apply an entry says.
    fn applied_once(&mut self, event: &Event, command: &Command, result: &ApplyResult) {
        let lane = self.keys.entry(command.key().clone()).or_default();
        let line = super::trace_line(event);
        match (command, result) {
            (Command::Grant { holder, .. }, ApplyResult::Granted { token }) => {
                if let Some((_, open)) = lane.holder.take() {
                    lane.holders.push(open.close(event.at_us, Some(line)));
                }
                let label = format!("{} {token}", holder.client);
                lane.holder = Some((*token, Open::new(event, Style::Holder, label)));
            }
            (Command::Release { token, .. }, ApplyResult::Released)
            | (Command::Expire { token, .. }, ApplyResult::Expired { existed: true })
                if lane.holder.as_ref().is_some_and(|(held, _)| held == token) =>
            {
                let (_, open) = lane.holder.take().expect("checked");
                lane.holders.push(open.close(event.at_us, Some(line)));
            }
            _ => {}
        }
    }

    pub fn finish(&mut self, end_us: u64) {
        for ((client, _), request) in std::mem::take(&mut self.requests) {
            let item = request_item(request, end_us);
            self.lanes.entry(client).or_default().requests.push(item);
        }
        for ((client, _), open) in std::mem::take(&mut self.writes) {
            self.lanes.entry(client).or_default().writes.push(open.close(end_us, None));
        }
        let mut believed: BTreeMap<Key, Vec<(u64, u64, ClientId, Token)>> = BTreeMap::new();
        for belief in std::mem::take(&mut self.beliefs) {
            let lane = self.lanes.entry(belief.client).or_default();
            let start_us = belief.start.at_us;
            let lease_end = lane.clock.true_reaching(start_us, belief.until_local_us).unwrap_or(end_us).min(end_us);
            let (end, trace) = match belief.ended {
                Some((at, line)) if at <= lease_end => (at, Some(line)),
                _ => (lease_end, Some(format!("(its clock reaches the lease's end at {})", super::ms(lease_end)))),
            };
            believed.entry(belief.key.clone()).or_default().push((start_us, end, belief.client, belief.token));
            lane.beliefs.push(belief.start.close(end, trace));
        }
        for lane in self.lanes.values_mut() {
            for open in [lane.paused.take(), lane.down.take()].into_iter().flatten() {
                lane.backgrounds.push(open.close(end_us, None));
            }
        }
        for (key, lane) in &mut self.keys {
            if let Some((_, open)) = lane.holder.take() {
                lane.holders.push(open.close(end_us, None));
            }
            lane.overlaps = overlaps(key, believed.remove(key).unwrap_or_default());
        }
    }
}

/// `acquire`, `renew`, …: the request's kind, and whether it is an acquire.
fn request_word(body: &ClientRequest) -> (String, bool) {
    match body {
        ClientRequest::Acquire { .. } => ("acquire".into(), true),
        ClientRequest::Renew { token, .. } => (format!("renew {token}"), false),
        ClientRequest::Release { token, .. } => (format!("release {token}"), false),
        ClientRequest::Revoke { token, .. } => (format!("revoke {token}"), false),
        ClientRequest::Cancel => ("cancel".into(), false),
    }
}

fn request_item(request: Request, end_us: u64) -> Item {
    let Request { mut first, retries, is_acquire, answer, gave_up } = request;
    let retried = if retries > 0 { format!("\n(sent {} times)", retries + 1) } else { String::new() };
    let (end, outcome, end_line) = match (answer, gave_up) {
        (_, Some((at, line))) => (at, "gave up".to_string(), Some(line)),
        (Some((at, reply, line)), None) => (at, reply_word(&reply), Some(line)),
        (None, None) => (end_us, "no answer".to_string(), None),
    };
    first.style = match (is_acquire, outcome.starts_with("tok")) {
        (true, true) => Style::Acquire,
        (true, false) => Style::AcquireRefused,
        (false, _) => Style::Request,
    };
    first.label = if is_acquire { outcome } else { first.label };
    first.trace.push_str(&retried);
    first.close(end, end_line)
}

fn reply_word(reply: &ClientReply) -> String {
    match reply {
        ClientReply::Granted { token, .. } => token.to_string(),
        ClientReply::Busy { .. } => "busy".into(),
        ClientReply::Renewed { .. } => "renewed".into(),
        ClientReply::Released => "released".into(),
        ClientReply::NotHeld => "not held".into(),
        ClientReply::NotLeader { .. } => "not leader".into(),
        ClientReply::TimedOut => "timed out".into(),
        ClientReply::Unavailable => "unavailable".into(),
    }
}

/// The stretches in which two or more clients believed they held `key`,
/// merged while the set of believers stays the same.
fn overlaps(key: &Key, beliefs: Vec<(u64, u64, ClientId, Token)>) -> Vec<Item> {
    let mut instants: BTreeSet<u64> = BTreeSet::new();
    for &(a, b, _, _) in &beliefs {
        instants.insert(a);
        instants.insert(b);
    }
    let instants: Vec<u64> = instants.into_iter().collect();
    let mut items: Vec<Item> = Vec::new();
    let mut current: Option<Together> = None;
    for pair in instants.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let holders: BTreeSet<(ClientId, Token)> =
            beliefs.iter().filter(|(s, e, _, _)| *s <= a && b <= *e).map(|(_, _, c, t)| (*c, *t)).collect();
        let clients: BTreeSet<ClientId> = holders.iter().map(|(c, _)| *c).collect();
        let together = clients.len() >= 2;
        match &mut current {
            Some((_, end, set)) if together && *set == holders && *end == a => *end = b,
            _ => {
                if let Some(done) = current.take() {
                    items.push(overlap_item(key, done));
                }
                if together {
                    current = Some((a, b, holders));
                }
            }
        }
    }
    if let Some(done) = current {
        items.push(overlap_item(key, done));
    }
    items
}

/// A stretch `[a, b)` and the clients (with their tokens) who all believed in the key then.
type Together = (u64, u64, BTreeSet<(ClientId, Token)>);

fn overlap_item(key: &Key, (a, b, holders): Together) -> Item {
    let label = holders.iter().map(|(c, _)| c.to_string()).collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>();
    let who: Vec<String> = holders.iter().map(|(c, t)| format!("{c} with {t}")).collect();
    let trace = format!("{} to {}: {} all believed they held {key}", super::ms(a), super::ms(b), who.join(" and "));
    Item::span(a, b, Style::Overlap, format!("both: {}", label.join("+")), trace)
}
