//! Read-index rounds: a leader confirms it is still the leader by hearing from
//! a majority after the round started, and only answers once an entry of its
//! own term is committed (so its commit index is at least every earlier
//! leader's).

use super::{ProposeError, RaftNode, ReadState, Role};
use crate::types::NodeId;
use crate::variant::Variant;
use std::collections::{BTreeSet, VecDeque};

/// At most this many rounds wait for confirmation; more are refused as `Busy`.
pub(super) const READ_ROUNDS_MAX: usize = 1024;

#[derive(Debug)]
struct ReadRound {
    ctx: u64,
    /// The `read_ctx` of the appends sent for this round; an acknowledgement
    /// of any append carrying it or a later one confirms the round.
    seq: u64,
    acks: BTreeSet<NodeId>,
}

#[derive(Debug, Default)]
pub(super) struct ReadRounds {
    /// The last sequence number handed to a round or an append; never
    /// reused over the node's life. An append carries a number above every
    /// round started before it, so its acknowledgement confirms them all.
    seq_last: u64,
    pending: VecDeque<ReadRound>,
}

impl ReadRounds {
    /// The `read_ctx` of the next append: a fresh sequence number.
    pub(super) fn next_append_seq(&mut self) -> u64 {
        self.seq_last = self.seq_last.checked_add(1).expect("append sequence space exhausted");
        self.seq_last
    }

    /// The sequence number of the latest append or round.
    pub(super) fn seq_last(&self) -> u64 {
        self.seq_last
    }

    pub(super) fn acknowledge(&mut self, from: NodeId, read_ctx: u64) {
        for round in self.pending.iter_mut().filter(|round| round.seq <= read_ctx) {
            round.acks.insert(from);
        }
    }

    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.pending.clear();
    }
}

impl RaftNode {
    pub(super) fn start_read(&mut self, ctx: u64) -> Result<(), ProposeError> {
        if self.role != Role::Leader {
            return Err(ProposeError::NotLeader { leader: self.leader });
        }
        if self.reads.pending.len() >= READ_ROUNDS_MAX {
            return Err(ProposeError::Busy);
        }
        self.reads.seq_last += 1;
        let seq = self.reads.seq_last;
        let acks = BTreeSet::from([self.config.id]);
        self.reads.pending.push_back(ReadRound { ctx, seq, acks });
        self.broadcast_heartbeat();
        self.release_reads();
        Ok(())
    }

    /// Answers the confirmed rounds, oldest first.
    pub(super) fn release_reads(&mut self) {
        if self.role != Role::Leader || self.log.term(self.log.committed) != Some(self.term) {
            return;
        }
        // Variant::ServeWithoutQuorum takes the leader's own belief that it
        // leads as the confirmation (with check-quorum off, `tick_leader`).
        let quorum = if self.config.variant == Variant::ServeWithoutQuorum { 1 } else { self.quorum() };
        while self.reads.pending.front().is_some_and(|round| round.acks.len() >= quorum) {
            let round = self.reads.pending.pop_front().expect("front exists");
            self.read_states.push(ReadState { ctx: round.ctx, commit: self.log.committed });
        }
    }
}
