//! A deterministic in-memory cluster for the Raft tests: a message queue
//! delivered in seeded-random (or FIFO) order with drops, duplicates and
//! partitions, disks that hold exactly what a driver persisted, crashes that
//! rebuild a node from its disk, and checkers that record violations of
//! election safety, apply agreement, log matching and commit durability.
#![allow(dead_code)]

use fencelock::raft::{
    Config, DurableState, Entry, HardState, Message, MessageBody, Payload, RaftNode, ReadState, Role, Snapshot,
};
use fencelock::{Command, Key, LockState, LogIndex, NodeId, Term, Token, Variant};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Readies handled in a row for one node before giving up (a limit on the loop).
const READIES_PER_PROCESS_MAX: usize = 64;
/// Messages delivered by one `deliver_all` at most.
const DELIVERIES_MAX: usize = 200_000;

/// What a node's disk holds: exactly what the harness persisted from Readies.
#[derive(Clone, Debug, Default)]
pub struct Disk {
    pub hard_state: HardState,
    pub snapshot: Option<Snapshot>,
    pub entries: Vec<Entry>,
    pub restored_from_backup: bool,
}

impl Disk {
    pub fn durable(&self) -> DurableState {
        DurableState {
            hard_state: self.hard_state,
            snapshot: self.snapshot.clone(),
            entries: self.entries.clone(),
            restored_from_backup: self.restored_from_backup,
        }
    }

    pub fn entry(&self, index: LogIndex) -> Option<&Entry> {
        self.entries.iter().find(|entry| entry.index == index)
    }

    /// True if the disk holds `entry` itself or a snapshot past it.
    pub fn stores(&self, entry: &Entry) -> bool {
        self.snapshot.as_ref().is_some_and(|snapshot| snapshot.index >= entry.index)
            || self.entry(entry.index) == Some(entry)
    }

    pub fn last_index(&self) -> LogIndex {
        self.entries.last().map(|entry| entry.index).or(self.snapshot.as_ref().map(|s| s.index)).unwrap_or(LogIndex(0))
    }
}

/// Fault rates of the random schedules, in per mille of steps or messages.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    pub drop_per_mille: u32,
    pub duplicate_per_mille: u32,
    /// A node crashes after sending `Ready::messages` but before persisting.
    pub crash_mid_ready_per_mille: u32,
}

impl Faults {
    pub fn none() -> Faults {
        Faults { drop_per_mille: 0, duplicate_per_mille: 0, crash_mid_ready_per_mille: 0 }
    }
}

pub struct Cluster {
    pub configs: Vec<Config>,
    pub nodes: Vec<Option<RaftNode>>,
    pub disks: Vec<Disk>,
    pub queue: VecDeque<Message>,
    pub queue_max: usize,
    rng: ChaCha8Rng,
    seed_next: u64,
    /// Directed links that drop every message.
    pub blocked: BTreeSet<(NodeId, NodeId)>,
    pub applied: Vec<LogIndex>,
    /// Every entry any node applied, by index: all nodes must agree.
    pub committed: BTreeMap<LogIndex, Entry>,
    pub leaders: BTreeMap<Term, NodeId>,
    pub read_states: Vec<(NodeId, ReadState)>,
    pub violations: Vec<String>,
    pub faults: Faults,
    /// Compact a node's log whenever it says a snapshot is due.
    pub auto_compact: bool,
    pub token_next: u64,
    pub steps: u64,
    /// Nodes that crash at their next Ready, after sending `messages` and before persisting.
    pub crash_before_persist: BTreeSet<NodeId>,
    /// Append rejections and snapshots delivered, to see backoff and InstallSnapshot at work.
    pub rejections: u64,
    pub snapshots_delivered: u64,
}

/// A disk holding `entries` given as (index, term), with a term and vote.
pub fn disk(term: u64, vote: Option<u8>, entries: &[(u64, u64)]) -> Disk {
    let entries = entries
        .iter()
        .map(|&(index, entry_term)| Entry {
            term: Term(entry_term),
            index: LogIndex(index),
            payload: Payload::Command(command(1000 + index * 100 + entry_term)),
        })
        .collect();
    Disk {
        hard_state: HardState { term: Term(term), vote: vote.map(NodeId), commit: LogIndex(0) },
        snapshot: None,
        entries,
        restored_from_backup: false,
    }
}

pub fn command(token: u64) -> Command {
    Command::Expire { key: Key::new("k"), token: Token(token) }
}

pub fn ids(count: u8) -> Vec<NodeId> {
    (0..count).map(NodeId).collect()
}

impl Cluster {
    pub fn new(count: u8, seed: u64, configure: impl Fn(&mut Config)) -> Cluster {
        let disks = vec![Disk::default(); count as usize];
        Cluster::from_disks(disks, seed, configure)
    }

    pub fn from_disks(disks: Vec<Disk>, seed: u64, configure: impl Fn(&mut Config)) -> Cluster {
        let count = disks.len() as u8;
        let configs: Vec<Config> = ids(count)
            .into_iter()
            .map(|id| {
                let mut config = Config::standard(id, ids(count));
                configure(&mut config);
                config
            })
            .collect();
        let mut cluster = Cluster {
            nodes: (0..count).map(|_| None).collect(),
            applied: vec![LogIndex(0); count as usize],
            configs,
            disks,
            queue: VecDeque::new(),
            queue_max: 4096,
            rng: ChaCha8Rng::seed_from_u64(seed),
            seed_next: seed.wrapping_mul(1_000_003),
            blocked: BTreeSet::new(),
            committed: BTreeMap::new(),
            leaders: BTreeMap::new(),
            read_states: Vec::new(),
            violations: Vec::new(),
            faults: Faults::none(),
            auto_compact: false,
            token_next: 1,
            steps: 0,
            crash_before_persist: BTreeSet::new(),
            rejections: 0,
            snapshots_delivered: 0,
        };
        for id in ids(count) {
            cluster.restart(id);
        }
        cluster
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn quorum(&self) -> usize {
        self.len() / 2 + 1
    }

    pub fn node(&self, id: NodeId) -> &RaftNode {
        self.nodes[id.0 as usize].as_ref().expect("node is up")
    }

    pub fn node_mut(&mut self, id: NodeId) -> &mut RaftNode {
        self.nodes[id.0 as usize].as_mut().expect("node is up")
    }

    pub fn is_up(&self, id: NodeId) -> bool {
        self.nodes[id.0 as usize].is_some()
    }

    pub fn up(&self) -> Vec<NodeId> {
        ids(self.len() as u8).into_iter().filter(|&id| self.is_up(id)).collect()
    }

    pub fn role(&self, id: NodeId) -> Role {
        self.node(id).soft_state().role
    }

    /// The leader of the highest term among live nodes, if any.
    pub fn leader(&self) -> Option<NodeId> {
        self.up()
            .into_iter()
            .filter(|&id| self.role(id) == Role::Leader)
            .max_by_key(|&id| self.node(id).soft_state().term)
    }

    pub fn crash(&mut self, id: NodeId) {
        self.nodes[id.0 as usize] = None;
    }

    /// Rebuilds the node from its disk, with a fresh seed for its timer.
    pub fn restart(&mut self, id: NodeId) {
        let durable = self.disks[id.0 as usize].durable();
        self.applied[id.0 as usize] = durable.snapshot.as_ref().map_or(LogIndex(0), |snapshot| snapshot.index);
        self.seed_next = self.seed_next.wrapping_add(1);
        let config = self.configs[id.0 as usize].clone();
        let node = RaftNode::new(config, durable, self.seed_next).expect("valid config");
        self.nodes[id.0 as usize] = Some(node);
        self.process(id);
    }

    pub fn isolate(&mut self, id: NodeId) {
        for other in ids(self.len() as u8) {
            if other != id {
                self.blocked.insert((id, other));
                self.blocked.insert((other, id));
            }
        }
    }

    /// Splits the cluster: no message crosses between `side` and the rest.
    pub fn partition(&mut self, side: &[NodeId]) {
        for a in ids(self.len() as u8) {
            for b in ids(self.len() as u8) {
                if side.contains(&a) != side.contains(&b) {
                    self.blocked.insert((a, b));
                }
            }
        }
    }

    pub fn heal(&mut self) {
        self.blocked.clear();
    }

    fn enqueue(&mut self, messages: Vec<Message>) {
        for message in messages {
            if self.queue.len() >= self.queue_max {
                // The network is full: the oldest message is lost.
                self.queue.pop_front();
            }
            self.queue.push_back(message);
        }
    }

    /// Hands every pending Ready of `id` to a model driver: send `messages`,
    /// persist, send `messages_after_persist`, apply, advance.
    pub fn process(&mut self, id: NodeId) {
        let slot = id.0 as usize;
        for _ in 0..READIES_PER_PROCESS_MAX {
            let Some(node) = self.nodes[slot].as_mut() else { return };
            if !node.has_ready() {
                break;
            }
            let ready = node.ready();
            self.enqueue(ready.messages);
            let crash_planned = self.crash_before_persist.remove(&id);
            if crash_planned
                || (self.faults.crash_mid_ready_per_mille > 0
                    && self.rng.gen_range(0..1000) < self.faults.crash_mid_ready_per_mille)
            {
                // Nothing of this Ready reached the disk.
                self.crash(id);
                self.restart(id);
                return;
            }
            let disk = &mut self.disks[slot];
            if let Some(snapshot) = &ready.snapshot {
                disk.snapshot = Some(snapshot.clone());
                disk.entries.clear();
                self.applied[slot] = snapshot.index;
                self.check_snapshot(snapshot);
            }
            if let Some(first) = ready.entries.first() {
                let disk = &mut self.disks[slot];
                disk.entries.retain(|entry| entry.index < first.index);
                assert_eq!(first.index.0, disk.last_index().0 + 1, "Ready entries leave no gap on disk");
                disk.entries.extend(ready.entries.iter().cloned());
            }
            if let Some(hard_state) = ready.hard_state {
                self.disks[slot].hard_state = hard_state;
            }
            self.enqueue(ready.messages_after_persist);
            for entry in &ready.committed_entries {
                self.apply(id, entry);
            }
            for read_state in ready.read_states {
                self.read_states.push((id, read_state));
            }
            let applied = self.applied[slot];
            let node = self.nodes[slot].as_mut().expect("node is up");
            node.advance(applied);
            if self.auto_compact && node.snapshot_due() {
                let snapshot = node.compact(applied, LockState::new(Token(0)));
                let disk = &mut self.disks[slot];
                disk.entries.retain(|entry| entry.index > snapshot.index);
                disk.snapshot = Some(snapshot);
            }
        }
    }

    fn apply(&mut self, id: NodeId, entry: &Entry) {
        let slot = id.0 as usize;
        if entry.index.0 != self.applied[slot].0 + 1 {
            self.violations.push(format!("{id} applied {} after {}", entry.index, self.applied[slot]));
        }
        self.applied[slot] = entry.index;
        let Some(agreed) = self.committed.get(&entry.index) else {
            // The first apply of an index anywhere: its commit was just
            // decided, so a majority must hold it durably right now (later, a
            // test may roll disks back on purpose).
            self.committed.insert(entry.index, entry.clone());
            let stored = self.disks.iter().filter(|disk| disk.stores(entry)).count();
            if stored < self.quorum() {
                self.violations
                    .push(format!("commit-durability: {id} applied {entry:?} stored on {stored} disks only"));
            }
            return;
        };
        if agreed != entry {
            self.violations.push(format!("apply-agreement: {id} applied {entry:?} where another applied {agreed:?}"));
        }
    }

    fn check_snapshot(&mut self, snapshot: &Snapshot) {
        if let Some(entry) = self.committed.get(&snapshot.index) {
            if entry.term != snapshot.term {
                self.violations
                    .push(format!("apply-agreement: snapshot at {} has term {}", snapshot.index, snapshot.term));
            }
        }
    }

    /// Delivers one message unless its link is cut or its target is down.
    pub fn deliver(&mut self, message: Message) {
        if self.blocked.contains(&(message.from, message.to)) || !self.is_up(message.to) {
            return;
        }
        let to = message.to;
        match &message.body {
            MessageBody::AppendResponse { success: false, .. } => self.rejections += 1,
            MessageBody::InstallSnapshot { .. } => self.snapshots_delivered += 1,
            _ => {}
        }
        self.node_mut(to).step(message);
        self.process(to);
    }

    /// Takes the queued messages that `pick` selects off the network, in
    /// order, leaving the others queued: a test holds them back or drops them.
    pub fn take(&mut self, pick: impl Fn(&Message) -> bool) -> Vec<Message> {
        let (taken, kept): (VecDeque<Message>, VecDeque<Message>) =
            std::mem::take(&mut self.queue).into_iter().partition(|message| pick(message));
        self.queue = kept;
        taken.into()
    }

    /// Delivers in FIFO order until the network is quiet.
    pub fn deliver_all(&mut self) {
        for _ in 0..DELIVERIES_MAX {
            let Some(message) = self.queue.pop_front() else { return };
            self.deliver(message);
        }
        panic!("the network did not quiet down within {DELIVERIES_MAX} deliveries");
    }

    /// Delivers in FIFO order until `done` holds (checked after each delivery).
    pub fn deliver_until(&mut self, done: impl Fn(&Cluster) -> bool) -> bool {
        for _ in 0..DELIVERIES_MAX {
            if done(self) {
                return true;
            }
            let Some(message) = self.queue.pop_front() else { return done(self) };
            self.deliver(message);
        }
        false
    }

    /// One tick of `id`, checking `RaftNode::idle_ticks` on every tick of
    /// every test: a tick it called idle sends nothing and changes neither
    /// role nor term, and leaves at least one idle tick fewer ahead.
    pub fn tick(&mut self, id: NodeId) {
        if self.is_up(id) {
            let node = self.node_mut(id);
            let idle = node.idle_ticks();
            let had_ready = node.has_ready();
            let before = node.soft_state();
            node.tick();
            if idle > 0 {
                assert!(had_ready || !node.has_ready(), "a tick called idle made work on {id:?}");
                assert_eq!(node.soft_state(), before, "a tick called idle changed {id:?}'s role or term");
                assert!(node.idle_ticks() + 1 >= idle, "{id:?}'s idle ticks ahead fell by more than the tick");
            }
            self.process(id);
        }
    }

    /// Ticks every live node once per round, delivering everything in between.
    pub fn run_ticks(&mut self, rounds: u32) {
        for _ in 0..rounds {
            for id in self.up() {
                self.tick(id);
            }
            self.deliver_all();
            self.check();
        }
    }

    /// Ticks only `id` until it starts a campaign, then lets the network settle.
    pub fn campaign(&mut self, id: NodeId) {
        let ticks_max = self.configs[id.0 as usize].election_ticks_max * 2;
        for _ in 0..ticks_max {
            self.tick(id);
            if self.role(id) != Role::Follower {
                break;
            }
        }
        self.deliver_all();
        self.check();
    }

    pub fn propose(&mut self, id: NodeId) -> Option<LogIndex> {
        let token = self.token_next;
        self.token_next += 1;
        let result = self.node_mut(id).propose(command(token));
        self.process(id);
        result.ok().map(|(index, _)| index)
    }

    /// Records violations of the properties that must hold after every step.
    pub fn check(&mut self) {
        for id in self.up() {
            let soft = self.node(id).soft_state();
            if soft.role == Role::Leader {
                let first = *self.leaders.entry(soft.term).or_insert(id);
                if first != id {
                    self.violations.push(format!("election-safety: {first} and {id} both led {}", soft.term));
                }
            }
        }
    }

    /// Every entry some node applied is durable on a majority of disks.
    pub fn check_durability(&mut self) {
        for entry in self.committed.values() {
            let stored = self.disks.iter().filter(|disk| disk.stores(entry)).count();
            if stored < self.quorum() {
                self.violations.push(format!("commit-durability: {entry:?} is on {stored} disks only"));
                return;
            }
        }
    }

    /// Log matching on disk: two logs with an entry of the same index and term
    /// are identical up to it.
    pub fn check_log_matching(&mut self) {
        for a in 0..self.len() {
            for b in a + 1..self.len() {
                let (disk_a, disk_b) = (&self.disks[a], &self.disks[b]);
                let Some(common) = disk_a
                    .entries
                    .iter()
                    .rev()
                    .find(|entry| disk_b.entry(entry.index).is_some_and(|other| other.term == entry.term))
                else {
                    continue;
                };
                for entry in disk_a.entries.iter().take_while(|entry| entry.index <= common.index) {
                    if let Some(other) = disk_b.entry(entry.index) {
                        if other != entry {
                            self.violations.push(format!("log-matching: n{a} {entry:?} vs n{b} {other:?}"));
                            return;
                        }
                    }
                }
            }
        }
    }

    /// One random step of a schedule.
    pub fn random_step(&mut self) {
        self.steps += 1;
        let count = self.len() as u8;
        let roll = self.rng.gen_range(0..1000);
        if roll < 450 {
            if self.queue.is_empty() {
                return;
            }
            let at = self.rng.gen_range(0..self.queue.len());
            let message = self.queue.remove(at).expect("index in range");
            if self.rng.gen_range(0..1000) < self.faults.drop_per_mille {
                return;
            }
            if self.rng.gen_range(0..1000) < self.faults.duplicate_per_mille {
                self.queue.push_back(message.clone());
            }
            self.deliver(message);
        } else if roll < 850 {
            let id = NodeId(self.rng.gen_range(0..count));
            self.tick(id);
        } else if roll < 900 {
            if let Some(leader) = self.leader() {
                self.propose(leader);
            }
        } else if roll < 915 {
            if let Some(leader) = self.leader() {
                let ctx = self.steps;
                let _ = self.node_mut(leader).read_index(ctx);
                self.process(leader);
            }
        } else if roll < 925 {
            let id = NodeId(self.rng.gen_range(0..count));
            self.crash(id);
        } else if roll < 945 {
            let id = NodeId(self.rng.gen_range(0..count));
            if !self.is_up(id) {
                self.restart(id);
            }
        } else if roll < 955 {
            let id = NodeId(self.rng.gen_range(0..count));
            self.isolate(id);
        } else if roll < 965 {
            let side: Vec<NodeId> = ids(count).into_iter().filter(|_| self.rng.gen_bool(0.5)).collect();
            self.partition(&side);
        } else if roll < 990 {
            self.heal();
        }
        self.check();
    }

    /// Heals everything and runs fault-free until a fresh entry is applied on
    /// every node; records a liveness violation if it is not within the bound.
    pub fn settle(&mut self, rounds_max: u32) {
        self.heal();
        self.faults = Faults::none();
        for id in ids(self.len() as u8) {
            if !self.is_up(id) {
                self.restart(id);
            }
        }
        let mut target = None;
        for round in 0..rounds_max {
            self.run_ticks(1);
            // A proposal lost with a deposed leader is made again.
            if target.is_none() || round % 50 == 49 {
                if let Some(leader) = self.leader() {
                    target = self.propose(leader);
                }
            }
            if let Some(index) = target {
                if self.applied.iter().all(|&applied| applied >= index) {
                    return;
                }
            }
        }
        self.violations.push(format!("liveness: no entry applied everywhere within {rounds_max} rounds"));
    }
}

/// A standard config with a variant.
pub fn with_variant(variant: Variant) -> impl Fn(&mut Config) {
    move |config: &mut Config| config.variant = variant
}
