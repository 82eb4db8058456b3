//! The first entry of each log index in this epoch, as the first node to
//! apply it saw it: what `apply-agreement` compares every later apply of the
//! index with, and `commit-durability` every acknowledgement.
//!
//! Every index above the state's horizon is held (`state.rs`, `Horizon`),
//! a window of a few thousand whose width the faults decide (a server down
//! or an old backup holds the horizon back), so each is held once and
//! densely: a block of `BLOCK_INDICES` slots per stretch of the log, one
//! slot an index with the entry's command and, where the node whose entry
//! it is applied the first command there, that command's result. Two maps
//! by index, one for the entries and one for the commands, each with its
//! own copy of the command, took three times the memory.

use fencelock::{ApplyResult, Command, LogIndex, NodeId, Term};
use std::collections::BTreeMap;

/// The log indices a block holds.
const BLOCK_INDICES: u64 = 64;

/// The first entry of an index, commands and no-ops alike.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct FirstEntry<'a> {
    pub node: NodeId,
    pub term: Term,
    /// `None` for a no-op.
    pub command: Option<&'a Command>,
}

impl FirstEntry<'_> {
    /// What was applied, for a violation's sentence.
    pub fn what(&self) -> String {
        super::state::describe_payload(self.command, self.term)
    }
}

/// The first command applied at an index, and its result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AppliedEntry<'a> {
    pub node: NodeId,
    pub command: &'a Command,
    pub result: ApplyResult,
}

/// One index's first entry.
#[derive(Clone, Debug)]
struct Slot {
    node: NodeId,
    term: Term,
    command: Option<Command>,
    /// The result of the first command applied here, when that is this
    /// entry's own apply (the first node to apply the index applied a command).
    result: Option<ApplyResult>,
}

#[derive(Debug, Default)]
pub(crate) struct FirstEntries {
    /// Slots by block (index / `BLOCK_INDICES`).
    blocks: BTreeMap<u64, Box<[Option<Slot>]>>,
    /// The first command applied at an index whose first entry is a no-op:
    /// the nodes disagree there, and later commands are still compared
    /// with the first command (rare: a faulty run's divergence).
    applied_apart: BTreeMap<LogIndex, (NodeId, Command, ApplyResult)>,
}

impl FirstEntries {
    fn slot(&self, index: LogIndex) -> Option<&Slot> {
        let block = self.blocks.get(&(index.0 / BLOCK_INDICES))?;
        block[(index.0 % BLOCK_INDICES) as usize].as_ref()
    }

    /// The first entry applied at `index`.
    pub fn entry(&self, index: LogIndex) -> Option<FirstEntry<'_>> {
        let slot = self.slot(index)?;
        Some(FirstEntry { node: slot.node, term: slot.term, command: slot.command.as_ref() })
    }

    /// The first command applied at `index`, and its result.
    pub fn applied(&self, index: LogIndex) -> Option<AppliedEntry<'_>> {
        if let Some(Slot { node, command: Some(command), result: Some(result), .. }) = self.slot(index) {
            return Some(AppliedEntry { node: *node, command, result: *result });
        }
        let (node, command, result) = self.applied_apart.get(&index)?;
        Some(AppliedEntry { node: *node, command, result: *result })
    }

    /// The slot of `index`, its block made if it has none.
    fn slot_mut(&mut self, index: LogIndex) -> &mut Option<Slot> {
        let block = self
            .blocks
            .entry(index.0 / BLOCK_INDICES)
            .or_insert_with(|| vec![None; BLOCK_INDICES as usize].into_boxed_slice());
        &mut block[(index.0 % BLOCK_INDICES) as usize]
    }

    /// Records a no-op applied at `index` as its first entry, unless it has
    /// one; true if this is the first.
    pub fn record_noop(&mut self, index: LogIndex, node: NodeId, term: Term) -> bool {
        let slot = self.slot_mut(index);
        if slot.is_some() {
            return false;
        }
        *slot = Some(Slot { node, term, command: None, result: None });
        true
    }

    /// Records `command` applied at `index` by `node`: as the index's first
    /// entry, unless it has one, and with `first_result` (the first command
    /// applied there) its result, kept apart where the first entry is
    /// another's. True if this is the first entry.
    pub fn record_command(
        &mut self,
        index: LogIndex,
        node: NodeId,
        term: Term,
        command: &Command,
        first_result: Option<ApplyResult>,
    ) -> bool {
        debug_assert!(first_result.is_none() || self.applied(index).is_none(), "{index} has its first command");
        let slot = self.slot_mut(index);
        if slot.is_none() {
            *slot = Some(Slot { node, term, command: Some(command.clone()), result: first_result });
            return true;
        }
        if let Some(result) = first_result {
            self.applied_apart.insert(index, (node, command.clone(), result));
        }
        false
    }

    /// Forgets every index at or below `to`.
    pub fn forget_to(&mut self, to: LogIndex) {
        let above = to.0 + 1;
        self.blocks = self.blocks.split_off(&(above / BLOCK_INDICES));
        if let Some(block) = self.blocks.get_mut(&(above / BLOCK_INDICES)) {
            block[..(above % BLOCK_INDICES) as usize].fill(None);
        }
        self.applied_apart = self.applied_apart.split_off(&LogIndex(above));
    }

    pub fn clear(&mut self) {
        self.blocks.clear();
        self.applied_apart.clear();
    }

    /// The indices held, for tests.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.blocks.values().flat_map(|block| block.iter()).filter(|slot| slot.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::{ClientId, Holder, Key, RequestId};

    fn grant(request: u64) -> Command {
        let holder = Holder { client: ClientId(1), request: RequestId(request) };
        Command::Grant { key: Key::new("k"), lease_ms: 2_000, holder }
    }

    /// A slot is a few dozen bytes: the window of held indices costs a
    /// block's worth of slots an index, not two map entries.
    #[test]
    fn a_slot_is_small() {
        assert!(std::mem::size_of::<Option<Slot>>() <= 80, "{}", std::mem::size_of::<Option<Slot>>());
    }

    #[test]
    fn the_first_entry_and_the_first_command_are_kept_and_forgotten_to_an_index() {
        let mut entries = FirstEntries::default();
        for index in 1..=200 {
            let first = Some(ApplyResult::GrantRejected);
            assert!(entries.record_command(LogIndex(index), NodeId(0), Term(2), &grant(index), first));
            assert!(!entries.record_noop(LogIndex(index), NodeId(1), Term(3)));
        }
        // A no-op first, then another node's command: the command is kept apart.
        assert!(entries.record_noop(LogIndex(201), NodeId(1), Term(3)));
        assert!(!entries.record_command(LogIndex(201), NodeId(2), Term(3), &grant(7), None));
        assert!(entries.applied(LogIndex(201)).is_none());
        let first = Some(ApplyResult::GrantRejected);
        assert!(!entries.record_command(LogIndex(201), NodeId(2), Term(3), &grant(7), first));
        let applied = entries.applied(LogIndex(201)).expect("kept apart");
        assert_eq!((applied.node, applied.command), (NodeId(2), &grant(7)));
        assert_eq!(entries.entry(LogIndex(201)).map(|e| e.command), Some(None));
        let entry = entries.entry(LogIndex(100)).expect("held");
        assert_eq!((entry.node, entry.term, entry.command), (NodeId(0), Term(2), Some(&grant(100))));
        entries.forget_to(LogIndex(130));
        assert!(entries.entry(LogIndex(130)).is_none() && entries.applied(LogIndex(130)).is_none());
        assert!(entries.entry(LogIndex(131)).is_some() && entries.applied(LogIndex(131)).is_some());
        assert_eq!(entries.len(), 71);
        entries.forget_to(LogIndex(201));
        assert_eq!(entries.len(), 0);
        assert!(entries.applied(LogIndex(201)).is_none());
    }
}
