//! Log replication: the leader's appends, heartbeats and snapshots, the
//! follower's handling of them with fast conflict backoff, and the commit rule
//! (only entries of the leader's current term are committed by counting).

use super::progress::{Flagged, ProgressState};
use super::{Entry, MessageBody, Payload, ProposeError, RaftNode, Role, Snapshot};
use crate::probe::Probe;
use crate::types::{LogIndex, NodeId, Term};
use crate::variant::Variant;

/// A follower's answer to an append, as the leader handles it (the fields
/// of [`MessageBody::AppendResponse`]).
pub(super) struct AppendAnswer {
    pub success: bool,
    pub match_index: LogIndex,
    pub hint_index: LogIndex,
    pub hint_term: Term,
    pub read_ctx: u64,
    pub recovering: bool,
    pub incarnation: u64,
}

/// Voters whose stored indexes a leader sorts without allocating: every
/// cluster the simulator's model allows (odd, up to nine).
const VOTERS_ON_STACK: usize = 9;

impl RaftNode {
    pub(super) fn propose_payload(&mut self, payload: Payload) -> Result<(LogIndex, Term), ProposeError> {
        if self.role != Role::Leader {
            return Err(ProposeError::NotLeader { leader: self.leader });
        }
        if self.log.last_index().0 - self.log.committed.0 >= self.config.uncommitted_entries_max() {
            return Err(ProposeError::Busy);
        }
        let index = self.append_entry(payload);
        self.broadcast_append();
        Ok((index, self.term))
    }

    /// The leader appends to its own log. Its own copy counts toward commit
    /// only once the driver reports it persisted (in `advance`).
    pub(super) fn append_entry(&mut self, payload: Payload) -> LogIndex {
        assert_eq!(self.role, Role::Leader);
        let index = LogIndex(self.log.last_index().0 + 1);
        self.log.append_leader(Entry { term: self.term, index, payload });
        index
    }

    pub(super) fn broadcast_append(&mut self) {
        for peer in self.peers() {
            // Bounded by the in-flight window: each send fills one slot or pauses a probe.
            for _ in 0..=self.config.inflight_max {
                if !self.send_append(peer, false) {
                    break;
                }
            }
        }
    }

    pub(super) fn broadcast_heartbeat(&mut self) {
        for peer in self.peers() {
            self.send_heartbeat(peer);
        }
    }

    /// Sends the next append (or the snapshot) to `to` unless its window is
    /// full. Returns true if something was sent.
    fn send_append(&mut self, to: NodeId, allow_empty: bool) -> bool {
        let inflight_max = self.config.inflight_max;
        let last = self.log.last_index();
        let progress = self.progress.get(&to).expect("the leader tracks every peer");
        if progress.is_paused(inflight_max) {
            return false;
        }
        let next = progress.next_index.min(LogIndex(last.0 + 1));
        let prev_index = LogIndex(next.0 - 1);
        let Some(prev_term) = self.log.term(prev_index) else {
            self.send_snapshot(to);
            return true;
        };
        let entries = self.log.slice(next, last, self.config.entries_per_message_max as u64);
        if entries.is_empty() && !allow_empty {
            return false;
        }
        let last_sent = entries.last().map_or(prev_index, |entry| entry.index);
        let entries_len = entries.len();
        let body = MessageBody::Append {
            prev_index,
            prev_term,
            entries,
            commit: self.log.committed,
            read_ctx: self.reads.next_append_seq(),
        };
        self.send(to, body);
        let committed = self.log.committed;
        let progress = self.progress.get_mut(&to).expect("the leader tracks every peer");
        progress.told_commit(committed.min(last_sent));
        progress.sent_append(last_sent, entries_len, inflight_max);
        true
    }

    fn send_snapshot(&mut self, to: NodeId) {
        self.probe(Probe::SnapshotSent);
        let snapshot = self.snapshot.clone().expect("a log that starts after index 0 has a snapshot");
        assert_eq!(snapshot.index, self.log.snapshot_index, "the kept snapshot is the log's start");
        self.progress.get_mut(&to).expect("the leader tracks every peer").become_snapshot(snapshot.index);
        self.send(to, MessageBody::InstallSnapshot { snapshot });
    }

    /// An empty append at the follower's match index: it carries the commit
    /// (the follower clamps it to the match) and the latest read-index round.
    fn send_heartbeat(&mut self, to: NodeId) {
        let match_index = self.progress.get(&to).expect("the leader tracks every peer").match_index;
        let (prev_index, prev_term) = self.heartbeat_prev(match_index);
        let body = MessageBody::Append {
            prev_index,
            prev_term,
            entries: Vec::new(),
            commit: self.log.committed,
            read_ctx: self.reads.next_append_seq(),
        };
        self.send(to, body);
        let committed = self.log.committed;
        self.progress.get_mut(&to).expect("the leader tracks every peer").told_commit(committed.min(prev_index));
    }

    /// Where a heartbeat to a follower matching through `match_index` goes:
    /// at the match, or below a compaction (its term gone) at index 0,
    /// which always matches.
    fn heartbeat_prev(&self, match_index: LogIndex) -> (LogIndex, Term) {
        match self.log.term(match_index) {
            Some(term) => (match_index, term),
            None => (LogIndex(0), Term(0)),
        }
    }

    /// A snapshot that got no answer within two election timeouts is sent again.
    pub(super) fn tick_snapshot_waits(&mut self) {
        let heartbeat_ticks = self.config.heartbeat_ticks;
        let wait_ticks_max = self.config.election_ticks_min.saturating_mul(2);
        let mut resend = Vec::new();
        for (&peer, progress) in self.progress.iter_mut() {
            if let ProgressState::Snapshot { index, wait_ticks } = progress.state {
                let wait_ticks = wait_ticks.saturating_add(heartbeat_ticks);
                progress.state = ProgressState::Snapshot { index, wait_ticks };
                if wait_ticks >= wait_ticks_max {
                    self.probes.hit(Probe::SnapshotResentAfterWait);
                    let match_index = progress.match_index;
                    progress.forget_match(match_index, LogIndex(match_index.0 + 1));
                    resend.push(peer);
                }
            }
        }
        for peer in resend {
            self.send_append(peer, true);
        }
    }

    /// The one place Variant::AckBeforeDurable is consulted: acknowledgements
    /// normally wait until what they acknowledge is durable.
    fn send_append_ack(&mut self, to: NodeId, body: MessageBody) {
        if self.config.variant == Variant::AckBeforeDurable {
            self.send(to, body);
        } else {
            self.send_after_persist(to, body);
        }
    }

    fn ack_append(&mut self, to: NodeId, match_index: LogIndex, read_ctx: u64, recovering: bool) {
        let body = MessageBody::AppendResponse {
            success: true,
            match_index,
            hint_index: LogIndex(0),
            hint_term: Term(0),
            read_ctx,
            recovering,
            incarnation: self.incarnation,
        };
        self.send_append_ack(to, body);
    }

    /// A follower (or candidate that just learned of the leader) handles an
    /// append of its own term.
    pub(super) fn handle_append(
        &mut self,
        from: NodeId,
        prev_index: LogIndex,
        prev_term: Term,
        mut entries: Vec<Entry>,
        commit: LogIndex,
        read_ctx: u64,
    ) {
        let recovering = self.reports_recovering();
        let committed = self.log.committed;
        let (mut prev_index, mut prev_term) = (prev_index, prev_term);
        if prev_index < committed {
            // Everything up to our commit matches the leader (leader
            // completeness), so skip what we already hold for sure.
            let Some(first_new) = entries.iter().position(|entry| entry.index > committed) else {
                self.ack_append(from, committed, read_ctx, recovering);
                self.maybe_finish_recovery(from, commit);
                return;
            };
            assert!(first_new > 0, "appends are contiguous after prev_index");
            if Some(entries[first_new - 1].term) != self.log.term(committed) {
                // Only an unsafe variant (a leader lacking committed entries)
                // gets here; keep the committed entry and let the history
                // checker see the divergence.
                assert!(!self.config.variant.is_safe(), "log matching at the commit index {committed}");
                return;
            }
            self.probe(Probe::AppendBelowCommitTrimmed);
            prev_term = self.log.term(committed).expect("the committed index is in the log or the snapshot");
            prev_index = committed;
            entries.drain(..first_new);
        }
        if self.log.term(prev_index) != Some(prev_term) {
            self.probe(Probe::AppendRejectedLogMismatch);
            let (hint_index, hint_term) = self.log.find_conflict_by_term(prev_index, prev_term);
            tracing::debug!(
                from = %from,
                term = %self.term,
                prev = %format_args!("{prev_index}/{prev_term}"),
                ours = %self.log.term(prev_index).map_or_else(|| "none".to_string(), |term| term.to_string()),
                hint = %format_args!("{hint_index}/{hint_term}"),
                "append rejected: our log does not hold the leader's previous entry"
            );
            let body = MessageBody::AppendResponse {
                success: false,
                match_index: prev_index,
                hint_index,
                hint_term,
                read_ctx,
                recovering,
                incarnation: self.incarnation,
            };
            self.send_append_ack(from, body);
            return;
        }
        let last_new = LogIndex(prev_index.0 + entries.len() as u64);
        if let Some(conflict) = self.log.find_conflict(&entries) {
            if conflict <= self.log.committed {
                // Only an unsafe variant (two leaders in a term, lost acked
                // entries) gets here; keep the committed entry and let the
                // history checker see the divergence.
                assert!(!self.config.variant.is_safe(), "append conflicts with committed entry {conflict}");
                return;
            }
            self.probe(Probe::FollowerSuffixOverwritten);
            let start = (conflict.0 - prev_index.0 - 1) as usize;
            self.log.truncate_and_append(&entries[start..]);
        }
        // The one place Variant::TruncateAfterAppend is consulted: it drops
        // whatever follows the append, even entries the leader sent later and
        // this node acknowledged, when an older append or a heartbeat arrives late.
        if self.config.variant == Variant::TruncateAfterAppend {
            self.log.truncate_after(last_new);
        }
        if self.config.variant.is_safe() {
            for entry in &entries {
                assert_eq!(self.log.entry(entry.index), Some(entry), "log matching: same index and term, same entry");
            }
        }
        // The one place Variant::FollowerCommitUncapped is consulted: only what
        // this append matched is known to be the leader's; a stale tail past it is not.
        let commit_cap =
            if self.config.variant == Variant::FollowerCommitUncapped { self.log.last_index() } else { last_new };
        if commit > last_new && self.log.last_index() > last_new {
            self.probe(Probe::FollowerCommitCapped);
        }
        let commit_to = commit.min(commit_cap);
        if commit_to > self.log.committed {
            self.log.commit_to(commit_to);
        }
        self.ack_append(from, last_new, read_ctx, recovering);
        self.maybe_finish_recovery(from, commit);
    }

    pub(super) fn handle_install_snapshot(&mut self, from: NodeId, snapshot: Snapshot) {
        let index = snapshot.index;
        if index <= self.log.committed {
            self.probe(Probe::SnapshotArrivedStale);
            let committed = self.log.committed;
            self.send_append_ack(from, MessageBody::InstallSnapshotResponse { index: committed });
            return;
        }
        if self.log.term(index) == Some(snapshot.term) {
            // Our log already holds that entry, and by log matching everything before it.
            self.log.commit_to(index);
        } else {
            self.probe(Probe::SnapshotInstalled);
            self.log.restore(&snapshot);
            self.snapshot = Some(snapshot.clone());
            self.snapshot_to_install = Some(snapshot);
            self.entries_handed = None;
        }
        self.send_append_ack(from, MessageBody::InstallSnapshotResponse { index });
    }

    pub(super) fn handle_install_snapshot_response(&mut self, from: NodeId, index: LogIndex) {
        let index = index.min(self.log.last_index());
        let inflight_max = self.config.inflight_max;
        let Some(progress) = self.progress.get_mut(&from) else { return };
        progress.recent_active = true;
        if !matches!(progress.state, ProgressState::Snapshot { .. }) {
            self.probes.hit(Probe::SnapshotAnswerAfterLeaderMovedOn);
        }
        let moved = progress.acknowledge(index, inflight_max);
        if matches!(progress.state, ProgressState::Snapshot { .. }) {
            progress.become_probe();
        }
        if moved {
            self.maybe_commit();
        }
        self.send_append(from, true);
    }

    pub(super) fn handle_append_response(&mut self, from: NodeId, answer: AppendAnswer) {
        let AppendAnswer { success, match_index, hint_index, hint_term, read_ctx, recovering, incarnation } = answer;
        let match_index = match_index.min(self.log.last_index());
        let probe_from =
            if hint_term > Term(0) { self.log.find_conflict_by_term(hint_index, hint_term).0 } else { hint_index };
        let inflight_max = self.config.inflight_max;
        let seq_now = self.reads.seq_last();
        let Some(progress) = self.progress.get_mut(&from) else { return };
        progress.recent_active = true;
        let life = recovering.then_some(Flagged { incarnation, seq: read_ctx });
        if !progress.admit(life, seq_now, LogIndex(match_index.0 + 1)) {
            if read_ctx > 0 {
                self.reads.acknowledge(from, read_ctx);
                self.release_reads();
            }
            return;
        }
        if success {
            let moved = progress.acknowledge(match_index, inflight_max);
            match progress.state {
                ProgressState::Probe if moved => progress.become_replicate(),
                ProgressState::Snapshot { index, .. } if progress.match_index >= index => progress.become_probe(),
                _ => {}
            }
            if moved {
                self.maybe_commit();
            }
            let mut sent = false;
            for _ in 0..=self.config.inflight_max {
                if !self.send_append(from, false) {
                    break;
                }
                sent = true;
            }
            // The follower holds less than the leader and nothing new is left
            // to send: the appends in flight may be lost (a crash, a cut
            // link), and no later append would reveal it. An empty append at
            // `next_index - 1` makes the follower reject and the leader probe
            // again. Once per heartbeat interval, as etcd does on heartbeat
            // answers alone: after every answer, each check's own answer
            // (which moves nothing while later appends are in flight) sent
            // the next, and a busy leader exchanged about twenty empty
            // appends per entry with each follower.
            let progress = self.progress.get_mut(&from).expect("the leader tracks every peer");
            let (match_now, commit_told) = (progress.match_index, progress.commit_told);
            let checked = progress.loss_check_sent && self.config.variant != Variant::LossCheckEveryAnswer;
            if !sent && !moved && match_index < self.log.last_index() && !checked {
                progress.loss_check_sent = true;
                self.probe(Probe::EmptyAppendRevealsLoss);
                self.send_append(from, true);
            } else if !sent && self.log.committed.min(self.heartbeat_prev(match_now).0) > commit_told {
                // The follower now holds committed entries that no append
                // told it were committed (the commit went out while its
                // append was in flight): a heartbeat tells it now rather
                // than at the next interval (etcd's `CanBumpCommit`).
                self.send_heartbeat(from);
            }
        } else if progress.reject(match_index, probe_from) {
            self.send_append(from, true);
        }
        if read_ctx > 0 {
            self.reads.acknowledge(from, read_ctx);
            self.release_reads();
        }
    }

    /// Commits the highest index stored by a majority (the leader counting its
    /// own persisted log), if that entry is of the current term (Raft figure 8).
    pub(super) fn maybe_commit(&mut self) -> bool {
        assert_eq!(self.role, Role::Leader);
        let candidate = self.majority_stored();
        if candidate <= self.log.committed {
            return false;
        }
        let term = self.log.term(candidate).expect("an index above commit is in the leader's log");
        // The one place Variant::CommitOldTermByCount is consulted.
        if term != self.term && self.config.variant != Variant::CommitOldTermByCount {
            self.probe(Probe::Figure8CommitDeferred);
            return false;
        }
        if self.log.term(LogIndex(self.log.committed.0 + 1)).is_some_and(|first| first < self.term) {
            self.probe(Probe::OldTermCommittedByCurrent);
        }
        self.log.commit_to(candidate);
        self.release_reads();
        self.broadcast_commit();
        true
    }

    /// The highest index a majority stores, the leader counting its own
    /// persisted log (a leader's view: its followers' match indexes).
    pub(super) fn majority_stored(&self) -> LogIndex {
        // Sorted in place on the stack for a cluster of up to
        // `VOTERS_ON_STACK`, in a vector beyond: this runs on every
        // acknowledgement a leader gets.
        let voters = self.config.voters.len();
        let mut on_stack = [LogIndex(0); VOTERS_ON_STACK];
        let mut on_heap = Vec::new();
        let stored = if voters <= on_stack.len() {
            &mut on_stack[..voters]
        } else {
            on_heap.resize(voters, LogIndex(0));
            &mut on_heap[..]
        };
        for (slot, id) in stored.iter_mut().zip(&self.config.voters) {
            *slot = if *id == self.config.id {
                self.log.persisted
            } else {
                self.progress.get(id).expect("the leader tracks every peer").match_index
            };
        }
        stored.sort_unstable_by(|a, b| b.cmp(a));
        stored[self.quorum() - 1]
    }

    /// Followers learn a new commit index at once, as in etcd and raft-rs,
    /// not at the next heartbeat: it lets them apply (and a follower that
    /// recovers from a restore leave recovery) a heartbeat interval sooner.
    /// An append with entries still to send carries it; otherwise an empty
    /// one at the follower's match (which it surely holds) does.
    fn broadcast_commit(&mut self) {
        for peer in self.peers() {
            if !self.send_append(peer, false) {
                self.send_heartbeat(peer);
            }
        }
    }
}
