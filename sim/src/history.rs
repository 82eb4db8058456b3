//! The run's history: every event the checker needs, in the order it happened.
//!
//! The history is also the trace: `fencesim replay --trace` prints one line per
//! event and the trace hash is a hash of these events. Times are true
//! simulation time in microseconds (`at_us`), never a node's local clock,
//! except where a field says `local`.

use fencelock::raft::Role;
pub use fencelock::resource::{WritePath, WriteVerdict};
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ApplyResult, ClientId, Command, Holder, Key, LogIndex, NodeId, RequestId, Term, Token};
use serde::{Deserialize, Serialize};

pub use crate::actor::Actor;
use crate::faults::{ChurnEvent, Fault};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum EventKind {
    // ---- the run ----
    /// The safety phase ends: every fault is healed from here on.
    Healed,
    /// A fault from the schedule took effect.
    Fault {
        fault: Fault,
    },
    /// Leader churn struck a leader or brought a victim back (chosen at run
    /// time, so not in the schedule).
    Churn(ChurnEvent),

    // ---- processes and storage ----
    Crashed {
        actor: Actor,
    },
    Restarted {
        actor: Actor,
    },
    Paused {
        actor: Actor,
    },
    Resumed {
        actor: Actor,
    },
    /// One server restarted from a stale backup of its own disk, taken at `backup_at_us`.
    NodeRestored {
        node: NodeId,
        backup_at_us: u64,
    },
    /// The whole cluster restored from one backup (an operator's rollback). `epoch` counts restores from 1.
    ClusterRestored {
        epoch: u32,
        backup_at_us: u64,
        token_floor: Token,
    },

    // ---- clocks ----
    /// A local clock's mapping changed: from this true instant, local time is
    /// `local_us + (now_us - at_us) * (1 + rate_ppm / 1e6)`. `within_bound`
    /// says whether the drift respects the bound the protocol assumes.
    Clock {
        actor: Actor,
        local_us: u64,
        rate_ppm: i64,
        within_bound: bool,
    },

    // ---- raft ----
    Role {
        node: NodeId,
        role: Role,
        term: Term,
        leader: Option<NodeId>,
    },
    /// A node applied a committed command (no-ops are [`EventKind::AppliedNoop`]).
    Applied {
        node: NodeId,
        index: LogIndex,
        term: Term,
        command: Command,
        result: ApplyResult,
    },
    /// A node applied a committed no-op (the entry a new leader appends in its term).
    AppliedNoop {
        node: NodeId,
        index: LogIndex,
        term: Term,
    },
    /// A node's state machine was loaded from a snapshot covering up to
    /// `index` (one sent by the leader, or its own when it starts), with the
    /// locks it holds.
    SnapshotInstalled {
        node: NodeId,
        index: LogIndex,
        token_last: Token,
        locks: Vec<(Key, Token)>,
    },

    // ---- the lock service ----
    /// A server answered a client.
    Replied {
        node: NodeId,
        client: ClientId,
        request: RequestId,
        reply: ClientReply,
    },
    /// The leader proposed an Expire (its local clock said the lease ran out).
    ExpireProposed {
        node: NodeId,
        key: Key,
        token: Token,
    },
    /// The leader proposed a ghost-lock Release.
    GhostReleaseProposed {
        node: NodeId,
        key: Key,
        token: Token,
        holder: Holder,
    },

    // ---- clients ----
    Requested {
        client: ClientId,
        request: RequestId,
        to: NodeId,
        body: ClientRequest,
    },
    Answered {
        client: ClientId,
        request: RequestId,
        from: NodeId,
        reply: ClientReply,
    },
    /// The client believes it holds `key` with `token` until its local clock reads `until_local_us`.
    BeliefStart {
        client: ClientId,
        key: Key,
        token: Token,
        until_local_us: u64,
    },
    /// The client stopped believing early (released, or saw the lease was gone).
    BeliefEnd {
        client: ClientId,
        key: Key,
        token: Token,
    },
    /// The client gave up on a request without an answer (it will not retry it).
    GaveUp {
        client: ClientId,
        request: RequestId,
    },

    // ---- the protected resource ----
    WriteSent {
        client: ClientId,
        request: RequestId,
        key: Key,
        token: Token,
        path: WritePath,
    },
    WriteDone {
        client: ClientId,
        request: RequestId,
        key: Key,
        token: Token,
        path: WritePath,
        verdict: WriteVerdict,
    },

    // ---- the workers' own stalls (last: a new kind keeps the others' encoding, so their trace hashes) ----
    /// A worker stalls `ms` between its lease check and its write (model
    /// keys `stalls`, `stall_ms_max`); a `Resumed` ends it. Drawn by the
    /// worker at run time, so not in the fault schedule.
    Stalled {
        client: ClientId,
        ms: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the history, from 0.
    pub seq: u64,
    pub at_us: u64,
    pub kind: EventKind,
}

/// The ordered history of one run, with its running hash.
#[derive(Clone, Debug, Default)]
pub struct History {
    events: Vec<Event>,
}

impl History {
    pub fn new() -> History {
        History::default()
    }

    pub fn record(&mut self, at_us: u64, kind: EventKind) {
        let seq = self.events.len() as u64;
        self.events.push(Event { seq, at_us, kind });
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }
}
