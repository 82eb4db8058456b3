//! The lock service between clients and the replicated state machine (SPEC.md;
//! SCENARIOS.md 2–8), sans-IO: the driver passes in messages, client requests
//! and the node's *local* clock reading, and carries out [`Output`]s and the
//! Raft [`Ready`].
//!
//! A [`LockServer`] owns one [`RaftNode`] and the [`LockState`] it applies. The
//! rules, each in the submodule that owns it:
//! - `requests`: what a client request does (acquire as try-lock or bounded
//!   wait, renew, owner-safe release, cancel; followers redirect).
//! - `apply`: applying committed entries, the one decision whether a
//!   `Granted` may be sent, ghost-lock cleanup, compaction.
//! - `leases`: lease timers on the leader's local clock, confirmed expiry,
//!   confirmed renew, restarting every lease when a new leader takes office.
//! - `declines`: the answers that end an acquire without a lock (a
//!   try-lock's `Busy`, a wait's `TimedOut`), decided through the log so no
//!   leader grants a request another has declined.
//!
//! Architecture invariant: a lock only ends through a committed Expire or
//! Release; the local clock only decides *when the leader asks* for one.

mod apply;
mod declines;
mod floors;
mod leases;
mod requests;
#[cfg(test)]
mod tests;

use crate::command::{ApplyResult, Command, Decline};
use crate::lock::LockState;
use crate::probe::{Probe, ProbeSet, Probes};
use crate::raft::{Message, RaftNode, Ready, Role, Snapshot};
use crate::types::{ClientId, Holder, Key, LogIndex, NodeId, RequestId, Term, Token};
use crate::variant::Variant;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

pub use floors::FloorAnswer;

/// What a client asks a server. Carried with the client id and request id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientRequest {
    /// Try to acquire `key`; with `wait_ms > 0`, wait in a bounded queue at most that long.
    Acquire { key: Key, lease_ms: u64, wait_ms: u64 },
    /// Extend the lease of the current holder of `token`.
    Renew { key: Key, token: Token },
    /// Owner-safe release.
    Release { key: Key, token: Token },
    /// Revoke the lease of `token` now (`etcdctl lease revoke`): the leader
    /// proposes `Expire { key, token }` at once. Whoever holds the token may
    /// send it — the holder's cleanup or an operator's tool — and a retried or
    /// delayed revoke can arrive after the key was released and regranted:
    /// that is exactly the late Expire the token on Expire makes harmless.
    Revoke { key: Key, token: Token },
    /// The client gives up on an earlier request (same request id): if it was
    /// granted, the grant is a ghost and the leader releases it. Fire and
    /// forget: it gets no reply, and if it is lost the lease frees the lock.
    Cancel,
}

/// A server's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientReply {
    Granted {
        token: Token,
        lease_ms: u64,
    },
    /// The key is held; the holder's lease runs at most this much longer (leader's local clock).
    Busy {
        remaining_ms: u64,
    },
    Renewed {
        lease_ms: u64,
    },
    Released,
    /// The token is not the current holder's (renew or release of a lost lock).
    NotHeld,
    /// This server is not the leader; try the one named, if any.
    NotLeader {
        leader: Option<NodeId>,
    },
    /// The wait deadline passed before the key was free.
    TimedOut,
    /// The leader could not serve the request now (not yet confirmed, queue full); retry.
    Unavailable,
}

/// The service's knobs; checked once by [`LockServer::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceConfig {
    /// How often the driver calls [`LockServer::tick`], on the node's local clock.
    pub tick_ms: u64,
    /// Waiters per key; a full queue answers `Unavailable`.
    pub wait_queue_max: usize,
    pub variant: Variant,
}

impl ServiceConfig {
    /// The settings the simulation's servers run with.
    pub fn standard(variant: Variant) -> ServiceConfig {
        ServiceConfig { tick_ms: crate::raft::TICK_MS_STANDARD, wait_queue_max: WAIT_QUEUE_MAX_STANDARD, variant }
    }

    fn assert_valid(&self) {
        assert!(self.tick_ms > 0, "service config `tick_ms` must be positive");
        assert!(self.wait_queue_max > 0, "service config `wait_queue_max` must be positive");
        assert!(self.wait_queue_max <= WAITERS_PER_KEY_MAX, "service config `wait_queue_max` too large");
    }
}

/// What the driver must carry out besides the Raft [`Ready`]; drained by [`LockServer::take_outputs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Send `reply` to `client` (for its request `request`).
    Reply {
        client: ClientId,
        request: RequestId,
        reply: ClientReply,
    },
    /// Every applied command, for the history.
    Applied {
        index: LogIndex,
        term: Term,
        command: Command,
        result: ApplyResult,
    },
    /// Every applied no-op (the entry a new leader appends), for the history.
    AppliedNoop {
        index: LogIndex,
        term: Term,
    },
    /// The log was compacted into this snapshot; the driver persists it.
    Compacted(Snapshot),
    ExpireProposed {
        key: Key,
        token: Token,
    },
    GhostReleaseProposed {
        key: Key,
        token: Token,
        holder: Holder,
    },
    /// An acquire turned away because its key's wait queue (or the table of
    /// waiting keys) was full, for the history: its `Unavailable` is
    /// backpressure, and how long a client turned away waits is no bound the
    /// service promises. Comes just before that `Reply`.
    TurnedAway {
        key: Key,
        holder: Holder,
    },
    /// Send `answer` to the resource's floor read `read`.
    FloorAnswer {
        read: u64,
        answer: FloorAnswer,
    },
}

/// Client proposals awaiting apply on this node; beyond it, requests answer `Unavailable`.
pub const PENDING_MAX: usize = 1_024;
/// Waiters queued per key in the standard configuration.
pub const WAIT_QUEUE_MAX_STANDARD: usize = 8;
/// Hard ceiling for `wait_queue_max`.
pub const WAITERS_PER_KEY_MAX: usize = 1_024;
/// Keys that may have waiters at once.
pub const WAITING_KEYS_MAX: usize = 1_024;
/// Read-index rounds in flight (renewals plus expiry rounds).
pub const READS_MAX: usize = 1_024;
/// Outputs the driver may leave undrained; more means the driver forgot `take_outputs`.
pub const OUTPUTS_MAX: usize = 65_536;
/// The longest wait a client may ask for; longer waits are cut to it.
pub const WAIT_MS_MAX: u64 = 600_000;
/// A leadership confirmation for an expiry that has not come back after this
/// many ticks (about an election timeout) is asked for again.
pub const CONFIRM_RETRY_TICKS: u64 = 30;

/// A client request this node proposed and will answer once it applies.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pending {
    /// The term the proposal was made in: only an entry of that term at that index is ours.
    term: Term,
    client: ClientId,
    request: RequestId,
    kind: PendingKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PendingKind {
    /// `lease_ms` is the lease the Grant asks for.
    Acquire {
        key: Key,
        lease_ms: u64,
    },
    Release {
        key: Key,
    },
    /// A try-lock's `Busy` or a wait's `TimedOut` (`declines`).
    Decline {
        key: Key,
        reason: Decline,
    },
}

/// A client waiting in a key's FIFO queue for the key to be free.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Waiter {
    holder: Holder,
    lease_ms: u64,
    deadline_local_ms: u64,
}

/// The leader's lease timer for one held lock.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Lease {
    token: Token,
    lease_ms: u64,
    deadline_local_ms: u64,
    expiry: Expiry,
}

/// Where the expiry of one lease stands; at most one Expire is in flight per token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expiry {
    Idle,
    /// Waiting for the read-index round `ctx` (asked at `since_local_ms`) to confirm leadership.
    Confirming {
        ctx: u64,
        since_local_ms: u64,
    },
    Proposed,
}

/// Why this node asked Raft to confirm its leadership.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ReadPurpose {
    /// Every lease in `Expiry::Confirming` with this round's ctx.
    Expiry,
    Renew {
        client: ClientId,
        request: RequestId,
        key: Key,
        token: Token,
    },
    /// Answer `Granted` for this applied Grant once leadership is confirmed
    /// by a round asked at `asked_local_ms`.
    Grant {
        client: ClientId,
        request: RequestId,
        key: Key,
        token: Token,
        asked_local_ms: u64,
    },
    /// Answer the resource's floor read `read` (`floors`).
    Floor {
        read: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ReadRound {
    term: Term,
    purpose: ReadPurpose,
}

/// This node's current term as leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Office {
    term: Term,
    /// Whether an entry of this term has been applied, so the local state holds
    /// every committed command; until then the leader answers `Unavailable`.
    serving: bool,
}

/// One lock-service node: its Raft node, its copy of the lock state and the
/// service's volatile tables (all bounded, all lost on a crash by design).
pub struct LockServer {
    config: ServiceConfig,
    raft: RaftNode,
    state: LockState,
    outputs: Vec<Output>,
    /// The role and term last seen, to notice role changes.
    seen: (Role, Term),
    office: Option<Office>,
    applied_index: LogIndex,
    pending: BTreeMap<LogIndex, Pending>,
    /// Holders whose Grant is in flight and whose client has gone: release right after apply.
    ghosts: BTreeSet<Holder>,
    waiters: BTreeMap<Key, VecDeque<Waiter>>,
    /// The last local clock reading the waiters' deadlines were compared
    /// with; a later reading below it is a backward step (`follow_clock_back`).
    now_local_ms_last: u64,
    leases: BTreeMap<Key, Lease>,
    reads: BTreeMap<u64, ReadRound>,
    read_ctx_last: u64,
    /// Confirmed floor reads waiting for the log to apply; at most `READS_MAX`.
    floors_parked: Vec<floors::ParkedFloor>,
    /// When this node applied the Grant of each held lock (local ms); only the
    /// `NoLeaseRestartOnNewLeader` variant uses it.
    applied_at_ms: BTreeMap<Key, (Token, u64)>,
    /// Coverage probes (`crate::probe`): off unless the driver turns them on.
    probes: Probes,
}

impl LockServer {
    /// `state` is the state of the snapshot the node starts from (or `LockState::new(floor)`).
    pub fn new(config: ServiceConfig, raft: RaftNode, state: LockState) -> LockServer {
        config.assert_valid();
        let soft = raft.soft_state();
        let mut server = LockServer {
            config,
            raft,
            state,
            outputs: Vec::new(),
            seen: (Role::Follower, soft.term),
            office: None,
            applied_index: LogIndex(0),
            pending: BTreeMap::new(),
            ghosts: BTreeSet::new(),
            waiters: BTreeMap::new(),
            now_local_ms_last: 0,
            leases: BTreeMap::new(),
            reads: BTreeMap::new(),
            read_ctx_last: 0,
            floors_parked: Vec::new(),
            applied_at_ms: BTreeMap::new(),
            probes: Probes::default(),
        };
        server.applied_index = server.raft.applied_index();
        for (key, lock) in server.state.locks() {
            server.applied_at_ms.insert(key.clone(), (lock.token, 0));
        }
        server
    }

    pub fn raft(&self) -> &RaftNode {
        &self.raft
    }

    pub fn state(&self) -> &LockState {
        &self.state
    }

    pub fn config(&self) -> &ServiceConfig {
        &self.config
    }

    /// Turns the coverage probes of the service and its Raft node on
    /// (`crate::probe`); they never change a decision.
    pub fn probes_on(&mut self) {
        self.probes.turn_on();
        self.raft.probes_on();
    }

    /// The probes the service and its Raft node hit since the last take.
    pub fn take_probes(&mut self) -> ProbeSet {
        self.probes.take().union(self.raft.take_probes())
    }

    fn probe(&mut self, probe: Probe) {
        self.probes.hit(probe);
    }

    /// The highest log index applied to [`LockServer::state`].
    pub fn applied_index(&self) -> LogIndex {
        self.applied_index
    }

    /// Whether this node is leader and has applied an entry of its own term.
    pub fn is_serving_leader(&self) -> bool {
        self.office.is_some_and(|office| office.serving)
    }

    /// The leader's local deadline for the lease on `key`, if it tracks one.
    pub fn lease_deadline_local_ms(&self, key: &Key) -> Option<u64> {
        self.leases.get(key).map(|lease| lease.deadline_local_ms)
    }

    /// Called every `tick_ms` of the node's local clock: ticks Raft, times out
    /// waiters and asks for confirmation of leases past their deadline.
    pub fn tick(&mut self, now_local_ms: u64) {
        self.raft.tick();
        self.observe_role(now_local_ms);
        self.time_out_waiters(now_local_ms);
        self.check_lease_deadlines(now_local_ms);
    }

    /// How many of the ticks at local instants `first_tick_local_ms`,
    /// `first_tick_local_ms + tick_ms`, ... would do nothing but advance
    /// timers: no message, no proposal, no answer, no probe. A driver may
    /// sleep through them and make them up when it next wakes, calling
    /// [`LockServer::tick`] for each at its own instant, in order (or
    /// [`LockServer::tick_idle`] once for them all), before
    /// any other input ([`RaftNode::idle_ticks`]). An idle cluster's nodes
    /// then wake once per heartbeat or election timeout rather than every
    /// tick.
    pub fn idle_ticks(&self, first_tick_local_ms: u64) -> u32 {
        let raft = self.raft.idle_ticks();
        // A reading below the last one is a backward step the tick acts on.
        if first_tick_local_ms < self.now_local_ms_last {
            return 0;
        }
        let Some(due_ms) = self.next_timer_local_ms() else {
            return raft;
        };
        // Tick i (from 0) is idle while first + i * tick_ms < due_ms.
        let ticks = due_ms.saturating_sub(first_tick_local_ms).div_ceil(self.config.tick_ms);
        raft.min(u32::try_from(ticks).unwrap_or(u32::MAX))
    }

    /// Makes the `ticks` ticks at local instants `first_tick_local_ms`,
    /// `first_tick_local_ms + tick_ms`, ... at once, when
    /// [`LockServer::idle_ticks`] counts them idle: what that many
    /// [`LockServer::tick`]s at those instants do, which is to advance the
    /// timers and the last clock reading, nothing else (no waiter times
    /// out, no lease is due, and the role they observe is the one the last
    /// step or round left). Panics if fewer are idle. A driver that slept
    /// through idle ticks makes them up with this in one call.
    pub fn tick_idle(&mut self, first_tick_local_ms: u64, ticks: u32) {
        if ticks == 0 {
            return;
        }
        let idle = self.idle_ticks(first_tick_local_ms);
        assert!(ticks <= idle, "{ticks} idle ticks asked from {first_tick_local_ms} ms, {idle} idle");
        self.observe_role(first_tick_local_ms);
        self.raft.tick_idle(ticks);
        // Never a step back: `idle_ticks` counts none from before the last reading.
        self.now_local_ms_last = first_tick_local_ms + u64::from(ticks - 1) * self.config.tick_ms;
    }

    /// The earliest local instant at which a tick times a waiter out or asks
    /// to confirm a lease past its deadline (`None`: no tick ever will
    /// without another input first).
    fn next_timer_local_ms(&self) -> Option<u64> {
        let waiters = (self.config.variant != Variant::WaitersNeverTimeOut)
            .then(|| self.waiters.values().flatten().map(|waiter| waiter.deadline_local_ms).min())
            .flatten();
        let serving = self.office.is_some_and(|office| office.serving);
        let retry_ms = CONFIRM_RETRY_TICKS.saturating_mul(self.config.tick_ms);
        let leases = serving
            .then(|| {
                self.leases
                    .values()
                    .filter_map(|lease| match lease.expiry {
                        Expiry::Idle => Some(lease.deadline_local_ms),
                        Expiry::Confirming { since_local_ms, .. } => {
                            Some(lease.deadline_local_ms.max(since_local_ms.saturating_add(retry_ms)))
                        }
                        Expiry::Proposed => None,
                    })
                    .min()
            })
            .flatten();
        waiters.into_iter().chain(leases).min()
    }

    /// Runs the Raft node's election timer out now ([`RaftNode::campaign`]).
    /// The service sees the new role as it applies the next Ready, which a
    /// campaign always makes (its (pre-)vote requests, or a lone node's
    /// first entry as leader).
    pub fn campaign(&mut self) {
        self.raft.campaign();
    }

    pub fn step(&mut self, message: Message, now_local_ms: u64) {
        self.raft.step(message);
        self.observe_role(now_local_ms);
    }

    pub fn has_ready(&self) -> bool {
        self.raft.has_ready()
    }

    /// The Raft `Ready`; hand it back to [`LockServer::apply_ready`] once persisted and sent.
    pub fn ready(&mut self) -> Ready {
        self.raft.ready()
    }

    /// Whether outputs wait to be taken ([`LockServer::take_outputs`]).
    pub fn has_outputs(&self) -> bool {
        !self.outputs.is_empty()
    }

    pub fn take_outputs(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.outputs)
    }

    fn push(&mut self, output: Output) {
        assert!(self.outputs.len() < OUTPUTS_MAX, "the driver must drain outputs after each step");
        self.outputs.push(output);
    }

    /// Every answer to a client leaves through here. The one place
    /// `SilentUnavailable` is consulted: it drops every `Unavailable` (a
    /// leader not yet serving, a full queue or table, a refused proposal or
    /// read round, a Busy that met a free key), so the client hears nothing
    /// and learns it must retry only when its request times out.
    fn reply(&mut self, client: ClientId, request: RequestId, reply: ClientReply) {
        if reply == ClientReply::Unavailable && self.config.variant == Variant::SilentUnavailable {
            tracing::debug!(client = %client, request = %request, "Unavailable left unsaid (silent-unavailable)");
            return;
        }
        self.push(Output::Reply { client, request, reply });
    }

    /// The redirect of a node that is not leader, naming the leader it knows.
    /// The one place `NoLeaderHint` is consulted: it names none, so the
    /// client tries the next server in turn.
    fn not_leader_reply(&self) -> ClientReply {
        let known = self.raft.soft_state().leader.filter(|leader| *leader != self.raft.id());
        let leader = if self.config.variant == Variant::NoLeaderHint { None } else { known };
        ClientReply::NotLeader { leader }
    }

    /// Notices a change of role or term and applies the hygiene rules: a new
    /// leader restarts every lease; a deposed one forgets its timers and read
    /// rounds, and redirects every client it was still to answer
    /// (`leave_office`).
    fn observe_role(&mut self, now_local_ms: u64) {
        let soft = self.raft.soft_state();
        let now = (soft.role, soft.term);
        if now == self.seen {
            return;
        }
        self.seen = now;
        if !self.floors_parked.is_empty()
            || self.reads.values().any(|round| matches!(round.purpose, ReadPurpose::Floor { .. }))
        {
            self.probe(Probe::FloorReadDroppedOnRoleChange);
        }
        if self.reads.values().any(|round| !matches!(round.purpose, ReadPurpose::Floor { .. })) {
            self.probe(Probe::ConfirmRoundsDroppedOnRoleChange);
        }
        // Read rounds of the old role can never be acted upon safely.
        let rounds = std::mem::take(&mut self.reads);
        self.floors_parked.clear();
        if self.office.is_some() {
            self.leave_office(rounds);
        }
        if soft.role == Role::Leader {
            self.take_office(soft.term, now_local_ms);
        }
    }

    fn take_office(&mut self, term: Term, now_local_ms: u64) {
        assert!(self.leases.is_empty(), "a new leader starts with no lease timers");
        self.office = Some(Office { term, serving: false });
        if self.state.locks().next().is_some() {
            self.probe(Probe::LeasesRestartedByNewLeader);
        }
        self.restart_leases(now_local_ms);
    }

    /// A deposed leader can finish nothing it started, so every client it was
    /// still to answer is redirected now (`NotLeader`, naming the new leader
    /// if known) instead of being left to time out: the waiters (nothing
    /// proposed for them), the proposals of its term, and the grants and
    /// renewals waiting for a leadership confirmation (`rounds`, the service's
    /// read rounds of the old role). A proposal may still commit under the
    /// next leader; the client's resend of the same request is then answered
    /// from the session table (an acquire or a decline) or finds the lock gone
    /// (a release), exactly as a resend after a timeout would. Clients that
    /// cancelled (`ghosts`) are not waiting and hear nothing.
    ///
    /// `GrantAfterExpiredWait` keeps its proposals: the naive server it models
    /// answers `Granted` whenever its Grant applies, leader or not.
    fn leave_office(&mut self, rounds: BTreeMap<u64, ReadRound>) {
        self.office = None;
        self.leases.clear();
        let ghosts = std::mem::take(&mut self.ghosts);
        let mut redirected: Vec<Holder> = Vec::new();
        let waiters = std::mem::take(&mut self.waiters);
        redirected.extend(waiters.into_values().flatten().map(|waiter| waiter.holder));
        if self.config.variant != Variant::GrantAfterExpiredWait {
            let pending = std::mem::take(&mut self.pending);
            if !pending.is_empty() {
                self.probe(Probe::ProposalsRedirectedOnStepDown);
            }
            let proposed =
                pending.into_values().map(|pending| Holder { client: pending.client, request: pending.request });
            redirected.extend(proposed.filter(|holder| !ghosts.contains(holder)));
        }
        redirected.extend(rounds.into_values().filter_map(|round| match round.purpose {
            ReadPurpose::Renew { client, request, .. } | ReadPurpose::Grant { client, request, .. } => {
                Some(Holder { client, request })
            }
            ReadPurpose::Expiry | ReadPurpose::Floor { .. } => None,
        }));
        let reply = self.not_leader_reply();
        for holder in redirected {
            self.reply(holder.client, holder.request, reply);
        }
    }

    /// Takes the entries of `parked` whose log position `after` is applied by now.
    fn take_applied<T>(applied: LogIndex, parked: &mut Vec<T>, after: impl Fn(&T) -> LogIndex) -> Vec<T> {
        let (due, waiting) = std::mem::take(parked).into_iter().partition(|entry| after(entry) <= applied);
        *parked = waiting;
        due
    }

    fn next_read_ctx(&mut self) -> u64 {
        // Never reused, so a confirmation from an old role cannot be mistaken for a new one.
        self.read_ctx_last = self.read_ctx_last.checked_add(1).expect("read ctx space exhausted");
        self.read_ctx_last
    }
}
