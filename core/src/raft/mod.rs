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

use crate::command::Command;
use crate::lock::LockState;
use crate::types::{LogIndex, NodeId, Term};
use crate::variant::Variant;
use serde::{Deserialize, Serialize};

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
    /// Also the heartbeat (with no entries). `read_ctx` confirms leadership for read-index.
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
    },
    InstallSnapshot {
        snapshot: Snapshot,
    },
    InstallSnapshotResponse {
        index: LogIndex,
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
    /// A snapshot to persist and install: it replaces the log up to its index
    /// and the state machine.
    pub snapshot: Option<Snapshot>,
    /// Messages that may be sent at once.
    pub messages: Vec<Message>,
    /// Messages to send only after the persistent parts of this Ready are durable.
    pub messages_after_persist: Vec<Message>,
    /// Committed entries to apply, in order.
    pub committed_entries: Vec<Entry>,
    /// Read-index rounds confirmed by a majority since the last Ready.
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
    /// backup of this node (see ARCHITECTURE.md, "Restores").
    pub restored_from_backup: bool,
}

/// One Raft server's protocol state. The implementation lives in the
/// submodules; this is the whole public surface.
pub struct RaftNode {
    _private: (),
}

impl RaftNode {
    /// Starts a node from what its disk holds (an empty `DurableState` for a
    /// brand-new node). `rng_seed` seeds the node's own ChaCha stream for
    /// election timeouts. Fails only on an invalid config.
    pub fn new(config: Config, durable: DurableState, rng_seed: u64) -> Result<RaftNode, ConfigError> {
        let _ = (config, durable, rng_seed);
        todo!("raft: RaftNode::new")
    }

    /// Advances logical time by one tick (the driver calls it every tick interval of its local clock).
    pub fn tick(&mut self) {
        todo!("raft: tick")
    }

    /// Handles a message from a peer.
    pub fn step(&mut self, message: Message) {
        let _ = message;
        todo!("raft: step")
    }

    /// Appends a command to the leader's log; returns its index and term.
    pub fn propose(&mut self, command: Command) -> Result<(LogIndex, Term), ProposeError> {
        let _ = command;
        todo!("raft: propose")
    }

    /// Starts a read-index round (leadership confirmation by a majority).
    /// Its `ReadState` with the same `ctx` appears in a later `Ready` once confirmed.
    pub fn read_index(&mut self, ctx: u64) -> Result<(), ProposeError> {
        let _ = ctx;
        todo!("raft: read_index")
    }

    pub fn has_ready(&self) -> bool {
        todo!("raft: has_ready")
    }

    /// Takes the pending work. Call [`RaftNode::advance`] once it is done.
    pub fn ready(&mut self) -> Ready {
        todo!("raft: ready")
    }

    /// Acknowledges that the last Ready was persisted and its committed entries
    /// were applied up to `applied`.
    pub fn advance(&mut self, applied: LogIndex) {
        let _ = applied;
        todo!("raft: advance")
    }

    /// Compacts the in-memory log up to `index`: `state` is the lock state
    /// machine as of `index` (already applied). Returns the snapshot, which the
    /// driver persists atomically with the truncation of its durable log.
    pub fn compact(&mut self, index: LogIndex, state: LockState) -> Snapshot {
        let _ = (index, state);
        todo!("raft: compact")
    }

    pub fn soft_state(&self) -> SoftState {
        todo!("raft: soft_state")
    }

    pub fn hard_state(&self) -> HardState {
        todo!("raft: hard_state")
    }

    pub fn id(&self) -> NodeId {
        todo!("raft: id")
    }
}
