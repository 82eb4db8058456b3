//! What a leader knows about one follower's log: how far it matches, what to
//! send next, and how many appends are still unacknowledged.

use crate::types::LogIndex;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ProgressState {
    /// Where the follower's log diverges is unknown: one append at a time.
    Probe,
    /// The follower is in step: stream appends, up to `inflight_max` unacknowledged.
    Replicate,
    /// An InstallSnapshot at `index` is on its way; `wait_ticks` counts heartbeats
    /// since, so a lost snapshot is sent again.
    Snapshot { index: LogIndex, wait_ticks: u32 },
}

#[derive(Clone, Debug)]
pub(super) struct Progress {
    pub(super) match_index: LogIndex,
    pub(super) next_index: LogIndex,
    pub(super) state: ProgressState,
    /// In `Probe`, an append was sent and no answer came back yet.
    probe_sent: bool,
    /// In `Replicate`, the last index of each unacknowledged append with entries.
    inflight: VecDeque<LogIndex>,
    /// The follower answered during the current check-quorum window.
    pub(super) recent_active: bool,
    /// An empty append to reveal lost appends went to the follower since
    /// the last heartbeat: one per heartbeat interval (the leader's
    /// `handle_append_response`).
    pub(super) loss_check_sent: bool,
    /// The highest commit index the appends sent to the follower could tell
    /// it (each carries the leader's commit, clamped by the follower to what
    /// the append covers): [`Progress::told_commit`].
    pub(super) commit_told: LogIndex,
    /// The life of the follower whose flagged answers count, once it flagged
    /// one in this term (it restarted or was restored); unflagged answers
    /// are then from before that and no longer count.
    life: Option<Life>,
}

/// A life of a follower as its leader knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Life {
    incarnation: u64,
    /// The leader's append sequence number when it first heard from this
    /// life: an answer to a later append comes from a node alive after that.
    seq_heard: u64,
}

/// What a flagged `AppendResponse` says about its sender's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Flagged {
    pub(super) incarnation: u64,
    /// The sequence number of the append it answers (`read_ctx`).
    pub(super) seq: u64,
}

/// Whose answer a flagged `AppendResponse` is, as far as the leader can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AnswerLife {
    /// The life the leader already counts.
    Current,
    /// A later life: it answered an append sent after the leader first
    /// heard from the current one, which must then be over (a node has one
    /// life at a time).
    Newer,
    /// Another life whose answer may be older than the current one's
    /// (a delayed answer from before a restart or restore): it proves nothing.
    Unknown,
}

impl Progress {
    pub(super) fn new(next_index: LogIndex) -> Progress {
        Progress {
            match_index: LogIndex(0),
            next_index,
            state: ProgressState::Probe,
            probe_sent: false,
            inflight: VecDeque::new(),
            recent_active: false,
            loss_check_sent: false,
            commit_told: LogIndex(0),
            life: None,
        }
    }

    pub(super) fn is_paused(&self, inflight_max: usize) -> bool {
        match self.state {
            ProgressState::Probe => self.probe_sent,
            ProgressState::Replicate => self.inflight.len() >= inflight_max,
            ProgressState::Snapshot { .. } => true,
        }
    }

    #[cfg(test)]
    pub(super) fn inflight_len(&self) -> usize {
        self.inflight.len()
    }

    /// Records an append carrying entries up to `last_index` (equal to the
    /// previous index for an empty append).
    pub(super) fn sent_append(&mut self, last_index: LogIndex, entries_len: usize, inflight_max: usize) {
        match self.state {
            ProgressState::Probe => self.probe_sent = true,
            ProgressState::Replicate => {
                if entries_len > 0 {
                    assert!(self.inflight.len() < inflight_max, "never more than inflight_max appends in flight");
                    self.next_index = LogIndex(last_index.0 + 1);
                    self.inflight.push_back(last_index);
                }
            }
            ProgressState::Snapshot { .. } => unreachable!("no append is sent while a snapshot is pending"),
        }
    }

    /// Notes that an append told the follower the commit `told` (the
    /// leader's commit clamped to what the append covers).
    pub(super) fn told_commit(&mut self, told: LogIndex) {
        self.commit_told = self.commit_told.max(told);
    }

    /// A successful acknowledgement up to `index`; true if the match moved.
    pub(super) fn acknowledge(&mut self, index: LogIndex, inflight_max: usize) -> bool {
        self.probe_sent = false;
        let moved = index > self.match_index;
        if moved {
            self.match_index = index;
        }
        self.next_index = self.next_index.max(LogIndex(self.match_index.0 + 1));
        let freed_before = self.inflight.len();
        while self.inflight.front().is_some_and(|&last| last <= index) {
            self.inflight.pop_front();
        }
        // A heartbeat answer frees one slot of a *full* window, so a window
        // whose appends were all lost drains and the follower's rejection
        // resets it. Only a full one: duplicated answers must not open the
        // window beyond `inflight_max` while appends are still in flight.
        if !moved
            && freed_before == self.inflight.len()
            && freed_before >= inflight_max
            && self.state == ProgressState::Replicate
        {
            self.inflight.pop_front();
        }
        moved
    }

    /// A rejection of an append whose previous index was `rejected`; the
    /// follower's hint is already mapped onto the leader's log as `probe_from`.
    /// Returns false for a stale rejection.
    pub(super) fn reject(&mut self, rejected: LogIndex, probe_from: LogIndex) -> bool {
        match self.state {
            ProgressState::Replicate => {
                if rejected <= self.match_index {
                    return false;
                }
                self.become_probe();
                true
            }
            ProgressState::Probe => {
                // A rejection of an index at or below the match contradicts
                // what the follower acknowledged; waiting for its next answer
                // (or a restore report) beats probing the same index forever.
                if rejected.0 + 1 != self.next_index.0 || rejected <= self.match_index {
                    return false;
                }
                // Strictly below the rejected index, so probing always moves.
                let next = rejected.min(LogIndex(probe_from.0 + 1));
                self.next_index = next.max(LogIndex(self.match_index.0 + 1));
                self.probe_sent = false;
                true
            }
            ProgressState::Snapshot { .. } => false,
        }
    }

    pub(super) fn become_probe(&mut self) {
        self.next_index = match self.state {
            ProgressState::Snapshot { index, .. } => LogIndex(self.match_index.max(index).0 + 1),
            _ => LogIndex(self.match_index.0 + 1),
        };
        self.state = ProgressState::Probe;
        self.probe_sent = false;
        self.inflight.clear();
    }

    pub(super) fn become_replicate(&mut self) {
        self.state = ProgressState::Replicate;
        self.next_index = LogIndex(self.match_index.0 + 1);
        self.probe_sent = false;
        self.inflight.clear();
    }

    pub(super) fn become_snapshot(&mut self, index: LogIndex) {
        self.state = ProgressState::Snapshot { index, wait_ticks: 0 };
        self.probe_sent = false;
        self.inflight.clear();
    }

    /// Whether an answer counts (ARCHITECTURE.md, "Restores"). `flagged` is
    /// set for an answer flagged `recovering`; `seq_now` is the leader's last
    /// append sequence number. Once the follower flagged an answer in this
    /// term, only flagged answers of its current life count: unflagged ones
    /// were sent before it restarted. A flagged answer of a newer life starts
    /// the count afresh, forgetting what earlier lives acknowledged; the
    /// answer itself is then handled as the first from a follower whose log
    /// is unknown (`next_index` is where to probe after a rejection).
    pub(super) fn admit(&mut self, flagged: Option<Flagged>, seq_now: u64, next_index: LogIndex) -> bool {
        let Some(flagged) = flagged else { return self.life.is_none() };
        match self.answer_life(flagged) {
            AnswerLife::Current => true,
            AnswerLife::Newer => {
                self.life = Some(Life { incarnation: flagged.incarnation, seq_heard: seq_now });
                self.forget_match(LogIndex(0), next_index);
                true
            }
            AnswerLife::Unknown => false,
        }
    }

    fn answer_life(&self, flagged: Flagged) -> AnswerLife {
        match self.life {
            Some(life) if life.incarnation == flagged.incarnation => AnswerLife::Current,
            Some(life) if flagged.seq <= life.seq_heard => AnswerLife::Unknown,
            _ => AnswerLife::Newer,
        }
    }

    /// The follower said its disk was restored from a backup: whatever it
    /// acknowledged before is forgotten, and only `match_index` (what it
    /// reports now) counts.
    pub(super) fn forget_match(&mut self, match_index: LogIndex, next_index: LogIndex) {
        self.match_index = match_index;
        self.state = ProgressState::Probe;
        self.next_index = next_index.max(LogIndex(match_index.0 + 1));
        self.probe_sent = false;
        self.inflight.clear();
        // A new life of the follower knows no commit index yet.
        self.commit_told = LogIndex(0);
    }
}
