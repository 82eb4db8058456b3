//! Terms, roles and elections: the election timer, pre-vote, voting with the
//! at-most-one-vote rule, leader stickiness, check-quorum, and the dispatch of
//! every incoming message after its term was checked.

use super::progress::Progress;
use super::replication::AppendAnswer;
use super::{Message, MessageBody, Payload, RaftNode, Role};
use crate::probe::Probe;
use crate::types::{LogIndex, NodeId, Term};
use crate::variant::Variant;
use rand::Rng;

impl RaftNode {
    pub(super) fn reset_election_timer(&mut self) {
        self.election_elapsed = 0;
        self.heartbeat_elapsed = 0;
        self.election_timeout = self.rng.gen_range(self.config.election_ticks_min..self.config.election_ticks_max);
    }

    pub(super) fn tick_election(&mut self) {
        self.election_elapsed += 1;
        if self.election_elapsed < self.election_timeout {
            return;
        }
        self.election_timer_ran_out();
    }

    /// What a follower or (pre-)candidate does when its election timer runs
    /// out: it draws a new timeout and campaigns, or, while recovering from
    /// a stale backup, asks its peers for the terms it missed.
    pub(super) fn election_timer_ran_out(&mut self) {
        if self.role == Role::Candidate {
            self.probe(Probe::SplitVoteRetry);
        }
        self.reset_election_timer();
        self.backs_campaign = false;
        // A node restored from a stale backup may have voted in terms it no
        // longer remembers, so it never campaigns while recovering; it asks
        // again for the terms it has not heard yet.
        if self.recovery.is_some() {
            self.probe_terms();
            return;
        }
        if self.config.pre_vote {
            self.become_pre_candidate();
        } else {
            self.become_candidate();
        }
    }

    pub(super) fn tick_leader(&mut self) {
        self.election_elapsed += 1;
        self.heartbeat_elapsed += 1;
        if self.election_elapsed >= self.config.election_ticks_min {
            self.election_elapsed = 0;
            // Variant::ServeWithoutQuorum turns check-quorum off here (and
            // confirms reads alone, `release_reads`): an isolated leader keeps serving.
            if self.config.check_quorum && self.config.variant != Variant::ServeWithoutQuorum {
                let active = 1 + self.progress.values().filter(|progress| progress.recent_active).count();
                if active < self.quorum() {
                    // Isolated from a majority: stop acting as leader (and
                    // stop confirming reads) within one election timeout.
                    self.probe(Probe::CheckQuorumStepDown);
                    self.become_follower(self.term, None);
                    return;
                }
            }
            for progress in self.progress.values_mut() {
                progress.recent_active = false;
            }
        }
        if self.heartbeat_elapsed >= self.config.heartbeat_ticks {
            self.heartbeat_elapsed = 0;
            self.tick_snapshot_waits();
            for progress in self.progress.values_mut() {
                progress.loss_check_sent = false;
            }
            self.broadcast_heartbeat();
        }
    }

    /// With check-quorum, within the minimum election timeout of hearing
    /// from a leader, a node ignores (pre-)votes, so a partitioned node
    /// coming back cannot depose a working leader. A leader is always
    /// "hearing from itself" until check-quorum tells it otherwise. Without
    /// check-quorum a leader never learns that it lost its majority, so
    /// nobody may ignore a vote request on its behalf: a higher term always
    /// wins, as in etcd.
    fn in_lease(&self) -> bool {
        self.config.check_quorum && self.leader.is_some() && self.election_elapsed < self.config.election_ticks_min
    }

    pub(super) fn become_follower(&mut self, term: Term, leader: Option<NodeId>) {
        assert!(term >= self.term, "terms never decrease");
        if self.role == Role::Leader {
            if term > self.term {
                self.probe(Probe::LeaderDeposedByHigherTerm);
            }
            if self.reads.has_pending() {
                self.probe(Probe::ReadRoundsDroppedOnStepDown);
            }
            let stored = self.majority_stored();
            if stored > self.office_commit && self.log.term(stored).is_some_and(|term| term < self.term) {
                self.probe(Probe::Figure8LeaderLostOffice);
            }
        }
        if term > self.term {
            self.term = term;
            self.vote = None;
        }
        self.role = Role::Follower;
        self.leader = leader;
        self.backs_campaign = false;
        self.votes.clear();
        self.progress.clear();
        // Pending read rounds die with leadership; the service redirects their callers.
        self.reads.clear();
        self.reset_election_timer();
    }

    fn become_pre_candidate(&mut self) {
        // Pre-vote changes neither the term nor the vote: a node that could
        // not win does not disturb the cluster.
        self.role = Role::PreCandidate;
        self.leader = None;
        self.votes.clear();
        self.votes.insert(self.config.id, true);
        let body = MessageBody::PreVote { last_index: self.log.last_index(), last_term: self.log.last_term() };
        for peer in self.peers() {
            self.send_at(peer, Term(self.term.0 + 1), body.clone());
        }
        self.check_votes();
    }

    fn become_candidate(&mut self) {
        assert!(self.recovery.is_none(), "a recovering node never campaigns");
        self.term = Term(self.term.0 + 1);
        self.vote = Some(self.config.id);
        self.role = Role::Candidate;
        self.leader = None;
        self.backs_campaign = true;
        self.votes.clear();
        self.votes.insert(self.config.id, true);
        self.reset_election_timer();
        let body = MessageBody::RequestVote { last_index: self.log.last_index(), last_term: self.log.last_term() };
        for peer in self.peers() {
            // The candidate's own vote and term must be durable first, or a
            // crash could let it vote for someone else in the same term.
            self.send_after_persist(peer, body.clone());
        }
        self.check_votes();
    }

    fn become_leader(&mut self) {
        assert_eq!(self.role, Role::Candidate);
        assert_eq!(self.vote, Some(self.config.id));
        self.role = Role::Leader;
        self.leader = Some(self.config.id);
        self.backs_campaign = false;
        self.votes.clear();
        self.reset_election_timer();
        self.office_commit = self.log.committed;
        let next = LogIndex(self.log.last_index().0 + 1);
        self.progress = self.peers().into_iter().map(|peer| (peer, Progress::new(next))).collect();
        // The no-op of the new term: once it commits, everything before it is
        // committed too, and read-index rounds may be answered.
        self.append_entry(Payload::Noop);
        self.broadcast_append();
    }

    /// Counts the (pre-)votes of the current campaign and moves on when decided.
    fn check_votes(&mut self) {
        let granted = self.votes.values().filter(|&&granted| granted).count();
        let rejected = self.votes.len() - granted;
        if granted >= self.quorum() {
            match self.role {
                Role::PreCandidate => self.become_candidate(),
                Role::Candidate => self.become_leader(),
                Role::Follower | Role::Leader => unreachable!("only candidates count votes"),
            }
        } else if rejected >= self.quorum() {
            if self.role == Role::PreCandidate {
                self.probe(Probe::PreCampaignLost);
            }
            self.become_follower(self.term, None);
        }
    }

    /// Checks the message's term against ours, then dispatches it. A term
    /// probe and its answer are taken first: the asker's term is the stale one
    /// being corrected, so it neither raises nor is rejected by ours.
    pub(super) fn step_checked(&mut self, message: Message) {
        match message.body {
            MessageBody::TermProbe { incarnation } => return self.answer_term_probe(message.from, incarnation),
            MessageBody::TermProbeResponse { incarnation, recovering } => {
                return self.record_term(message.from, message.term, incarnation, recovering)
            }
            _ => {}
        }
        if message.term > self.term {
            match &message.body {
                MessageBody::PreVote { .. } | MessageBody::RequestVote { .. } if self.in_lease() => {
                    if matches!(message.body, MessageBody::PreVote { .. }) {
                        self.probe(Probe::PreVoteIgnoredInLease);
                    }
                    tracing::debug!(
                        from = %message.from,
                        term = %message.term,
                        leader = %self.leader.map_or_else(|| "none".to_string(), |node| node.to_string()),
                        "vote request ignored: a leader was heard within the election timeout (leader stickiness)"
                    );
                    return;
                }
                // A pre-vote is for a term the candidate has not entered yet,
                // and a granted answer carries that future term.
                MessageBody::PreVote { .. } | MessageBody::PreVoteResponse { granted: true } => {}
                MessageBody::Append { .. } | MessageBody::InstallSnapshot { .. } => {
                    self.become_follower(message.term, Some(message.from))
                }
                _ => self.become_follower(message.term, None),
            }
        } else if message.term < self.term {
            match message.body {
                // A stale leader learns our term from the answer and steps down;
                // with pre-vote this is how a node with a higher term rejoins.
                MessageBody::Append { .. } | MessageBody::InstallSnapshot { .. } => {
                    self.probe(Probe::StaleLeaderAppendRejected);
                    tracing::debug!(
                        from = %message.from,
                        term = %self.term,
                        theirs = %message.term,
                        "append rejected: the sender's term is older than ours"
                    );
                    let body = MessageBody::AppendResponse {
                        success: false,
                        match_index: LogIndex(0),
                        hint_index: LogIndex(0),
                        hint_term: Term(0),
                        read_ctx: 0,
                        recovering: self.reports_recovering(),
                        incarnation: self.incarnation,
                    };
                    self.send(message.from, body);
                }
                MessageBody::PreVote { .. } => self.send(message.from, MessageBody::PreVoteResponse { granted: false }),
                _ => {}
            }
            return;
        }
        let from = message.from;
        match message.body {
            MessageBody::PreVote { last_index, last_term } => {
                self.handle_vote_request(from, message.term, last_index, last_term, true)
            }
            MessageBody::RequestVote { last_index, last_term } => {
                self.handle_vote_request(from, message.term, last_index, last_term, false)
            }
            MessageBody::PreVoteResponse { granted } => {
                if (self.role == Role::PreCandidate && message.term == Term(self.term.0 + 1)) || !granted {
                    self.record_vote(from, granted, Role::PreCandidate);
                }
            }
            MessageBody::RequestVoteResponse { granted } => self.record_vote(from, granted, Role::Candidate),
            MessageBody::Append { read_ctx, .. } if self.surveying_terms() => {
                self.refuse_while_surveying(from, read_ctx)
            }
            MessageBody::InstallSnapshot { .. } if self.surveying_terms() => {}
            MessageBody::Append { prev_index, prev_term, entries, commit, read_ctx } => {
                if self.accept_leader(from) {
                    self.handle_append(from, prev_index, prev_term, entries, commit, read_ctx);
                }
            }
            MessageBody::AppendResponse {
                success,
                match_index,
                hint_index,
                hint_term,
                read_ctx,
                recovering,
                incarnation,
            } => {
                // The one place Variant::NeverCommit is consulted: the leader
                // notes that the follower is alive, as it does for any answer
                // (so check-quorum keeps it in office), but drops what the
                // answer acknowledges: no match index moves, nothing commits.
                if self.role == Role::Leader && self.config.variant == Variant::NeverCommit {
                    if let Some(progress) = self.progress.get_mut(&from) {
                        progress.recent_active = true;
                    }
                } else if self.role == Role::Leader {
                    let answer =
                        AppendAnswer { success, match_index, hint_index, hint_term, read_ctx, recovering, incarnation };
                    self.handle_append_response(from, answer);
                }
            }
            MessageBody::InstallSnapshot { snapshot } => {
                if self.accept_leader(from) {
                    self.handle_install_snapshot(from, snapshot);
                }
            }
            MessageBody::InstallSnapshotResponse { index } => {
                if self.role == Role::Leader {
                    self.handle_install_snapshot_response(from, index);
                }
            }
            MessageBody::TermProbe { .. } | MessageBody::TermProbeResponse { .. } => unreachable!("taken first"),
        }
    }

    /// An append or snapshot of our own term comes from that term's only leader.
    fn accept_leader(&mut self, from: NodeId) -> bool {
        if self.role == Role::Leader {
            // Two leaders in one term: only possible under an unsafe variant
            // (a vote that was not durable, or amnesia). Ignore the other one;
            // the history checker reports the violation.
            return false;
        }
        if self.role != Role::Follower || self.leader != Some(from) {
            self.become_follower(self.term, Some(from));
        }
        // A leader is heard: the campaign this node backed is decided.
        self.backs_campaign = false;
        // The one place Variant::ElectionChurn is consulted: hearing from the
        // leader does not restart the election timer, so it counts from when
        // the node began to follow, and runs out one election timeout later
        // however alive the leader is. Leader stickiness (`in_lease`, the
        // check-quorum rule that makes a follower ignore (pre-)votes while it
        // hears a leader) reads the same timer, as a naive implementation
        // would, so the other followers, whose timers ran as long, grant the
        // pre-vote and the vote: the campaign wins with pre-vote on, and a
        // new term begins every election timeout or two (a heartbeat that
        // reaches a pre-candidate first sends it back to following).
        if self.config.variant != Variant::ElectionChurn {
            self.election_elapsed = 0;
        }
        true
    }

    fn record_vote(&mut self, from: NodeId, granted: bool, campaign: Role) {
        if self.role != campaign {
            return;
        }
        self.votes.entry(from).or_insert(granted);
        self.check_votes();
    }

    fn handle_vote_request(&mut self, from: NodeId, term: Term, last_index: LogIndex, last_term: Term, pre: bool) {
        // The one place Variant::VoteTwice is consulted: a follower forgets
        // whom it already voted for in the term.
        let vote_free =
            self.vote.is_none() || (self.config.variant == Variant::VoteTwice && self.role == Role::Follower);
        // Candidate stickiness: a pre-vote for a later term is refused for
        // the minimum election timeout after voting for another campaign of
        // this term, which may still win. Granted, it would let the loser of
        // a close race enter the later term just as the winner takes office,
        // and depose it with its first append's answer. The timer running out
        // ends it, so a lost race delays the next one by at most that timeout.
        let backs_other = pre
            && self.backs_campaign
            && self.vote != Some(from)
            && self.election_elapsed < self.config.election_ticks_min;
        let can_vote = self.vote == Some(from)
            || (vote_free && self.leader.is_none())
            || (pre && term > self.term && !backs_other);
        // The one place Variant::VoteIgnoresLog is consulted: it drops Raft's
        // election restriction, so a candidate lacking committed entries can win.
        let log_ok = self.config.variant == Variant::VoteIgnoresLog || self.log.is_up_to_date(last_index, last_term);
        let granted = can_vote && self.recovery.is_none() && log_ok;
        if !granted {
            let probe = if !can_vote && backs_other {
                Some(Probe::PreVoteRefusedBackingCampaign)
            } else if !can_vote {
                (!pre && self.vote.is_some_and(|vote| vote != from)).then_some(Probe::VoteRefusedVotedForOther)
            } else if self.recovery.is_some() {
                Some(Probe::VoteRefusedRecovering)
            } else {
                Some(Probe::VoteRefusedLogBehind)
            };
            if let Some(probe) = probe {
                self.probe(probe);
            }
            let why = if !can_vote && backs_other {
                "voted for another campaign of this term, which may still win (candidate stickiness)"
            } else if !can_vote {
                "already voted or following a leader in this term"
            } else if self.recovery.is_some() {
                "recovering: not caught up since restart"
            } else {
                "candidate's log is behind ours"
            };
            tracing::debug!(
                from = %from,
                term = %term,
                pre,
                voted_for = %self.vote.map_or_else(|| "none".to_string(), |node| node.to_string()),
                candidate_last = %format_args!("{last_index}/{last_term}"),
                ours_last = %format_args!("{}/{}", self.log.last_index(), self.log.last_term()),
                "vote refused: {why}"
            );
        }
        if pre {
            // A pre-vote promises nothing, so its answer needs no persistence.
            let answer_term = if granted { term } else { self.term };
            self.send_at(from, answer_term, MessageBody::PreVoteResponse { granted });
            return;
        }
        assert_eq!(term, self.term);
        if granted {
            assert!(vote_free || self.vote == Some(from), "at most one vote per term");
            self.vote = Some(from);
            self.backs_campaign = true;
            self.election_elapsed = 0;
        }
        self.send_vote_response(from, granted);
    }

    /// The one place Variant::VoteNotDurable is consulted.
    fn send_vote_response(&mut self, to: NodeId, granted: bool) {
        let body = MessageBody::RequestVoteResponse { granted };
        if self.config.variant == Variant::VoteNotDurable {
            self.send(to, body);
        } else {
            self.send_after_persist(to, body);
        }
    }
}
