//! The supervisor: madsim's node 0, the `block_on` future itself. It is
//! never killed, so it owns the processes' handles, the operator's backups
//! and the advance of time, and it applies each fault of the plan.

use super::acks::AckCrash;
use super::amnesia::Amnesia;
use super::churn::{Churn, Cluster};
use super::fences::FenceStrike;
use super::figure8::Figure8Strike;
use super::grants::GrantStrike;
use super::late_renewals::LateRenewal;
use super::renews::RenewStrike;
use super::restores::{Backups, ClusterRestore};
use super::votes::VoteStrike;
use super::{salvage, RunRecord};
use crate::faults::{ChurnEvent, Fault, FaultEvent};
use crate::history::{Actor, Event, EventKind, History, Reader};
use crate::machine::clock::{init_true_time, now_us, TrueTime};
use crate::machine::disk::{NodeImage, NodeOp};
use crate::machine::net::{Addr, Net, NetConfig};
use crate::machine::timer;
use crate::model::Model;
use crate::nodes::commands::CommandQueue;
use crate::nodes::context::{ArmedStall, Ctx};
use crate::nodes::{resource, server, worker};
use crate::streams;
use fencelock::raft::Role;
use fencelock::{ClientId, NodeId, Probe, Term, Token};
use madsim::runtime::{Handle, NodeHandle};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

/// Which strike families follow the history from the run's start.
#[derive(Clone, Copy)]
struct Follows {
    grants: bool,
    fences: bool,
}

impl Follows {
    /// From the heal on no episode starts: nothing follows the history for one.
    const NONE: Follows = Follows { grants: false, fences: false };
}

/// The madsim side of every process, with what the operator keeps.
pub(crate) struct Supervisor {
    pub(crate) ctx: Arc<Ctx>,
    pub(super) handle: Handle,
    pub(super) servers: Vec<NodeHandle>,
    pub(super) clients: Vec<NodeHandle>,
    pub(super) resource: NodeHandle,
    /// Processes that are down (killed, not yet restarted).
    pub(super) down: BTreeMap<Actor, ()>,
    /// Paused processes and the true instant their pause ends (`u64::MAX`
    /// for a hold), shared with the tasks that end timed pauses.
    pub(super) paused: Arc<Mutex<BTreeMap<Actor, u64>>>,
    backups: Backups,
    pub(super) rng: ChaCha8Rng,
    /// Taken out while it acts on the supervisor (`churn_step`); always there otherwise.
    churn: Option<Box<Churn>>,
    /// Crashes after acknowledging; taken out like `churn` while it acts.
    acks: Option<Box<AckCrash>>,
    /// Renew strikes; taken out like `churn` while they act.
    renews: Option<Box<RenewStrike>>,
    /// Ack amnesia; taken out like `churn` while it acts.
    amnesia: Option<Box<Amnesia>>,
    /// Grant strikes; taken out like `churn` while they act.
    grants: Option<Box<GrantStrike>>,
    /// Vote strikes; taken out like `churn` while they act.
    votes: Option<Box<VoteStrike>>,
    /// Fence strikes; taken out like `churn` while they act.
    fences: Option<Box<FenceStrike>>,
    /// Late renewals; taken out like `churn` while they act.
    late: Option<Box<LateRenewal>>,
    /// Figure-8 strikes; taken out like `churn` while they act.
    figure8: Option<Box<Figure8Strike>>,
    /// The node the tasks that end timed pauses run on, killed with them
    /// when the run ends (`tear_down`). madsim keeps a record of every task
    /// spawned on its main node (the supervisor's) for the whole run, and
    /// sheds a finished task's record on any other node when it counts the
    /// tasks: a pause a few seconds apart for hours left thousands.
    timers: NodeHandle,
    /// Leaders crashed by `CrashLeader` and the true instant each comes back, in order.
    restarts_due: Vec<(u64, NodeId)>,
    /// `now_us` reads this run's clock directly while the supervisor lives.
    _true_time: TrueTime,
}

pub(super) fn is_initial_rate(fault: &Fault) -> bool {
    matches!(fault, Fault::ClockRate { .. })
}

/// What the world must know of its plan before the first fault: the
/// clocks' initial rates (the rates scheduled at time 0) and whether the
/// plan strikes grants or fences (their strikes follow the history from
/// its start).
pub(crate) struct Outlook {
    clock_rates: BTreeMap<Actor, i64>,
    grant_strikes: bool,
    fence_strikes: bool,
}

impl Outlook {
    /// Reads a plan through, in order.
    pub(crate) fn of(plan: impl Iterator<Item = FaultEvent>) -> Outlook {
        let mut outlook = Outlook { clock_rates: BTreeMap::new(), grant_strikes: false, fence_strikes: false };
        for event in plan {
            match event.fault {
                Fault::ClockRate { actor, ppm } if event.at_ms == 0 => {
                    outlook.clock_rates.insert(actor, ppm);
                }
                Fault::GrantStrikes { .. } => outlook.grant_strikes = true,
                Fault::FenceStrikes { .. } => outlook.fence_strikes = true,
                _ => {}
            }
        }
        outlook
    }
}

fn clock_event(ctx: &Ctx, actor: Actor, rate_ppm: i64) -> EventKind {
    let clock = ctx.clock_of(actor).lock().expect("clock lock").clone();
    EventKind::Clock {
        actor,
        local_us: clock.local_us(now_us()),
        rate_ppm,
        within_bound: clock.within_bound(ctx.model.drift_ppm_max),
    }
}

pub(crate) async fn sleep_until_us(at_us: u64) {
    let now = now_us();
    if at_us > now {
        madsim::time::sleep(Duration::from_micros(at_us - now)).await;
    }
}

impl Supervisor {
    /// Builds the world: the router, the clocks (initial rates from the
    /// schedule), the disks and every process.
    pub(crate) fn start(
        seed: u64,
        model: Model,
        outlook: Outlook,
        script_queues: Option<BTreeMap<ClientId, CommandQueue>>,
        history: History,
    ) -> Supervisor {
        let true_time = init_true_time();
        let net_config = NetConfig {
            loss_rate: model.loss_rate,
            dup_rate: model.dup_rate,
            corrupt_rate: if model.corruption { 0.01 } else { 0.0 },
            ..NetConfig::default()
        };
        let net = Net::new(net_config, streams::net(seed));
        net.spawn_router();
        let clock_rates = outlook.clock_rates;
        // The grant and fence strikes follow the history from its start when
        // the run may strike: when its plan has them, or anything may happen (a script).
        let follows = Follows {
            grants: history.keeps_all() || outlook.grant_strikes,
            fences: history.keeps_all() || outlook.fence_strikes,
        };
        let mut ctx = Ctx::new(seed, model, net, &clock_rates, history);
        ctx.script_queues = script_queues.map(Mutex::new);
        let ctx = Arc::new(ctx);
        if follows.grants {
            ctx.follow_history(Reader::GrantStrikes);
        }
        if follows.fences {
            ctx.follow_history(Reader::FenceStrikes);
        }
        salvage::offer(&ctx.shared);
        // Every clock's starting mapping is in the history: the checker
        // converts local lease ends to true time with it.
        let actors = (0..ctx.model.nodes)
            .map(|n| Actor::Server(NodeId(n)))
            .chain((0..ctx.model.clients).map(|c| Actor::Client(ClientId(c))))
            .chain([Actor::Resource]);
        for actor in actors {
            let rate_ppm = clock_rates.get(&actor).copied().unwrap_or(0);
            ctx.record(clock_event(&ctx, actor, rate_ppm));
        }
        Supervisor::build(ctx, Handle::current(), follows, true_time)
    }

    /// Ends the run and hands back what it recorded.
    pub(crate) fn finish(self) -> RunRecord {
        let sim_us = now_us();
        let (history, probes) = {
            let mut shared = self.ctx.shared();
            (std::mem::take(&mut shared.history), shared.probes)
        };
        let record = RunRecord { history, net: self.ctx.net.stats(), sim_us, probes };
        self.tear_down();
        record
    }

    /// Kills every process and the pause ends (the `timers` node) once the
    /// record is taken. madsim has no `Drop` for its runtime: a task still
    /// pending when `block_on` returns is kept alive by a cycle (its future
    /// holds a handle on the timer that holds its waker), and with it the
    /// world's whole state, about 170 KB a seed. Killed, each task is
    /// dropped by the executor as it drains its queue before `block_on`
    /// returns, and the closed net ends the router.
    /// Nothing is recorded after the record is taken, so the run itself does
    /// not change.
    fn tear_down(&self) {
        for node in self.servers.iter().chain(&self.clients).chain([&self.resource, &self.timers]) {
            self.handle.kill(node.id());
        }
        self.ctx.net.close();
    }

    fn build(ctx: Arc<Ctx>, handle: Handle, follows: Follows, true_time: TrueTime) -> Supervisor {
        let servers = (0..ctx.model.nodes)
            .map(|n| spawn_node(&handle, &ctx, format!("n{n}"), move |c| server::run(c, NodeId(n))))
            .collect();
        let resource = spawn_node(&handle, &ctx, "db".to_string(), resource::run);
        let clients = (0..ctx.model.clients)
            .map(|i| spawn_node(&handle, &ctx, format!("c{i}"), move |c| worker::run(c, ClientId(i))))
            .collect();
        // Made last, so every other node keeps its id.
        let timers = handle.create_node().name("timers").build();
        let rng = streams::operator(ctx.seed);
        let ctx_seed = ctx.seed;
        Supervisor {
            ctx,
            handle,
            servers,
            clients,
            resource,
            down: BTreeMap::new(),
            paused: Arc::new(Mutex::new(BTreeMap::new())),
            backups: Backups::default(),
            rng,
            churn: Some(Box::new(Churn::new(ctx_seed))),
            acks: Some(Box::new(AckCrash::new(ctx_seed))),
            renews: Some(Box::new(RenewStrike::new(ctx_seed))),
            amnesia: Some(Box::new(Amnesia::new(ctx_seed))),
            grants: Some(Box::new(GrantStrike::new(follows.grants))),
            votes: Some(Box::new(VoteStrike::new(ctx_seed))),
            fences: Some(Box::new(FenceStrike::new(follows.fences))),
            late: Some(Box::new(LateRenewal::new())),
            figure8: Some(Box::new(Figure8Strike::new())),
            timers,
            restarts_due: Vec::new(),
            _true_time: true_time,
        }
    }

    pub(crate) fn node_of(&self, actor: Actor) -> &NodeHandle {
        match actor {
            Actor::Server(node) => &self.servers[node.0 as usize],
            Actor::Client(client) => &self.clients[client.0 as usize],
            Actor::Resource => &self.resource,
        }
    }

    pub(crate) async fn apply(&mut self, fault: &Fault) {
        let ctx = self.ctx.clone();
        ctx.record(EventKind::Fault { fault: fault.clone() });
        self.churn_mut().yield_to(fault);
        self.acks.as_mut().expect("the ack crashes are back after every step").yield_to(fault);
        self.renews.as_mut().expect("the renew strikes are back after every step").yield_to(fault);
        self.amnesia.as_mut().expect("the ack amnesia is back after every step").yield_to(fault);
        // Grant strikes only pause, and a planned fault ends a pause as it would any other.
        self.votes.as_mut().expect("the vote strikes are back after every step").yield_to(fault);
        self.fences.as_mut().expect("the fence strikes are back after every step").yield_to(fault);
        // Late renewals only hold links; a planned heal ends a hold for what is sent after it.
        self.figure8_mut().yield_to(fault);
        match fault {
            Fault::Partition { sides } => ctx.net.partition(sides),
            Fault::OneWay { from, to } => ctx.net.cut(*from, *to),
            Fault::IsolateLeader => {
                if let Some(leader) = ctx.known_leader() {
                    ctx.net.isolate(Addr::Server(leader));
                }
            }
            Fault::IsolateLeaderWith { clients, pause_ms } => {
                if let Some(leader) = ctx.known_leader() {
                    let mut side = vec![Addr::Server(leader)];
                    side.extend(clients.iter().map(|client| Addr::Client(*client)));
                    let others = (0..ctx.model.nodes).map(NodeId).filter(|n| *n != leader).map(Addr::Server);
                    ctx.net.partition(&[side, others.collect()]);
                    if *pause_ms > 0 {
                        self.pause(Actor::Server(leader), *pause_ms);
                    }
                }
            }
            Fault::CrashLeader { torn, down_ms } => {
                if let Some(leader) = self.live_leader() {
                    self.crash_server(leader, *torn);
                    self.restarts_due.push((now_us() + down_ms * 1_000, leader));
                }
            }
            Fault::PauseLeader { ms } => {
                if let Some(leader) = self.live_leader() {
                    self.pause(Actor::Server(leader), *ms);
                }
            }
            Fault::StallHolder { ms } => ctx.shared().armed_stalls.push_back(ArmedStall::For(*ms)),
            Fault::StallUntilOvertaken(stall) => {
                ctx.shared().armed_stalls.push_back(ArmedStall::UntilOvertaken(*stall))
            }
            Fault::StallOnGrant { ms } => ctx.shared().armed_stalls.push_back(ArmedStall::OnGrant(*ms)),
            Fault::LoseWriteAnswer => ctx.shared().write_answers_to_lose += 1,
            Fault::ElectionStorm { servers } => {
                let leader = self.live_leader();
                let up = (0..ctx.model.nodes)
                    .map(NodeId)
                    .filter(|n| !self.down.contains_key(&Actor::Server(*n)) && Some(*n) != leader);
                ctx.arm_campaigns(up.take(usize::from(*servers)));
            }
            Fault::CutClient { client } => ctx.net.isolate(Addr::Client(*client)),
            Fault::Heal => ctx.net.heal(),
            Fault::Crash { node, torn } => self.crash_server(*node, *torn),
            Fault::Restart { node } => self.restart(Actor::Server(*node)),
            Fault::Pause { actor, ms } => self.pause(*actor, *ms),
            Fault::ClockRate { actor, ppm } => {
                ctx.clock_of(*actor).lock().expect("clock lock").set_rate(now_us(), *ppm);
                ctx.record(clock_event(&ctx, *actor, *ppm));
            }
            Fault::ClockStep { actor, delta_ms } => {
                let rate_ppm = {
                    let mut clock = ctx.clock_of(*actor).lock().expect("clock lock");
                    clock.step(now_us(), delta_ms * 1_000);
                    clock.rate_ppm()
                };
                ctx.record(clock_event(&ctx, *actor, rate_ppm));
            }
            Fault::BackupNode { node } => {
                let image = ctx.node_disks[node.0 as usize].lock().expect("disk lock").backup();
                self.backups.back_up_node(*node, now_us(), image);
            }
            Fault::RestoreNode { node } => self.restore_node(*node),
            Fault::BackupCluster => {
                let (floor, variant) = (Token(ctx.model.token_floor), ctx.model.variant);
                self.backups.back_up_cluster(&ctx.node_disks, now_us(), floor, variant);
            }
            Fault::RestoreCluster => self.restore_cluster(),
            Fault::CrashResource => {
                self.kill(Actor::Resource);
                let torn_keep = self.rng.gen_range(0..2);
                ctx.resource_disk.lock().expect("disk lock").crash(torn_keep);
            }
            Fault::RestartResource => self.restart(Actor::Resource),
            Fault::DiskStall { node, fsync_ms } => {
                ctx.node_disks[node.0 as usize].lock().expect("disk lock").set_stall_us(fsync_ms * 1_000);
            }
            Fault::LeaderChurn { for_ms, within_ms, down_ms } => {
                self.churn_mut().start(now_us(), *for_ms, *within_ms, *down_ms)
            }
            Fault::BackupResource => {
                let image = ctx.resource_disk.lock().expect("disk lock").backup();
                self.backups.back_up_resource(now_us(), image);
            }
            Fault::RestoreResource => self.restore_resource(),
            Fault::AckCrashes { .. } => self.with_family(|s| &mut s.acks, |acks, s| acks.start(now_us(), fault, s)),
            Fault::RenewStrikes { .. } => {
                self.with_family(|s| &mut s.renews, |renews, s| renews.start(now_us(), fault, s))
            }
            Fault::AckAmnesia { .. } => {
                self.with_family(|s| &mut s.amnesia, |amnesia, s| amnesia.start(now_us(), fault, s))
            }
            Fault::GrantStrikes { .. } => {
                self.with_family(|s| &mut s.grants, |grants, s| grants.start(now_us(), fault, s))
            }
            Fault::VoteStrikes { .. } => self.with_family(|s| &mut s.votes, |votes, s| votes.start(now_us(), fault, s)),
            Fault::FenceStrikes { .. } => {
                self.with_family(|s| &mut s.fences, |fences, s| fences.start(now_us(), fault, s))
            }
            Fault::LateRenewals { .. } => self.with_family(|s| &mut s.late, |late, s| late.start(now_us(), fault, s)),
            Fault::Figure8Strikes { .. } => self.figure8_mut().start(now_us(), fault),
        }
    }

    pub(crate) fn kill(&mut self, actor: Actor) {
        if self.down.contains_key(&actor) {
            return;
        }
        self.paused.lock().expect("pause lock").remove(&actor);
        self.handle.kill(self.node_of(actor).id());
        if let Actor::Client(client) = actor {
            // A worker killed in a stall reads no more (no fault kills a
            // worker today; this keeps a future one from pinning the history).
            self.ctx.unfollow_history(Reader::Stall(client));
        }
        self.down.insert(actor, ());
        self.ctx.record(EventKind::Crashed { actor });
    }

    pub(crate) fn restart(&mut self, actor: Actor) {
        if self.down.remove(&actor).is_none() {
            return;
        }
        self.handle.restart(self.node_of(actor).id());
        self.ctx.record(EventKind::Restarted { actor });
    }

    pub(crate) fn crash_server(&mut self, node: NodeId, torn: bool) {
        self.kill(Actor::Server(node));
        let mut disk = self.ctx.node_disks[node.0 as usize].lock().expect("disk lock");
        let torn_keep = if torn && disk.pending_len() > 0 { self.rng.gen_range(0..disk.pending_len()) } else { 0 };
        let lost = &disk.pending()[torn_keep.min(disk.pending_len())..];
        let compaction_lost = lost.iter().any(|op| matches!(op, NodeOp::Compact(_)));
        let tail_cut = torn_keep > 0 && !lost.is_empty();
        disk.crash(torn_keep);
        drop(disk);
        if compaction_lost {
            self.ctx.probe(Probe::CompactionRacingCrash);
        }
        if tail_cut {
            self.ctx.probe(Probe::TornLogTailCut);
        }
    }

    fn is_paused(&self, actor: Actor) -> bool {
        self.paused.lock().expect("pause lock").contains_key(&actor)
    }

    /// A stop-the-world stall of `ms` (a GC pause): timers fire and messages
    /// queue while paused, and everything drains on resume.
    pub(crate) fn pause(&mut self, actor: Actor, ms: u64) {
        if self.down.contains_key(&actor) || self.is_paused(actor) {
            return;
        }
        let until_us = now_us() + ms * 1_000;
        let id = self.node_of(actor).id();
        self.handle.pause(id);
        self.paused.lock().expect("pause lock").insert(actor, until_us);
        self.ctx.note_paused(actor);
        let handle = self.handle.clone();
        let ctx = self.ctx.clone();
        let paused = self.paused.clone();
        self.timers.spawn(async move {
            sleep_until_us(until_us).await;
            // Only this pause's end: a kill, a heal or another pause since
            // then has taken the entry over.
            let mine = {
                let mut paused = paused.lock().expect("pause lock");
                let mine = paused.get(&actor) == Some(&until_us);
                if mine {
                    paused.remove(&actor);
                }
                mine
            };
            if mine {
                handle.resume(id);
                ctx.note_resumed(actor);
            }
        });
        // Counting the tasks sheds the records of the finished ones (`timers`).
        self.handle.metrics().num_tasks();
    }

    /// A stop-the-world stall that lasts until [`Supervisor::resume`].
    pub(crate) fn hold(&mut self, actor: Actor) {
        if self.down.contains_key(&actor) || self.is_paused(actor) {
            return;
        }
        self.handle.pause(self.node_of(actor).id());
        self.paused.lock().expect("pause lock").insert(actor, u64::MAX);
        self.ctx.note_paused(actor);
    }

    pub(crate) fn resume(&mut self, actor: Actor) {
        if self.paused.lock().expect("pause lock").remove(&actor).is_some() {
            self.handle.resume(self.node_of(actor).id());
            self.ctx.note_resumed(actor);
        }
    }

    /// One server restarted from a stale backup of its own disk (amnesia).
    pub(crate) fn restore_node(&mut self, node: NodeId) {
        let Some((backup_at_us, image)) = self.backups.node_restore(node, &self.ctx.node_disks) else {
            // No usable backup of this cluster generation: the operator restarts it as it is.
            self.restart(Actor::Server(node));
            return;
        };
        self.restart_from(node, backup_at_us, image);
    }

    /// `node` stopped, its disk replaced by `image` (a backup taken at `backup_at_us`), and started again.
    fn restart_from(&mut self, node: NodeId, backup_at_us: u64, image: NodeImage) {
        self.kill(Actor::Server(node));
        self.ctx.node_disks[usize::from(node.0)].lock().expect("disk lock").restore(image);
        self.ctx.record(EventKind::NodeRestored { node, backup_at_us });
        self.restart(Actor::Server(node));
    }

    /// Every server stopped, its disk replaced by the cluster backup, and started again.
    pub(crate) fn restore_cluster(&mut self) {
        let Some(restore) = self.backups.cluster_restore(self.ctx.model.variant) else {
            return;
        };
        for n in 0..self.ctx.model.nodes {
            self.kill(Actor::Server(NodeId(n)));
        }
        for disk in &self.ctx.node_disks {
            disk.lock().expect("disk lock").restore(restore.image.clone());
        }
        let ClusterRestore { epoch, backup_at_us, token_floor, .. } = restore;
        self.ctx.record(EventKind::ClusterRestored { epoch, backup_at_us, token_floor });
        for n in 0..self.ctx.model.nodes {
            self.restart(Actor::Server(NodeId(n)));
        }
    }

    /// The resource stopped, its disk replaced by its last backup, and
    /// started again: it reads its floors before it serves a write.
    pub(crate) fn restore_resource(&mut self) {
        let Some((restore, backup_at_us, image)) = self.backups.resource_restore() else {
            return;
        };
        self.kill(Actor::Resource);
        self.ctx.resource_disk.lock().expect("disk lock").restore(image);
        self.ctx.record(EventKind::ResourceRestored { restore, backup_at_us });
        self.restart(Actor::Resource);
    }

    /// Ends the safety phase: every link, rate, pause, disk stall and crash is undone.
    pub(crate) fn heal(&mut self) {
        let net = &self.ctx.net;
        net.heal();
        net.set_loss_rate(0.0);
        net.set_dup_rate(0.0);
        net.set_corrupt_rate(0.0);
        let paused: Vec<Actor> = std::mem::take(&mut *self.paused.lock().expect("pause lock")).into_keys().collect();
        for actor in paused {
            self.handle.resume(self.node_of(actor).id());
            self.ctx.note_resumed(actor);
        }
        for disk in &self.ctx.node_disks {
            disk.lock().expect("disk lock").set_stall_us(0);
        }
        self.churn = Some(Box::new(Churn::new(self.ctx.seed)));
        self.acks = Some(Box::new(AckCrash::new(self.ctx.seed)));
        self.renews = Some(Box::new(RenewStrike::new(self.ctx.seed)));
        self.amnesia = Some(Box::new(Amnesia::new(self.ctx.seed)));
        self.grants = Some(Box::new(GrantStrike::new(Follows::NONE.grants)));
        self.votes = Some(Box::new(VoteStrike::new(self.ctx.seed)));
        self.fences = Some(Box::new(FenceStrike::new(Follows::NONE.fences)));
        self.late = Some(Box::new(LateRenewal::new()));
        self.figure8 = Some(Box::new(Figure8Strike::new()));
        for reader in [Reader::GrantStrikes, Reader::FenceStrikes, Reader::RenewStrikes, Reader::LateRenewals] {
            self.ctx.unfollow_history(reader);
        }
        self.ctx.watch_acks(false);
        self.ctx.watch_votes(false);
        let down: Vec<Actor> = self.down.keys().copied().collect();
        for actor in down {
            self.restart(actor);
        }
        self.ctx.record(EventKind::Healed);
    }

    /// Sleeps until `at_us`, doing the reactive families' work and bringing
    /// crashed leaders back on the way. The families act at their own
    /// instants (an episode's end, a victim due back, a give-up) and, while
    /// one listens, in the instant of every event recorded and every
    /// acknowledgement or vote reported (the bell, `Ctx::ring`): a
    /// supervisor that looked every millisecond instead was a tenth of a
    /// run's time. Its first step is at once: the fault just applied (or
    /// the start, or the heal) may be what a family waits for. What the
    /// supervisor does itself rings nothing: a family later in a step's
    /// order sees an earlier one's action in that step, an earlier one sees
    /// it at the next event (a server restarted rings as it reports its
    /// role; a cable pulled or plugged is the churn's or the amnesia's,
    /// which step before the figure-8 strikes that look at cables).
    pub(crate) async fn sleep_until_us(&mut self, at_us: u64) {
        let mut deadline = None;
        loop {
            self.churn_step();
            self.restart_due_leaders();
            let now = now_us();
            if now >= at_us {
                return;
            }
            let (wake_us, listening) = self.next_wake(now, at_us);
            if wake_us <= now {
                continue;
            }
            self.ctx.listen(listening);
            let alarm = timer::refresh(&mut deadline, wake_us);
            let ctx = &self.ctx;
            std::future::poll_fn(|cx| {
                if listening && ctx.poll_rung(cx) {
                    return Poll::Ready(());
                }
                Pin::new(&mut *alarm).poll(cx)
            })
            .await;
            self.ctx.listen(false);
        }
    }

    /// The first instant a family, a crashed leader or the caller (`at_us`)
    /// is owed a step, and whether a family listens for events before it.
    fn next_wake(&mut self, now: u64, at_us: u64) -> (u64, bool) {
        let acks = self.acks.as_deref().expect("the ack crashes are back after every step");
        let renews = self.renews.as_deref().expect("the renew strikes are back after every step");
        let amnesia = self.amnesia.as_deref().expect("the ack amnesia is back after every step");
        let grants = self.grants.as_deref().expect("the grant strikes are back after every step");
        let votes = self.votes.as_deref().expect("the vote strikes are back after every step");
        let fences = self.fences.as_deref().expect("the fence strikes are back after every step");
        let late = self.late.as_deref().expect("the late renewals are back after every step");
        let churn = self.churn.as_deref().expect("the churn is back after every step");
        let figure8 = self.figure8.as_deref().expect("the figure-8 strikes are back after every step");
        let listening = churn.listens(now)
            || acks.listens(now)
            || renews.listens(now)
            || amnesia.listens()
            || grants.listens(now)
            || votes.listens(now)
            || fences.listens(now)
            || late.listens(now)
            || figure8.listens(now);
        let restart = self.restarts_due.iter().map(|(due_us, _)| *due_us).min();
        let wake_us = [
            churn.next_wake_us(now),
            acks.next_wake_us(now),
            renews.next_wake_us(now),
            amnesia.next_wake_us(now),
            votes.next_wake_us(now),
            fences.next_wake_us(),
            late.next_wake_us(now),
            figure8.next_wake_us(now),
            restart,
        ]
        .into_iter()
        .flatten()
        .fold(at_us, u64::min);
        (wake_us, listening)
    }

    /// The leader of the highest term among the live servers, as they last reported.
    fn live_leader(&self) -> Option<NodeId> {
        self.live_leaders().into_iter().max_by_key(|(_, term)| *term).map(|(node, _)| node)
    }

    /// Restarts the leaders crashed by `CrashLeader` whose time down is over.
    fn restart_due_leaders(&mut self) {
        let now = now_us();
        while let Some(i) = self.restarts_due.iter().position(|(due_us, _)| *due_us <= now) {
            let (_, node) = self.restarts_due.remove(i);
            self.restart(Actor::Server(node));
        }
    }

    fn churn_mut(&mut self) -> &mut Churn {
        self.churn.as_mut().expect("the churn is back after every step")
    }

    fn figure8_mut(&mut self) -> &mut Figure8Strike {
        self.figure8.as_mut().expect("the figure-8 strikes are back after every step")
    }

    /// Lets the churn, the ack crashes, the renew strikes, the ack amnesia,
    /// the grant, vote and fence strikes, the late renewals and the figure-8
    /// strikes, in this order, do what they owe now, acting on this supervisor.
    /// The step is synchronous, so simulated time stands still through it:
    /// one reading of the clock serves every family.
    fn churn_step(&mut self) {
        let now = now_us();
        self.with_family(|s| &mut s.churn, |churn, s| churn.step(now, s));
        self.with_family(|s| &mut s.acks, |acks, s| acks.step(now, s));
        self.with_family(|s| &mut s.renews, |renews, s| renews.step(now, s));
        self.with_family(|s| &mut s.amnesia, |amnesia, s| amnesia.step(now, s));
        self.with_family(|s| &mut s.grants, |grants, s| grants.step(now, s));
        self.with_family(|s| &mut s.votes, |votes, s| votes.step(now, s));
        self.with_family(|s| &mut s.fences, |fences, s| fences.step(now, s));
        self.with_family(|s| &mut s.late, |late, s| late.step(now, s));
        self.with_family(|s| &mut s.figure8, |figure8, s| figure8.step(now, s));
    }

    /// Takes a reactive family out of its slot while it acts on this
    /// supervisor (it needs the supervisor mutably), then puts it back. The
    /// families are boxed: this runs for each of them at every step, and
    /// moving a pointer costs nothing where moving a family and its random
    /// stream was a few percent of a run.
    fn with_family<F>(
        &mut self,
        slot: fn(&mut Supervisor) -> &mut Option<Box<F>>,
        act: impl FnOnce(&mut F, &mut Supervisor),
    ) {
        let mut family = slot(self).take().expect("a reactive family is back after every step");
        act(&mut family, self);
        *slot(self) = Some(family);
    }
}

/// The churn's view of the cluster.
impl Cluster for Supervisor {
    fn nodes(&self) -> usize {
        usize::from(self.ctx.model.nodes)
    }

    fn applies(&self, node: NodeId) -> u64 {
        self.ctx.shared().applies.get(&node).copied().unwrap_or(0)
    }

    fn servers_down(&self) -> usize {
        self.down.keys().filter(|actor| matches!(actor, Actor::Server(_))).count()
    }

    fn live_leaders(&self) -> Vec<(NodeId, Term)> {
        let shared = self.ctx.shared();
        shared
            .roles
            .iter()
            .filter(|(node, soft)| soft.role == Role::Leader && !self.down.contains_key(&Actor::Server(**node)))
            .map(|(node, soft)| (*node, soft.term))
            .collect()
    }

    fn leads(&self, node: NodeId, term: Term) -> bool {
        let alive = !self.down.contains_key(&Actor::Server(node));
        let shared = self.ctx.shared();
        alive && shared.roles.get(&node).is_some_and(|soft| soft.role == Role::Leader && soft.term == term)
    }

    fn crash(&mut self, node: NodeId, torn: bool) {
        self.crash_server(node, torn);
    }

    fn restart(&mut self, node: NodeId) {
        Supervisor::restart(self, Actor::Server(node));
    }

    fn unplug(&mut self, node: NodeId) {
        self.ctx.net.unplug(Addr::Server(node));
    }

    fn plug(&mut self, node: NodeId) {
        self.ctx.net.plug(Addr::Server(node));
    }

    fn servers_unplugged(&self) -> usize {
        (0..self.ctx.model.nodes).filter(|n| self.ctx.net.is_unplugged(Addr::Server(NodeId(*n)))).count()
    }

    fn note(&self, event: ChurnEvent) {
        self.ctx.record(EventKind::Churn(event));
    }

    fn is_up(&self, node: NodeId) -> bool {
        !self.down.contains_key(&Actor::Server(node))
    }

    fn watch_acks(&mut self, on: bool) {
        self.ctx.watch_acks(on);
    }

    fn acks_watched(&self) -> bool {
        self.ctx.acks_watched()
    }

    fn take_acks(&mut self) -> Vec<crate::nodes::context::AckSent> {
        self.ctx.take_acks()
    }

    fn follow_history(&self, reader: Reader) {
        self.ctx.follow_history(reader);
    }

    fn unfollow_history(&self, reader: Reader) {
        self.ctx.unfollow_history(reader);
    }

    fn read_history<T>(&self, reader: Reader, pick: impl Fn(&Event) -> Option<T>) -> Vec<T> {
        self.ctx.read_history(reader, pick)
    }

    fn crash_resource(&mut self) {
        self.kill(Actor::Resource);
        self.ctx.resource_disk.lock().expect("disk lock").crash(0);
    }

    fn restart_resource(&mut self) {
        self.restart(Actor::Resource);
    }

    fn resource_backed_up(&self) -> bool {
        self.backups.resource_backed_up()
    }

    fn restore_resource_from_backup(&mut self) {
        self.restore_resource();
    }

    fn watch_votes(&mut self, on: bool) {
        self.ctx.watch_votes(on);
    }

    fn votes_watched(&self) -> bool {
        self.ctx.votes_watched()
    }

    fn take_votes(&mut self) -> Vec<crate::nodes::context::VoteSent> {
        self.ctx.take_votes()
    }

    fn cut_between(&mut self, addr: Addr, others: &[Addr]) {
        for other in others {
            self.ctx.net.cut(addr, *other);
            self.ctx.net.cut(*other, addr);
        }
    }

    fn hold_link(&mut self, from: Addr, to: Addr, until_us: u64) {
        self.ctx.net.hold_link(from, to, until_us);
    }

    fn reconnect_between(&mut self, addr: Addr, others: &[Addr]) {
        for other in others {
            self.ctx.net.uncut(addr, *other);
            self.ctx.net.uncut(*other, addr);
        }
    }

    fn cut_off(&mut self, side: &[Addr]) {
        for (from, to) in self.links_across(side) {
            self.ctx.net.cut(from, to);
        }
    }

    fn reconnect(&mut self, side: &[Addr]) {
        for (from, to) in self.links_across(side) {
            self.ctx.net.uncut(from, to);
        }
    }

    fn pause(&mut self, node: NodeId, ms: u64) {
        Supervisor::pause(self, Actor::Server(node), ms);
    }

    fn set_fsync_us(&mut self, node: NodeId, fsync_us: u64) {
        self.ctx.node_disks[usize::from(node.0)].lock().expect("disk lock").set_stall_us(fsync_us);
    }

    fn back_up(&self, node: NodeId) -> NodeImage {
        self.ctx.node_disks[usize::from(node.0)].lock().expect("disk lock").backup()
    }

    fn restore_from_backup(&mut self, node: NodeId, backup_at_us: u64, image: NodeImage) -> bool {
        if !super::restores::may_restore(node, &self.ctx.node_disks) {
            return false;
        }
        self.restart_from(node, backup_at_us, NodeImage { restored_from_backup: true, ..image });
        true
    }
}

impl Supervisor {
    /// Both directions of every link between an address of `side` and a server not on it.
    fn links_across(&self, side: &[Addr]) -> Vec<(Addr, Addr)> {
        let others: Vec<Addr> =
            (0..self.ctx.model.nodes).map(|n| Addr::Server(NodeId(n))).filter(|addr| !side.contains(addr)).collect();
        side.iter().flat_map(|a| others.iter().flat_map(move |b| [(*a, *b), (*b, *a)])).collect()
    }
}

/// A madsim node that runs `life` from scratch at every (re)start.
fn spawn_node<F, Fut>(handle: &Handle, ctx: &Arc<Ctx>, name: String, life: F) -> NodeHandle
where
    F: Fn(Arc<Ctx>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let ctx = ctx.clone();
    handle.create_node().name(name).init(move || life(ctx.clone())).build()
}
