//! A sans-IO Raft layer in the shape of etcd-io/raft and tikv/raft-rs.
//!
//! A [`RaftNode`] is driven only through [`RaftNode::tick`], [`RaftNode::step`],
//! [`RaftNode::propose`] and [`RaftNode::read_index`]. It hands out a [`Ready`]:
//! what to persist, what to send, what to apply. The driver persists, then
//! sends, then applies, then calls [`RaftNode::advance`].
//!
//! Persistence contract: `Ready::messages` may go out at once (a leader's
//! appends can be sent in parallel with its own write), but
//! `Ready::messages_after_persist` (votes, append acknowledgements) only after
//! `hard_state`, `entries` and `snapshot` of the same `Ready` are durable.

mod config;
mod election;
mod log;
mod progress;
mod read_index;
mod ready;
mod recovery;
mod replication;
#[cfg(test)]
mod tests;

pub use config::{SNAPSHOT_THRESHOLD_ENTRIES_STANDARD, TICK_MS_STANDARD};

use crate::command::Command;
use crate::lock::LockState;
use crate::probe::{Probe, ProbeSet, Probes};
use crate::types::{LogIndex, NodeId, Term};
use crate::variant::Variant;
use log::RaftLog;
use progress::Progress;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use read_index::ReadRounds;
use recovery::Recovery;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a node stores durably besides its log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardState {
    pub term: Term,
    pub vote: Option<NodeId>,
    pub commit: LogIndex,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Payload {
    /// The empty entry a new leader appends at the start of its term.
    Noop,
    Command(Command),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub term: Term,
    pub index: LogIndex,
    pub payload: Payload,
}

/// The lock state machine as of `index`, taken atomically with it (the token
/// counter is inside `state`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub index: LogIndex,
    pub term: Term,
    pub state: LockState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Role {
    Follower,
    PreCandidate,
    Candidate,
    Leader,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub from: NodeId,
    pub to: NodeId,
    pub term: Term,
    pub body: MessageBody,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageBody {
    PreVote {
        last_index: LogIndex,
        last_term: Term,
    },
    PreVoteResponse {
        granted: bool,
    },
    RequestVote {
        last_index: LogIndex,
        last_term: Term,
    },
    RequestVoteResponse {
        granted: bool,
    },
    /// Also the heartbeat (with no entries). `read_ctx` is the leader's
    /// sequence number of this append, increasing over the leader's life; the
    /// answer echoes it, which confirms the read-index rounds started before
    /// it and dates the answer for the restore rule (ARCHITECTURE.md, "Restores").
    Append {
        prev_index: LogIndex,
        prev_term: Term,
        entries: Vec<Entry>,
        commit: LogIndex,
        read_ctx: u64,
    },
    /// `hint_index`/`hint_term` drive fast conflict backoff on rejection.
    AppendResponse {
        success: bool,
        match_index: LogIndex,
        hint_index: LogIndex,
        hint_term: Term,
        read_ctx: u64,
        /// The sender's disk was restored from a stale backup and it has not
        /// caught up yet: the leader forgets what it acknowledged before and
        /// counts only `match_index` (ARCHITECTURE.md, "Restores").
        recovering: bool,
        /// Names the sender's current life (drawn from the seed it was
        /// started with): with `recovering`, it lets the leader tell the
        /// answers of the node's current life from delayed answers of an
        /// earlier one (ARCHITECTURE.md, "Restores").
        incarnation: u64,
    },
    InstallSnapshot {
        snapshot: Snapshot,
    },
    InstallSnapshotResponse {
        index: LogIndex,
    },
    /// A node restored from a stale backup asks every peer for its current
    /// term before it acknowledges anything (ARCHITECTURE.md, "Restores").
    /// `incarnation` names the asker's life; the answer echoes it. The
    /// message's term is not checked against the receiver's: the asker's term
    /// is the stale one being corrected.
    TermProbe {
        incarnation: u64,
    },
    /// The answer carries the answerer's current term as the message's term;
    /// `recovering` says that term may be stale too, so it does not count.
    TermProbeResponse {
        incarnation: u64,
        recovering: bool,
    },
}

/// A confirmed read-index round: `ctx` is the caller's, `commit` the leader's commit at the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadState {
    pub ctx: u64,
    pub commit: LogIndex,
}

/// Everything the driver must do after a batch of inputs.
#[derive(Clone, Debug, Default)]
pub struct Ready {
    /// Changed hard state to persist, if any.
    pub hard_state: Option<HardState>,
    /// Entries to append to the durable log. The log is first truncated from
    /// `entries[0].index` (a follower overwriting a conflicting suffix).
    pub entries: Vec<Entry>,
    /// A snapshot to persist and install: it replaces the whole durable log
    /// (the entries after it, if any, follow in `entries`) and the state
    /// machine. Persist it before `entries`.
    pub snapshot: Option<Snapshot>,
    /// Messages that may be sent at once.
    pub messages: Vec<Message>,
    /// Messages to send only after the persistent parts of this Ready are durable.
    pub messages_after_persist: Vec<Message>,
    /// Committed entries to apply, in order, starting right after the applied
    /// index (after `snapshot`, if there is one). Apply them only once the
    /// persistent parts are durable.
    pub committed_entries: Vec<Entry>,
    /// Read-index rounds confirmed by a majority since the last Ready. A round
    /// still pending when the leader loses leadership is dropped without a
    /// `ReadState`: the caller notices the lost leadership and gives up on it
    /// (the lock service redirects a waiting client; a floor read is asked again
    /// by the resource).
    pub read_states: Vec<ReadState>,
}

impl Ready {
    pub fn is_empty(&self) -> bool {
        self.hard_state.is_none()
            && self.entries.is_empty()
            && self.snapshot.is_none()
            && self.messages.is_empty()
            && self.messages_after_persist.is_empty()
            && self.committed_entries.is_empty()
            && self.read_states.is_empty()
    }
}

/// Volatile role information, for tracing and the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftState {
    pub role: Role,
    pub term: Term,
    pub leader: Option<NodeId>,
}

/// Validated once by [`Config::validate`]; errors name the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub id: NodeId,
    /// Every voter, including `id`.
    pub voters: Vec<NodeId>,
    pub heartbeat_ticks: u32,
    pub election_ticks_min: u32,
    /// Exclusive upper bound of the randomized election timeout.
    pub election_ticks_max: u32,
    pub entries_per_message_max: usize,
    pub inflight_max: usize,
    /// Take a snapshot (compact the log) once this many entries are applied past the last snapshot.
    pub snapshot_threshold_entries: u64,
    pub pre_vote: bool,
    pub check_quorum: bool,
    pub variant: Variant,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub field: &'static str,
    pub reason: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid raft config `{}`: {}", self.field, self.reason)
    }
}

impl std::error::Error for ConfigError {}

/// Why a proposal was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProposeError {
    NotLeader {
        leader: Option<NodeId>,
    },
    /// The leader's uncommitted log is at its bound.
    Busy,
}

/// What a node recovers from its disk when it starts.
#[derive(Clone, Debug, Default)]
pub struct DurableState {
    pub hard_state: HardState,
    pub snapshot: Option<Snapshot>,
    /// Entries after the snapshot, in index order.
    pub entries: Vec<Entry>,
    /// Set by the operator's restore procedure when the disk came from a stale
    /// backup of this node (see ARCHITECTURE.md, "Restores"). The driver keeps
    /// it set until [`RaftNode::is_recovering`] turns false and the Ready that
    /// did it is durable, then clears it.
    pub restored_from_backup: bool,
}

impl DurableState {
    /// The state machine this disk's durable part commits to (see [`committed_state`]).
    pub fn committed_state(&self, floor: crate::Token, variant: Variant) -> (LogIndex, Term, LockState) {
        committed_state(self.snapshot.as_ref(), &self.entries, self.hard_state.commit, floor, variant)
    }
}

/// The state machine a disk's durable part commits to — its snapshot, then
/// its entries up to `commit` applied — with the index and term it reaches.
/// A disk without a snapshot starts from an empty table whose tokens start
/// above `floor`. What an operator's whole-cluster restore takes from the
/// most advanced backup (the simulator's and the real operator's alike).
pub fn committed_state(
    snapshot: Option<&Snapshot>,
    entries: &[Entry],
    commit: LogIndex,
    floor: crate::Token,
    variant: Variant,
) -> (LogIndex, Term, LockState) {
    let (mut index, mut term, mut state) = match snapshot {
        Some(s) => (s.index, s.term, s.state.clone()),
        None => (LogIndex(0), Term(0), LockState::new(floor)),
    };
    for entry in entries {
        if entry.index <= index || entry.index > commit {
            continue;
        }
        if let Payload::Command(command) = &entry.payload {
            state.apply(command, variant);
        }
        index = entry.index;
        term = entry.term;
    }
    (index, term, state)
}

/// One Raft server's protocol state. The logic lives in the submodules
/// (`election`, `replication`, `read_index`, `ready`); this is the whole
/// public surface.
pub struct RaftNode {
    config: Config,
    term: Term,
    vote: Option<NodeId>,
    role: Role,
    leader: Option<NodeId>,
    log: RaftLog,
    /// The latest snapshot, sent to followers that fell behind the log start.
    snapshot: Option<Snapshot>,
    /// The leader's view of every other voter; empty otherwise.
    progress: BTreeMap<NodeId, Progress>,
    /// The commit index when this node last took office: an older term's
    /// entry stored by a majority above it reached that majority in this
    /// office (figure 8's window, watched by a probe at step-down).
    office_commit: LogIndex,
    /// (Pre-)votes received in the current campaign: voter -> granted.
    votes: BTreeMap<NodeId, bool>,
    election_elapsed: u32,
    /// This node cast its vote in its term (for itself as a candidate, or for
    /// a peer) and has since neither heard a leader nor run its election
    /// timer out: the campaign it backs may still win, so for the minimum
    /// election timeout it refuses pre-votes for a later term (`election`,
    /// candidate stickiness).
    backs_campaign: bool,
    heartbeat_elapsed: u32,
    /// Drawn from `rng` in [election_ticks_min, election_ticks_max) at every role change.
    election_timeout: u32,
    rng: ChaCha8Rng,
    recovery: Option<Recovery>,
    /// The term in which recovery ended: answers stay flagged `recovering`
    /// for the rest of it, so that leader can tell them from stale answers
    /// sent before the restore (ARCHITECTURE.md, "Restores"). A node starts
    /// with it set to its durable term: it cannot know whether it recovered
    /// in that term before a crash, and that term's leader ignores its
    /// unflagged answers for good if it did. A flagged answer is always true.
    recovered_in_term: Option<Term>,
    /// Names this life of the node in its answers; see `AppendResponse::incarnation`.
    incarnation: u64,
    reads: ReadRounds,
    // What the next Ready hands out, and what the last one handed out.
    messages: Vec<Message>,
    messages_after_persist: Vec<Message>,
    read_states: Vec<ReadState>,
    snapshot_to_install: Option<Snapshot>,
    hard_state_handed: HardState,
    /// The last entry handed out for persistence, confirmed in `advance`.
    entries_handed: Option<(LogIndex, Term)>,
    /// Coverage probes (`crate::probe`): off unless the driver turns them on.
    probes: Probes,
}

impl RaftNode {
    /// Starts a node from what its disk holds (an empty `DurableState` for a
    /// brand-new node). `rng_seed` seeds the node's own ChaCha stream for
    /// election timeouts and names this life of the node in its answers: the
    /// driver gives every start of a node its own seed (two lives of a node
    /// with one seed would look like one to a leader, and a delayed answer of
    /// the first could count for the second). Fails only on an invalid config.
    ///
    /// The node resumes as a follower from the durable state only. Its commit
    /// is clamped to what the log holds; the driver's state machine starts
    /// from `durable.snapshot` and the entries after it up to the commit come
    /// back in the first `Ready` as committed entries. A state of only a
    /// snapshot and a hard state (a whole-cluster restore) is accepted.
    pub fn new(config: Config, durable: DurableState, rng_seed: u64) -> Result<RaftNode, ConfigError> {
        config.validate()?;
        let (snapshot_index, snapshot_term) =
            durable.snapshot.as_ref().map_or((LogIndex(0), Term(0)), |snapshot| (snapshot.index, snapshot.term));
        let mut log = RaftLog::recovered(snapshot_index, snapshot_term, durable.entries);
        let commit = durable.hard_state.commit.clamp(snapshot_index, log.last_index());
        if commit > log.committed {
            log.commit_to(commit);
        }
        // A restore may hand a snapshot whose term is above the stored hard state.
        let term = durable.hard_state.term.max(log.last_term());
        let vote = if term == durable.hard_state.term { durable.hard_state.vote } else { None };
        // The one place Variant::AmnesiaRejoin is consulted: it skips the recovery rule.
        let recovery =
            (durable.restored_from_backup && config.variant != Variant::AmnesiaRejoin).then(|| Recovery::new(term));
        let mut node = RaftNode {
            term,
            vote,
            role: Role::Follower,
            leader: None,
            log,
            snapshot: durable.snapshot,
            progress: BTreeMap::new(),
            office_commit: LogIndex(0),
            votes: BTreeMap::new(),
            election_elapsed: 0,
            backs_campaign: false,
            heartbeat_elapsed: 0,
            election_timeout: config.election_ticks_min,
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            recovery,
            recovered_in_term: Some(term),
            incarnation: incarnation_of(rng_seed),
            reads: ReadRounds::default(),
            messages: Vec::new(),
            messages_after_persist: Vec::new(),
            read_states: Vec::new(),
            snapshot_to_install: None,
            hard_state_handed: durable.hard_state,
            entries_handed: None,
            probes: Probes::default(),
            config,
        };
        node.reset_election_timer();
        node.probe_terms();
        Ok(node)
    }

    /// Advances logical time by one tick (the driver calls it every tick interval of its local clock).
    pub fn tick(&mut self) {
        if self.role == Role::Leader {
            self.tick_leader();
        } else {
            self.tick_election();
        }
    }

    /// How many of the coming ticks would only advance this node's timers:
    /// the next tick that can send, campaign or step down is the one after
    /// them. A driver may sleep through these ticks as long as it makes them
    /// up, calling [`RaftNode::tick`] for each in order (or
    /// [`RaftNode::tick_idle`] once for them all), before it hands the node
    /// anything else (a message's effect may depend on the timers).
    pub fn idle_ticks(&self) -> u32 {
        if self.role == Role::Leader {
            let quorum_check = self.config.election_ticks_min.saturating_sub(self.election_elapsed + 1);
            let heartbeat = self.config.heartbeat_ticks.saturating_sub(self.heartbeat_elapsed + 1);
            quorum_check.min(heartbeat)
        } else {
            self.election_timeout.saturating_sub(self.election_elapsed + 1)
        }
    }

    /// Makes `ticks` idle ticks at once: what that many [`RaftNode::tick`]s
    /// do while [`RaftNode::idle_ticks`] counts at least `ticks` ahead,
    /// which is to advance the timers and nothing else. Panics if fewer are
    /// idle.
    pub fn tick_idle(&mut self, ticks: u32) {
        assert!(ticks <= self.idle_ticks(), "{ticks} idle ticks asked, {} ahead", self.idle_ticks());
        self.election_elapsed += ticks;
        if self.role == Role::Leader {
            self.heartbeat_elapsed += ticks;
        }
    }

    /// Runs the election timer out now (etcd's `campaign`): a follower or
    /// (pre-)candidate campaigns at once, with pre-vote if configured, as
    /// its timer would make it at its next timeout; a node recovering from
    /// a stale backup asks for terms instead, and a leader does nothing. For
    /// a harness that needs elections at chosen instants (the simulator's
    /// `ElectionStorm`), or an operator moving leadership by hand.
    pub fn campaign(&mut self) {
        if self.role != Role::Leader {
            self.election_timer_ran_out();
        }
    }

    /// Handles a message from a peer.
    pub fn step(&mut self, message: Message) {
        assert_eq!(message.to, self.config.id, "message delivered to the wrong node");
        if !self.config.voters.contains(&message.from) || message.from == self.config.id {
            return;
        }
        self.step_checked(message);
    }

    /// Appends a command to the leader's log; returns its index and term.
    pub fn propose(&mut self, command: Command) -> Result<(LogIndex, Term), ProposeError> {
        self.propose_payload(Payload::Command(command))
    }

    /// Starts a read-index round (leadership confirmation by a majority).
    /// Its `ReadState` with the same `ctx` appears in a later `Ready` once
    /// confirmed; if leadership is lost first, it never appears.
    pub fn read_index(&mut self, ctx: u64) -> Result<(), ProposeError> {
        self.start_read(ctx)
    }

    pub fn has_ready(&self) -> bool {
        self.has_ready_inner()
    }

    /// Takes the pending work. Call [`RaftNode::advance`] once it is done.
    pub fn ready(&mut self) -> Ready {
        self.take_ready()
    }

    /// Acknowledges that the last Ready was persisted and its committed entries
    /// were applied up to `applied`.
    pub fn advance(&mut self, applied: LogIndex) {
        self.advance_inner(applied);
    }

    /// Gives back a sent Ready's message buffers (`Ready::messages` and
    /// `Ready::messages_after_persist`, drained by the driver) for the next
    /// Ready to fill: optional, it only saves allocations. Anything still in
    /// them is dropped unsent.
    pub fn recycle(&mut self, messages: Vec<Message>, after_persist: Vec<Message>) {
        self.recycle_inner(messages, after_persist);
    }

    /// Compacts the in-memory log up to `index`: `state` is the lock state
    /// machine as of `index` (already applied). Returns the snapshot, which the
    /// driver persists atomically with the truncation of its durable log.
    pub fn compact(&mut self, index: LogIndex, state: LockState) -> Snapshot {
        self.compact_inner(index, state)
    }

    pub fn soft_state(&self) -> SoftState {
        SoftState { role: self.role, term: self.term, leader: self.leader }
    }

    pub fn hard_state(&self) -> HardState {
        HardState { term: self.term, vote: self.vote, commit: self.log.committed }
    }

    pub fn id(&self) -> NodeId {
        self.config.id
    }

    pub fn commit_index(&self) -> LogIndex {
        self.log.committed
    }

    pub fn last_index(&self) -> LogIndex {
        self.log.last_index()
    }

    /// What the driver reported applied (or the snapshot index installed since).
    pub fn applied_index(&self) -> LogIndex {
        self.log.applied
    }

    /// The index the in-memory log starts after (the last compaction or snapshot).
    pub fn snapshot_index(&self) -> LogIndex {
        self.log.snapshot_index
    }

    /// True once `snapshot_threshold_entries` entries were applied past the last snapshot.
    pub fn snapshot_due(&self) -> bool {
        self.log.applied.0 - self.log.snapshot_index.0 >= self.config.snapshot_threshold_entries
    }

    /// The term of the entry at `index`, if the in-memory log still holds it.
    pub fn entry_term(&self, index: LogIndex) -> Option<Term> {
        self.log.term(index)
    }

    /// True while this node, restored from a stale backup, has not yet caught
    /// up with a leader of a later term (ARCHITECTURE.md, "Restores"): it neither votes nor campaigns.
    pub fn is_recovering(&self) -> bool {
        self.recovery.is_some()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Turns the coverage probes on (`crate::probe`); they never change a decision.
    pub fn probes_on(&mut self) {
        self.probes.turn_on();
    }

    /// The probes hit since the last take.
    pub fn take_probes(&mut self) -> ProbeSet {
        self.probes.take()
    }

    fn probe(&mut self, probe: Probe) {
        self.probes.hit(probe);
    }

    /// Whether answers to a leader carry `recovering: true`.
    fn reports_recovering(&self) -> bool {
        self.recovery.is_some() || self.recovered_in_term == Some(self.term)
    }

    fn quorum(&self) -> usize {
        self.config.voters.len() / 2 + 1
    }

    fn send(&mut self, to: NodeId, body: MessageBody) {
        self.send_at(to, self.term, body);
    }

    fn send_at(&mut self, to: NodeId, term: Term, body: MessageBody) {
        self.messages.push(Message { from: self.config.id, to, term, body });
    }

    fn send_after_persist(&mut self, to: NodeId, body: MessageBody) {
        self.messages_after_persist.push(Message { from: self.config.id, to, term: self.term, body });
    }

    fn peers(&self) -> Vec<NodeId> {
        self.config.voters.iter().copied().filter(|&id| id != self.config.id).collect()
    }
}

/// The name of a node's life: drawn from a stream of its seed apart from the
/// timer's, so naming the life leaves the election timeouts as they were.
fn incarnation_of(rng_seed: u64) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(rng_seed);
    rng.set_stream(1);
    rng.gen()
}
