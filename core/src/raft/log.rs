//! The in-memory Raft log: a snapshot offset followed by the entries after it,
//! plus the indexes that track how far the log is committed, handed to the
//! driver for persistence, persisted, and applied.

use super::{Entry, Snapshot};
use crate::types::{LogIndex, Term};

/// At most this many committed entries are handed out in one `Ready`, so a
/// restarted node with a long log does not produce one unbounded batch.
pub(super) const COMMITTED_ENTRIES_PER_READY_MAX: u64 = 1024;

#[derive(Debug)]
pub(super) struct RaftLog {
    /// The last index covered by the snapshot (0 when there is none).
    pub(super) snapshot_index: LogIndex,
    pub(super) snapshot_term: Term,
    /// `entries[k].index == snapshot_index + 1 + k`.
    entries: Vec<Entry>,
    pub(super) committed: LogIndex,
    /// Applied by the driver, as reported in `advance` (or moved by a snapshot).
    pub(super) applied: LogIndex,
    /// The last committed index handed out in a `Ready` for applying.
    pub(super) applying: LogIndex,
    /// The last index known durable on this node's disk.
    pub(super) persisted: LogIndex,
    /// The first index not yet handed out in a `Ready` for persisting.
    pub(super) unstable_from: LogIndex,
}

impl RaftLog {
    /// A log recovered from disk: everything in it is already durable.
    pub(super) fn recovered(snapshot_index: LogIndex, snapshot_term: Term, entries: Vec<Entry>) -> RaftLog {
        let mut log = RaftLog {
            snapshot_index,
            snapshot_term,
            entries: Vec::new(),
            committed: snapshot_index,
            applied: snapshot_index,
            applying: snapshot_index,
            persisted: snapshot_index,
            unstable_from: LogIndex(snapshot_index.0 + 1),
        };
        // The driver may keep entries the snapshot already covers; they are dropped.
        for entry in entries.into_iter().filter(|entry| entry.index > snapshot_index) {
            assert_eq!(entry.index.0, log.last_index().0 + 1, "durable entries must be contiguous after the snapshot");
            assert!(entry.term >= log.last_term(), "terms in a log never decrease");
            log.entries.push(entry);
        }
        log.persisted = log.last_index();
        log.unstable_from = LogIndex(log.last_index().0 + 1);
        log
    }

    pub(super) fn last_index(&self) -> LogIndex {
        LogIndex(self.snapshot_index.0 + self.entries.len() as u64)
    }

    pub(super) fn last_term(&self) -> Term {
        self.entries.last().map_or(self.snapshot_term, |entry| entry.term)
    }

    /// The term of the entry at `index`, if the log still knows it.
    pub(super) fn term(&self, index: LogIndex) -> Option<Term> {
        if index == self.snapshot_index {
            return Some(self.snapshot_term);
        }
        self.entry(index).map(|entry| entry.term)
    }

    pub(super) fn entry(&self, index: LogIndex) -> Option<&Entry> {
        if index <= self.snapshot_index || index > self.last_index() {
            return None;
        }
        let entry = &self.entries[(index.0 - self.snapshot_index.0 - 1) as usize];
        assert_eq!(entry.index, index);
        Some(entry)
    }

    /// Entries `from..=to`, at most `count_max` of them. `from` must be after the snapshot.
    pub(super) fn slice(&self, from: LogIndex, to: LogIndex, count_max: u64) -> Vec<Entry> {
        assert!(from > self.snapshot_index, "slice {from} starts inside the snapshot at {}", self.snapshot_index);
        let to = to.min(self.last_index()).min(LogIndex(from.0.saturating_add(count_max).saturating_sub(1)));
        if to < from {
            return Vec::new();
        }
        let lo = (from.0 - self.snapshot_index.0 - 1) as usize;
        let hi = (to.0 - self.snapshot_index.0) as usize;
        self.entries[lo..hi].to_vec()
    }

    /// Raft's election restriction: is a log ending at (`last_index`, `last_term`) at least as up to date as ours?
    pub(super) fn is_up_to_date(&self, last_index: LogIndex, last_term: Term) -> bool {
        (last_term, last_index) >= (self.last_term(), self.last_index())
    }

    /// The leader appends its own new entry.
    pub(super) fn append_leader(&mut self, entry: Entry) {
        assert_eq!(entry.index.0, self.last_index().0 + 1, "a leader appends at the end of its log");
        assert!(entry.term >= self.last_term(), "terms in a log never decrease");
        self.entries.push(entry);
    }

    /// The first entry of `entries` that is missing from the log or disagrees
    /// with it on the term.
    pub(super) fn find_conflict(&self, entries: &[Entry]) -> Option<LogIndex> {
        entries.iter().find(|entry| self.term(entry.index) != Some(entry.term)).map(|entry| entry.index)
    }

    /// A follower stores `entries`, whose first one is where its log stops
    /// agreeing with the leader: the suffix from there is replaced.
    pub(super) fn truncate_and_append(&mut self, entries: &[Entry]) {
        let Some(first) = entries.first() else { return };
        assert!(first.index > self.committed, "a committed entry ({}) is never overwritten", first.index);
        assert!(first.index > self.snapshot_index);
        assert!(first.index.0 <= self.last_index().0 + 1, "log matching: no gap before {}", first.index);
        let keep = (first.index.0 - self.snapshot_index.0 - 1) as usize;
        self.entries.truncate(keep);
        // Truncated entries are no longer durable in the sense that matters:
        // the new ones must be handed out again.
        self.persisted = self.persisted.min(LogIndex(first.index.0 - 1));
        self.unstable_from = self.unstable_from.min(first.index);
        for entry in entries {
            assert_eq!(entry.index.0, self.last_index().0 + 1, "entries in an append are contiguous");
            assert!(entry.term >= self.last_term(), "terms in a log never decrease");
            self.entries.push(entry.clone());
        }
    }

    /// Drops every entry after `index`. Only `Variant::TruncateAfterAppend`
    /// does this to entries that agree with the leader; nothing committed goes.
    pub(super) fn truncate_after(&mut self, index: LogIndex) {
        assert!(index >= self.committed, "a committed entry ({}) is never dropped", self.committed);
        if index >= self.last_index() {
            return;
        }
        let keep = (index.0 - self.snapshot_index.0) as usize;
        self.entries.truncate(keep);
        self.persisted = self.persisted.min(index);
        self.unstable_from = self.unstable_from.min(LogIndex(index.0 + 1));
    }

    /// Fast conflict backoff: the last index at or below `index` whose term is
    /// at most `term`, with that term. Below the snapshot the term is unknown:
    /// the answer is then that index with term 0.
    pub(super) fn find_conflict_by_term(&self, index: LogIndex, term: Term) -> (LogIndex, Term) {
        let mut index = index.min(self.last_index());
        // Bounded by the log length: every step goes one index down.
        for _ in 0..=self.entries.len() {
            match self.term(index) {
                Some(here) if here <= term => return (index, here),
                Some(_) if index.0 > 0 => index = LogIndex(index.0 - 1),
                _ => break,
            }
        }
        (index, Term(0))
    }

    pub(super) fn commit_to(&mut self, index: LogIndex) {
        assert!(index > self.committed, "commit never decreases: {} -> {index}", self.committed);
        assert!(index <= self.last_index(), "commit {index} beyond the log end {}", self.last_index());
        self.committed = index;
    }

    /// Entries not yet handed out for persistence; marks them handed.
    pub(super) fn take_unstable(&mut self) -> Vec<Entry> {
        let from = self.unstable_from.max(LogIndex(self.snapshot_index.0 + 1));
        let entries = self.slice(from, self.last_index(), u64::MAX);
        self.unstable_from = LogIndex(self.last_index().0 + 1);
        entries
    }

    pub(super) fn has_unstable(&self) -> bool {
        self.unstable_from <= self.last_index()
    }

    /// Committed entries after what was handed out for applying; marks them handed.
    pub(super) fn take_committed(&mut self) -> Vec<Entry> {
        let from = LogIndex(self.applying.max(self.applied).0 + 1);
        let entries = self.slice(from, self.committed, COMMITTED_ENTRIES_PER_READY_MAX);
        if let Some(last) = entries.last() {
            self.applying = last.index;
        }
        entries
    }

    pub(super) fn has_committed_to_hand(&self) -> bool {
        self.committed > self.applying.max(self.applied)
    }

    /// Drops the entries up to `index`, which a snapshot now covers.
    pub(super) fn compact(&mut self, index: LogIndex) {
        assert!(index <= self.applied, "compacting {index} beyond applied {}", self.applied);
        assert!(index >= self.snapshot_index);
        let term = self.term(index).expect("compaction point is in the log");
        let drop = (index.0 - self.snapshot_index.0) as usize;
        self.entries.drain(..drop);
        self.snapshot_index = index;
        self.snapshot_term = term;
    }

    /// Replaces the whole log with `snapshot` (a follower installing the leader's).
    pub(super) fn restore(&mut self, snapshot: &Snapshot) {
        assert!(snapshot.index > self.committed, "a snapshot below commit is never installed");
        self.entries.clear();
        self.snapshot_index = snapshot.index;
        self.snapshot_term = snapshot.term;
        self.committed = snapshot.index;
        self.applied = snapshot.index;
        self.applying = snapshot.index;
        self.persisted = snapshot.index;
        self.unstable_from = LogIndex(snapshot.index.0 + 1);
    }
}
