//! The checker's reconstruction of the replicated state, shared by every family.
//!
//! From `Applied` and `AppliedNoop` events it rebuilds, per cluster epoch,
//! what each log index holds (as the first node to apply it saw it: its term,
//! and its command or a no-op), which tokens were issued to
//! whom, which locks were removed, and each node's own lock table. A family
//! checker reads it as it was just before the event it judges; [`Facts`] holds
//! what the event itself means against that state.

use super::first_entries::{AppliedEntry, FirstEntries, FirstEntry};
use super::index_runs::TokenRuns;
use super::keys::Keys;
use super::packed::{put, put_change, take, take_change, take_u32, Pack, PackedMap};
use super::CheckConfig;
use crate::faults::{ChurnEvent, Fault};
use crate::history::{Actor, Event, EventKind};
use fencelock::{ApplyResult, ClientId, Command, Holder, Key, LogIndex, NodeId, RequestId, Term, Token};
use std::collections::{BTreeMap, BTreeSet};

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

impl Default for Issued {
    fn default() -> Self {
        let holder = Holder { client: ClientId(0), request: RequestId(0) };
        Issued { key: 0, holder, epoch: 0, at_us: 0 }
    }
}

impl Pack for Issued {
    fn pack(&self, before: &Self, bytes: &mut Vec<u8>) {
        put(bytes, u64::from(self.key));
        put(bytes, u64::from(self.holder.client.0));
        // A request id is the client's incarnation above its count there:
        // apart, a few bytes, where the whole id takes five from the first restart.
        put(bytes, self.holder.request.0 >> 32);
        put(bytes, self.holder.request.0 & u64::from(u32::MAX));
        put(bytes, u64::from(self.epoch));
        put_change(bytes, self.at_us, before.at_us);
    }

    fn unpack(before: &Self, bytes: &[u8], at: &mut usize) -> Self {
        let key = take_u32(bytes, at);
        let client = ClientId(take_u32(bytes, at));
        let request = RequestId((take(bytes, at) << 32) | take(bytes, at));
        Issued {
            key,
            holder: Holder { client, request },
            epoch: take_u32(bytes, at),
            at_us: take_change(bytes, at, before.at_us),
        }
    }
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
    /// This epoch's log entries, no-ops included, and its commands, as
    /// their first appliers saw them.
    entries: FirstEntries,
    /// Every token issued in the whole run, by its first issue, packed
    /// (`packed.rs`): a violation may name any token's first issue at any
    /// later time, so none is forgotten.
    issued: PackedMap<Token, Issued>,
    /// The keys `issued`, `removed` and `entries` name, by number: a run has few keys
    /// and a record for every lock, so each name is kept once.
    keys: Keys,
    token_max: Option<Token>,
    /// Tokens any node computed in an applied Grant, first applier or not.
    /// Like every set of tokens here, it is kept whole, as runs: the service
    /// hands tokens out one after another, so a run's tokens are a few runs.
    tokens_applied: TokenRuns,
    /// Tokens any server told a client in a Granted reply.
    tokens_replied: TokenRuns,
    /// Locks removed by an applied command in this epoch: those removed on
    /// the key their token was first issued for as runs of tokens (nearly
    /// every lock is removed in the end, so they are a few runs), the others
    /// by key number and token.
    removed_issued: TokenRuns,
    removed_other: BTreeSet<(u32, Token)>,
    nodes: BTreeMap<NodeId, NodeLocks>,
    /// Which indices a server may still apply: `entries` keeps
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
            entries: FirstEntries::default(),
            issued: PackedMap::default(),
            keys: Keys::default(),
            token_max: None,
            tokens_applied: TokenRuns::default(),
            tokens_replied: TokenRuns::default(),
            removed_issued: TokenRuns::default(),
            removed_other: BTreeSet::new(),
            nodes: BTreeMap::new(),
            horizon: Horizon::default(),
        }
    }

    /// Entries at or below this index of this epoch are forgotten: no
    /// server can apply there again (see [`Horizon`]).
    pub fn forgotten_to(&self) -> LogIndex {
        self.horizon.forgotten_to
    }

    /// The command first applied at `index` in this epoch, and its result.
    pub fn applied_at(&self, index: LogIndex) -> Option<AppliedEntry> {
        self.entries.applied(index, &self.keys)
    }

    /// The entry (term, and command or no-op) first applied at `index` in this epoch.
    pub fn entry_at(&self, index: LogIndex) -> Option<FirstEntry> {
        self.entries.entry(index, &self.keys)
    }

    pub fn issue(&self, token: Token) -> Option<Issue<'_>> {
        self.issued.get(token).map(|issued| self.issue_of(issued))
    }

    /// Every token's first issue, in token order.
    pub fn issues(&self) -> impl Iterator<Item = (Token, Issue<'_>)> {
        self.issued.iter().map(|(token, issued)| (token, self.issue_of(issued)))
    }

    fn issue_of(&self, issued: Issued) -> Issue<'_> {
        let Issued { key, holder, epoch, at_us } = issued;
        Issue { key: self.keys.name(key), holder, epoch, at_us }
    }

    pub fn token_max(&self) -> Option<Token> {
        self.token_max
    }

    /// Whether the lock service ever produced this token (applied or answered).
    pub fn token_seen(&self, token: Token) -> bool {
        self.tokens_applied.contains(token) || self.tokens_replied.contains(token)
    }

    /// Whether some node computed this token in an applied Grant.
    pub fn token_applied(&self, token: Token) -> bool {
        self.tokens_applied.contains(token)
    }

    pub fn was_removed(&self, key: &Key, token: Token) -> bool {
        let Some(key) = self.keys.find(key) else { return false };
        let on_issued_key = || self.issued.get(token).is_some_and(|issued| issued.key == key);
        (self.removed_issued.contains(token) && on_issued_key()) || self.removed_other.contains(&(key, token))
    }

    /// Whether the lock `token` was first issued as (`issue`, from
    /// [`Context::issue`]) was removed in this epoch: `was_removed` on the
    /// issue's key, without looking the issue up again.
    pub fn issue_removed(&self, token: Token, issue: &Issue<'_>) -> bool {
        let Some(key) = self.keys.find(issue.key) else { return false };
        debug_assert_eq!(self.issued.get(token).map(|issued| issued.key), Some(key), "`issue` is {token}'s first");
        self.removed_issued.contains(token) || self.removed_other.contains(&(key, token))
    }

    /// Records the removal of `token`'s lock on `key` (by number).
    fn remove(&mut self, key: u32, token: Token) {
        // An issue's key never changes once recorded, so a token in
        // `removed_issued` always names its issue's key.
        if self.issued.get(token).is_some_and(|issued| issued.key == key) {
            self.removed_issued.insert(token, ());
        } else {
            self.removed_other.insert((key, token));
        }
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
        let first_apply = *index > self.horizon.forgotten_to && !self.entries.has_applied(*index);
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
                self.entries.clear();
                self.removed_issued.clear();
                self.removed_other.clear();
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
                self.tokens_replied.insert(*token, ());
            }
            EventKind::Applied { node, index, term, command, result } => {
                let first_result = facts.first_apply.then_some(*result);
                self.entries.record_command(*index, *node, *term, command, first_result, &mut self.keys);
                self.absorb_applied(event.at_us, *node, command, result, facts);
            }
            EventKind::AppliedNoop { node, index, term } => {
                self.entries.record_noop(*index, *node, *term);
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
        self.entries.forget_to(to);
    }

    fn absorb_applied(&mut self, at_us: u64, node: NodeId, command: &Command, result: &ApplyResult, facts: &Facts) {
        let table = self.nodes.entry(node).or_default();
        match (command, result) {
            (Command::Grant { key, holder, .. }, ApplyResult::Granted { token }) => {
                table.locks.insert(key.clone(), Some(*token));
                self.tokens_applied.insert(*token, ());
                if facts.first_apply {
                    let issue = Issued { key: self.keys.number(key), holder: *holder, epoch: self.epoch, at_us };
                    if self.issued.insert(*token, issue) {
                        self.token_max = self.token_max.max(Some(*token));
                    }
                }
            }
            (command, result) if is_removal(command, result).is_some() => {
                table.locks.insert(command.key().clone(), None);
            }
            _ => {}
        }
        for (key, token) in &facts.removed {
            let key = self.keys.number(key);
            self.remove(key, *token);
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

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::Context;
    use fencelock::{ApplyResult, Key, Token};

    /// `count` grants of `k`, each released: tokens 44 on, to c3.
    fn grants_released(count: u64) -> H {
        let mut h = happy().at_ms(4_000);
        for i in 0..count {
            let (index, token) = (6 + 2 * i, 44 + i);
            h = h
                .apply_all(&[0, 1, 2], index, grant("k", 3, 100 + i), granted(token))
                .reply(0, 3, 100 + i, reply_granted(token))
                .apply_all(&[0, 1, 2], index + 1, release("k", token, 3, 100 + i), ApplyResult::Released);
        }
        h
    }

    /// An issue to a restarted client (its request ids above 2^32) packs
    /// to a few bytes and back.
    #[test]
    fn an_issue_packs_its_request_as_incarnation_and_count() {
        use super::super::packed::Pack;
        use super::Issued;
        use fencelock::{ClientId, Holder, RequestId};
        let before = Issued::default();
        let holder = Holder { client: ClientId(3), request: RequestId((7 << 32) | 1_000) };
        let issue = Issued { key: 2, holder, epoch: 1, at_us: 90_000 };
        let mut bytes = Vec::new();
        issue.pack(&before, &mut bytes);
        assert!(bytes.len() <= 9, "{} bytes", bytes.len());
        let back = Issued::unpack(&before, &bytes, &mut 0);
        assert_eq!((back.key, back.holder, back.epoch, back.at_us), (2, holder, 1, 90_000));
    }

    /// Every token issued, told and removed is kept for the whole run (a
    /// violation may name any of them at any later time), packed: ten
    /// thousand released grants keep each token set as one run and the
    /// issues as a few bytes each, and the first issue is still there.
    #[test]
    fn a_long_run_of_grants_keeps_every_token_in_a_few_runs_and_packed_issues() {
        let count = 10_000;
        let h = grants_released(count);
        let mut ctx = Context::new(h.config(RUN_END_MS * 1_000));
        for event in h.events() {
            let facts = ctx.facts(event);
            ctx.absorb(event, &facts);
        }
        // happy() issues 41 to 43 before: one run from 41 on.
        assert_eq!(ctx.tokens_applied.runs_len(), 1);
        assert_eq!(ctx.tokens_replied.runs_len(), 1);
        assert!(ctx.removed_issued.runs_len() <= 2, "{} runs", ctx.removed_issued.runs_len());
        assert!(ctx.removed_other.is_empty());
        let (open, packed_bytes) = ctx.issued.held();
        assert!(open < 64 && packed_bytes <= 16 * count as usize, "{open} open, {packed_bytes} bytes");
        let first = ctx.issue(Token(44)).expect("the first of them is kept");
        assert_eq!((first.key, first.holder), (&Key::new("k"), holder(3, 100)));
        assert!(ctx.was_removed(&Key::new("k"), Token(44)) && !ctx.was_removed(&Key::new("j"), Token(44)));
        assert!(ctx.token_seen(Token(44)) && ctx.token_applied(Token(44 + count - 1)));
        assert!(!ctx.token_seen(Token(44 + count)));
    }

    /// The first grant's token, issued and told again ten thousand grants
    /// later: both findings still name its first issue and its removal.
    #[test]
    fn a_token_from_long_before_issued_and_told_again_is_still_caught() {
        let count = 10_000;
        let verdict = grants_released(count)
            .apply_all(&[0, 1, 2], 6 + 2 * count, grant("k", 4, 1), granted(44))
            .reply(0, 4, 1, reply_granted(44))
            .check();
        let details: Vec<&str> = verdict.violations.iter().map(|v| v.detail.as_str()).collect();
        let twice = "tok44 was issued to c4/r1 for k at i20006 on n0, but it had been issued before to c3/r100 \
                     for k: a token was issued twice";
        assert!(details.contains(&twice), "{details:#?}");
        let removed = "n0 told c4 Granted with tok44 on k for r1 after the cluster had already removed that lock: \
                       the client now believes in a lock nobody holds";
        assert!(details.contains(&removed), "{details:#?}");
    }
}
