//! The resource's floor read after it was restored from a backup: a
//! linearizable read of the lock table and the token counter.
//!
//! It is Raft's read-index read, like the confirmation a `Granted` waits for: the
//! leader asks a read-index round when the read arrives, and answers once the
//! round confirms it still leads and its applied log has reached the round's
//! commit index. Every Grant committed before the read arrived is then in the
//! answer, and every Grant committed after it has a higher token than the
//! answer's `token_last` (tokens are assigned at apply, strictly increasing).
//! A deposed leader's rounds never settle; the resource asks again.

use super::{LockServer, Output, ReadPurpose, ReadRound, READS_MAX};
use crate::resource::{Fence, LockFloor};
use crate::types::{LogIndex, NodeId, Term};
use serde::{Deserialize, Serialize};

/// A server's answer to a floor read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FloorAnswer {
    /// The lock table and counter as of a confirmed read index.
    Floor(LockFloor),
    /// This server does not lead; try the one named, if any.
    NotLeader { leader: Option<NodeId> },
    /// The leader cannot serve it now; ask again.
    Unavailable,
}

/// A confirmed floor read waiting for the log to apply up to `after`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ParkedFloor {
    term: Term,
    after: LogIndex,
    read: u64,
}

impl LockServer {
    /// The resource asks for its floor (`read` names the attempt; the answer carries it back).
    pub fn on_floor_read(&mut self, read: u64) {
        let Some(office) = self.office.filter(|office| office.serving) else {
            let answer = if self.office.is_some() { FloorAnswer::Unavailable } else { self.floor_redirect() };
            self.push(Output::FloorAnswer { read, answer });
            return;
        };
        if self.reads.len() >= READS_MAX {
            self.push(Output::FloorAnswer { read, answer: FloorAnswer::Unavailable });
            return;
        }
        let ctx = self.next_read_ctx();
        if self.raft.read_index(ctx).is_err() {
            self.push(Output::FloorAnswer { read, answer: FloorAnswer::Unavailable });
            return;
        }
        self.reads.insert(ctx, ReadRound { term: office.term, purpose: ReadPurpose::Floor { read } });
    }

    fn floor_redirect(&self) -> FloorAnswer {
        let leader = self.raft.soft_state().leader.filter(|leader| *leader != self.raft.id());
        FloorAnswer::NotLeader { leader }
    }

    /// Leadership in `term` was confirmed with the log committed up to `after`.
    pub(super) fn settle_floor(&mut self, term: Term, after: LogIndex, read: u64) {
        if !self.still_leader_of(term) {
            return;
        }
        if self.applied_index < after {
            if self.floors_parked.len() < READS_MAX {
                self.floors_parked.push(ParkedFloor { term, after, read });
            }
            return;
        }
        let held = self
            .state
            .locks()
            .map(|(key, lock)| (key.clone(), Fence { token: lock.token, holder: lock.holder }))
            .collect();
        let floor = LockFloor { token_last: self.state.token_last(), held };
        tracing::debug!(read, token_last = %floor.token_last, "floor read answered from confirmed leadership");
        self.push(Output::FloorAnswer { read, answer: FloorAnswer::Floor(floor) });
    }

    /// After an applied batch: answers the parked floor reads whose wait is over.
    pub(super) fn settle_parked_floors(&mut self) {
        if self.floors_parked.is_empty() {
            return;
        }
        let due = Self::take_applied(self.applied_index, &mut self.floors_parked, |parked| parked.after);
        for parked in due {
            self.settle_floor(parked.term, parked.after, parked.read);
        }
    }
}
