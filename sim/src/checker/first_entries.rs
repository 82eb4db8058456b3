//! The first entry of each log index in this epoch, as the first node to
//! apply it saw it: what `apply-agreement` compares every later apply of the
//! index with, and `commit-durability` every acknowledgement.
//!
//! Every index above the state's horizon is held (`state.rs`, `Horizon`),
//! a window of a few thousand whose width the faults decide (a server down
//! or an old backup holds the horizon back), and the longer a run, the
//! wider the widest window it meets. So each index is one record of a
//! [`PackedMap`] (`packed.rs`): the first applies come in index order, and
//! an entry is a few small numbers close to the one before it (the same
//! term, node and key, a request or token a little higher), about a dozen
//! bytes where a slot holding the command took eighty. The newest records,
//! the ones the other servers apply next, are kept unpacked.

use super::keys::Keys;
use super::packed::{put, put_change, take_change, take_u32, Pack, PackedMap};
use fencelock::{ApplyResult, ClientId, Command, Decline, Holder, LogIndex, NodeId, RequestId, Term, Token};
use std::collections::BTreeMap;

/// The first entry of an index, commands and no-ops alike.
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
        super::state::describe_payload(self.command.as_ref(), self.term)
    }
}

/// The first command applied at an index, and its result.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AppliedEntry {
    pub node: NodeId,
    pub command: Command,
    pub result: ApplyResult,
}

/// One index's first entry, its key by number in the state's `Keys`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Record {
    node: NodeId,
    term: Term,
    /// What the entry is ([`Record::NOOP`], …) with its decline reason.
    kind: u8,
    key: u32,
    client: u32,
    request: u64,
    /// A grant's lease, a release's or expiry's token.
    number: u64,
    /// The result of the first command applied here, when that is this
    /// entry's own apply (the first node to apply the index applied a
    /// command), as [`result_code`] writes it; 0 for none.
    result: u8,
    /// A granted result's token.
    granted: u64,
}

impl Record {
    const NOOP: u8 = 0;
    const GRANT: u8 = 1;
    const RELEASE: u8 = 2;
    const EXPIRE: u8 = 3;
    const DECLINE_BUSY: u8 = 4;
    const DECLINE_TIMED_OUT: u8 = 5;

    fn noop(node: NodeId, term: Term) -> Record {
        Record { node, term, kind: Record::NOOP, ..Record::default() }
    }

    fn command(node: NodeId, term: Term, command: &Command, result: Option<ApplyResult>, keys: &mut Keys) -> Record {
        let key = keys.number(command.key());
        let (kind, holder, number) = match command {
            Command::Grant { lease_ms, holder, .. } => (Record::GRANT, Some(holder), *lease_ms),
            Command::Release { token, holder, .. } => (Record::RELEASE, Some(holder), token.0),
            Command::Expire { token, .. } => (Record::EXPIRE, None, token.0),
            Command::Decline { holder, reason: Decline::Busy, .. } => (Record::DECLINE_BUSY, Some(holder), 0),
            Command::Decline { holder, reason: Decline::TimedOut, .. } => (Record::DECLINE_TIMED_OUT, Some(holder), 0),
        };
        let (client, request) = holder.map_or((0, 0), |holder| (holder.client.0, holder.request.0));
        let (result, granted) = result.map_or((0, 0), result_code);
        Record { node, term, kind, key, client, request, number, result, granted }
    }

    /// The command, `None` for a no-op.
    fn to_command(self, keys: &Keys) -> Option<Command> {
        if self.kind == Record::NOOP {
            return None;
        }
        let key = keys.name(self.key).clone();
        let holder = Holder { client: ClientId(self.client), request: RequestId(self.request) };
        Some(match self.kind {
            Record::GRANT => Command::Grant { key, lease_ms: self.number, holder },
            Record::RELEASE => Command::Release { key, token: Token(self.number), holder },
            Record::EXPIRE => Command::Expire { key, token: Token(self.number) },
            Record::DECLINE_BUSY => Command::Decline { key, holder, reason: Decline::Busy },
            Record::DECLINE_TIMED_OUT => Command::Decline { key, holder, reason: Decline::TimedOut },
            kind => unreachable!("a record of kind {kind}"),
        })
    }

    fn result(self) -> Option<ApplyResult> {
        Some(match self.result {
            0 => return None,
            1 => ApplyResult::Granted { token: Token(self.granted) },
            2 => ApplyResult::GrantRejected,
            3 => ApplyResult::Released,
            4 => ApplyResult::NotFound,
            5 => ApplyResult::Expired { existed: true },
            6 => ApplyResult::Expired { existed: false },
            7 => ApplyResult::Declined { reason: Decline::Busy },
            8 => ApplyResult::Declined { reason: Decline::TimedOut },
            9 => ApplyResult::Noop,
            code => unreachable!("a result of code {code}"),
        })
    }
}

/// A result as a code from 1 (what [`Record::result`] reads), and a granted token.
fn result_code(result: ApplyResult) -> (u8, u64) {
    match result {
        ApplyResult::Granted { token } => (1, token.0),
        ApplyResult::GrantRejected => (2, 0),
        ApplyResult::Released => (3, 0),
        ApplyResult::NotFound => (4, 0),
        ApplyResult::Expired { existed: true } => (5, 0),
        ApplyResult::Expired { existed: false } => (6, 0),
        ApplyResult::Declined { reason: Decline::Busy } => (7, 0),
        ApplyResult::Declined { reason: Decline::TimedOut } => (8, 0),
        ApplyResult::Noop => (9, 0),
    }
}

impl Pack for Record {
    fn pack(&self, before: &Self, bytes: &mut Vec<u8>) {
        bytes.extend([self.node.0, self.kind, self.result]);
        put_change(bytes, self.term.0, before.term.0);
        if self.kind == Record::NOOP {
            return;
        }
        put(bytes, u64::from(self.key));
        put(bytes, u64::from(self.client));
        put_change(bytes, self.request, before.request);
        put_change(bytes, self.number, before.number);
        if self.result == 1 {
            put_change(bytes, self.granted, before.granted);
        }
    }

    fn unpack(before: &Self, bytes: &[u8], at: &mut usize) -> Self {
        let [node, kind, result] = [bytes[*at], bytes[*at + 1], bytes[*at + 2]];
        *at += 3;
        let term = Term(take_change(bytes, at, before.term.0));
        let mut record = Record { node: NodeId(node), term, kind, result, ..Record::default() };
        if kind == Record::NOOP {
            return record;
        }
        record.key = take_u32(bytes, at);
        record.client = take_u32(bytes, at);
        record.request = take_change(bytes, at, before.request);
        record.number = take_change(bytes, at, before.number);
        if result == 1 {
            record.granted = take_change(bytes, at, before.granted);
        }
        record
    }
}

#[derive(Debug, Default)]
pub(crate) struct FirstEntries {
    /// Each record's key by number in the state's `Keys` (`Context::keys`).
    records: PackedMap<LogIndex, Record>,
    /// Indices at or below are forgotten (a block may still hold some).
    forgotten_to: LogIndex,
    /// First entries applied at forgotten indices since the last forget (a
    /// faulty variant's server that installs a snapshot older than the
    /// horizon applies there again), compared with later applies there
    /// until the next forget (rare).
    below: BTreeMap<LogIndex, Record>,
    /// The first command applied at an index whose first entry is a no-op:
    /// the nodes disagree there, and later commands are still compared
    /// with the first command (rare: a faulty run's divergence).
    applied_apart: BTreeMap<LogIndex, (NodeId, Command, ApplyResult)>,
}

impl FirstEntries {
    fn record(&self, index: LogIndex) -> Option<Record> {
        if index <= self.forgotten_to {
            return self.below.get(&index).copied();
        }
        self.records.get(index)
    }

    /// Records `record` as the first entry at `index`, unless it has one; true if this is the first.
    fn record_first(&mut self, index: LogIndex, record: Record) -> bool {
        if index > self.forgotten_to {
            return self.records.insert(index, record);
        }
        if self.below.contains_key(&index) {
            return false;
        }
        self.below.insert(index, record);
        true
    }

    /// The first entry applied at `index` (`keys` names the records' keys).
    pub fn entry(&self, index: LogIndex, keys: &Keys) -> Option<FirstEntry> {
        let record = self.record(index)?;
        Some(FirstEntry { node: record.node, term: record.term, command: record.to_command(keys) })
    }

    /// The first command applied at `index`, and its result.
    pub fn applied(&self, index: LogIndex, keys: &Keys) -> Option<AppliedEntry> {
        if let Some(record) = self.record(index) {
            if let (Some(command), Some(result)) = (record.to_command(keys), record.result()) {
                return Some(AppliedEntry { node: record.node, command, result });
            }
        }
        let (node, command, result) = self.applied_apart.get(&index)?;
        Some(AppliedEntry { node: *node, command: command.clone(), result: *result })
    }

    /// Whether `index` has its first command applied: [`FirstEntries::applied`]
    /// without making the command.
    pub fn has_applied(&self, index: LogIndex) -> bool {
        self.record(index).is_some_and(|record| record.kind != Record::NOOP && record.result != 0)
            || self.applied_apart.contains_key(&index)
    }

    /// Records a no-op applied at `index` as its first entry, unless it has
    /// one (a forgotten index has none until it is applied again); true if
    /// this is the first.
    pub fn record_noop(&mut self, index: LogIndex, node: NodeId, term: Term) -> bool {
        self.record_first(index, Record::noop(node, term))
    }

    /// Records `command` applied at `index` by `node`: as the index's first
    /// entry, unless it has one, and with `first_result` (the first command
    /// applied there) its result, kept apart where the first entry is
    /// another's. True if this is the first entry. `keys` numbers its key.
    pub fn record_command(
        &mut self,
        index: LogIndex,
        node: NodeId,
        term: Term,
        command: &Command,
        first_result: Option<ApplyResult>,
        keys: &mut Keys,
    ) -> bool {
        debug_assert!(first_result.is_none() || !self.has_applied(index), "{index} has its first command");
        if self.record(index).is_none() {
            let record = Record::command(node, term, command, first_result, keys);
            return self.record_first(index, record);
        }
        if let Some(result) = first_result {
            self.applied_apart.insert(index, (node, command.clone(), result));
        }
        false
    }

    /// Forgets every index at or below `to`; a later apply there is its first entry again.
    pub fn forget_to(&mut self, to: LogIndex) {
        self.forgotten_to = self.forgotten_to.max(to);
        self.below = self.below.split_off(&LogIndex(to.0 + 1));
        self.records.forget_below(LogIndex(to.0 + 1));
        self.applied_apart = self.applied_apart.split_off(&LogIndex(to.0 + 1));
    }

    /// A new epoch: its indices start again.
    pub fn clear(&mut self) {
        self.records = PackedMap::default();
        self.forgotten_to = LogIndex(0);
        self.below.clear();
        self.applied_apart.clear();
    }

    /// The indices held, for tests.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.records.iter().filter(|(index, _)| *index > self.forgotten_to).count() + self.below.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::Key;

    fn grant_holder(request: u64) -> Holder {
        Holder { client: ClientId(1), request: RequestId(request) }
    }

    fn grant(request: u64) -> Command {
        Command::Grant { key: Key::new("k"), lease_ms: 2_000, holder: grant_holder(request) }
    }

    /// A command's record packs into a dozen-odd bytes beside the one
    /// before it, a no-op's into four: the window of held indices costs that
    /// an index, not the command's eighty.
    #[test]
    fn a_record_packs_small_and_unpacks_as_it_was() {
        let mut keys = Keys::default();
        let first =
            Record::command(NodeId(1), Term(7), &grant(40), Some(ApplyResult::Granted { token: Token(90) }), &mut keys);
        let second =
            Record::command(NodeId(1), Term(7), &grant(41), Some(ApplyResult::Granted { token: Token(91) }), &mut keys);
        let noop = Record::noop(NodeId(2), Term(8));
        let release = Command::Release { key: Key::new("k"), token: Token(91), holder: grant_holder(41) };
        let third = Record::command(NodeId(2), Term(8), &release, None, &mut keys);
        let mut bytes = Vec::new();
        second.pack(&first, &mut bytes);
        assert!(bytes.len() <= 12, "{} bytes", bytes.len());
        let noop_at = bytes.len();
        noop.pack(&second, &mut bytes);
        assert_eq!(bytes.len() - noop_at, 4);
        third.pack(&noop, &mut bytes);
        let mut at = 0;
        let unpacked_second = Record::unpack(&first, &bytes, &mut at);
        assert_eq!(unpacked_second, second);
        let unpacked_noop = Record::unpack(&unpacked_second, &bytes, &mut at);
        assert_eq!(
            (unpacked_noop.node, unpacked_noop.term, unpacked_noop.to_command(&keys)),
            (NodeId(2), Term(8), None)
        );
        let unpacked_third = Record::unpack(&unpacked_noop, &bytes, &mut at);
        assert_eq!((unpacked_third.to_command(&keys), unpacked_third.result()), (Some(release), None));
        assert_eq!(at, bytes.len());
    }

    /// Every command and result comes back as it was recorded.
    #[test]
    fn every_kind_of_entry_comes_back_whole() {
        let holder = grant_holder(5);
        let key = Key::new("other");
        let commands = [
            (grant(5), ApplyResult::GrantRejected),
            (Command::Release { key: key.clone(), token: Token(3), holder }, ApplyResult::NotFound),
            (Command::Expire { key: key.clone(), token: Token(4) }, ApplyResult::Expired { existed: true }),
            (Command::Expire { key: key.clone(), token: Token(2) }, ApplyResult::Expired { existed: false }),
            (
                Command::Decline { key: key.clone(), holder, reason: Decline::Busy },
                ApplyResult::Declined { reason: Decline::Busy },
            ),
            (
                Command::Decline { key, holder, reason: Decline::TimedOut },
                ApplyResult::Declined { reason: Decline::TimedOut },
            ),
            (grant(6), ApplyResult::Noop),
            (grant(7), ApplyResult::Released),
        ];
        let (mut entries, mut keys) = (FirstEntries::default(), Keys::default());
        for (index, (command, result)) in (1..).map(LogIndex).zip(&commands) {
            assert!(entries.record_command(index, NodeId(0), Term(1), command, Some(*result), &mut keys));
        }
        for (index, (command, result)) in (1..).map(LogIndex).zip(&commands) {
            let applied = entries.applied(index, &keys).expect("recorded");
            assert_eq!((&applied.command, applied.result), (command, *result));
        }
    }

    #[test]
    fn the_first_entry_and_the_first_command_are_kept_and_forgotten_to_an_index() {
        let (mut entries, mut keys) = (FirstEntries::default(), Keys::default());
        for index in 1..=200 {
            let first = Some(ApplyResult::GrantRejected);
            assert!(entries.record_command(LogIndex(index), NodeId(0), Term(2), &grant(index), first, &mut keys));
            assert!(!entries.record_noop(LogIndex(index), NodeId(1), Term(3)));
        }
        // A no-op first, then another node's command: the command is kept apart.
        assert!(entries.record_noop(LogIndex(201), NodeId(1), Term(3)));
        assert!(!entries.record_command(LogIndex(201), NodeId(2), Term(3), &grant(7), None, &mut keys));
        assert!(entries.applied(LogIndex(201), &keys).is_none());
        let first = Some(ApplyResult::GrantRejected);
        assert!(!entries.record_command(LogIndex(201), NodeId(2), Term(3), &grant(7), first, &mut keys));
        let applied = entries.applied(LogIndex(201), &keys).expect("kept apart");
        assert_eq!((applied.node, &applied.command), (NodeId(2), &grant(7)));
        assert_eq!(entries.entry(LogIndex(201), &keys).map(|e| e.command), Some(None));
        let entry = entries.entry(LogIndex(100), &keys).expect("held");
        assert_eq!((entry.node, entry.term, entry.command), (NodeId(0), Term(2), Some(grant(100))));
        entries.forget_to(LogIndex(130));
        assert!(entries.entry(LogIndex(130), &keys).is_none() && entries.applied(LogIndex(130), &keys).is_none());
        assert!(entries.entry(LogIndex(131), &keys).is_some() && entries.applied(LogIndex(131), &keys).is_some());
        assert_eq!(entries.len(), 71);
        entries.forget_to(LogIndex(201));
        assert_eq!(entries.len(), 0);
        assert!(entries.applied(LogIndex(201), &keys).is_none());
    }

    /// A server that starts below the horizon applies forgotten indices
    /// again: the first of them is the entry the others are compared with,
    /// until the horizon is cut again.
    #[test]
    fn an_apply_at_a_forgotten_index_is_its_first_entry_until_the_next_forget() {
        let (mut entries, mut keys) = (FirstEntries::default(), Keys::default());
        for index in 1..=100 {
            entries.record_command(LogIndex(index), NodeId(0), Term(2), &grant(index), None, &mut keys);
        }
        entries.forget_to(LogIndex(90));
        assert!(entries.entry(LogIndex(80), &keys).is_none(), "forgotten, though its block is kept");
        assert!(entries.record_command(LogIndex(80), NodeId(1), Term(2), &grant(7), None, &mut keys));
        assert!(!entries.record_noop(LogIndex(80), NodeId(2), Term(3)));
        let entry = entries.entry(LogIndex(80), &keys).expect("applied again");
        assert_eq!((entry.node, entry.command), (NodeId(1), Some(grant(7))));
        assert_eq!(entries.len(), 11);
        entries.forget_to(LogIndex(95));
        assert!(entries.entry(LogIndex(80), &keys).is_none());
        assert_eq!(entries.len(), 5);
    }
}
