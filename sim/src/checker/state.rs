//! The checker's reconstruction of the replicated state, shared by every family.
//!
//! From `Applied` and `AppliedNoop` events it rebuilds, per cluster epoch,
//! what each log index holds (as the first node to apply it saw it: its term,
//! and its command or a no-op), which tokens were issued to
//! whom, which locks were removed, and each node's own lock table. A family
//! checker reads it as it was just before the event it judges; [`Facts`] holds
//! what the event itself means against that state.

use super::keys::Keys;
use super::CheckConfig;
use crate::faults::{ChurnEvent, Fault};
use crate::history::{Actor, Event, EventKind};
use fencelock::{ApplyResult, ClientId, Command, Holder, Key, LogIndex, NodeId, RequestId, Term, Token};
use std::collections::{BTreeMap, BTreeSet};

/// What the first node to apply an index applied there.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AppliedEntry {
    pub node: NodeId,
    pub command: Command,
    pub result: ApplyResult,
    pub at_us: u64,
}

/// The entry the first node to apply an index applied there, commands and no-ops alike.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FirstEntry {
    pub node: NodeId,
    pub term: Term,
    /// `None` for a no-op.
    pub command: Option<Command>,
}

impl FirstEntry {
    /// What was applied, for a violation's sentence.
    pub fn what(&self) -> String {
        describe_payload(self.command.as_ref(), self.term)
    }
}

/// `a no-op of t3` or `Grant { .. } of t3`.
pub(crate) fn describe_payload(command: Option<&Command>, term: Term) -> String {
    match command {
        Some(command) => format!("{command:?} of {term}"),
        None => format!("a no-op of {term}"),
    }
}

/// The first issue of a token.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Issue<'a> {
    pub key: &'a Key,
    pub holder: Holder,
    pub epoch: u32,
    pub at_us: u64,
}

/// The first issue of a token as kept: its key by number in `Context::keys`.
#[derive(Clone, Copy, Debug)]
struct Issued {
    key: u32,
    holder: Holder,
    epoch: u32,
    at_us: u64,
}

/// One node's lock on one key, as far as the history shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockSlot {
    /// The node reloaded state the history does not show (restart, restore, snapshot).
    Unknown,
    Free,
    Held(Token),
}

/// One node's lock table. A restart or restore makes every key unknown until
/// the node records the snapshot it starts from (`SnapshotInstalled` carries
/// the snapshot's locks); then the applied commands after it keep it exact.
#[derive(Clone, Debug, Default)]
struct NodeLocks {
    base_unknown: bool,
    locks: BTreeMap<Key, Option<Token>>,
}

impl NodeLocks {
    fn slot(&self, key: &Key) -> LockSlot {
        match self.locks.get(key) {
            Some(Some(token)) => LockSlot::Held(*token),
            Some(None) => LockSlot::Free,
            None if self.base_unknown => LockSlot::Unknown,
            None => LockSlot::Free,
        }
    }

    fn forget(&mut self) {
        self.base_unknown = true;
        self.locks.clear();
    }

    /// The table is exactly `locks` (a snapshot was loaded).
    fn load(&mut self, locks: &[(Key, Token)]) {
        self.base_unknown = false;
        self.locks = locks.iter().map(|(key, token)| (key.clone(), Some(*token))).collect();
    }
}

/// What one event means against the state just before it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Facts {
    /// An `Applied` at an index no node applied before in this epoch.
    pub first_apply: bool,
    /// For an `Applied`: the applying node's lock on the command's key just before.
    pub slot_before: Option<LockSlot>,
    /// For an `Applied` that removed a lock: the (key, token) pairs it removed
    /// (the command's token, and the table's if that differs).
    pub removed: Vec<(Key, Token)>,
}

/// Removes a lock: the result of an Expire or Release that took something away.
pub(crate) fn is_removal(command: &Command, result: &ApplyResult) -> Option<(Key, Token)> {
    match (command, result) {
        (Command::Expire { key, token }, ApplyResult::Expired { existed: true }) => Some((key.clone(), *token)),
        (Command::Release { key, token, .. }, ApplyResult::Released) => Some((key.clone(), *token)),
        _ => None,
    }
}

#[derive(Debug)]
pub(crate) struct Context {
    pub config: CheckConfig,
    /// Whole-cluster restores so far; 0 before the first.
    pub epoch: u32,
    pub healed_at_us: Option<u64>,
    /// True instants of the whole-cluster restores.
    pub restores_at_us: Vec<u64>,
    /// This epoch's commands as their first appliers saw them.
    applied: BTreeMap<LogIndex, AppliedEntry>,
    /// This epoch's log entries, no-ops included, as their first appliers saw them.
    entries: BTreeMap<LogIndex, FirstEntry>,
    /// Every token issued in the whole run, by its first issue.
    issued: BTreeMap<Token, Issued>,
    /// The keys `issued` and `removed` name, by number: a run has few keys
    /// and a record for every lock, so each name is kept once.
    keys: Keys,
    token_max: Option<Token>,
    /// Tokens any node computed in an applied Grant, first applier or not.
    tokens_applied: BTreeSet<Token>,
    /// Tokens any server told a client in a Granted reply.
    tokens_replied: BTreeSet<Token>,
    /// Locks removed by an applied command in this epoch, their keys by number.
    removed: BTreeSet<(u32, Token)>,
    nodes: BTreeMap<NodeId, NodeLocks>,
    /// Which indices a server may still apply: `applied` and `entries` keep
    /// only what lies above its floor.
    horizon: Horizon,
}

/// How far back any server of this epoch can still apply. A server applies
/// an index again only after it starts from a snapshot below it: its own
/// disk's after a restart, a backup's after a restore, or its leader's. So
/// no server applies again at or below the lowest snapshot index any disk
/// or backup holds durably (a leader's snapshot is never older than its own
/// disk's), and the entries there need not be kept to judge agreement. Each
/// index below is a lower bound from the history: `SnapshotDurable` raises
/// a server's, a backup takes the server's at that moment, and a start
/// shows exactly what the disk held.
#[derive(Clone, Debug, Default)]
struct Horizon {
    /// Each server's disk: the snapshot it holds durably, at least.
    disks: BTreeMap<NodeId, LogIndex>,
    /// The operator's backup of each server, and the images an ack-amnesia
    /// episode keeps to restore from.
    backups: BTreeMap<NodeId, LogIndex>,
    amnesia: BTreeMap<NodeId, LogIndex>,
    /// Servers restarted or restored whose start is still to show their disk.
    starting: BTreeSet<NodeId>,
    /// Entries at or below this index are forgotten.
    forgotten_to: LogIndex,
}

/// Entries kept below the floor all the same: a server of a faulty variant
/// that installs an older snapshot than it holds still meets the entries of
/// the last few compactions.
const HORIZON_SLACK: u64 = 1_000;

impl Horizon {
    fn disk(&self, node: NodeId) -> LogIndex {
        self.disks.get(&node).copied().unwrap_or(LogIndex(0))
    }

    /// The lowest index a server of `nodes` may start from.
    fn floor(&self, nodes: u8) -> LogIndex {
        (0..nodes).map(|node| self.floor_of(NodeId(node))).min().unwrap_or(LogIndex(0))
    }

    /// The lowest index `node` may start from: its disk's, or a backup's of it.
    fn floor_of(&self, node: NodeId) -> LogIndex {
        let kept = [self.backups.get(&node), self.amnesia.get(&node)];
        kept.into_iter().flatten().copied().fold(self.disk(node), LogIndex::min)
    }

    /// A new epoch: every disk holds the cluster backup, in the new epoch's indices unknown.
    fn restart_epoch(&mut self) {
        *self = Horizon::default();
    }
}

impl Context {
    pub fn new(config: CheckConfig) -> Context {
        Context {
            config,
            epoch: 0,
            healed_at_us: None,
            restores_at_us: Vec::new(),
            applied: BTreeMap::new(),
            entries: BTreeMap::new(),
            issued: BTreeMap::new(),
            keys: Keys::default(),
            token_max: None,
            tokens_applied: BTreeSet::new(),
            tokens_replied: BTreeSet::new(),
            removed: BTreeSet::new(),
            nodes: BTreeMap::new(),
            horizon: Horizon::default(),
        }
    }

    /// Entries at or below this index of this epoch are forgotten: no
    /// server can apply there again (see [`Horizon`]).
    pub fn forgotten_to(&self) -> LogIndex {
        self.horizon.forgotten_to
    }

    pub fn applied_at(&self, index: LogIndex) -> Option<&AppliedEntry> {
        self.applied.get(&index)
    }

    /// The entry (term, and command or no-op) first applied at `index` in this epoch.
    pub fn entry_at(&self, index: LogIndex) -> Option<&FirstEntry> {
        self.entries.get(&index)
    }

    pub fn issue(&self, token: Token) -> Option<Issue<'_>> {
        self.issued.get(&token).map(|issued| self.issue_of(issued))
    }

    pub fn issues(&self) -> impl Iterator<Item = (&Token, Issue<'_>)> {
        self.issued.iter().map(|(token, issued)| (token, self.issue_of(issued)))
    }

    fn issue_of(&self, issued: &Issued) -> Issue<'_> {
        let Issued { key, holder, epoch, at_us } = *issued;
        Issue { key: self.keys.name(key), holder, epoch, at_us }
    }

    pub fn token_max(&self) -> Option<Token> {
        self.token_max
    }

    /// Whether the lock service ever produced this token (applied or answered).
    pub fn token_seen(&self, token: Token) -> bool {
        self.tokens_applied.contains(&token) || self.tokens_replied.contains(&token)
    }

    /// Whether some node computed this token in an applied Grant.
    pub fn token_applied(&self, token: Token) -> bool {
        self.tokens_applied.contains(&token)
    }

    pub fn was_removed(&self, key: &Key, token: Token) -> bool {
        self.keys.find(key).is_some_and(|key| self.removed.contains(&(key, token)))
    }

    pub fn slot(&self, node: NodeId, key: &Key) -> LockSlot {
        self.nodes.get(&node).map(|n| n.slot(key)).unwrap_or(LockSlot::Free)
    }

    pub fn facts(&self, event: &Event) -> Facts {
        let EventKind::Applied { node, index, command, result, .. } = &event.kind else {
            return Facts::default();
        };
        let slot_before = self.slot(*node, command.key());
        let mut removed = Vec::new();
        if let Some((key, token)) = is_removal(command, result) {
            if let LockSlot::Held(held) = slot_before {
                if held != token {
                    removed.push((key.clone(), held));
                }
            }
            removed.push((key, token));
        }
        let first_apply = *index > self.horizon.forgotten_to && !self.applied.contains_key(index);
        Facts { first_apply, slot_before: Some(slot_before), removed }
    }

    pub fn absorb(&mut self, event: &Event, facts: &Facts) {
        match &event.kind {
            EventKind::Healed => {
                self.healed_at_us.get_or_insert(event.at_us);
            }
            EventKind::ClusterRestored { epoch, .. } => {
                assert!(*epoch > self.epoch, "restore epoch {epoch} does not follow {}", self.epoch);
                self.epoch = *epoch;
                self.restores_at_us.push(event.at_us);
                // A new epoch: indices restart from the backup's, and the
                // locks are whatever the backup held.
                self.applied.clear();
                self.entries.clear();
                self.removed.clear();
                self.nodes.values_mut().for_each(NodeLocks::forget);
                self.horizon.restart_epoch();
            }
            EventKind::Restarted { actor: Actor::Server(node) } => {
                self.nodes.entry(*node).or_default().forget();
                self.horizon.starting.insert(*node);
            }
            EventKind::NodeRestored { node, .. } => {
                self.nodes.entry(*node).or_default().forget();
                // Its disk is a backup's now: the lower of the images it may be.
                let floor = self.horizon.floor_of(*node);
                self.horizon.disks.insert(*node, floor);
                self.horizon.starting.insert(*node);
            }
            EventKind::SnapshotInstalled { node, index, locks, .. } => {
                self.nodes.entry(*node).or_default().load(locks);
                if self.horizon.starting.remove(node) {
                    // A start loads what its disk holds durably: exact.
                    self.horizon.disks.insert(*node, *index);
                }
            }
            EventKind::SnapshotDurable { node, index } => {
                let disk = self.horizon.disks.entry(*node).or_insert(LogIndex(0));
                *disk = (*disk).max(*index);
                self.forget_below_floor();
            }
            EventKind::Fault { fault: Fault::BackupNode { node } } => {
                self.horizon.backups.insert(*node, self.horizon.disk(*node));
            }
            EventKind::Churn(ChurnEvent::AmnesiaArmed { fsync_ms, .. }) => {
                // An episode without slow disks keeps an image of every server.
                let servers = (0..self.config.nodes).map(NodeId);
                self.horizon.amnesia = if *fsync_ms == 0 {
                    servers.map(|node| (node, self.horizon.disk(node))).collect()
                } else {
                    BTreeMap::new()
                };
            }
            EventKind::Replied { reply: fencelock::service::ClientReply::Granted { token, .. }, .. } => {
                self.tokens_replied.insert(*token);
            }
            EventKind::Applied { node, index, term, command, result } => {
                let first = FirstEntry { node: *node, term: *term, command: Some(command.clone()) };
                self.entries.entry(*index).or_insert(first);
                self.absorb_applied(event.at_us, *node, *index, command, result, facts);
            }
            EventKind::AppliedNoop { node, index, term } => {
                let first = FirstEntry { node: *node, term: *term, command: None };
                self.entries.entry(*index).or_insert(first);
            }
            _ => {}
        }
    }

    /// Forgets the entries at or below the floor, less the slack.
    fn forget_below_floor(&mut self) {
        let floor = self.horizon.floor(self.config.nodes);
        let to = LogIndex(floor.0.saturating_sub(HORIZON_SLACK));
        if to <= self.horizon.forgotten_to {
            return;
        }
        self.horizon.forgotten_to = to;
        let above = LogIndex(to.0 + 1);
        self.applied = self.applied.split_off(&above);
        self.entries = self.entries.split_off(&above);
    }

    fn absorb_applied(
        &mut self,
        at_us: u64,
        node: NodeId,
        index: LogIndex,
        command: &Command,
        result: &ApplyResult,
        facts: &Facts,
    ) {
        if facts.first_apply {
            let entry = AppliedEntry { node, command: command.clone(), result: *result, at_us };
            self.applied.insert(index, entry);
        }
        let table = self.nodes.entry(node).or_default();
        match (command, result) {
            (Command::Grant { key, holder, .. }, ApplyResult::Granted { token }) => {
                table.locks.insert(key.clone(), Some(*token));
                self.tokens_applied.insert(*token);
                if facts.first_apply && !self.issued.contains_key(token) {
                    let issue = Issued { key: self.keys.number(key), holder: *holder, epoch: self.epoch, at_us };
                    self.issued.insert(*token, issue);
                    self.token_max = self.token_max.max(Some(*token));
                }
            }
            (command, result) if is_removal(command, result).is_some() => {
                table.locks.insert(command.key().clone(), None);
            }
            _ => {}
        }
        for (key, token) in &facts.removed {
            let key = self.keys.number(key);
            self.removed.insert((key, *token));
        }
    }
}

/// Where and when a node did something the checker judges.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen {
    pub at_us: u64,
    pub node: NodeId,
}

/// A node's answer to one client request.
#[derive(Clone, Copy, Debug)]
pub(super) struct Answer {
    pub seen: Seen,
    pub client: ClientId,
    pub request: RequestId,
}

/// A log entry a node applied (a command or a no-op), where and when.
#[derive(Clone, Copy, Debug)]
pub(super) struct EntrySeen {
    pub seen: Seen,
    pub index: LogIndex,
    pub term: Term,
}
