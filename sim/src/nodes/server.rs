//! The one module that turns a Raft server's `Ready` into I/O: persist to its
//! disk, then send, then apply. Everything protocol-shaped lives in
//! `fencelock`; this file only moves bytes, waits for fsync and reads the
//! node's local clock.

use crate::faults::Acked;
use crate::history::{Actor, EventKind};
use crate::machine::clock::{local_at, local_now, now_us, poll_changed, SharedClock};
use crate::machine::disk::{fsync, NodeOp};
use crate::machine::net::{Addr, Delivery, Mailbox};
use crate::machine::timer;
use crate::machine::wire;
use crate::nodes::context::{AckSent, Ctx, VoteSent};
use crate::streams;
use fencelock::raft::{Config, Message, MessageBody, RaftNode, Ready, SoftState};
use fencelock::service::{LockServer, Output, ServiceConfig};
use fencelock::wire::Envelope;
use fencelock::{LockState, LogIndex, NodeId, Token};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

/// One Raft tick, the same for every server: core tunes its standard config to it.
const TICK_MS: u64 = fencelock::raft::TICK_MS_STANDARD;
const TICK_US: u64 = TICK_MS * 1_000;
/// How close the next tick may be for a storm's campaign to be taken now:
/// madsim's shortest sleep, which a fresh alarm for that tick would take.
const CAMPAIGN_SLACK_US: u64 = 1_000;
/// A bound on Ready rounds handled after one input; Raft converges in a few.
const READY_ROUNDS_MAX: usize = 64;

/// The life of one server process: from its durable state until it is killed.
///
/// Raft ticks every `TICK_MS` of the local clock, but a server does not wake
/// for a tick that would only advance its timers
/// ([`LockServer::idle_ticks`]): it sleeps until the first tick that can act,
/// a delivery, a step or rate change of its clock, or a storm's campaign,
/// and on waking makes up the idle ticks whose instants passed, as if each
/// were taken at its own local instant, before anything else. A tick due
/// while the process was paused is lost, as a paused process's would be.
/// The model key `tickless = false` wakes it at every tick instead.
pub async fn run(ctx: Arc<Ctx>, id: NodeId) {
    let mut server = start(&ctx, id);
    server.probes_on();
    let mut mailbox = ctx.net.bind(Addr::Server(id));
    let clock = ctx.clock_of(Actor::Server(id)).clone();
    let mut soft = server.raft().soft_state();
    ctx.note_role(id, soft);
    let mut durable = durable_snapshot_index(&ctx, id);
    let mut next_tick_local_us = local_now(&clock) + TICK_US;
    let mut alarm = None;
    let tickless = ctx.model.tickless != Some(false);
    // True time as the last await left it: it stands still until the next.
    let mut now_true_us = now_us();
    loop {
        // A pause of an earlier life, or one that began and ended while the
        // last round waited for its fsync, is over: the ticks due in it are
        // lost, and the tick now overdue is taken at the next wake (madsim's
        // shortest sleep away at most), as a ticking server's is.
        ctx.take_paused_since(id);
        // The clock's mapping as this round reads it: the ticks slept
        // through are placed by it (a change wakes the server).
        let mapping = clock.lock().expect("clock lock").clone();
        let now_local_us = mapping.local_us(now_true_us);
        // Ticks keep their pace across a backward step of the local clock
        // (only the lease deadlines, which read the clock, feel the step).
        next_tick_local_us = next_tick_local_us.min(now_local_us + TICK_US);
        let armed = ctx.campaign_armed(id);
        // Work the last round left (`drive`'s bound, or a Ready its outputs
        // made) waits for the next tick, as it always has.
        let idle = if !tickless || armed || server.has_ready() || next_tick_local_us <= now_local_us {
            0
        } else {
            server.idle_ticks(next_tick_local_us / 1_000)
        };
        let due_local_us = next_tick_local_us + u64::from(idle) * TICK_US;
        let due_true_us = mapping.true_us_when(due_local_us, now_true_us).max(now_true_us + 1);
        let woke = if tickless {
            let alarm = timer::keep_earliest(&mut alarm, due_true_us);
            wake(&mut mailbox, alarm, Some((&clock, mapping.changes())), Some((&*ctx, id, !armed))).await
        } else {
            // Every tick wakes the server.
            wake(&mut mailbox, timer::refresh(&mut alarm, due_true_us), None, None).await
        };
        // Make up the idle ticks whose instants passed while the server
        // slept (not those that fell in a pause).
        let woke_us = now_us();
        let paused_since_us = ctx.take_paused_since(id);
        let slept_until_local_us = mapping.local_us(paused_since_us.map_or(woke_us, |since| since.min(woke_us)));
        let armed_now = ctx.campaign_armed(id);
        // The tick due now carries a storm's campaign; not one passed before
        // the storm, nor one a delivery woke the server at.
        let keep_last = armed_now && matches!(woke, Woke::Other);
        let made_up = make_up_idle_ticks(
            &mut server,
            &mut next_tick_local_us,
            Slept { idle, until_local_us: slept_until_local_us, keep_last },
        );
        // Time stands still until the next await: one clock read serves this
        // round, in the mapping as it is now (a change woke the server).
        let now_local_us = local_at(&clock, woke_us);
        let tick_due = next_tick_local_us <= now_local_us && (made_up == idle || paused_since_us.is_some());
        // A storm's campaign is taken at the tick due now, or within madsim's
        // shortest sleep (which would make it late).
        let campaign_due = armed_now && next_tick_local_us <= now_local_us + CAMPAIGN_SLACK_US;
        match woke {
            Woke::Delivery(delivery) => on_delivery(&ctx, &mut server, now_local_us / 1_000, delivery),
            Woke::Other if !tickless || tick_due || campaign_due => {
                server.tick(now_local_us / 1_000);
                if ctx.take_campaign(id) {
                    server.campaign();
                }
                // A clock stepped far forward, or a pause, does not owe a burst of ticks.
                next_tick_local_us = (next_tick_local_us + TICK_US).max(now_local_us + 1);
            }
            Woke::Other => {}
        }
        now_true_us = drive(&ctx, id, &mut server, &mut soft, &mut durable, woke_us).await;
    }
}

/// What a tickless server slept through: `idle` ticks from its next one
/// on, up to the local instant `until_local_us`.
struct Slept {
    idle: u32,
    until_local_us: u64,
    /// Leave a tick due within `CAMPAIGN_SLACK_US` of `until_local_us` to be
    /// taken as a real one (a storm's campaign rides on it).
    keep_last: bool,
}

/// Makes up the slept-through idle ticks whose instants passed, in order
/// from `next_tick_local_us`, advancing it past them; returns how many. They
/// only move timers ([`LockServer::idle_ticks`]), so they are made in one
/// call ([`LockServer::tick_idle`]). A debug build makes them one by one
/// instead and checks that each did nothing else: every debug run then holds
/// `idle_ticks` to what a tick really does (core's tests hold it on every
/// tick of theirs, in any build).
fn make_up_idle_ticks(server: &mut LockServer, next_tick_local_us: &mut u64, slept: Slept) -> u32 {
    let first_tick_local_us = *next_tick_local_us;
    let mut made_up = 0;
    while made_up < slept.idle && *next_tick_local_us <= slept.until_local_us {
        if slept.keep_last && *next_tick_local_us + CAMPAIGN_SLACK_US > slept.until_local_us {
            break;
        }
        *next_tick_local_us += TICK_US;
        made_up += 1;
    }
    if cfg!(debug_assertions) {
        for tick_local_us in (first_tick_local_us..*next_tick_local_us).step_by(TICK_US as usize) {
            server.tick(tick_local_us / 1_000);
            assert!(
                !server.has_ready() && !server.has_outputs(),
                "a tick LockServer::idle_ticks called idle made work at {} ms",
                tick_local_us / 1_000
            );
        }
    } else {
        server.tick_idle(first_tick_local_us / 1_000, made_up);
    }
    made_up
}

/// Why a server woke.
enum Woke {
    Delivery(Delivery),
    /// Its alarm, a change of its clock, the end of its pause, or a storm arming its campaign.
    Other,
}

/// Waits for a delivery (looked at first), `alarm`, (with `clock`) a change
/// of the clock after its `changes`-th, or (with `server`) the end of the
/// node's pause or, if the flag is set, a storm arming it.
async fn wake(
    mailbox: &mut Mailbox,
    alarm: &mut timer::Deadline,
    clock: Option<(&SharedClock, u64)>,
    server: Option<(&Ctx, NodeId, bool)>,
) -> Woke {
    std::future::poll_fn(|cx| {
        if let Poll::Ready(delivery) = mailbox.poll_recv(cx) {
            return Poll::Ready(Woke::Delivery(delivery));
        }
        let alarm_rang = Pin::new(&mut *alarm).poll(cx).is_ready();
        let clock_changed = clock.is_some_and(|(clock, changes)| poll_changed(clock, changes, cx));
        let woken = server.is_some_and(|(ctx, id, campaign)| ctx.poll_server_woken(id, campaign, cx));
        if alarm_rang || clock_changed || woken {
            Poll::Ready(Woke::Other)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Steps one delivery into the server at local time `now_local_ms`.
fn on_delivery(ctx: &Ctx, server: &mut LockServer, now_local_ms: u64, delivery: Delivery) {
    match delivery {
        Delivery::Packet { bytes, .. } => match wire::decode::<Envelope>(&bytes) {
            Ok(Envelope::Raft(message)) => server.step(message, now_local_ms),
            Ok(Envelope::Request { client, request, body }) => server.on_client(client, request, body, now_local_ms),
            Ok(Envelope::FloorRead { read }) => server.on_floor_read(read),
            Ok(_) => {}
            Err(_) => ctx.net.note_corrupt_detected(),
        },
        Delivery::Bounced { to: Addr::Client(client), bytes } => {
            if let Ok(Envelope::Reply { request, reply }) = wire::decode::<Envelope>(&bytes) {
                server.on_bounced(client, request, reply, now_local_ms);
            }
        }
        Delivery::Bounced { .. } => {}
    }
}

/// Records that `node`'s state machine now is `state` as of `index`.
fn record_snapshot(ctx: &Ctx, node: NodeId, index: LogIndex, state: &LockState) {
    let locks = state.locks().map(|(key, lock)| (key.clone(), lock.token)).collect();
    ctx.record(EventKind::SnapshotInstalled { node, index, token_last: state.token_last(), locks });
}

/// Rebuilds the server from what its disk holds durably.
fn start(ctx: &Ctx, id: NodeId) -> LockServer {
    let model = &ctx.model;
    let durable = ctx.node_disks[id.0 as usize].lock().expect("disk lock").durable().to_durable();
    let (index, state) = match &durable.snapshot {
        Some(snapshot) => (snapshot.index, snapshot.state.clone()),
        None => (LogIndex(0), LockState::new(Token(model.token_floor))),
    };
    // The checker learns the lock table this life starts from.
    record_snapshot(ctx, id, index, &state);
    let incarnation = ctx.next_incarnation(Actor::Server(id));
    let voters = (0..model.nodes).map(NodeId).collect();
    let mut config = Config::standard(id, voters);
    config.variant = model.variant;
    config.entries_per_message_max = model.entries_per_message_max as usize;
    config.inflight_max = model.inflight_max as usize;
    if let Some(entries) = model.snapshot_entries {
        config.snapshot_threshold_entries = u64::from(entries);
    }
    let ticks = |ms: u64| u32::try_from(ms / TICK_MS).expect("the model bounds its timeouts");
    config.heartbeat_ticks = ticks(model.heartbeat_ms);
    config.election_ticks_min = ticks(model.election_ms_min);
    config.election_ticks_max = ticks(model.election_ms_max);
    let mut service_config = ServiceConfig::standard(model.variant);
    service_config.wait_queue_max = model.wait_queue() as usize;
    let rng_seed = streams::raft(ctx.seed, id.0, incarnation);
    let raft = RaftNode::new(config, durable, rng_seed).expect("the standard raft config is valid");
    LockServer::new(service_config, raft, state)
}

/// The index of the snapshot `id`'s disk holds durably (0: none).
fn durable_snapshot_index(ctx: &Ctx, id: NodeId) -> LogIndex {
    let disk = ctx.node_disks[id.0 as usize].lock().expect("disk lock");
    disk.durable().snapshot.as_ref().map_or(LogIndex(0), |snapshot| snapshot.index)
}

/// Tells the checker when an fsync made a newer snapshot durable (`durable`:
/// the last one told in this life, which starts from the disk's).
fn note_durable_snapshot(ctx: &Ctx, id: NodeId, durable: &mut LogIndex) {
    let index = durable_snapshot_index(ctx, id);
    if index > *durable {
        *durable = index;
        ctx.record(EventKind::SnapshotDurable { node: id, index });
    }
}

/// Persists, sends and applies from true instant `now_true_us` until the
/// server has nothing more to do; returns the instant it ends at
/// (`now_true_us` unless it waited for an fsync).
async fn drive(
    ctx: &Ctx,
    id: NodeId,
    server: &mut LockServer,
    soft: &mut SoftState,
    durable: &mut LogIndex,
    mut now_true_us: u64,
) -> u64 {
    let clock = ctx.clock_of(Actor::Server(id));
    for _ in 0..READY_ROUNDS_MAX {
        if !server.has_ready() {
            break;
        }
        let mut ready = server.ready();
        ctx.count_ready_round(now_true_us);
        let must_sync = persist(ctx, id, &mut ready);
        // Acknowledgements of a round that wrote to disk, whenever they go:
        // the ack-crash family (`world/acks.rs`) crashes a node just after one.
        let report_acks = must_sync && ctx.acks_watched();
        if report_acks {
            note_acks(ctx, &ready.messages);
        }
        // Every (pre-)vote grant, durable or not: the vote-strike family (`world/votes.rs`).
        let report_votes = ctx.votes_watched();
        if report_votes {
            note_votes(ctx, &ready.messages);
        }
        send_all(ctx, id, &mut ready.messages, now_true_us);
        if must_sync {
            ctx.count_sync(now_true_us);
            // Dropped unfinished only if the server is killed inside the fsync.
            let vote_in_fsync = VoteInFsync::new(ctx, &ready.messages_after_persist);
            fsync(&ctx.node_disks[id.0 as usize]).await;
            now_true_us = now_us();
            vote_in_fsync.done();
            note_durable_snapshot(ctx, id, durable);
        }
        if report_acks {
            note_acks(ctx, &ready.messages_after_persist);
        }
        if report_votes {
            note_votes(ctx, &ready.messages_after_persist);
        }
        send_all(ctx, id, &mut ready.messages_after_persist, now_true_us);
        if must_sync && !server.raft().is_recovering() {
            let mut disk = ctx.node_disks[id.0 as usize].lock().expect("disk lock");
            if disk.durable().restored_from_backup {
                // Durable with the vote that ended recovery (ARCHITECTURE.md, "Restores").
                disk.write(NodeOp::Recovered);
            }
        }
        if let Some(snapshot) = &ready.snapshot {
            record_snapshot(ctx, id, snapshot.index, &snapshot.state);
        }
        server.apply_ready(ready, local_at(clock, now_true_us) / 1_000);
        handle_outputs(ctx, id, server);
    }
    handle_outputs(ctx, id, server);
    ctx.note_probes(server.take_probes());
    let role = server.raft().soft_state();
    if role != *soft {
        *soft = role;
        ctx.note_role(id, role);
    }
    now_true_us
}

/// A vote granted in a round that waits for its fsync: if the server is
/// killed inside the fsync, the task drops this unfinished, and the probe
/// `vote-lost-in-fsync-crash` is reached (the vote is never sent).
struct VoteInFsync<'a> {
    ctx: Option<&'a Ctx>,
}

impl<'a> VoteInFsync<'a> {
    fn new(ctx: &'a Ctx, after_persist: &[Message]) -> VoteInFsync<'a> {
        let granted = after_persist
            .iter()
            .any(|message| matches!(message.body, MessageBody::RequestVoteResponse { granted: true }));
        VoteInFsync { ctx: granted.then_some(ctx) }
    }

    fn done(mut self) {
        self.ctx = None;
    }
}

impl Drop for VoteInFsync<'_> {
    fn drop(&mut self) {
        if let Some(ctx) = self.ctx {
            ctx.probe_from_drop(fencelock::Probe::VoteLostInFsyncCrash);
        }
    }
}

/// Writes the persistent parts of a Ready to the disk (pending until fsync).
/// Returns whether anything the protocol depends on was written: a commit
/// index alone is not worth an fsync (it is recomputed after a crash).
fn persist(ctx: &Ctx, id: NodeId, ready: &mut Ready) -> bool {
    let mut disk = ctx.node_disks[id.0 as usize].lock().expect("disk lock");
    let before = disk.durable().hard_state;
    let mut must_sync = false;
    if let Some(snapshot) = &ready.snapshot {
        disk.write(NodeOp::Snapshot(snapshot.clone()));
        must_sync = true;
    }
    if !ready.entries.is_empty() {
        // Moved, not cloned: applying the Ready reads only its committed entries.
        disk.write(NodeOp::Append(std::mem::take(&mut ready.entries)));
        must_sync = true;
    }
    if let Some(hard_state) = ready.hard_state {
        disk.write(NodeOp::HardState(hard_state));
        must_sync |= hard_state.term != before.term || hard_state.vote != before.vote;
    }
    must_sync
}

/// Reports the vote grants and entry acknowledgements among `messages` to
/// the ack-crash watch, as they are sent.
fn note_acks(ctx: &Ctx, messages: &[Message]) {
    let acks = messages.iter().filter_map(|message| {
        let acked = match message.body {
            MessageBody::RequestVoteResponse { granted: true } => Acked::Vote,
            MessageBody::AppendResponse { success: true, .. } => Acked::Entries,
            _ => return None,
        };
        Some(AckSent { node: message.from, to: message.to, term: message.term, acked, at_us: now_us() })
    });
    ctx.report_acks(acks);
}

fn note_votes(ctx: &Ctx, messages: &[Message]) {
    let votes = messages.iter().filter_map(|message| {
        let pre = match message.body {
            MessageBody::PreVoteResponse { granted: true } => true,
            MessageBody::RequestVoteResponse { granted: true } => false,
            _ => return None,
        };
        Some(VoteSent { voter: message.from, candidate: message.to, term: message.term, pre, at_us: now_us() })
    });
    ctx.report_votes(votes);
}

/// Sends `messages` at true instant `now_true_us` (now), draining them:
/// their buffer goes back to the server with the Ready
/// ([`LockServer::apply_ready`]).
fn send_all(ctx: &Ctx, id: NodeId, messages: &mut Vec<Message>, now_true_us: u64) {
    ctx.count_messages(messages.len() as u64, now_true_us);
    ctx.send_all(
        now_true_us,
        Addr::Server(id),
        messages.drain(..).map(|message| (Addr::Server(message.to), Envelope::Raft(message))),
    );
}

fn handle_outputs(ctx: &Ctx, id: NodeId, server: &mut LockServer) {
    for output in server.take_outputs() {
        match output {
            Output::Reply { client, request, reply } => {
                ctx.record(EventKind::Replied { node: id, client, request, reply });
                ctx.send(Addr::Server(id), Addr::Client(client), &Envelope::Reply { request, reply });
            }
            Output::Applied { index, term, command, result } => {
                ctx.record(EventKind::Applied { node: id, index, term, command, result });
            }
            Output::AppliedNoop { index, term } => {
                ctx.record(EventKind::AppliedNoop { node: id, index, term });
            }
            Output::Compacted(snapshot) => {
                ctx.node_disks[id.0 as usize].lock().expect("disk lock").write(NodeOp::Compact(snapshot));
            }
            Output::ExpireProposed { key, token } => {
                ctx.record(EventKind::ExpireProposed { node: id, key, token });
            }
            Output::GhostReleaseProposed { key, token, holder } => {
                ctx.record(EventKind::GhostReleaseProposed { node: id, key, token, holder });
            }
            Output::TurnedAway { key, holder } => {
                ctx.record(EventKind::TurnedAway { node: id, key, holder });
            }
            Output::FloorAnswer { read, answer } => {
                ctx.send(Addr::Server(id), Addr::Resource, &Envelope::FloorReply { read, answer });
            }
        }
    }
}
