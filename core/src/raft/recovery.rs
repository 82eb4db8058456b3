//! Protocol-aware recovery of a node whose disk was restored from a stale
//! backup (ARCHITECTURE.md, "Restores"): it first relearns a term at least as
//! new as any it had reached when it acknowledged entries that were then
//! committed (the term survey), then follows a leader without voting until it
//! has caught up with that leader's commit.

use super::{MessageBody, RaftNode};
use crate::probe::Probe;
use crate::types::{LogIndex, NodeId, Term};
use std::collections::BTreeSet;

/// A node whose disk was restored from a stale backup, until it has caught up
/// with a leader of a term at or after the restored one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Recovery {
    /// The term on the restored disk; votes cast after it may have been lost.
    restored_term: Term,
    /// Peers, not recovering themselves, that told this life their current
    /// term (which the node has adopted if it was higher).
    surveyed: BTreeSet<NodeId>,
}

impl Recovery {
    pub(super) fn new(restored_term: Term) -> Recovery {
        Recovery { restored_term, surveyed: BTreeSet::new() }
    }
}

impl RaftNode {
    /// How many peers a restored node must hear from: enough that every
    /// majority holding this node meets them in one other node (`n - q + 1`
    /// of the `n - 1` others for a quorum `q`; none when it is alone).
    fn survey_size(&self) -> usize {
        let voters = self.config.voters.len();
        (voters - self.quorum() + 1).min(voters - 1)
    }

    /// True while a restored node has not yet heard the current term of
    /// enough peers (`survey_size`). Until then it stores and acknowledges
    /// nothing: an entry committed before the restore with this node's lost
    /// acknowledgement was committed in a term that one of those peers still
    /// holds (or exceeds), and a leader of an older term, waking from a
    /// pause, must not use the forgetful node to commit over it.
    pub(super) fn surveying_terms(&self) -> bool {
        self.recovery.as_ref().is_some_and(|recovery| recovery.surveyed.len() < self.survey_size())
    }

    /// Asks every peer not yet heard from for its current term (at start and
    /// at every election timeout while the survey lasts).
    pub(super) fn probe_terms(&mut self) {
        let Some(recovery) = self.recovery.as_ref().filter(|_| self.surveying_terms()) else { return };
        let unheard: Vec<NodeId> = self.peers().into_iter().filter(|peer| !recovery.surveyed.contains(peer)).collect();
        for peer in unheard {
            self.send(peer, MessageBody::TermProbe { incarnation: self.incarnation });
        }
    }

    /// Answers an append while the survey lasts with a refusal that stores
    /// nothing and names this life: the leader forgets what earlier lives of
    /// the node acknowledged (ARCHITECTURE.md, "Restores"), so a delayed
    /// answer from before the restore cannot count either.
    pub(super) fn refuse_while_surveying(&mut self, leader: NodeId, read_ctx: u64) {
        self.probe(Probe::AppendRefusedWhileSurveying);
        tracing::debug!(from = %leader, term = %self.term, "append refused: restored, terms not surveyed yet");
        let body = MessageBody::AppendResponse {
            success: false,
            match_index: LogIndex(0),
            hint_index: LogIndex(0),
            hint_term: Term(0),
            read_ctx,
            recovering: true,
            incarnation: self.incarnation,
        };
        self.send(leader, body);
    }

    /// Any node answers a probe with its own term, without looking at the
    /// asker's (which is the stale one being corrected).
    pub(super) fn answer_term_probe(&mut self, to: NodeId, incarnation: u64) {
        let body = MessageBody::TermProbeResponse { incarnation, recovering: self.recovery.is_some() };
        self.send(to, body);
    }

    /// Counts an answer to this life's probe from a peer that is not
    /// recovering, adopting its term if it is newer.
    pub(super) fn record_term(&mut self, from: NodeId, term: Term, incarnation: u64, recovering: bool) {
        if !self.surveying_terms() || incarnation != self.incarnation || recovering {
            return;
        }
        if term > self.term {
            self.probe(Probe::SurveyAdoptedHigherTerm);
            self.become_follower(term, None);
        }
        let size = self.survey_size();
        let recovery = self.recovery.as_mut().expect("surveying implies recovering");
        recovery.surveyed.insert(from);
        if recovery.surveyed.len() == size {
            tracing::debug!(term = %self.term, "term survey done: enough peers told their terms");
        }
    }

    /// Leaves recovery once caught up with the leader of a term at or after
    /// the restored one: recording that leader as this term's vote closes the
    /// term to any other candidate (ARCHITECTURE.md, "Restores"). The
    /// restored term itself qualifies: its leader is the term's only one, and
    /// a vote the backup already holds for this term is the one the node cast
    /// before (votes never change within a term), so it is kept; waiting for a
    /// later term would leave the node out of every election for as long as
    /// that leader lasts.
    pub(super) fn maybe_finish_recovery(&mut self, leader: NodeId, leader_commit: LogIndex) {
        let Some(recovery) = &self.recovery else { return };
        let restored_term = recovery.restored_term;
        if self.term < restored_term || self.log.committed < leader_commit {
            return;
        }
        // A fresh leader's commit index may lag entries committed in earlier
        // terms (it holds them, but has not counted them yet); only a
        // commit of an entry of its own term covers them all.
        if self.log.term(self.log.committed) != Some(self.term) {
            return;
        }
        assert_eq!(self.leader, Some(leader));
        assert!(
            self.term == restored_term || self.vote.is_none() || self.vote == Some(leader),
            "a recovering node never votes after its restored term"
        );
        if self.vote.is_none() {
            self.vote = Some(leader);
        }
        self.recovery = None;
        self.recovered_in_term = Some(self.term);
        self.probe(Probe::RecoveryFinished);
    }
}
