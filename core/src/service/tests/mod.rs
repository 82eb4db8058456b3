//! Tests of the lock service rules on a tiny in-memory cluster of
//! [`LockServer`]s: one node (which commits on its own) or three nodes that
//! exchange messages through a queue, with per-node local clocks, a switch
//! to cut a node off, one to stall it (a GC pause: its messages wait) and
//! one to hold back appends that carry entries while heartbeats pass (a
//! slow log write or a congested link: leadership is confirmed, the Grant
//! in flight is not yet committed).

mod acquire;
mod declines;
mod floors;
mod ghosts;
mod idle;
mod leases;
mod revoke;

use super::{ClientReply, ClientRequest, LockServer, Output, ServiceConfig};
use crate::command::{ApplyResult, Command};
use crate::lock::LockState;
use crate::raft::{Config, DurableState, Message, MessageBody, RaftNode, Role, SNAPSHOT_THRESHOLD_ENTRIES_STANDARD};
use crate::types::{ClientId, Key, LogIndex, NodeId, RequestId, Term, Token};
use crate::variant::Variant;
use std::collections::{BTreeSet, VecDeque};

const TICK_MS: u64 = 10;
const LEASE_MS: u64 = 1_000;
/// Rounds of ready/deliver per settle; a cluster that does not quiesce is a bug.
const SETTLE_ROUNDS_MAX: usize = 10_000;

pub(super) struct Cluster {
    servers: Vec<LockServer>,
    /// Each node's local clock; they start far apart so a test cannot confuse them.
    clocks_ms: Vec<u64>,
    inbox: VecDeque<Message>,
    isolated: BTreeSet<NodeId>,
    /// Stalled nodes: they neither tick nor step; messages to them wait in `held`.
    paused: BTreeSet<NodeId>,
    held: VecDeque<Message>,
    /// While set, appends carrying an entry above this index wait in `held_entries` (heartbeats pass).
    entries_pass_through: Option<LogIndex>,
    held_entries: VecDeque<Message>,
    /// Every output, in order, with the node that produced it.
    log: Vec<(NodeId, Output)>,
}

pub(super) fn key() -> Key {
    Key::new("invoice/B-1042")
}

/// A second key, for tests where two keys must not be confused.
pub(super) fn other_key() -> Key {
    Key::new("invoice/B-1043")
}

pub(super) fn acquire(wait_ms: u64) -> ClientRequest {
    ClientRequest::Acquire { key: key(), lease_ms: LEASE_MS, wait_ms }
}

impl Cluster {
    pub(super) fn new(nodes: u8, variant: Variant) -> Cluster {
        let mut config = ServiceConfig::standard(variant);
        config.wait_queue_max = 2;
        Cluster::with_config(nodes, config)
    }

    pub(super) fn with_config(nodes: u8, config: ServiceConfig) -> Cluster {
        Cluster::with_snapshot_threshold(nodes, config, SNAPSHOT_THRESHOLD_ENTRIES_STANDARD)
    }

    /// A cluster whose Raft nodes compact every `snapshot_threshold_entries` applied entries.
    pub(super) fn with_snapshot_threshold(
        nodes: u8,
        config: ServiceConfig,
        snapshot_threshold_entries: u64,
    ) -> Cluster {
        Cluster::with_raft(nodes, config, |raft| raft.snapshot_threshold_entries = snapshot_threshold_entries)
    }

    /// A cluster whose Raft nodes take the standard configuration as `tweak` changes it.
    pub(super) fn with_raft(nodes: u8, config: ServiceConfig, tweak: impl Fn(&mut Config)) -> Cluster {
        let voters: Vec<NodeId> = (0..nodes).map(NodeId).collect();
        let servers = voters
            .iter()
            .map(|id| {
                let mut raft_config = Config { variant: config.variant, ..Config::standard(*id, voters.clone()) };
                tweak(&mut raft_config);
                let raft =
                    RaftNode::new(raft_config, DurableState::default(), 1_000 + u64::from(id.0)).expect("valid config");
                let mut server = LockServer::new(config.clone(), raft, LockState::new(Token(0)));
                // On for `tick_checked`, which reads them; they change no decision.
                server.probes_on();
                server
            })
            .collect();
        let clocks_ms = (0..nodes).map(|n| 1_000_000 * (u64::from(n) + 1)).collect();
        Cluster {
            servers,
            clocks_ms,
            inbox: VecDeque::new(),
            isolated: BTreeSet::new(),
            paused: BTreeSet::new(),
            held: VecDeque::new(),
            entries_pass_through: None,
            held_entries: VecDeque::new(),
            log: Vec::new(),
        }
    }

    pub(super) fn server(&self, node: NodeId) -> &LockServer {
        &self.servers[usize::from(node.0)]
    }

    pub(super) fn now_ms(&self, node: NodeId) -> u64 {
        self.clocks_ms[usize::from(node.0)]
    }

    /// Hands out every Ready and delivers every message until the cluster is quiet.
    pub(super) fn settle(&mut self) {
        self.settle_until(|_| false);
    }

    /// Like `settle`, but stops after the first round at whose end `until` holds.
    pub(super) fn settle_until(&mut self, until: impl Fn(&Cluster) -> bool) {
        for _ in 0..SETTLE_ROUNDS_MAX {
            let mut busy = false;
            for n in 0..self.servers.len() {
                let node = NodeId(n as u8);
                if !self.paused.contains(&node) && self.servers[n].has_ready() {
                    busy = true;
                    for message in self.take_ready(node) {
                        if !self.isolated.contains(&message.from) && !self.isolated.contains(&message.to) {
                            self.inbox.push_back(message);
                        }
                    }
                }
                self.collect(node);
            }
            if let Some(message) = self.inbox.pop_front() {
                busy = true;
                if self.paused.contains(&message.to) {
                    self.held.push_back(message);
                    continue;
                }
                if self.entries_pass_through.is_some_and(|through| carries_entries_above(&message, through)) {
                    self.held_entries.push_back(message);
                    continue;
                }
                let to = usize::from(message.to.0);
                let now_ms = self.clocks_ms[to];
                self.servers[to].step(message, now_ms);
                self.collect(NodeId(to as u8));
            }
            if !busy || until(self) {
                return;
            }
        }
        panic!("the cluster did not settle within {SETTLE_ROUNDS_MAX} rounds");
    }

    /// Takes `node`'s Ready (if it has one), applies it, and returns its
    /// messages instead of delivering them: `settle_until` delivers them, and
    /// tests that order every step by hand take them.
    pub(super) fn take_ready(&mut self, node: NodeId) -> Vec<Message> {
        let now_ms = self.now_ms(node);
        let server = &mut self.servers[usize::from(node.0)];
        if !server.has_ready() {
            return Vec::new();
        }
        let mut ready = server.ready();
        let messages: Vec<Message> = std::mem::take(&mut ready.messages)
            .into_iter()
            .chain(std::mem::take(&mut ready.messages_after_persist))
            .collect();
        server.apply_ready(ready, now_ms);
        self.collect(node);
        messages
    }

    /// Steps each of `messages` addressed to `to` into it by hand, in order (no Ready is taken).
    pub(super) fn step_into(&mut self, to: NodeId, messages: Vec<Message>) {
        let now_ms = self.now_ms(to);
        for message in messages.into_iter().filter(|m| m.to == to) {
            self.servers[usize::from(to.0)].step(message, now_ms);
        }
        self.collect(to);
    }

    fn collect(&mut self, node: NodeId) {
        let outputs = self.servers[usize::from(node.0)].take_outputs();
        self.log.extend(outputs.into_iter().map(|output| (node, output)));
    }

    /// One tick on every running node (each on its own clock; a stalled
    /// node's clock runs on), then settle.
    pub(super) fn tick(&mut self) {
        for n in 0..self.servers.len() {
            self.clocks_ms[n] += TICK_MS;
            if self.paused.contains(&NodeId(n as u8)) {
                continue;
            }
            let now_ms = self.clocks_ms[n];
            self.tick_checked(n, now_ms);
        }
        self.settle();
    }

    /// Ticks node `n` at `now_ms`, checking `LockServer::idle_ticks` on every
    /// tick of every test: a tick it called idle makes no Ready, no output
    /// and no probe, and leaves one idle tick fewer ahead (at least).
    fn tick_checked(&mut self, n: usize, now_ms: u64) {
        self.collect(NodeId(n as u8));
        let server = &mut self.servers[n];
        let idle = server.idle_ticks(now_ms);
        let had_ready = server.has_ready();
        server.take_probes();
        server.tick(now_ms);
        if idle > 0 {
            assert!(had_ready || !server.has_ready(), "a tick called idle made Raft work (node {n} at {now_ms} ms)");
            assert!(server.take_outputs().is_empty(), "a tick called idle answered (node {n} at {now_ms} ms)");
            assert_eq!(
                server.take_probes(),
                crate::probe::ProbeSet::default(),
                "a tick called idle probed (node {n} at {now_ms} ms)"
            );
            assert!(
                server.idle_ticks(now_ms + TICK_MS) >= idle - 1,
                "idle ticks ahead grew fewer by more than the tick"
            );
        }
        self.collect(NodeId(n as u8));
    }

    /// `node`'s election timer run out now, then settle.
    pub(super) fn campaign(&mut self, node: NodeId) {
        self.servers[usize::from(node.0)].campaign();
        self.collect(node);
        self.settle();
    }

    /// One tick on `node` alone, without delivering anything: a node resuming
    /// from a stall whose first tick comes before the messages that waited for it.
    pub(super) fn tick_alone(&mut self, node: NodeId) {
        let n = usize::from(node.0);
        self.clocks_ms[n] += TICK_MS;
        let now_ms = self.clocks_ms[n];
        self.tick_checked(n, now_ms);
    }

    /// `node`'s next `ticks` ticks alone, made at once (`LockServer::tick_idle`).
    pub(super) fn tick_idle_alone(&mut self, node: NodeId, ticks: u32) {
        let n = usize::from(node.0);
        let first_ms = self.clocks_ms[n] + TICK_MS;
        self.clocks_ms[n] += u64::from(ticks) * TICK_MS;
        self.servers[n].tick_idle(first_ms, ticks);
        self.collect(node);
    }

    pub(super) fn run_ms(&mut self, ms: u64) {
        for _ in 0..ms / TICK_MS {
            self.tick();
        }
    }

    /// Ticks until `until` holds, at most `ms_max`; returns whether it did.
    pub(super) fn run_until(&mut self, ms_max: u64, until: impl Fn(&Cluster) -> bool) -> bool {
        for _ in 0..ms_max / TICK_MS {
            if until(self) {
                return true;
            }
            self.tick();
        }
        until(self)
    }

    /// The reachable leader that serves requests, if exactly one.
    pub(super) fn leader(&self) -> Option<NodeId> {
        let serving: Vec<NodeId> = (0..self.servers.len() as u8)
            .map(NodeId)
            .filter(|node| !self.isolated.contains(node) && self.server(*node).is_serving_leader())
            .collect();
        (serving.len() == 1).then(|| serving[0])
    }

    /// Runs until a serving leader exists; returns it.
    pub(super) fn elect(&mut self) -> NodeId {
        assert!(self.run_until(5_000, |cluster| cluster.leader().is_some()), "no leader within 5 s");
        self.leader().expect("just checked")
    }

    pub(super) fn isolate(&mut self, node: NodeId) {
        self.isolated.insert(node);
        self.inbox.retain(|message| message.from != node && message.to != node);
    }

    pub(super) fn heal(&mut self) {
        self.isolated.clear();
    }

    /// Stalls `node`: it stops ticking and stepping, and what is sent to it waits.
    pub(super) fn pause(&mut self, node: NodeId) {
        self.paused.insert(node);
    }

    /// Ends `node`'s stall: it takes what waited for it, in order, before anything newer.
    pub(super) fn resume(&mut self, node: NodeId) {
        self.paused.remove(&node);
        let (mine, others): (VecDeque<Message>, VecDeque<Message>) =
            std::mem::take(&mut self.held).into_iter().partition(|message| message.to == node);
        self.held = others;
        for message in mine.into_iter().rev() {
            self.inbox.push_front(message);
        }
        self.settle();
    }

    /// From now on appends that carry entries wait; heartbeats (empty appends) and every other message pass.
    pub(super) fn hold_entries(&mut self) {
        self.entries_pass_through = Some(LogIndex(0));
    }

    /// Lets the held appends whose entries all lie at or below `through` go
    /// on, in order, and settles; appends that carry a later entry keep waiting.
    pub(super) fn deliver_entries_through(&mut self, through: LogIndex) {
        self.entries_pass_through = Some(through);
        self.inbox.extend(std::mem::take(&mut self.held_entries));
        self.settle();
    }

    /// Stops holding: what waited is delivered, in order, and the cluster settles.
    pub(super) fn release_entries(&mut self) {
        self.entries_pass_through = None;
        self.inbox.extend(std::mem::take(&mut self.held_entries));
        self.settle();
    }

    /// Steps `node`'s local clock by `delta_ms` (an NTP step).
    pub(super) fn step_clock(&mut self, node: NodeId, delta_ms: i64) {
        let clock = &mut self.clocks_ms[usize::from(node.0)];
        *clock = clock.checked_add_signed(delta_ms).expect("clock stays positive");
    }

    /// Delivers a client request to `node` without settling.
    pub(super) fn send(&mut self, node: NodeId, client: u32, request: u64, body: ClientRequest) {
        let now_ms = self.now_ms(node);
        self.servers[usize::from(node.0)].on_client(ClientId(client), RequestId(request), body, now_ms);
        self.collect(node);
    }

    /// Delivers a client request to `node` and settles.
    pub(super) fn request(&mut self, node: NodeId, client: u32, request: u64, body: ClientRequest) {
        self.send(node, client, request, body);
        self.settle();
    }

    pub(super) fn bounce(&mut self, node: NodeId, client: u32, request: u64, reply: ClientReply) {
        let now_ms = self.now_ms(node);
        self.servers[usize::from(node.0)].on_bounced(ClientId(client), RequestId(request), reply, now_ms);
        self.collect(node);
        self.settle();
    }

    /// Every reply to `(client, request)`, with the node that sent it.
    pub(super) fn replies(&self, client: u32, request: u64) -> Vec<(NodeId, ClientReply)> {
        self.log
            .iter()
            .filter_map(|(node, output)| match output {
                Output::Reply { client: c, request: r, reply }
                    if *c == ClientId(client) && *r == RequestId(request) =>
                {
                    Some((*node, *reply))
                }
                _ => None,
            })
            .collect()
    }

    /// The replies to `(client, request)` without the sender.
    pub(super) fn answers(&self, client: u32, request: u64) -> Vec<ClientReply> {
        self.replies(client, request).into_iter().map(|(_, reply)| reply).collect()
    }

    /// The commands `node` applied, with their results.
    pub(super) fn applied(&self, node: NodeId) -> Vec<(Command, ApplyResult)> {
        self.log
            .iter()
            .filter_map(|(from, output)| match output {
                Output::Applied { command, result, .. } if *from == node => Some((command.clone(), *result)),
                _ => None,
            })
            .collect()
    }

    pub(super) fn outputs_of(&self, node: NodeId) -> impl Iterator<Item = &Output> {
        self.log.iter().filter(move |(from, _)| *from == node).map(|(_, output)| output)
    }

    pub(super) fn expire_proposals(&self, node: NodeId) -> usize {
        self.outputs_of(node).filter(|output| matches!(output, Output::ExpireProposed { .. })).count()
    }

    pub(super) fn token_of(&self, node: NodeId) -> Option<Token> {
        self.server(node).state().lock(&key()).map(|lock| lock.token)
    }

    pub(super) fn role(&self, node: NodeId) -> Role {
        self.server(node).raft().soft_state().role
    }
}

/// `answers` is one redirect (`NotLeader`) and nothing else: what a deposed
/// leader tells a client it can no longer answer.
#[track_caller]
pub(super) fn assert_only_redirected(answers: &[ClientReply], why: &str) {
    assert!(matches!(answers, [ClientReply::NotLeader { .. }]), "{why}: expected one NotLeader, got {answers:?}");
}

fn carries_entries_above(message: &Message, through: LogIndex) -> bool {
    matches!(&message.body, MessageBody::Append { entries, .. } if entries.iter().any(|entry| entry.index > through))
}

/// A one-node cluster with a serving leader, node 0.
pub(super) fn single(variant: Variant) -> Cluster {
    let mut cluster = Cluster::new(1, variant);
    assert_eq!(cluster.elect(), NodeId(0));
    cluster
}

/// A three-node cluster with a serving leader; returns it too.
pub(super) fn three(variant: Variant) -> (Cluster, NodeId) {
    let mut cluster = Cluster::new(3, variant);
    let leader = cluster.elect();
    (cluster, leader)
}

/// Some node other than `node`.
pub(super) fn other_than(node: NodeId) -> NodeId {
    NodeId((node.0 + 1) % 3)
}

#[test]
fn follower_redirects_to_the_leader_it_knows() {
    let (mut cluster, leader) = three(Variant::Default);
    let follower = other_than(leader);
    cluster.request(follower, 1, 1, acquire(0));
    assert_eq!(cluster.answers(1, 1), vec![ClientReply::NotLeader { leader: Some(leader) }]);
    assert_eq!(cluster.token_of(leader), None, "a follower proposes nothing");
}

#[test]
fn no_leader_hint_variant_redirects_without_naming_the_leader() {
    let (mut cluster, leader) = three(Variant::NoLeaderHint);
    let follower = other_than(leader);
    assert_eq!(cluster.server(follower).raft().soft_state().leader, Some(leader), "the follower knows its leader");
    cluster.request(follower, 1, 1, acquire(0));
    assert_eq!(cluster.answers(1, 1), vec![ClientReply::NotLeader { leader: None }]);
}

/// A follower that has applied c1's grant gets a try-lock and a renew: the
/// safe server redirects both; `follower-answers-try-lock` answers the
/// try-lock `Busy` from its own copy of the state, and still redirects the rest.
fn follower_with_the_key_held(variant: Variant) -> (Vec<ClientReply>, Vec<ClientReply>, NodeId) {
    let (mut cluster, leader) = three(variant);
    cluster.request(leader, 1, 1, acquire(0));
    let follower = other_than(leader);
    cluster.run_ms(100);
    assert_eq!(cluster.token_of(follower), Some(Token(1)), "the follower applied the grant");
    cluster.request(follower, 2, 1, acquire(0));
    cluster.request(follower, 1, 2, ClientRequest::Renew { key: key(), token: Token(1) });
    (cluster.answers(2, 1), cluster.answers(1, 2), leader)
}

#[test]
fn a_follower_redirects_a_try_lock_even_for_a_key_it_sees_held() {
    let (try_lock, renew, leader) = follower_with_the_key_held(Variant::Default);
    assert_eq!(try_lock, vec![ClientReply::NotLeader { leader: Some(leader) }]);
    assert_eq!(renew, vec![ClientReply::NotLeader { leader: Some(leader) }]);
}

#[test]
fn follower_answers_try_lock_variant_answers_busy_from_its_own_state() {
    let (try_lock, renew, leader) = follower_with_the_key_held(Variant::FollowerAnswersTryLock);
    assert_eq!(try_lock, vec![ClientReply::Busy { remaining_ms: LEASE_MS }]);
    assert_eq!(renew, vec![ClientReply::NotLeader { leader: Some(leader) }], "only a try-lock");
}

#[test]
fn the_log_is_compacted_every_threshold_applied_entries() {
    let mut cluster = Cluster::with_snapshot_threshold(1, ServiceConfig::standard(Variant::Default), 4);
    cluster.elect();
    // Entry 1 is the leader's no-op; 2, 3 and 4 are a grant, its release and a second grant.
    cluster.request(NodeId(0), 1, 1, acquire(0));
    cluster.request(NodeId(0), 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    let compactions = |cluster: &Cluster| -> Vec<(u64, Option<Token>)> {
        cluster
            .outputs_of(NodeId(0))
            .filter_map(|output| match output {
                Output::Compacted(snapshot) => Some((snapshot.index.0, snapshot.state.lock(&key()).map(|l| l.token))),
                _ => None,
            })
            .collect()
    };
    assert_eq!(compactions(&cluster), vec![]);
    cluster.request(NodeId(0), 1, 3, acquire(0));
    assert_eq!(compactions(&cluster), vec![(4, Some(Token(2)))], "the snapshot holds the state as of its index");
    assert_eq!(cluster.server(NodeId(0)).raft().snapshot_index().0, 4);
}

#[test]
fn every_node_reports_the_committed_noop_of_the_new_leader() {
    let (mut cluster, leader) = three(Variant::Default);
    let term = cluster.server(leader).raft().soft_state().term;
    cluster.request(leader, 1, 1, acquire(0));
    for node in (0..3).map(NodeId) {
        let applied: Vec<(LogIndex, Term, bool)> = cluster
            .outputs_of(node)
            .filter_map(|output| match output {
                Output::AppliedNoop { index, term } => Some((*index, *term, true)),
                Output::Applied { index, term, .. } => Some((*index, *term, false)),
                _ => None,
            })
            .collect();
        // Index 1 is the leader's no-op, index 2 the grant.
        assert_eq!(applied, vec![(LogIndex(1), term, true), (LogIndex(2), term, false)], "on {node}");
    }
}

#[test]
fn a_follower_behind_the_compacted_log_takes_the_lock_state_from_the_snapshot() {
    let mut cluster = Cluster::with_snapshot_threshold(3, ServiceConfig::standard(Variant::Default), 4);
    let leader = cluster.elect();
    let lagging = other_than(leader);
    cluster.isolate(lagging);
    // A grant, its release and a second grant: entries 2 to 4 (or later), compacted at the leader.
    cluster.request(leader, 1, 1, acquire(0));
    cluster.request(leader, 1, 2, ClientRequest::Release { key: key(), token: Token(1) });
    cluster.request(leader, 2, 1, acquire(0));
    cluster.run_ms(100);
    assert!(cluster.server(leader).raft().snapshot_index() > cluster.server(lagging).applied_index());
    cluster.heal();
    assert!(cluster
        .run_until(2_000, |cluster| cluster.server(lagging).applied_index() == cluster.server(leader).applied_index()));
    assert!(cluster.server(lagging).raft().snapshot_index() > LogIndex(0), "it caught up through a snapshot");
    assert_eq!(cluster.server(lagging).state(), cluster.server(leader).state());
    assert_eq!(cluster.token_of(lagging), Some(Token(2)));
    assert_eq!(cluster.server(lagging).lease_deadline_local_ms(&key()), None, "a follower keeps no lease timer");
}

fn server_with(config: ServiceConfig) -> LockServer {
    let raft = RaftNode::new(Config::standard(NodeId(0), vec![NodeId(0)]), DurableState::default(), 1).expect("valid");
    LockServer::new(config, raft, LockState::new(Token(0)))
}

#[test]
#[should_panic(expected = "service config `tick_ms` must be positive")]
fn a_zero_tick_is_refused_at_construction() {
    server_with(ServiceConfig { tick_ms: 0, ..ServiceConfig::standard(Variant::Default) });
}

#[test]
#[should_panic(expected = "service config `wait_queue_max` must be positive")]
fn an_empty_wait_queue_is_refused_at_construction() {
    server_with(ServiceConfig { wait_queue_max: 0, ..ServiceConfig::standard(Variant::Default) });
}

#[test]
#[should_panic(expected = "service config `wait_queue_max` too large")]
fn a_wait_queue_above_its_ceiling_is_refused_at_construction() {
    let wait_queue_max = super::WAITERS_PER_KEY_MAX + 1;
    server_with(ServiceConfig { wait_queue_max, ..ServiceConfig::standard(Variant::Default) });
}
