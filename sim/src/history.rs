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
use crate::faults::{ChurnEvent, Fault, JobEnd, Overtake, StallPoint};
use std::collections::BTreeMap;
use std::fmt;

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
    /// The leader turned an acquire away: the key's wait queue (or the table
    /// of waiting keys) was full. Its `Unavailable` follows; `answered`
    /// gives a request turned away its deadline afresh from here.
    TurnedAway {
        node: NodeId,
        key: Key,
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
        /// Why: its retries ran out, or it walked away by choice.
        #[serde(default)]
        why: GiveUp,
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

    // ---- the resource's restores (after the stalls, for the same reason) ----
    /// The operator restored the resource from its backup taken at
    /// `backup_at_us` (`restore` counts the resource's restores from 1):
    /// every write it accepted since is gone, highest tokens included.
    ResourceRestored {
        restore: u64,
        backup_at_us: u64,
    },
    /// The restored resource asked server `to` for its floor (read `read`).
    FloorAsked {
        restore: u64,
        read: u64,
        to: NodeId,
    },
    /// The restored resource raised its floors from the read `read` that
    /// `from` answered, and durably: it serves writes again. `held` are the
    /// keys held at the read with their tokens.
    FloorRaised {
        restore: u64,
        read: u64,
        from: NodeId,
        token_last: Token,
        held: Vec<(Key, Token)>,
    },

    // ---- a planned stall told by what it waits for (last, for the same reason) ----
    /// A worker holding `key` under `token` stalls between its lease check
    /// and its write (or before a renewal, `before`) until another worker
    /// overtakes it there (`on`), then `after_ms` more, at most `ms_max`
    /// (`StallUntilOvertaken`); a `Resumed` ends it. The holder then writes
    /// on `path` and ends its job as `end` says.
    StalledUntilOvertaken {
        client: ClientId,
        key: Key,
        token: Token,
        on: Overtake,
        after_ms: u64,
        ms_max: u64,
        before: StallPoint,
        #[serde(default)]
        path: Option<WritePath>,
        #[serde(default)]
        end: JobEnd,
    },
    /// A worker answered `Granted` for `request` stalls `ms` before reading
    /// the answer (`StallOnGrant`); a `Resumed` ends it.
    StalledOnGrant {
        client: ClientId,
        request: RequestId,
        ms: u64,
    },

    // ---- a planned loss of the resource's answer (last, for the same reason) ----
    /// The resource's answer to `client`'s write `request` was lost on its
    /// way back (`LoseWriteAnswer`); the worker sends it again.
    WriteAnswerLost {
        client: ClientId,
        request: RequestId,
    },

    // ---- the work the servers did (last, for the same reason) ----
    /// The servers' work in each stretch of `every_us` from the heal on
    /// (the last stretch may be shorter): Raft messages sent, `Ready` rounds
    /// handled and disk syncs. Recorded as the liveness phase ends
    /// (`work-budget`); counting does not wake the supervisor, so it
    /// moves no schedule.
    Work {
        every_us: u64,
        messages: Vec<u64>,
        ready_rounds: Vec<u64>,
        syncs: Vec<u64>,
    },

    // ---- storage, appended (an event's index is in every trace hash) ----
    /// A server's fsync left its disk holding a snapshot up to `index`
    /// durably: whatever it starts from later (a restart, or a backup taken
    /// from now on) applies only entries above it. The checker forgets the
    /// entries no server can apply again (`checker/state.rs`).
    SnapshotDurable {
        node: NodeId,
        index: LogIndex,
    },
}

/// Why a client gave up on a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GiveUp {
    /// Its retries ran out without a final answer: the service did not answer.
    #[default]
    Retries,
    /// It walked away by choice before the answer (a `Cancel`, or its
    /// connection dropped): the workload's abandoned acquires.
    WalkedAway,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the history, from 0.
    pub seq: u64,
    pub at_us: u64,
    pub kind: EventKind,
}

/// What sees every event as it is recorded: the run's judge, when the
/// history does not keep the events for a reader at the end.
pub trait Tap: Send {
    fn observe(&mut self, event: &Event);
}

/// Who reads the history while the run goes on (the reactive families
/// that strike on what they see, and a stalled worker waiting to be
/// overtaken). Each reader has a position; the history keeps the events
/// its readers have yet to read, and no others unless it keeps them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reader {
    RenewStrikes,
    LateRenewals,
    GrantStrikes,
    FenceStrikes,
    Stall(ClientId),
}

/// The ordered history of one run.
///
/// A run that is replayed, traced, drawn or shrunk keeps every event
/// ([`History::new`]). A hunt's run keeps none ([`History::streamed`]):
/// each event goes to its [`Tap`] (the checker, the coverage probes, the
/// trace hash) as it is recorded, and stays only until every reader that
/// follows the run has read it, so a run's memory does not grow with its
/// length. Both see the same events in the same order.
pub struct History {
    /// The events from `first_seq` on.
    events: Vec<Event>,
    first_seq: u64,
    keep_all: bool,
    readers: BTreeMap<Reader, u64>,
    tap: Option<Box<dyn Tap>>,
}

impl Default for History {
    /// A history that keeps every event, as [`History::new`].
    fn default() -> History {
        History { events: Vec::new(), first_seq: 0, keep_all: true, readers: BTreeMap::new(), tap: None }
    }
}

impl Clone for History {
    /// A copy of the events; the tap stays with the run.
    fn clone(&self) -> History {
        History {
            events: self.events.clone(),
            first_seq: self.first_seq,
            keep_all: self.keep_all,
            readers: self.readers.clone(),
            tap: None,
        }
    }
}

impl fmt::Debug for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("History")
            .field("first_seq", &self.first_seq)
            .field("kept", &self.events.len())
            .field("keep_all", &self.keep_all)
            .field("readers", &self.readers)
            .finish()
    }
}

impl History {
    /// A history that keeps every event.
    pub fn new() -> History {
        History::default()
    }

    /// This history, also handing each event to `tap` as it is recorded.
    pub fn tapped(mut self, tap: Box<dyn Tap>) -> History {
        self.tap = Some(tap);
        self
    }

    /// A history that hands each event to `tap` and keeps only what a reader has yet to read.
    pub fn streamed(tap: Box<dyn Tap>) -> History {
        History { keep_all: false, tap: Some(tap), ..History::new() }
    }

    /// Appends an event, tells it to `tracing` (`tell`) and to the tap.
    pub fn record(&mut self, at_us: u64, kind: EventKind) {
        let event = Event { seq: self.len(), at_us, kind };
        tell(&event);
        if let Some(tap) = &mut self.tap {
            tap.observe(&event);
        }
        if self.keep_all || !self.readers.is_empty() {
            self.events.push(event);
        } else {
            self.first_seq += 1;
        }
    }

    /// Whether every event is kept (a replay's history) rather than streamed to a tap.
    pub fn keeps_all(&self) -> bool {
        self.keep_all
    }

    /// How many events were recorded.
    pub fn len(&self) -> u64 {
        self.first_seq + self.events.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many events are held now (a streamed history holds those its readers have yet to read).
    pub fn kept(&self) -> usize {
        self.events.len()
    }

    /// The events kept: every event of a history that keeps them all.
    pub fn events(&self) -> &[Event] {
        assert!(self.keep_all, "a streamed history keeps only what its readers have yet to read: run the seed with `run_seed` to keep its events");
        &self.events
    }

    /// `reader` follows the run from the next event on (again, if it did).
    pub fn follow(&mut self, reader: Reader) {
        self.readers.insert(reader, self.len());
    }

    /// `reader` stops following the run.
    pub fn unfollow(&mut self, reader: Reader) {
        self.readers.remove(&reader);
        self.forget_read();
    }

    /// What `pick` takes from each event `reader` has not read yet, oldest first.
    pub fn read<T>(&mut self, reader: Reader, pick: impl Fn(&Event) -> Option<T>) -> Vec<T> {
        let end = self.len();
        let from = self.readers.insert(reader, end).unwrap_or_else(|| panic!("{reader:?} reads without following"));
        let skip = (from - self.first_seq) as usize;
        let picked = self.events[skip..].iter().filter_map(pick).collect();
        self.forget_read();
        picked
    }

    /// Drops the events every reader has read, unless the history keeps them all.
    fn forget_read(&mut self) {
        if self.keep_all {
            return;
        }
        let low = self.readers.values().copied().min().unwrap_or(self.len());
        let drop = (low - self.first_seq) as usize;
        if drop > 0 {
            self.events.drain(..drop);
            self.first_seq = low;
        }
    }

    /// The key of every request that names one, by client and request id:
    /// what a reply, an answer or a give-up is about.
    pub fn requests_keys(&self) -> BTreeMap<(ClientId, RequestId), Key> {
        let mut keys = BTreeMap::new();
        for event in self.events() {
            if let EventKind::Requested { client, request, body, .. } = &event.kind {
                if let Some(key) = request_key(body) {
                    keys.insert((*client, *request), key.clone());
                }
            }
        }
        keys
    }
}

fn request_key(body: &ClientRequest) -> Option<&Key> {
    match body {
        ClientRequest::Acquire { key, .. }
        | ClientRequest::Renew { key, .. }
        | ClientRequest::Release { key, .. }
        | ClientRequest::Revoke { key, .. } => Some(key),
        ClientRequest::Cancel => None,
    }
}

fn actor(actor: Actor) -> String {
    actor.to_string()
}

/// Tells a recorded event to `tracing`: target `fencesim::history`, level
/// INFO, inside a `node{name=…}` span of the actor it is about, with its
/// simulated time and the term, key and token where they apply. The message
/// is the trace line's text. With no subscriber (a hunt) this is one check.
fn tell(event: &Event) {
    if !tracing::enabled!(target: "fencesim::history", tracing::Level::INFO) {
        return;
    }
    let (who, what) = event.kind.describe();
    let span = tracing::info_span!(target: "fencesim::history", "node", name = %who);
    let _entered = span.enter();
    tracing::info!(
        target: "fencesim::history",
        seq = event.seq,
        at_us = event.at_us,
        actor = %who,
        term = event.kind.term().map(|term| term.0),
        key = event.kind.key().map(Key::as_str),
        token = event.kind.token().map(tracing::field::display),
        "{what}"
    );
}

impl EventKind {
    /// The term the event is about, where one applies.
    pub fn term(&self) -> Option<Term> {
        use EventKind as K;
        match self {
            K::Role { term, .. } | K::Applied { term, .. } | K::AppliedNoop { term, .. } => Some(*term),
            K::Churn(
                ChurnEvent::Struck { term, .. }
                | ChurnEvent::AckStruck { term, .. }
                | ChurnEvent::RenewStruck { term, .. }
                | ChurnEvent::RenewalHeld { term, .. }
                | ChurnEvent::GrantStruck { term, .. }
                | ChurnEvent::VoteSplit { term, .. }
                | ChurnEvent::VoteStruck { term, .. }
                | ChurnEvent::AmnesiaArmed { term, .. }
                | ChurnEvent::AmnesiaStruck { term, .. }
                | ChurnEvent::Figure8Stranded { term, .. }
                | ChurnEvent::Figure8SuccessorUnplugged { term, .. }
                | ChurnEvent::Figure8Struck { term, .. },
            ) => Some(*term),
            _ => None,
        }
    }

    /// The lock key the event is about, where it names one. A reply names
    /// none: its request does (see `requests_keys`).
    pub fn key(&self) -> Option<&Key> {
        use EventKind as K;
        match self {
            K::Applied { command, .. } => Some(command.key()),
            K::Requested { body, .. } => request_key(body),
            K::ExpireProposed { key, .. }
            | K::GhostReleaseProposed { key, .. }
            | K::TurnedAway { key, .. }
            | K::BeliefStart { key, .. }
            | K::BeliefEnd { key, .. }
            | K::WriteSent { key, .. }
            | K::WriteDone { key, .. }
            | K::StalledUntilOvertaken { key, .. } => Some(key),
            _ => None,
        }
    }

    /// The fencing token the event is about, where one applies.
    pub fn token(&self) -> Option<Token> {
        use EventKind as K;
        match self {
            K::Applied { result: ApplyResult::Granted { token }, .. } => Some(*token),
            K::Applied { command: Command::Release { token, .. } | Command::Expire { token, .. }, .. } => Some(*token),
            K::Replied { reply: ClientReply::Granted { token, .. }, .. }
            | K::Answered { reply: ClientReply::Granted { token, .. }, .. } => Some(*token),
            K::Requested {
                body:
                    ClientRequest::Renew { token, .. }
                    | ClientRequest::Release { token, .. }
                    | ClientRequest::Revoke { token, .. },
                ..
            } => Some(*token),
            K::FloorRaised { token_last, .. } => Some(*token_last),
            K::ExpireProposed { token, .. }
            | K::GhostReleaseProposed { token, .. }
            | K::BeliefStart { token, .. }
            | K::BeliefEnd { token, .. }
            | K::WriteSent { token, .. }
            | K::WriteDone { token, .. }
            | K::StalledUntilOvertaken { token, .. } => Some(*token),
            _ => None,
        }
    }

    /// Every actor the event involves: the one it is about first, then the
    /// other side (the client a reply goes to, the server a request goes to,
    /// the writer of a write, whoever a fault names).
    pub fn actors(&self) -> Vec<Actor> {
        use EventKind as K;
        match self {
            K::Healed | K::ClusterRestored { .. } | K::Work { .. } => Vec::new(),
            K::Fault { fault } => fault.named(),
            K::Churn(ChurnEvent::Struck { node, .. } | ChurnEvent::PluggedBack { node }) => vec![Actor::Server(*node)],
            K::Churn(ChurnEvent::AckStruck { node, to, .. }) => vec![Actor::Server(*node), Actor::Server(*to)],
            K::Churn(
                ChurnEvent::RenewStruck { node, client, .. }
                | ChurnEvent::RenewalHeld { node, client, .. }
                | ChurnEvent::GrantStruck { node, client, .. },
            ) => {
                vec![Actor::Server(*node), Actor::Client(*client)]
            }
            K::Churn(
                ChurnEvent::VoteSplit { candidate, voter, .. } | ChurnEvent::VoteStruck { candidate, voter, .. },
            ) => {
                vec![Actor::Server(*candidate), Actor::Server(*voter)]
            }
            K::Churn(ChurnEvent::FenceStruck { .. }) => vec![Actor::Resource],
            K::Churn(ChurnEvent::AmnesiaArmed { leader, cut, .. }) => {
                std::iter::once(leader).chain(cut).map(|node| Actor::Server(*node)).collect()
            }
            K::Churn(ChurnEvent::AmnesiaStruck { node, leader, .. }) => {
                vec![Actor::Server(*node), Actor::Server(*leader)]
            }
            K::Churn(ChurnEvent::Reconnected { addrs }) => addrs.iter().copied().map(Actor::from).collect(),
            K::Churn(ChurnEvent::Figure8Stranded { leader, .. }) => vec![Actor::Server(*leader)],
            K::Churn(ChurnEvent::Figure8SuccessorUnplugged { successor, leader, .. }) => {
                vec![Actor::Server(*successor), Actor::Server(*leader)]
            }
            K::Churn(ChurnEvent::Figure8Struck { leader, successor, .. }) => {
                vec![Actor::Server(*leader), Actor::Server(*successor)]
            }
            K::Crashed { actor } | K::Restarted { actor } | K::Paused { actor } | K::Resumed { actor } => vec![*actor],
            K::Clock { actor, .. } => vec![*actor],
            K::NodeRestored { node, .. }
            | K::Role { node, .. }
            | K::Applied { node, .. }
            | K::AppliedNoop { node, .. }
            | K::SnapshotInstalled { node, .. }
            | K::SnapshotDurable { node, .. }
            | K::ExpireProposed { node, .. }
            | K::GhostReleaseProposed { node, .. } => vec![Actor::Server(*node)],
            K::Replied { node, client, .. } => vec![Actor::Server(*node), Actor::Client(*client)],
            K::TurnedAway { node, holder, .. } => vec![Actor::Server(*node), Actor::Client(holder.client)],
            K::Requested { client, to: node, .. } | K::Answered { client, from: node, .. } => {
                vec![Actor::Client(*client), Actor::Server(*node)]
            }
            K::BeliefStart { client, .. }
            | K::BeliefEnd { client, .. }
            | K::GaveUp { client, .. }
            | K::Stalled { client, .. }
            | K::StalledUntilOvertaken { client, .. }
            | K::StalledOnGrant { client, .. } => vec![Actor::Client(*client)],
            K::WriteSent { client, .. } => vec![Actor::Client(*client), Actor::Resource],
            K::WriteDone { client, .. } | K::WriteAnswerLost { client, .. } => {
                vec![Actor::Resource, Actor::Client(*client)]
            }
            K::ResourceRestored { .. } => vec![Actor::Resource],
            K::FloorAsked { to: node, .. } | K::FloorRaised { from: node, .. } => {
                vec![Actor::Resource, Actor::Server(*node)]
            }
        }
    }

    /// Who the event is about and what it says: `("n2", "Leader in t7")`,
    /// as the trace prints it.
    pub fn describe(&self) -> (String, String) {
        use EventKind as K;
        match self {
            K::Healed => ("sim".into(), "healed: faults off, liveness phase begins".into()),
            K::Fault { fault } => ("sim".into(), format!("fault: {fault}")),
            K::Churn(event) => ("sim".into(), format!("fault: {event}")),
            K::Crashed { actor: a } => (actor(*a), "crashed".into()),
            K::Restarted { actor: a } => (actor(*a), "restarted".into()),
            K::Paused { actor: a } => (actor(*a), "paused".into()),
            K::Stalled { client, ms } => {
                (client.to_string(), format!("stalls {ms}ms between its lease check and its write"))
            }
            K::StalledUntilOvertaken { client, key, token, on, after_ms, ms_max, before, path, end } => {
                let until = match on {
                    Overtake::Grant => format!("another worker is granted {key}"),
                    Overtake::Write => format!("a write on {key} under a token above {token} is accepted"),
                };
                let more = match after_ms {
                    0 => String::new(),
                    ms => format!(", then {ms}ms more"),
                };
                let at = match before {
                    StallPoint::Write => "between its lease check and its write",
                    StallPoint::Renew => "before its renewal",
                };
                let ends = match end {
                    JobEnd::Drawn => "",
                    JobEnd::Release => ", then ends its job with a Release",
                    JobEnd::Revoke => ", then ends its job with a Revoke",
                };
                let writes = path.map(|path| format!(", then writes via {path:?}")).unwrap_or_default();
                (client.to_string(), format!("stalls {at} until {until}{more} (at most {ms_max}ms){writes}{ends}"))
            }
            K::StalledOnGrant { client, request, ms } => {
                (client.to_string(), format!("stalls {ms}ms before reading the Granted answer to {request}"))
            }
            K::Resumed { actor: a } => (actor(*a), "resumed".into()),
            K::NodeRestored { node, backup_at_us } => {
                (node.to_string(), format!("restored from its backup of {}ms", backup_at_us / 1_000))
            }
            K::ClusterRestored { epoch, backup_at_us, token_floor } => (
                "sim".into(),
                format!(
                    "cluster restored (epoch {epoch}) from the backup of {}ms, token floor {token_floor}",
                    backup_at_us / 1_000
                ),
            ),
            K::Clock { actor: a, local_us, rate_ppm, within_bound } => (
                actor(*a),
                format!(
                    "clock {}.{:03}ms rate {rate_ppm:+}ppm{}",
                    local_us / 1_000,
                    local_us % 1_000,
                    if *within_bound { "" } else { " (beyond bound)" }
                ),
            ),
            K::Role { node, role, term, leader } => (
                node.to_string(),
                format!("{role:?} in {term}{}", leader.map(|l| format!(", leader {l}")).unwrap_or_default()),
            ),
            K::Applied { node, index, term, command, result } => {
                (node.to_string(), format!("applied {index}/{term} {command:?} -> {result:?}"))
            }
            K::AppliedNoop { node, index, term } => (node.to_string(), format!("applied {index}/{term} no-op")),
            K::SnapshotInstalled { node, index, token_last, .. } => {
                (node.to_string(), format!("installed snapshot at {index}, token_last {token_last}"))
            }
            K::SnapshotDurable { node, index } => (node.to_string(), format!("snapshot at {index} durable")),
            K::Replied { node, client, request, reply } => {
                (node.to_string(), format!("reply to {client} {request}: {reply:?}"))
            }
            K::ExpireProposed { node, key, token } => (node.to_string(), format!("proposes Expire({key}, {token})")),
            K::GhostReleaseProposed { node, key, token, holder } => {
                (node.to_string(), format!("proposes ghost Release({key}, {token}) of {holder}"))
            }
            K::TurnedAway { node, key, holder } => (
                node.to_string(),
                format!("turns {} {} away: the wait queue of {key} is full", holder.client, holder.request),
            ),
            K::Requested { client, request, to, body } => (client.to_string(), format!("{request} to {to}: {body:?}")),
            K::Answered { client, request, from, reply } => {
                (client.to_string(), format!("{request} answered by {from}: {reply:?}"))
            }
            K::BeliefStart { client, key, token, until_local_us } => (
                client.to_string(),
                format!("believes it holds {key} with {token} until local {}ms", until_local_us / 1_000),
            ),
            K::BeliefEnd { client, key, token } => (client.to_string(), format!("no longer believes in {key} {token}")),
            K::GaveUp { client, request, why: GiveUp::Retries } => {
                (client.to_string(), format!("gives up on {request}"))
            }
            K::GaveUp { client, request, why: GiveUp::WalkedAway } => {
                (client.to_string(), format!("walks away from {request}"))
            }
            K::WriteSent { client, request, key, token, path } => {
                (client.to_string(), format!("writes {key} with {token} via {path:?} ({request})"))
            }
            K::WriteDone { client, request, key, token, path, verdict } => {
                ("db".into(), format!("{verdict:?}: {client} {request} {key} {token} via {path:?}"))
            }
            K::Work { every_us, messages, ready_rounds, syncs } => (
                "sim".into(),
                format!(
                    "servers' work per {}ms after the heal: messages {messages:?}, Ready rounds {ready_rounds:?}, \
                     disk syncs {syncs:?}",
                    every_us / 1_000
                ),
            ),
            K::WriteAnswerLost { client, request } => {
                ("db".into(), format!("the answer to {client} {request} is lost on its way back"))
            }
            K::ResourceRestored { restore, backup_at_us } => {
                ("db".into(), format!("restored (restore {restore}) from its backup of {}ms", backup_at_us / 1_000))
            }
            K::FloorAsked { restore, read, to } => {
                ("db".into(), format!("asks {to} for its floor (restore {restore}, read {read})"))
            }
            K::FloorRaised { restore, read, from, token_last, held } => {
                let held: Vec<String> = held.iter().map(|(key, token)| format!("{key} {token}")).collect();
                let held = if held.is_empty() { "none".to_string() } else { held.join(", ") };
                (
                    "db".into(),
                    format!(
                        "floor raised (restore {restore}, read {read} from {from}): token_last {token_last}, held: {held}"
                    ),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    struct Seen(Arc<Mutex<Vec<u64>>>);

    impl Tap for Seen {
        fn observe(&mut self, event: &Event) {
            self.0.lock().unwrap().push(event.seq);
        }
    }

    fn healed(history: &mut History, at_us: u64) {
        history.record(at_us, EventKind::Healed);
    }

    #[test]
    fn a_streamed_history_keeps_only_what_its_readers_have_yet_to_read() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut history = History::streamed(Box::new(Seen(seen.clone())));
        healed(&mut history, 1);
        assert_eq!((history.len(), history.kept()), (1, 0), "no reader: nothing is kept");
        history.follow(Reader::GrantStrikes);
        healed(&mut history, 2);
        history.follow(Reader::Stall(ClientId(1)));
        healed(&mut history, 3);
        assert_eq!(history.kept(), 2);
        let at = |e: &Event| Some(e.at_us);
        assert_eq!(history.read(Reader::GrantStrikes, at), vec![2, 3]);
        assert_eq!(history.kept(), 1, "the stalled worker has yet to read the third event");
        assert_eq!(history.read(Reader::Stall(ClientId(1)), at), vec![3]);
        assert_eq!(history.kept(), 0);
        healed(&mut history, 4);
        history.unfollow(Reader::GrantStrikes);
        assert_eq!(history.read(Reader::Stall(ClientId(1)), at), vec![4]);
        history.unfollow(Reader::Stall(ClientId(1)));
        healed(&mut history, 5);
        assert_eq!((history.len(), history.kept()), (5, 0));
        assert_eq!(*seen.lock().unwrap(), vec![0, 1, 2, 3, 4], "the tap sees every event in order");
    }

    #[test]
    fn a_kept_history_keeps_every_event_whatever_its_readers_read() {
        let mut history = History::new();
        history.follow(Reader::RenewStrikes);
        for at_us in 0..4 {
            healed(&mut history, at_us);
        }
        assert_eq!(history.read(Reader::RenewStrikes, |e| Some(e.seq)), vec![0, 1, 2, 3]);
        history.unfollow(Reader::RenewStrikes);
        assert_eq!(history.events().len(), 4);
        assert_eq!(history.clone().events().len(), 4, "a copy has the events");
    }

    #[test]
    #[should_panic(expected = "reads without following")]
    fn a_reader_that_does_not_follow_cannot_read() {
        History::new().read(Reader::FenceStrikes, |e| Some(e.seq));
    }
}
