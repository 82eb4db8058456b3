//! Terse hand-made histories for the checker's tests.
//!
//! `H::new().at_ms(10).leader(0, 1).apply_all(&[0, 1, 2], 1, grant("k", 1, 1), granted(41))`
//! reads like the run it describes; `happy()` is a clean run that every
//! family's violating history starts from.

use super::{check, CheckConfig, Property, Verdict};
use crate::history::{Actor, EventKind, History, WritePath, WriteVerdict};
use crate::model::Model;
use fencelock::raft::Role;
use fencelock::service::{ClientReply, ClientRequest};
use fencelock::{ApplyResult, ClientId, Command, Holder, Key, LogIndex, NodeId, RequestId, Term, Token};

pub(crate) const LEASE_MS: u64 = 2_000;
/// Where `H::check` ends the run.
pub(crate) const RUN_END_MS: u64 = 12_000;

pub(crate) fn key(name: &str) -> Key {
    Key::new(name)
}

pub(crate) fn holder(client: u32, request: u64) -> Holder {
    Holder { client: ClientId(client), request: RequestId(request) }
}

pub(crate) fn grant(k: &str, client: u32, request: u64) -> Command {
    Command::Grant { key: key(k), lease_ms: LEASE_MS, holder: holder(client, request) }
}

pub(crate) fn release(k: &str, token: u64, client: u32, request: u64) -> Command {
    Command::Release { key: key(k), token: Token(token), holder: holder(client, request) }
}

pub(crate) fn expire(k: &str, token: u64) -> Command {
    Command::Expire { key: key(k), token: Token(token) }
}

pub(crate) fn granted(token: u64) -> ApplyResult {
    ApplyResult::Granted { token: Token(token) }
}

pub(crate) fn reply_granted(token: u64) -> ClientReply {
    ClientReply::Granted { token: Token(token), lease_ms: LEASE_MS }
}

pub(crate) fn server(node: u8) -> Actor {
    Actor::Server(NodeId(node))
}

pub(crate) fn client(id: u32) -> Actor {
    Actor::Client(ClientId(id))
}

/// A history under construction; time only moves forward.
pub(crate) struct H {
    history: History,
    now_us: u64,
}

impl H {
    pub fn new() -> H {
        H { history: History::new(), now_us: 0 }
    }

    pub fn at_ms(self, ms: u64) -> H {
        self.at_us(ms * 1_000)
    }

    pub fn at_us(mut self, at_us: u64) -> H {
        assert!(at_us >= self.now_us, "test history goes back in time");
        self.now_us = at_us;
        self
    }

    /// The instant the next event is told at.
    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// The history so far.
    pub fn events(&self) -> &[crate::history::Event] {
        self.history.events()
    }

    pub fn ev(mut self, kind: EventKind) -> H {
        self.history.record(self.now_us, kind);
        self
    }

    pub fn role(self, node: u8, term: u64, role: Role) -> H {
        let leader = (role == Role::Leader).then_some(NodeId(node));
        self.ev(EventKind::Role { node: NodeId(node), role, term: Term(term), leader })
    }

    pub fn leader(self, node: u8, term: u64) -> H {
        self.role(node, term, Role::Leader)
    }

    pub fn apply(self, node: u8, index: u64, command: Command, result: ApplyResult) -> H {
        self.apply_in(node, index, 1, command, result)
    }

    pub fn apply_in(self, node: u8, index: u64, term: u64, command: Command, result: ApplyResult) -> H {
        self.ev(EventKind::Applied { node: NodeId(node), index: LogIndex(index), term: Term(term), command, result })
    }

    /// `node` applies the no-op of `term` at `index`.
    pub fn apply_noop(self, node: u8, index: u64, term: u64) -> H {
        self.ev(EventKind::AppliedNoop { node: NodeId(node), index: LogIndex(index), term: Term(term) })
    }

    /// The same entry applied by each of `nodes`, in that order.
    pub fn apply_all(mut self, nodes: &[u8], index: u64, command: Command, result: ApplyResult) -> H {
        for node in nodes {
            self = self.apply(*node, index, command.clone(), result);
        }
        self
    }

    pub fn reply(self, node: u8, client: u32, request: u64, reply: ClientReply) -> H {
        self.ev(EventKind::Replied { node: NodeId(node), client: ClientId(client), request: RequestId(request), reply })
    }

    pub fn request(self, client: u32, request: u64, to: u8, body: ClientRequest) -> H {
        self.ev(EventKind::Requested { client: ClientId(client), request: RequestId(request), to: NodeId(to), body })
    }

    pub fn acquire_request(self, client: u32, request: u64, k: &str) -> H {
        self.request(client, request, 0, ClientRequest::Acquire { key: key(k), lease_ms: LEASE_MS, wait_ms: 0 })
    }

    pub fn answered(self, client: u32, request: u64, reply: ClientReply) -> H {
        self.ev(EventKind::Answered { client: ClientId(client), request: RequestId(request), from: NodeId(0), reply })
    }

    /// A whole acquire on three nodes with leader n0: request, apply, reply, answer, belief.
    pub fn acquire(self, index: u64, k: &str, client: u32, request: u64, token: u64) -> H {
        let until_local_us = self.now_us + LEASE_MS * 1_000;
        self.acquire_request(client, request, k)
            .apply_all(&[0, 1, 2], index, grant(k, client, request), granted(token))
            .reply(0, client, request, reply_granted(token))
            .answered(client, request, reply_granted(token))
            .belief_until_us(client, k, token, until_local_us)
    }

    pub fn belief_until_us(self, client: u32, k: &str, token: u64, until_local_us: u64) -> H {
        self.ev(EventKind::BeliefStart { client: ClientId(client), key: key(k), token: Token(token), until_local_us })
    }

    /// `node`, as leader, proposed an Expire of `k`'s `token` (its clock said the lease ran out).
    pub fn expire_proposed(self, node: u8, k: &str, token: u64) -> H {
        self.ev(EventKind::ExpireProposed { node: NodeId(node), key: key(k), token: Token(token) })
    }

    pub fn belief_end(self, client: u32, k: &str, token: u64) -> H {
        self.ev(EventKind::BeliefEnd { client: ClientId(client), key: key(k), token: Token(token) })
    }

    pub fn write(self, client: u32, request: u64, k: &str, token: u64, path: WritePath, verdict: WriteVerdict) -> H {
        let (c, r, t) = (ClientId(client), RequestId(request), Token(token));
        self.ev(EventKind::WriteSent { client: c, request: r, key: key(k), token: t, path }).ev(EventKind::WriteDone {
            client: c,
            request: r,
            key: key(k),
            token: t,
            path,
            verdict,
        })
    }

    pub fn clock(self, actor: Actor, local_us: u64, rate_ppm: i64, within_bound: bool) -> H {
        self.ev(EventKind::Clock { actor, local_us, rate_ppm, within_bound })
    }

    pub fn crash(self, actor: Actor) -> H {
        self.ev(EventKind::Crashed { actor })
    }

    pub fn restart(self, actor: Actor) -> H {
        self.ev(EventKind::Restarted { actor })
    }

    pub fn healed(self) -> H {
        self.ev(EventKind::Healed)
    }

    /// The operator backs the resource up now (a planned fault).
    pub fn resource_backup(self) -> H {
        self.ev(EventKind::Fault { fault: crate::faults::Fault::BackupResource })
    }

    /// The resource restored from its backup taken at `backup_at_ms`.
    pub fn resource_restore(self, restore: u64, backup_at_ms: u64) -> H {
        self.ev(EventKind::ResourceRestored { restore, backup_at_us: backup_at_ms * 1_000 })
    }

    /// The operator takes the whole-cluster backup now.
    pub fn cluster_backup(self) -> H {
        self.ev(EventKind::Fault { fault: crate::faults::Fault::BackupCluster })
    }

    /// A whole-cluster restore from the backup taken at `backup_at_ms`.
    pub fn cluster_restore(self, epoch: u32, backup_at_ms: u64, token_floor: u64) -> H {
        self.ev(EventKind::ClusterRestored {
            epoch,
            backup_at_us: backup_at_ms * 1_000,
            token_floor: Token(token_floor),
        })
    }

    pub fn restore(self, epoch: u32, token_floor: u64) -> H {
        self.ev(EventKind::ClusterRestored { epoch, backup_at_us: 0, token_floor: Token(token_floor) })
    }

    pub fn config(&self, run_end_us: u64) -> CheckConfig {
        let model = Model { nodes: 3, drift_ppm_max: 500, lease_ms: LEASE_MS, ..Model::default() };
        CheckConfig { run_end_us, ..CheckConfig::for_model(&model) }
    }

    /// Checks with the run ending at 12 s, or now if that is later.
    pub fn check(&self) -> Verdict {
        self.check_until_ms(RUN_END_MS.max(self.now_us / 1_000))
    }

    pub fn check_until_ms(&self, run_end_ms: u64) -> Verdict {
        assert!(run_end_ms * 1_000 >= self.now_us, "the run ends before its last event");
        check(&self.history, self.config(run_end_ms * 1_000))
    }
}

/// A clean run on three nodes: c1 takes `k` with token 41, writes, releases;
/// c2 takes it with 42, writes, c1's late write is rejected, c2's lease
/// expires; the run heals at 3 s, c1 takes `k` again with 43 at 3.1 s
/// (index 5), and `H::check` ends the run at 12 s.
pub(crate) fn happy() -> H {
    happy_after_c1_wrote(happy_until_c1_wrote())
}

/// `happy` with `extra` told at 50 ms, during the faults (`happy` heals at 3 s).
pub(crate) fn happy_with_at_50ms(extra: impl FnOnce(H) -> H) -> H {
    happy_after_c1_wrote(extra(happy_until_c1_wrote().at_ms(50)))
}

/// `happy` with the operator's backup of the resource at 100 ms: after c1's
/// write with 41, before c2's with 42.
pub(crate) fn happy_with_backup_at_100ms() -> H {
    happy_after_c1_wrote(happy_until_c1_wrote().at_ms(100).resource_backup())
}

/// `happy` until c1's write with 41 at 30 ms.
fn happy_until_c1_wrote() -> H {
    let mut h = H::new();
    for n in 0..3 {
        h = h.clock(server(n), 0, 100, true);
    }
    h.clock(client(1), 0, -200, true)
        .clock(client(2), 0, 0, true)
        .at_ms(10)
        .role(1, 1, Role::Follower)
        .leader(0, 1)
        .at_ms(20)
        .acquire(1, "k", 1, 1, 41)
        .at_ms(30)
        .write(1, 2, "k", 41, WritePath::Status, WriteVerdict::Accepted)
}

/// `happy` from c1's release at 100 ms on.
fn happy_after_c1_wrote(h: H) -> H {
    h.at_ms(100)
        .request(1, 3, 0, ClientRequest::Release { key: key("k"), token: Token(41) })
        .apply_all(&[0, 1, 2], 2, release("k", 41, 1, 3), ApplyResult::Released)
        .reply(0, 1, 3, ClientReply::Released)
        .answered(1, 3, ClientReply::Released)
        .belief_end(1, "k", 41)
        .at_ms(200)
        .acquire(3, "k", 2, 1, 42)
        .at_ms(210)
        .write(2, 2, "k", 42, WritePath::Status, WriteVerdict::Accepted)
        .write(2, 2, "k", 42, WritePath::Status, WriteVerdict::Duplicate { accepted: true })
        .write(1, 4, "k", 41, WritePath::Ledger, WriteVerdict::RejectedStale { highest: Token(42) })
        .at_ms(2_300)
        .ev(EventKind::ExpireProposed { node: NodeId(0), key: key("k"), token: Token(42) })
        .apply_all(&[0, 1, 2], 4, expire("k", 42), ApplyResult::Expired { existed: true })
        .at_ms(3_000)
        .healed()
        .at_ms(3_100)
        .acquire(5, "k", 1, 5, 43)
}

pub(crate) fn assert_only(verdict: &Verdict, property: Property) {
    assert_eq!(verdict.properties(), vec![property], "violations: {:#?}", verdict.violations);
}

pub(crate) fn assert_clean(verdict: &Verdict) {
    assert!(verdict.is_clean(), "violations: {:#?}", verdict.violations);
}
