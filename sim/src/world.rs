//! One run: build the world from a seed and a model, play the fault schedule
//! during the safety phase, heal everything, let the liveness phase run, and
//! hand back the history.
//!
//! The supervisor is the `block_on` future itself (madsim's node 0): it is
//! never killed, so it owns the router task, the fault schedule and the
//! operator's backups.

use crate::clock::{init_true_time, now_us};
use crate::context::{Ctx, STREAM_DISK, STREAM_NET};
use crate::disk::NodeImage;
use crate::faults::{Fault, FaultEvent};
use crate::history::{Actor, EventKind, History};
use crate::model::Model;
use crate::net::{Addr, Net, NetConfig, NetStats};
use crate::workload::CommandQueue;
use crate::{resource_node, server, workload};
use fencelock::raft::{HardState, Payload, Snapshot};
use fencelock::{ClientId, LockState, LogIndex, NodeId, Term, Token, Variant};
use madsim::runtime::{Handle, NodeHandle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod churn;

/// What a run leaves behind for the checker and the CLI.
pub struct RunRecord {
    pub history: History,
    pub net: NetStats,
    pub sim_us: u64,
}

/// A whole-cluster backup: the state machine as of a committed index.
#[derive(Clone)]
struct ClusterBackup {
    at_us: u64,
    index: LogIndex,
    term: Term,
    state: LockState,
}

/// The madsim side of every process, with what the operator keeps.
pub(crate) struct Supervisor {
    pub(crate) ctx: Arc<Ctx>,
    handle: Handle,
    servers: Vec<NodeHandle>,
    clients: Vec<NodeHandle>,
    resource: NodeHandle,
    /// Processes that are down (killed, not yet restarted).
    down: BTreeMap<Actor, ()>,
    /// Paused processes and the true instant their pause ends (`u64::MAX`
    /// for a hold), shared with the tasks that end timed pauses.
    paused: Arc<Mutex<BTreeMap<Actor, u64>>>,
    node_backups: BTreeMap<NodeId, (u64, NodeImage)>,
    cluster_backup: Option<ClusterBackup>,
    /// Whole-cluster restores so far; the operator keeps this count outside the backups.
    restore_epoch: u32,
    rng: ChaCha8Rng,
    churn: churn::Churn,
}

/// Runs one seed to the end of its liveness phase. Must be called inside a
/// fresh madsim runtime's `block_on`.
pub async fn simulate(seed: u64, model: Model, plan: Vec<FaultEvent>) -> RunRecord {
    let mut supervisor = Supervisor::start(seed, model, &plan, None);
    let ctx = supervisor.ctx.clone();
    let safety_end_us = ctx.model.safety_ms * 1_000;
    for event in plan.into_iter().filter(|e| e.at_ms > 0 || !is_initial_rate(&e.fault)) {
        let at_us = event.at_ms * 1_000;
        if at_us >= safety_end_us {
            break;
        }
        supervisor.sleep_until_us(at_us).await;
        supervisor.apply(&event.fault).await;
    }
    supervisor.sleep_until_us(safety_end_us).await;
    supervisor.heal();
    supervisor.sleep_until_us(safety_end_us + ctx.model.liveness_ms * 1_000).await;
    supervisor.finish()
}

fn is_initial_rate(fault: &Fault) -> bool {
    matches!(fault, Fault::ClockRate { .. })
}

/// Clock rates scheduled at time 0 are the clocks' initial drift.
fn initial_clock_rates(plan: &[FaultEvent]) -> BTreeMap<Actor, i64> {
    plan.iter()
        .filter(|e| e.at_ms == 0)
        .filter_map(|e| match e.fault {
            Fault::ClockRate { actor, ppm } => Some((actor, ppm)),
            _ => None,
        })
        .collect()
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
        plan: &[FaultEvent],
        script_queues: Option<BTreeMap<ClientId, CommandQueue>>,
    ) -> Supervisor {
        init_true_time();
        let net_config = NetConfig {
            loss_rate: model.loss_rate,
            dup_rate: model.dup_rate,
            corrupt_rate: if model.corruption { 0.01 } else { 0.0 },
            ..NetConfig::default()
        };
        let net = Net::new(net_config, seed ^ STREAM_NET);
        net.spawn_router();
        let clock_rates = initial_clock_rates(plan);
        let mut ctx = Ctx::new(seed, model, net, &clock_rates);
        ctx.script_queues = script_queues.map(Mutex::new);
        let ctx = Arc::new(ctx);
        crate::run::offer_salvage(&ctx.shared);
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
        Supervisor::build(ctx, Handle::current())
    }

    /// Ends the run and hands back what it recorded.
    pub(crate) fn finish(self) -> RunRecord {
        let sim_us = now_us();
        let history = std::mem::take(&mut self.ctx.shared().history);
        RunRecord { history, net: self.ctx.net.stats(), sim_us }
    }

    fn build(ctx: Arc<Ctx>, handle: Handle) -> Supervisor {
        let servers = (0..ctx.model.nodes)
            .map(|n| {
                let c = ctx.clone();
                handle
                    .create_node()
                    .name(format!("n{n}"))
                    .init(move || {
                        let c = c.clone();
                        async move {
                            server::run(c, NodeId(n)).await;
                        }
                    })
                    .build()
            })
            .collect();
        let c = ctx.clone();
        let resource = handle
            .create_node()
            .name("db")
            .init(move || {
                let c = c.clone();
                async move { resource_node::run(c).await }
            })
            .build();
        let clients = (0..ctx.model.clients)
            .map(|i| {
                let c = ctx.clone();
                handle
                    .create_node()
                    .name(format!("c{i}"))
                    .init(move || {
                        let c = c.clone();
                        async move { workload::run(c, ClientId(i)).await }
                    })
                    .build()
            })
            .collect();
        let rng = ChaCha8Rng::seed_from_u64(ctx.seed ^ STREAM_DISK);
        let ctx_seed = ctx.seed;
        Supervisor {
            ctx,
            handle,
            servers,
            clients,
            resource,
            down: BTreeMap::new(),
            paused: Arc::new(Mutex::new(BTreeMap::new())),
            node_backups: BTreeMap::new(),
            cluster_backup: None,
            restore_epoch: 0,
            rng,
            churn: churn::Churn::new(ctx_seed),
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
        ctx.record(EventKind::Fault { what: fault.to_string() });
        self.churn_yield_to(fault);
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
                self.node_backups.insert(*node, (now_us(), image));
            }
            Fault::RestoreNode { node } => self.restore_node(*node),
            Fault::BackupCluster => self.cluster_backup = self.take_cluster_backup(),
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
            Fault::LeaderChurn { for_ms, within_ms, down_ms } => self.start_churn(*for_ms, *within_ms, *down_ms),
        }
    }

    pub(crate) fn kill(&mut self, actor: Actor) {
        if self.down.contains_key(&actor) {
            return;
        }
        self.paused.lock().expect("pause lock").remove(&actor);
        self.handle.kill(self.node_of(actor).id());
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
        disk.crash(torn_keep);
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
        self.ctx.record(EventKind::Paused { actor });
        let handle = self.handle.clone();
        let ctx = self.ctx.clone();
        let paused = self.paused.clone();
        madsim::task::spawn(async move {
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
                ctx.record(EventKind::Resumed { actor });
            }
        });
    }

    /// A stop-the-world stall that lasts until [`Supervisor::resume`].
    pub(crate) fn hold(&mut self, actor: Actor) {
        if self.down.contains_key(&actor) || self.is_paused(actor) {
            return;
        }
        self.handle.pause(self.node_of(actor).id());
        self.paused.lock().expect("pause lock").insert(actor, u64::MAX);
        self.ctx.record(EventKind::Paused { actor });
    }

    pub(crate) fn resume(&mut self, actor: Actor) {
        if self.paused.lock().expect("pause lock").remove(&actor).is_some() {
            self.handle.resume(self.node_of(actor).id());
            self.ctx.record(EventKind::Resumed { actor });
        }
    }

    /// One server restarted from a stale backup of its own disk (amnesia).
    pub(crate) fn restore_node(&mut self, node: NodeId) {
        // Protocol-aware recovery needs a majority that kept its disks: the
        // operator never has a majority of nodes recovering from stale
        // backups at once (they could not elect the leader they recover from).
        let recovering_others = (0..self.ctx.model.nodes)
            .filter(|&n| n != node.0)
            .filter(|&n| self.ctx.node_disks[n as usize].lock().expect("disk lock").durable().restored_from_backup)
            .count();
        let majority = usize::from(self.ctx.model.nodes) / 2 + 1;
        let backup = self.node_backups.get(&node).cloned().filter(|_| recovering_others + 1 < majority);
        let Some((backup_at_us, image)) = backup else {
            // No usable backup of this cluster generation: the operator restarts it as it is.
            self.restart(Actor::Server(node));
            return;
        };
        self.kill(Actor::Server(node));
        let image = NodeImage { restored_from_backup: true, ..image };
        self.ctx.node_disks[node.0 as usize].lock().expect("disk lock").restore(image);
        self.ctx.record(EventKind::NodeRestored { node, backup_at_us });
        self.restart(Actor::Server(node));
    }

    /// `etcdctl snapshot save`: the committed state of the most advanced server.
    fn take_cluster_backup(&self) -> Option<ClusterBackup> {
        let variant = self.ctx.model.variant;
        let floor = Token(self.ctx.model.token_floor);
        self.ctx
            .node_disks
            .iter()
            .map(|disk| committed_state(disk.lock().expect("disk lock").durable(), floor, variant))
            .max_by_key(|(index, _, _)| *index)
            .map(|(index, term, state)| ClusterBackup { at_us: now_us(), index, term, state })
    }

    /// `etcdctl snapshot restore` on every member: one snapshot, a fresh
    /// term above every earlier one, and the token floor raised into a new
    /// restore epoch so no token is ever issued twice (ARCHITECTURE.md,
    /// "Tokens across restores").
    pub(crate) fn restore_cluster(&mut self) {
        let Some(backup) = self.cluster_backup.clone() else {
            return;
        };
        self.restore_epoch += 1;
        let epoch_base = u64::from(self.restore_epoch) << 32;
        let mut state = backup.state.clone();
        // The one place `restore-naive` changes: the counter stays as backed up.
        if self.ctx.model.variant != Variant::RestoreNaive {
            state.raise_token_floor(Token(epoch_base));
        }
        let token_floor = state.token_last();
        // Per-node backups belong to the cluster generation before the restore;
        // restoring one into the new generation would be an operator's error.
        self.node_backups.clear();
        for n in 0..self.ctx.model.nodes {
            self.kill(Actor::Server(NodeId(n)));
        }
        let term = Term(backup.term.0.max(epoch_base));
        let image = NodeImage {
            hard_state: HardState { term, vote: None, commit: backup.index },
            snapshot: Some(Snapshot { index: backup.index, term: backup.term, state }),
            entries: Vec::new(),
            restored_from_backup: false,
        };
        for disk in &self.ctx.node_disks {
            disk.lock().expect("disk lock").restore(image.clone());
        }
        self.ctx.record(EventKind::ClusterRestored {
            epoch: self.restore_epoch,
            backup_at_us: backup.at_us,
            token_floor,
        });
        for n in 0..self.ctx.model.nodes {
            self.restart(Actor::Server(NodeId(n)));
        }
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
            self.ctx.record(EventKind::Resumed { actor });
        }
        for disk in &self.ctx.node_disks {
            disk.lock().expect("disk lock").set_stall_us(0);
        }
        self.churn = churn::Churn::new(self.ctx.seed);
        let down: Vec<Actor> = self.down.keys().copied().collect();
        for actor in down {
            self.restart(actor);
        }
        self.ctx.record(EventKind::Healed);
    }
}

/// The state machine a disk's durable part commits to: its snapshot plus its
/// committed log entries, applied.
fn committed_state(image: &NodeImage, floor: Token, variant: Variant) -> (LogIndex, Term, LockState) {
    let (mut index, mut term, mut state) = match &image.snapshot {
        Some(s) => (s.index, s.term, s.state.clone()),
        None => (LogIndex(0), Term(0), LockState::new(floor)),
    };
    for entry in &image.entries {
        if entry.index <= index || entry.index > image.hard_state.commit {
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
