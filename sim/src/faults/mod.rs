//! Faults as data: the schedule of a run's safety phase, drawn from the seed.
//!
//! A plan is a plain list of timed [`FaultEvent`]s, so it can be printed,
//! saved as JSON, edited and replayed. Each fault family draws from its own
//! ChaCha stream (one key from the seed, one stream number per family), so
//! switching one family off leaves every other family's schedule unchanged.
//! Loss, duplication and corruption are per-packet rates the world sets on the
//! net; they are not events here.

use crate::actor::Actor;
use crate::machine::net::Addr;
use crate::model::{Model, BEYOND_BOUND_BASE_PPM_MIN, BEYOND_BOUND_FACTOR_MAX, DRIFT_PPM_REAL_MAX};
use fencelock::resource::WritePath;
use fencelock::{ClientId, Key, NodeId, Term, Token};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::fmt;

mod acks;
mod amnesia;
mod churn;
mod disks;
mod fences;
mod figure8;
mod grants;
mod late_renewals;
mod renews;
mod schedule;
mod standard;
pub mod steer;
pub mod swarm;
#[cfg(test)]
mod tests;
mod validate;
mod votes;

pub(crate) use figure8::{FIGURE8_RETURN_WAIT_MS, FIGURE8_STRAND_WAIT_MS};
pub(crate) use renews::RENEW_CUT_AFTER_PAUSE_MS_MAX;
pub use schedule::Schedule;
pub use validate::validate;
pub(crate) use votes::VOTE_WAIT_MS;

/// Events a plan may hold. A day-long safety phase at the standard fault
/// rate stays well below it; at ten times the rate with every family on, a
/// day comes close (about 860,000).
pub const EVENTS_MAX: usize = 1_000_000;

/// No fault starts before this, so the cluster elects its first leader in peace.
pub(crate) const WARMUP_MS: u64 = 300;

/// A majority may be down at once only this long (a brief blip, not an outage).
const MAJORITY_DOWN_MS_MAX: u64 = 1_500;

/// One fault at a point of the safety phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FaultEvent {
    pub at_ms: u64,
    pub fault: Fault,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// Cuts every link between different sides, both ways; addresses on no side keep their links.
    Partition {
        sides: Vec<Vec<Addr>>,
    },
    /// Cuts one direction of one link.
    OneWay {
        from: Addr,
        to: Addr,
    },
    /// Cuts whoever leads when the fault fires off from everyone.
    IsolateLeader,
    /// Cuts whoever leads when the fault fires, together with `clients`, off
    /// from the other servers: the deposed leader keeps serving those clients
    /// until it notices (renewals and reads meet a stale leader). With
    /// `pause_ms`, the leader also stalls that long as it is cut off (a GC
    /// pause), so it notices only after the others have elected a successor.
    IsolateLeaderWith {
        clients: Vec<ClientId>,
        pause_ms: u64,
    },
    /// Cuts a client off from the cluster (its requests and answers vanish).
    CutClient {
        client: ClientId,
    },
    /// Ends every network fault above.
    Heal,
    /// Kills a server; its disk drops unsynced writes (`torn`: keeping a random prefix).
    Crash {
        node: NodeId,
        torn: bool,
    },
    Restart {
        node: NodeId,
    },
    /// A stop-the-world stall of `ms`.
    Pause {
        actor: Actor,
        ms: u64,
    },
    /// Sets a local clock's drift. At `at_ms` 0 these are the clocks' initial rates.
    ClockRate {
        actor: Actor,
        ppm: i64,
    },
    /// Steps a local clock forward or backward.
    ClockStep {
        actor: Actor,
        delta_ms: i64,
    },
    /// Copies a server's durable disk aside.
    BackupNode {
        node: NodeId,
    },
    /// Restarts a server from its last backup (amnesia of everything since).
    RestoreNode {
        node: NodeId,
    },
    /// Takes the operator's backup of the committed state.
    BackupCluster,
    /// Restores every server from the cluster backup.
    RestoreCluster,
    CrashResource,
    RestartResource,
    /// A server's disk turns slow: every fsync takes `fsync_ms` (0: the
    /// normal latency again). The node waits for each one, as etcd's leader
    /// stuck in fsync did (etcd 15247).
    DiskStall {
        node: NodeId,
        fsync_ms: u64,
    },
    /// Crashes whoever leads when the fault fires (its disk drops unsynced
    /// writes as in `Crash`) and restarts it `down_ms` later. A plan that
    /// names the role rather than the node keeps its meaning under another
    /// seed, where another server wins the election (`shrink` writes these).
    CrashLeader {
        torn: bool,
        down_ms: u64,
    },
    /// A stop-the-world stall of `ms` of whoever leads when the fault fires.
    PauseLeader {
        ms: u64,
    },
    /// For `for_ms`, up to `strikes` times, a renew that a lock's holder
    /// sends to the leader that last extended its lease is held on the wire
    /// (with whatever else the holder sends that leader) until `after_ms`
    /// past that lease's end as the leader measures it
    /// (`world/late_renewals.rs`): it arrives while the leader decides the
    /// lease's expiry, before or after it asks its expiry round. A waiter's
    /// retry of an acquire that a leader granted without answering it is
    /// held the same way, until just past that lease's end there.
    LateRenewals {
        for_ms: u64,
        strikes: u64,
        after_ms: u64,
    },
    /// The next worker to pass its lease check with a lock held stalls `ms`
    /// between that check and its write (worker A of seed 002), whoever it
    /// is: the stall the workload draws (`stalls`), as a planned event.
    StallHolder {
        ms: u64,
    },
    /// For `for_ms`, every server that takes office is struck (crashed or
    /// cut off) up to `within_ms` after it or as it applies its first entries
    /// in office (`world/churn.rs`), and comes back `down_ms` later.
    LeaderChurn {
        for_ms: u64,
        within_ms: u64,
        down_ms: u64,
    },
    /// The operator copies the resource's durable disk aside.
    BackupResource,
    /// The operator stops the resource, puts its last backup back (data and
    /// highest tokens together) and starts it again.
    RestoreResource,
    /// For `for_ms`, up to `strikes` servers are crashed in the instant
    /// they send a vote grant (`votes`) or an acknowledgement
    /// of appended entries (otherwise), and each comes back 1-`down_ms` ms
    /// later (`world/acks.rs`): what a node sent before its write was durable is lost.
    AckCrashes {
        for_ms: u64,
        votes: bool,
        strikes: u64,
        down_ms: u64,
    },
    /// For `for_ms`, up to `strikes` times, a leader that has just answered
    /// a renew is cut off from the other servers together with the client
    /// it renewed for, and paused `pause_ms` (`world/renews.rs`): a
    /// successor takes office while the client's next renewals queue at the
    /// deposed leader, which answers them as it wakes.
    RenewStrikes {
        for_ms: u64,
        strikes: u64,
        pause_ms: u64,
    },
    /// Every server's disk is backed up and a minority of the leader's
    /// followers cut off from the other servers (with `fsync_ms` above 0,
    /// the connected followers' fsyncs also take that long); the first time
    /// within `for_ms` that the leader applies an entry the connected
    /// followers acknowledged, one of them forgets it (restored from that
    /// backup, or with `fsync_ms`, crashed before its slow fsync ends), the
    /// leader's cable is pulled for `down_ms` and the minority reconnected
    /// (`world/amnesia.rs`).
    AckAmnesia {
        for_ms: u64,
        down_ms: u64,
        fsync_ms: u64,
    },
    /// For `for_ms`, up to `strikes` times, a leader that has just freed a
    /// key a client waits for there (so it has just sent the waiter's
    /// Grant to its followers) is paused `pause_ms` (`world/grants.rs`): a
    /// successor commits the Grant, nobody tells the waiter, and the lease
    /// runs out while the leader that queued the request sleeps.
    GrantStrikes {
        for_ms: u64,
        strikes: u64,
        pause_ms: u64,
    },
    /// For `for_ms`, up to `strikes` times, as a server grants a pre-vote,
    /// the pre-candidate is cut off from every server but a bare majority
    /// with that voter; as the voter then grants it the vote, the voter is
    /// crashed in that instant, back 1-`down_ms` ms later, and the
    /// candidate cut off from every server for `cut_ms` (`world/votes.rs`).
    VoteStrikes {
        for_ms: u64,
        strikes: u64,
        down_ms: u64,
        cut_ms: u64,
    },
    /// For `for_ms`, up to `strikes` times, the resource is crashed in the
    /// instant it accepts a takeover write (a higher token on a key
    /// whose last lock expired), back `down_ms` later (`world/fences.rs`).
    /// With `restore`, it is instead restored from its last backup there
    /// (stopped, its disk put back, started again: `RestoreResource` told
    /// by the write it follows; `down_ms` unused): the operator's restore
    /// that a stale holder's write meets (`shrink` writes these).
    FenceStrikes {
        for_ms: u64,
        strikes: u64,
        down_ms: u64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        restore: bool,
    },
    /// The next worker to pass its lease check with a lock held stalls
    /// between that check and its write until another worker overtakes it on
    /// that key — is granted it (`Overtake::Grant`) or has a write under a
    /// higher token accepted (`Overtake::Write`) — and `after_ms` more; at
    /// most `ms_max` in all. `StallHolder` told by what the stall waits for,
    /// not by its length, so it outlasts the takeover under any seed's timing
    /// (`shrink` writes these). With `before = "Renew"` the stall comes
    /// instead before the next renewal of a worker renewing a long job's
    /// lease, which then renews naming the token it was overtaken on.
    /// With `path` the stalled holder writes on that path, and with `end =
    /// "Revoke"` (or `"Release"`) it ends its job that way, not as the
    /// workload draws: a stale write on the bulk path, a revoke by token
    /// that lands after the key was granted again.
    StallUntilOvertaken(UntilOvertaken),
    /// The next worker answered `Granted` stalls `ms` before it reads the
    /// answer, whoever it is: a GC pause while the answer waits in the
    /// mailbox (or an answer late by a lost reply and a retry), which a
    /// client counting its lease from the answer's arrival does not survive
    /// (`shrink` writes these).
    StallOnGrant {
        ms: u64,
    },
    /// The resource's answer to the next write it judges is lost on its
    /// way back, whoever wrote: the worker hears nothing and sends the same
    /// write (same request id) again, which a resource must answer from its
    /// record of answered writes instead of applying twice (`shrink`
    /// writes these).
    LoseWriteAnswer,
    /// The election timers of `servers` live servers that do not lead (the
    /// lowest ids) run out at their next tick, all at once: servers tick
    /// together (they boot together, and drift moves their ticks apart by
    /// microseconds a second), so they campaign in the same instant, as
    /// when a leader dies and timers reset by its last heartbeat run out
    /// together. With no leader in office their campaigns meet in one term:
    /// candidates and the other servers to vote, a split election that
    /// at-most-one-vote voting survives. With a leader in office its other
    /// followers are in its lease and refuse the campaigns; a storm of a
    /// majority grants itself pre-votes and deposes it (`shrink` writes
    /// these, before an election).
    ElectionStorm {
        servers: u8,
    },
    // Added last: a variant's place is its index on the wire and in the
    // trace hash, so a new one goes at the end.
    /// For `for_ms`, up to `strikes` times, figure 8 of the Raft paper
    /// (`world/figure8.rs`): a leader is cut off from the other servers
    /// (its clients still reach it), the successor they elect is unplugged
    /// as it takes office, and the first leader reconnected; if it wins
    /// office again, it is unplugged at its first apply or `strike_ms`
    /// after it is seen leading, whichever is first, and the successor
    /// plugged back in; the first leader returns `down_ms` later.
    Figure8Strikes {
        for_ms: u64,
        strikes: u64,
        strike_ms: u64,
        down_ms: u64,
    },
}

/// Where a lock holder's planned stall comes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StallPoint {
    /// Between its lease check and its write (worker A of seed 002).
    #[default]
    Write,
    /// Before the next renewal of a long job's lease.
    Renew,
}

impl StallPoint {
    pub fn is_write(&self) -> bool {
        *self == StallPoint::Write
    }
}

/// A `StallUntilOvertaken`: what the stall waits for, how much longer it
/// lasts then and how long at most, where it comes, and the path the
/// stalled holder then writes on and how it ends its job (`None`, `Drawn`:
/// as the workload draws). Written in a fault file as the fault's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UntilOvertaken {
    pub on: Overtake,
    pub after_ms: u64,
    pub ms_max: u64,
    #[serde(default, skip_serializing_if = "StallPoint::is_write")]
    pub before: StallPoint,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<WritePath>,
    #[serde(default, skip_serializing_if = "JobEnd::is_drawn")]
    pub end: JobEnd,
}

/// How a lock holder stalled by a planned fault ends its job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobEnd {
    /// As the workload draws: mostly a Release, 3 times in 10 a Revoke by
    /// token, now and then a crash while holding.
    #[default]
    Drawn,
    /// A Release of the lock by token.
    Release,
    /// A Revoke of its lease by token (etcd's `lease revoke`).
    Revoke,
}

impl JobEnd {
    pub fn is_drawn(&self) -> bool {
        *self == JobEnd::Drawn
    }
}

/// What a `StallUntilOvertaken` stall waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Overtake {
    /// Another worker is granted the key (a higher token applied at any server).
    Grant,
    /// The resource accepts a write on the key under a higher token.
    Write,
}

/// What acknowledgement a crash-after-acknowledging strike follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Acked {
    /// A vote granted to a candidate.
    Vote,
    /// Entries appended, acknowledged to the leader.
    Entries,
}

/// What the reactive families (leader churn, crashes after acknowledging)
/// did at run time: their victims depend on the run, so they are recorded as
/// they happen, not planned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ChurnEvent {
    /// A leader crashed (or its cable pulled) `seen_ms` after it was seen
    /// leading, or as it applied its first entries in office.
    Struck { node: NodeId, term: Term, crashed: bool, seen_ms: u64, at_first_apply: bool },
    /// A pulled cable plugged back in.
    PluggedBack { node: NodeId },
    /// A server crashed `after_us` after it sent `acked` to `to` in `term`,
    /// to come back `down_ms` later.
    AckStruck { node: NodeId, to: NodeId, term: Term, acked: Acked, after_us: u64, down_ms: u64 },
    /// A leader cut off with `client` from the other servers and paused
    /// `pause_ms`, `after_us` after it answered that client's renew; the
    /// links come back `cut_ms` after the strike.
    RenewStruck { node: NodeId, client: ClientId, term: Term, after_us: u64, pause_ms: u64, cut_ms: u64 },
    /// A leader paused `pause_ms`, `after_us` after it freed `key` while
    /// `client` waited for it there.
    GrantStruck { node: NodeId, client: ClientId, key: Key, term: Term, after_us: u64, pause_ms: u64 },
    /// `candidate` cut off from every server but `kept`, `after_us` after
    /// `voter` granted it a pre-vote for `term`.
    VoteSplit { candidate: NodeId, voter: NodeId, term: Term, kept: Vec<NodeId>, after_us: u64 },
    /// `voter` crashed `after_us` after it granted `candidate` its vote in
    /// `term`, back `down_ms` later; the candidate cut off from every server for `cut_ms`.
    VoteStruck { voter: NodeId, candidate: NodeId, term: Term, after_us: u64, down_ms: u64, cut_ms: u64 },
    /// The resource crashed `after_us` after it accepted `token` on `key`,
    /// whose lock with `expired` had ended by expiry; back `down_ms` later.
    /// With `restore`, restored from its last backup instead.
    FenceStruck {
        key: Key,
        token: Token,
        expired: Token,
        after_us: u64,
        down_ms: u64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        restore: bool,
    },
    /// `client`'s renew to `node`, leader of `term`, held on the wire for
    /// `held_ms` from `after_us` after it was sent, to arrive just past the
    /// end of the lease `node` last gave `client`; with `retry`, its retry
    /// of an acquire that `node` granted without an answer, to arrive just
    /// past the end of that lease.
    RenewalHeld {
        node: NodeId,
        client: ClientId,
        term: Term,
        after_us: u64,
        held_ms: u64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        retry: bool,
    },
    /// `cut` cut off from the other servers while `leader` leads `term`, and
    /// every server backed up (`fsync_ms` 0) or the other followers' fsyncs slowed to `fsync_ms`.
    AmnesiaArmed { leader: NodeId, term: Term, cut: Vec<NodeId>, fsync_ms: u64 },
    /// `node` restored from the backup taken `backup_ms` ago (`crashed`:
    /// crashed, its unsynced writes lost, back `back_ms` later), as `leader`
    /// applied entries `node` had acknowledged; the leader's cable pulled
    /// for `down_ms`, and the cut-off servers reconnected.
    AmnesiaStruck {
        node: NodeId,
        leader: NodeId,
        term: Term,
        crashed: bool,
        backup_ms: u64,
        back_ms: u64,
        down_ms: u64,
    },
    /// The links of these addresses to the other servers, cut by a reactive family, are back.
    Reconnected { addrs: Vec<Addr> },
    /// A figure-8 strike's first step: `leader`, leading `term`, cut off
    /// from the other servers (its clients still reach it).
    Figure8Stranded { leader: NodeId, term: Term },
    /// `successor`, seen leading `term` (elected without the stranded
    /// `leader`'s last entries), unplugged at once; `leader` reconnected.
    Figure8SuccessorUnplugged { successor: NodeId, leader: NodeId, term: Term },
    /// `leader`, the stranded one, in office again in `term`, unplugged
    /// `seen_ms` after it was seen leading (or as it applied its first
    /// entries there), back `down_ms` later; `successor` is plugged back in
    /// at once (`PluggedBack`).
    Figure8Struck { leader: NodeId, successor: NodeId, term: Term, seen_ms: u64, at_first_apply: bool, down_ms: u64 },
}

impl fmt::Display for ChurnEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChurnEvent::Struck { node, term, crashed, seen_ms, at_first_apply } => {
                let verb = if *crashed { "crash" } else { "unplug" };
                let when = if *at_first_apply { ", as it applied its first entries" } else { "" };
                write!(f, "churn: {verb} {node}, leader of {term}, {seen_ms} ms after it was seen leading{when}")
            }
            ChurnEvent::PluggedBack { node } => write!(f, "plug {node} back in"),
            ChurnEvent::AckStruck { node, to, term, acked, after_us, down_ms } => {
                let what = match acked {
                    Acked::Vote => "granted its vote",
                    Acked::Entries => "acknowledged entries",
                };
                write!(
                    f,
                    "ack crash: crash {node} {after_us} us after it {what} to {to} in {term}, back in {down_ms} ms"
                )
            }
            ChurnEvent::RenewStruck { node, client, term, after_us, pause_ms, cut_ms } => write!(
                f,
                "renew strike: cut {node}, leader of {term}, off with {client} and pause it {pause_ms} ms, \
                 {after_us} us after it renewed {client}'s lease; links back in {cut_ms} ms"
            ),
            ChurnEvent::RenewalHeld { node, client, term, after_us, held_ms, retry } => {
                let held = if *retry { "retry" } else { "renew" };
                write!(
                    f,
                    "late renewal: hold {client}'s {held} to {node}, leader of {term}, {held_ms} ms on the wire \
                     ({after_us} us after it was sent), to arrive just past "
                )?;
                match retry {
                    false => f.write_str("the lease's end there"),
                    true => write!(f, "the end of the lease it granted {client} without an answer"),
                }
            }
            ChurnEvent::GrantStruck { node, client, key, term, after_us, pause_ms } => write!(
                f,
                "grant strike: pause {node}, leader of {term}, {pause_ms} ms, {after_us} us after it freed {key} \
                 while {client} waited for it there"
            ),
            ChurnEvent::VoteSplit { candidate, voter, term, kept, after_us } => {
                let kept: Vec<String> = kept.iter().map(NodeId::to_string).collect();
                write!(
                    f,
                    "vote strike: cut {candidate} off from every server but {}, {after_us} us after {voter} granted \
                     it a pre-vote for {term}",
                    kept.join(" ")
                )
            }
            ChurnEvent::VoteStruck { voter, candidate, term, after_us, down_ms, cut_ms } => write!(
                f,
                "vote strike: crash {voter} {after_us} us after it voted for {candidate} in {term}, back in {down_ms} \
                 ms; cut {candidate} off from every server for {cut_ms} ms"
            ),
            ChurnEvent::FenceStruck { key, token, expired, after_us, down_ms, restore: false } => write!(
                f,
                "fence strike: crash the resource {after_us} us after it accepted {token} on {key} (the lock of \
                 {expired} expired), back in {down_ms} ms"
            ),
            ChurnEvent::FenceStruck { key, token, expired, after_us, restore: true, .. } => write!(
                f,
                "fence strike: restore the resource from its last backup {after_us} us after it accepted {token} \
                 on {key} (the lock of {expired} expired)"
            ),
            ChurnEvent::AmnesiaArmed { leader, term, cut, fsync_ms } => {
                let cut: Vec<String> = cut.iter().map(NodeId::to_string).collect();
                let prepare = match fsync_ms {
                    0 => "back up every server".to_string(),
                    ms => format!("slow the other followers' fsync to {ms} ms"),
                };
                write!(f, "ack amnesia: {prepare}, cut {} off from the others ({leader} leads {term})", cut.join(" "))
            }
            ChurnEvent::AmnesiaStruck { node, leader, term, crashed, backup_ms, back_ms, down_ms } => {
                let forget = if *crashed {
                    format!("crash {node} before its fsync ends, back in {back_ms} ms,")
                } else {
                    format!("restore {node} from its backup of {backup_ms} ms ago")
                };
                write!(
                    f,
                    "ack amnesia: {forget} as {leader}, leader of {term}, applies entries it acknowledged; unplug \
                     {leader} for {down_ms} ms and reconnect the cut-off servers"
                )
            }
            ChurnEvent::Reconnected { addrs } => {
                let addrs: Vec<String> = addrs.iter().map(Addr::to_string).collect();
                write!(f, "reconnect {} to the other servers", addrs.join(" "))
            }
            ChurnEvent::Figure8Stranded { leader, term } => write!(
                f,
                "figure-8 strike: cut {leader}, leader of {term}, off from the other servers (its clients still \
                 reach it)"
            ),
            ChurnEvent::Figure8SuccessorUnplugged { successor, leader, term } => write!(
                f,
                "figure-8 strike: unplug {successor} as it leads {term} without {leader}'s last entries; reconnect \
                 {leader}"
            ),
            ChurnEvent::Figure8Struck { leader, successor, term, seen_ms, at_first_apply, down_ms } => {
                let when = if *at_first_apply { ", as it applied its first entries" } else { "" };
                write!(
                    f,
                    "figure-8 strike: unplug {leader}, in office again in {term}, {seen_ms} ms after it was seen \
                     leading{when}, away {down_ms} ms; {successor} returns"
                )
            }
        }
    }
}

impl Fault {
    /// Every server and worker the fault names (addresses as actors), in
    /// the order it names them; the resource, "whoever leads" and "whoever holds" are not named.
    pub fn named(&self) -> Vec<Actor> {
        let of = |addr: &Addr| Actor::from(*addr);
        let named = match self {
            Fault::Partition { sides } => sides.iter().flatten().map(of).collect(),
            Fault::OneWay { from, to } => vec![of(from), of(to)],
            Fault::IsolateLeaderWith { clients, .. } => clients.iter().map(|c| Actor::Client(*c)).collect(),
            Fault::CutClient { client } => vec![Actor::Client(*client)],
            Fault::Crash { node, .. }
            | Fault::Restart { node }
            | Fault::BackupNode { node }
            | Fault::RestoreNode { node }
            | Fault::DiskStall { node, .. } => vec![Actor::Server(*node)],
            Fault::Pause { actor, .. } | Fault::ClockRate { actor, .. } | Fault::ClockStep { actor, .. } => {
                vec![*actor]
            }
            Fault::IsolateLeader
            | Fault::CrashLeader { .. }
            | Fault::PauseLeader { .. }
            | Fault::StallHolder { .. }
            | Fault::Heal
            | Fault::BackupCluster
            | Fault::RestoreCluster
            | Fault::CrashResource
            | Fault::RestartResource
            | Fault::BackupResource
            | Fault::RestoreResource
            | Fault::LeaderChurn { .. }
            | Fault::AckCrashes { .. }
            | Fault::RenewStrikes { .. }
            | Fault::AckAmnesia { .. }
            | Fault::GrantStrikes { .. }
            | Fault::VoteStrikes { .. }
            | Fault::FenceStrikes { .. }
            | Fault::LateRenewals { .. }
            | Fault::Figure8Strikes { .. }
            | Fault::StallUntilOvertaken(_)
            | Fault::StallOnGrant { .. }
            | Fault::LoseWriteAnswer
            | Fault::ElectionStorm { .. } => Vec::new(),
        };
        named.into_iter().filter(|actor| *actor != Actor::Resource).collect()
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Partition { sides } => {
                let sides: Vec<String> = sides
                    .iter()
                    .map(|side| format!("{{{}}}", side.iter().map(Addr::to_string).collect::<Vec<_>>().join(" ")))
                    .collect();
                write!(f, "partition {}", sides.join(" | "))
            }
            Fault::OneWay { from, to } => write!(f, "one-way cut {from} -> {to}"),
            Fault::IsolateLeader => f.write_str("isolate the leader"),
            Fault::CrashLeader { torn, down_ms } => {
                let torn = if *torn { " (torn write)" } else { "" };
                write!(f, "crash the leader{torn}, restart it {down_ms} ms later")
            }
            Fault::PauseLeader { ms } => write!(f, "pause the leader for {ms} ms"),
            Fault::StallHolder { ms } => {
                write!(
                    f,
                    "stall the next worker to write under a lock for {ms} ms between its lease check and its write"
                )
            }
            Fault::StallUntilOvertaken(UntilOvertaken { on, after_ms, ms_max, before, path, end }) => {
                let at = match before {
                    StallPoint::Write => "to write under a lock between its lease check and its write",
                    StallPoint::Renew => "to renew a lock before its renewal",
                };
                let what = match on {
                    Overtake::Grant => "another worker is granted its key",
                    Overtake::Write => "another worker's write under a higher token is accepted",
                };
                let then = match after_ms {
                    0 => String::new(),
                    ms => format!(" and {ms} ms more"),
                };
                let writes = path.map(|path| format!(", then write via {path:?}")).unwrap_or_default();
                let ends = match end {
                    JobEnd::Drawn => "",
                    JobEnd::Release => ", then end its job with a Release",
                    JobEnd::Revoke => ", then end its job with a Revoke",
                };
                write!(f, "stall the next worker {at} until {what}{then} (at most {ms_max} ms){writes}{ends}")
            }
            Fault::LoseWriteAnswer => f.write_str("lose the resource's answer to the next write"),
            Fault::ElectionStorm { servers } => {
                write!(f, "the election timers of {servers} live servers run out at their next tick, together")
            }
            Fault::StallOnGrant { ms } => {
                write!(f, "stall the next worker answered Granted for {ms} ms before it reads the answer")
            }
            Fault::IsolateLeaderWith { clients, pause_ms } => {
                if clients.is_empty() {
                    // The shrinker may leave no client on the leader's side.
                    f.write_str("isolate the leader")?;
                } else {
                    let clients: Vec<String> = clients.iter().map(ClientId::to_string).collect();
                    write!(f, "isolate the leader with {}", clients.join(" "))?;
                }
                if *pause_ms > 0 {
                    write!(f, ", pausing it for {pause_ms} ms")?;
                }
                Ok(())
            }
            Fault::CutClient { client } => write!(f, "cut client {client} off"),
            Fault::Heal => f.write_str("heal the network"),
            Fault::Crash { node, torn: false } => write!(f, "crash {node}"),
            Fault::Crash { node, torn: true } => write!(f, "crash {node} (torn write)"),
            Fault::Restart { node } => write!(f, "restart {node}"),
            Fault::Pause { actor, ms } => write!(f, "pause {} for {ms} ms", actor),
            Fault::ClockRate { actor, ppm } => write!(f, "clock rate {} {ppm:+} ppm", actor),
            Fault::ClockStep { actor, delta_ms } => write!(f, "clock step {} {delta_ms:+} ms", actor),
            Fault::BackupNode { node } => write!(f, "back up {node}"),
            Fault::RestoreNode { node } => write!(f, "restore {node} from its backup"),
            Fault::BackupCluster => f.write_str("back up the cluster"),
            Fault::RestoreCluster => f.write_str("restore the cluster from its backup"),
            Fault::CrashResource => f.write_str("crash the resource"),
            Fault::RestartResource => f.write_str("restart the resource"),
            Fault::BackupResource => f.write_str("back up the resource"),
            Fault::RestoreResource => f.write_str("restore the resource from its backup"),
            Fault::DiskStall { node, fsync_ms: 0 } => write!(f, "disk of {node} back to normal"),
            Fault::DiskStall { node, fsync_ms } => write!(f, "disk of {node} stalls: fsync takes {fsync_ms} ms"),
            Fault::LeaderChurn { for_ms, within_ms, down_ms } => write!(
                f,
                "leader churn for {for_ms} ms: each new leader is struck within {within_ms} ms or at its first \
                 apply, away {down_ms} ms"
            ),
            Fault::AckCrashes { for_ms, votes, strikes, down_ms } => {
                let what = if *votes { "a vote grant" } else { "acknowledging entries" };
                write!(f, "ack crashes for {for_ms} ms: up to {strikes} servers crash just after {what}, away up to {down_ms} ms")
            }
            Fault::RenewStrikes { for_ms, strikes, pause_ms } => write!(
                f,
                "renew strikes for {for_ms} ms: up to {strikes} times, a leader that has just renewed a client's lease \
                 is cut off with it and paused {pause_ms} ms"
            ),
            Fault::AckAmnesia { for_ms, down_ms, fsync_ms: 0 } => write!(
                f,
                "ack amnesia for {for_ms} ms: back up every server and cut a minority off; restore a follower from \
                 its backup as the leader applies what it acknowledged, unplug the leader for {down_ms} ms"
            ),
            Fault::AckAmnesia { for_ms, down_ms, fsync_ms } => write!(
                f,
                "ack amnesia for {for_ms} ms: cut a minority off and slow the other followers' fsync to {fsync_ms} ms; \
                 crash a follower as the leader applies what it acknowledged, unplug the leader for {down_ms} ms"
            ),
            Fault::GrantStrikes { for_ms, strikes, pause_ms } => write!(
                f,
                "grant strikes for {for_ms} ms: up to {strikes} times, a leader that has just freed a key a client \
                 waits for there is paused {pause_ms} ms"
            ),
            Fault::VoteStrikes { for_ms, strikes, down_ms, cut_ms } => write!(
                f,
                "vote strikes for {for_ms} ms: up to {strikes} times, split an election and crash a voter just after \
                 its vote, back within {down_ms} ms, the candidate cut off {cut_ms} ms"
            ),
            Fault::FenceStrikes { for_ms, strikes, down_ms, restore: false } => write!(
                f,
                "fence strikes for {for_ms} ms: up to {strikes} times, crash the resource just after a takeover \
                 write, back in {down_ms} ms"
            ),
            Fault::FenceStrikes { for_ms, strikes, restore: true, .. } => write!(
                f,
                "fence strikes for {for_ms} ms: up to {strikes} times, restore the resource from its last backup \
                 just after a takeover write"
            ),
            Fault::LateRenewals { for_ms, strikes, after_ms } => write!(
                f,
                "late renewals for {for_ms} ms: up to {strikes} times, hold a holder's renew to the leader on the \
                 wire until {after_ms} ms past its lease's end there"
            ),
            Fault::Figure8Strikes { for_ms, strikes, strike_ms, down_ms } => write!(
                f,
                "figure-8 strikes for {for_ms} ms: up to {strikes} times, strand a leader, unplug its successor as \
                 it takes office, and unplug the first leader again at its first apply back in office or \
                 {strike_ms} ms in, away {down_ms} ms while the successor returns"
            ),
        }
    }
}

/// One line per event: its time and what happens.
pub fn describe(plan: &[FaultEvent]) -> String {
    plan.iter().map(|e| format!("{:>8} ms  {}\n", e.at_ms, e.fault)).collect()
}

/// The fault families, each with its own stream.
#[derive(Clone, Copy)]
enum Family {
    Drift = 1,
    Network = 2,
    Outages = 3,
    ClusterRestores = 4,
    Pauses = 5,
    Clocks = 6,
    Resource = 7,
    Disks = 8,
    Churn = 9,
    ResourceRestores = 10,
    AckCrashes = 11,
    RenewStrikes = 12,
    AckAmnesia = 13,
    GrantStrikes = 14,
    VoteStrikes = 15,
    FenceStrikes = 16,
    LateRenewals = 17,
    Figure8Strikes = 18,
}

fn family_rng(seed: u64, family: Family) -> ChaCha8Rng {
    crate::streams::fault_family(seed, family as u64)
}

/// The fault schedule of a run, whole: sorted by time, every event inside
/// the safety phase `[0, model.safety_ms)`, each family present only if the
/// model switches it on. The initial clock rates (at 0) are always there. A
/// run draws the same events as it plays them ([`Schedule`]).
pub fn plan(model: &Model, seed: u64) -> Vec<FaultEvent> {
    Schedule::new(model, seed).collect()
}

/// A server's time down: from its crash to its restart or restore.
#[derive(Clone)]
struct Outage {
    node: NodeId,
    torn: bool,
    /// Set when the node comes back from a backup taken at this time.
    backup_at: Option<u64>,
    crash_at: u64,
    up_at: u64,
    /// Drawn by the disks (`disks.rs`), not the outages' own stream.
    disk: bool,
}

/// What every family's draws read of the model: its servers, clients and clocks.
struct Planner<'a> {
    model: &'a Model,
}

impl Planner<'_> {
    fn servers(&self) -> Vec<NodeId> {
        (0..self.model.nodes).map(NodeId).collect()
    }

    fn clients(&self) -> Vec<ClientId> {
        (0..self.model.clients).map(ClientId).collect()
    }

    /// Servers and clients: the actors with a local clock.
    pub(super) fn clocked_actors(&self) -> Vec<Actor> {
        let servers = self.servers().into_iter().map(Actor::Server);
        servers.chain(self.clients().into_iter().map(Actor::Client)).collect()
    }

    /// A clock's rate: within the real drift range (`drift_ppm_real_max`,
    /// the assumed bound unless set), or for the clocks `drift_beyond_bound`
    /// picked, 3-20 times the assumed bound. Validation keeps both inside
    /// `DRIFT_PPM_REAL_MAX`, so every clock moves forward.
    pub(super) fn rate(&self, rng: &mut ChaCha8Rng, beyond_bound: bool) -> i64 {
        let ppm = if beyond_bound {
            let base = self.model.drift_ppm_max.max(BEYOND_BOUND_BASE_PPM_MIN);
            let magnitude = i64::try_from(rng.gen_range(3..=BEYOND_BOUND_FACTOR_MAX) * base).expect("validated bound");
            if rng.gen_bool(0.5) {
                magnitude
            } else {
                -magnitude
            }
        } else {
            let real = i64::try_from(self.model.drift_ppm_real()).expect("validated drift range");
            rng.gen_range(-real..=real)
        };
        assert!(ppm.unsigned_abs() <= DRIFT_PPM_REAL_MAX, "drift {ppm} ppm beyond what a model may draw");
        ppm
    }

    /// Partitions 35%, one-way cuts 15%, leader isolation 35% and cut-off
    /// clients 15%. Most isolations keep some clients with the leader and
    /// stall it (a GC pause) as it is cut off: the deposed leader that still
    /// hears its clients after a successor took office, where renewals and
    /// answers from a stale leader meet a new leader's expiries.
    pub(super) fn network_fault(&self, rng: &mut ChaCha8Rng) -> Option<Fault> {
        let servers = self.servers();
        let clients = self.clients();
        let roll = rng.gen_range(0..100);
        if roll < 35 && servers.len() >= 2 {
            return Some(self.partition(rng));
        }
        if roll < 50 {
            let to_client = !clients.is_empty() && (servers.len() < 2 || rng.gen_bool(0.3));
            if to_client {
                let server = Addr::Server(*servers.choose(rng)?);
                let client = Addr::Client(*clients.choose(rng)?);
                let (from, to) = if rng.gen_bool(0.5) { (server, client) } else { (client, server) };
                return Some(Fault::OneWay { from, to });
            }
            let pair: Vec<NodeId> = servers.choose_multiple(rng, 2).copied().collect();
            if pair.len() == 2 {
                return Some(Fault::OneWay { from: Addr::Server(pair[0]), to: Addr::Server(pair[1]) });
            }
        }
        if roll < 85 || clients.is_empty() {
            if clients.is_empty() || rng.gen_bool(0.3) {
                return Some(Fault::IsolateLeader);
            }
            let count = rng.gen_range(1..=clients.len());
            let mut with: Vec<ClientId> = clients.choose_multiple(rng, count).copied().collect();
            with.sort_unstable();
            let pause_ms = if rng.gen_bool(0.3) { 0 } else { rng.gen_range(300..=2_500) };
            return Some(Fault::IsolateLeaderWith { clients: with, pause_ms });
        }
        Some(Fault::CutClient { client: *clients.choose(rng)? })
    }

    /// Servers split into two sides (sometimes three); some clients join a side.
    fn partition(&self, rng: &mut ChaCha8Rng) -> Fault {
        let mut servers = self.servers();
        servers.shuffle(rng);
        let count = if servers.len() >= 3 && rng.gen_bool(0.2) { 3 } else { 2 };
        let mut cuts: Vec<usize> =
            (1..servers.len()).collect::<Vec<_>>().choose_multiple(rng, count - 1).copied().collect();
        cuts.sort_unstable();
        let mut sides: Vec<Vec<Addr>> = Vec::new();
        let mut start = 0;
        for end in cuts.into_iter().chain([servers.len()]) {
            let mut side: Vec<NodeId> = servers[start..end].to_vec();
            side.sort_unstable();
            sides.push(side.into_iter().map(Addr::Server).collect());
            start = end;
        }
        for client in self.clients() {
            if rng.gen_bool(0.3) {
                let side = rng.gen_range(0..sides.len());
                sides[side].push(Addr::Client(client));
            }
        }
        assert!(sides.iter().all(|side| !side.is_empty()));
        Fault::Partition { sides }
    }
}
