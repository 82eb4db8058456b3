//! The hand-over to the driver: building a `Ready`, and `advance` once it is
//! persisted, sent and applied; also compaction on the driver's request.

use super::{Message, RaftNode, Ready, Role, Snapshot};
use crate::lock::LockState;
use crate::types::LogIndex;
use crate::variant::Variant;

impl RaftNode {
    pub(super) fn has_ready_inner(&self) -> bool {
        self.hard_state() != self.hard_state_handed
            || self.log.has_unstable()
            || self.snapshot_to_install.is_some()
            || !self.messages.is_empty()
            || !self.messages_after_persist.is_empty()
            || self.log.has_committed_to_hand()
            || !self.read_states.is_empty()
    }

    pub(super) fn take_ready(&mut self) -> Ready {
        let mut ready = Ready::default();
        let hard_state = self.hard_state();
        if hard_state != self.hard_state_handed {
            assert!(hard_state.term >= self.hard_state_handed.term, "the durable term never decreases");
            assert!(
                hard_state.term > self.hard_state_handed.term
                    || self.hard_state_handed.vote.is_none()
                    || hard_state.vote == self.hard_state_handed.vote
                    || self.config.variant == Variant::VoteTwice,
                "at most one vote per term"
            );
            ready.hard_state = Some(hard_state);
            self.hard_state_handed = hard_state;
        }
        ready.snapshot = self.snapshot_to_install.take();
        ready.entries = self.log.take_unstable();
        if let Some(last) = ready.entries.last() {
            self.entries_handed = Some((last.index, last.term));
        }
        ready.messages = std::mem::take(&mut self.messages);
        ready.messages_after_persist = std::mem::take(&mut self.messages_after_persist);
        ready.committed_entries = self.log.take_committed();
        if let (Some(first), Some(snapshot)) = (ready.committed_entries.first(), ready.snapshot.as_ref()) {
            assert_eq!(first.index.0, snapshot.index.0 + 1, "committed entries start right after the snapshot");
        }
        ready.read_states = std::mem::take(&mut self.read_states);
        ready
    }

    pub(super) fn advance_inner(&mut self, applied: LogIndex) {
        if let Some((index, term)) = self.entries_handed.take() {
            // Entries truncated since they were handed out do not count.
            if self.log.term(index) == Some(term) && index > self.log.persisted {
                self.log.persisted = index;
            }
        }
        assert!(applied <= self.log.committed, "applied {applied} beyond commit {}", self.log.committed);
        assert!(applied <= self.log.applying.max(self.log.applied), "applied {applied} beyond what was handed out");
        self.log.applied = self.log.applied.max(applied);
        // Whatever was handed out but not applied comes back in the next Ready.
        self.log.applying = self.log.applied;
        if self.role == Role::Leader {
            self.maybe_commit();
        }
    }

    /// Takes back the message buffers of a Ready the driver has sent (it
    /// drained them): the next Ready's messages go into memory already
    /// held, where a fresh buffer cost an allocation for nearly every
    /// acknowledgement a follower sends. What the driver left in them is
    /// dropped, never sent again.
    pub(super) fn recycle_inner(&mut self, messages: Vec<Message>, after_persist: Vec<Message>) {
        for (mine, mut theirs) in [(&mut self.messages, messages), (&mut self.messages_after_persist, after_persist)] {
            theirs.clear();
            if mine.is_empty() && mine.capacity() < theirs.capacity() {
                *mine = theirs;
            }
        }
    }

    pub(super) fn compact_inner(&mut self, index: LogIndex, state: LockState) -> Snapshot {
        assert!(index <= self.log.applied, "compact at {index} beyond applied {}", self.log.applied);
        assert!(index <= self.log.persisted, "compact at {index} beyond persisted {}", self.log.persisted);
        assert!(index >= self.log.snapshot_index, "compact at {index} below the last snapshot");
        self.log.compact(index);
        let snapshot = Snapshot { index, term: self.log.snapshot_term, state };
        self.snapshot = Some(snapshot.clone());
        snapshot
    }
}
