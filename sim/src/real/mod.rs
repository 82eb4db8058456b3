//! `fencesim real`: the lock service as real processes, under the fault
//! schedule a seed draws, judged by the simulator's checker.
//!
//! A run starts a cluster of `fencelock-node serve` processes on loopback
//! (their Raft state in fsync'd files), one `fencelock-node worker` process
//! per client (the workload, writing to the protected resource: SQLite in
//! the run's directory, or a PostgreSQL server), and plays the seed's plan
//! (`faults::plan`) on real time: pauses are SIGSTOP and SIGCONT, crashes
//! SIGKILL and a restart from disk, partitions the servers' admin request
//! to drop Raft traffic (one-way cuts between servers: the sender drops
//! what it sends), a worker's links to servers cut at the worker's end (its
//! `links-N` control file: what it sends to or hears from a server is
//! dropped there), clock faults a new mapping of a process's local clock
//! (admin request or control file: the OS clock is never touched), a
//! planned stall of the holder a real stop of the worker between its lease
//! check and its write, backups and restores of a server, the cluster or
//! the resource the operator's own steps (`restores.rs`), a crash of the
//! resource an outage (a tool holding its write lock until the restart).
//! After `safety_ms`
//! every fault is healed; after the
//! liveness phase every process is stopped by its PID, and their histories,
//! merged on CLOCK_MONOTONIC (`merge.rs`), are judged by `checker` under
//! the same property ids as a simulated run.
//!
//! The fault schedule is the seed's; what the OS schedules around it is
//! not, so a real run is not reproducible byte for byte. Faults a real run
//! cannot play (message loss, slow disks, the reactive families) are
//! reported as skipped.
//!
//! **Architecture Invariant:** this is the one module that reads real time
//! and starts processes; no simulated run reaches it.

pub mod merge;
mod overtake;
pub mod procs;
mod restores;

use crate::actor::Actor;
use crate::checker::{Property, Violation};
use crate::faults::{self, Fault, FaultEvent, StallPoint, UntilOvertaken};
use crate::history::EventKind;
use crate::machine::clock::LocalClock;
use crate::machine::net::{Addr, NetStats};
use crate::model::Model;
use crate::run::seed::{judge, Outcome};
use crate::world::RunRecord;
use fencelock::{ClientId, NodeId};
use merge::{RoleWatch, Stamped};
use overtake::{stalled_at, OvertakeWatch, StopNote};
use procs::Procs;
use restores::Tools;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Between two turns of the runner's loop.
const TURN: Duration = Duration::from_millis(1);
/// How long after a restart a server's partition is sent to it again (it listens by then).
const REISOLATE_AFTER_US: u64 = 200_000;
/// How long the runner waits for the first server to listen before workers start.
const START_WAIT_US: u64 = 2_000_000;

/// What to run.
#[derive(Clone, Debug)]
pub struct RealOptions {
    pub seed: u64,
    /// The model: cluster size, variant, timing, workload, fault families,
    /// `safety_ms` and `liveness_ms` (of real time).
    pub model: Model,
    /// The protected resource; `None`: SQLite in the run's directory.
    pub resource: Option<String>,
    /// The run's directory (cluster file, data, histories, logs); must not hold a run already.
    pub dir: PathBuf,
    /// The `fencelock-node` executable.
    pub node_bin: PathBuf,
    /// The fault schedule to play (a scenario's); `None`: the seed's (`faults::plan`).
    pub plan: Option<Vec<FaultEvent>>,
    /// Set (by Ctrl-C) to end the run early; every process is still stopped.
    pub stop: Arc<AtomicBool>,
}

/// What a real run did and how it was judged.
pub struct RealRun {
    pub outcome: Outcome,
    /// The faults of the plan that were played, and those a real run cannot play.
    pub played: Vec<FaultEvent>,
    pub skipped: Vec<FaultEvent>,
    /// Processes started (servers, workers, restarts, the operator's backup and restore tools).
    pub processes: u64,
    /// Processes still running at the end, all stopped by PID.
    pub stopped_at_end: usize,
    /// Ended early by `stop`.
    pub interrupted: bool,
}

/// Why a fault of the plan is not played for real, or `None` when it is.
pub fn unplayable(fault: &Fault) -> Option<&'static str> {
    match fault {
        Fault::Partition { .. }
        | Fault::IsolateLeader
        | Fault::IsolateLeaderWith { .. }
        | Fault::Heal
        | Fault::Crash { .. }
        | Fault::Restart { .. }
        | Fault::ClockRate { .. }
        | Fault::ClockStep { .. }
        | Fault::CrashLeader { .. }
        | Fault::PauseLeader { .. }
        | Fault::StallHolder { .. } => None,
        // Ended once the histories show the overtaking (`overtake.rs`).
        Fault::StallUntilOvertaken(stall) if stall.before == StallPoint::Write => None,
        Fault::Pause { actor: Actor::Resource, .. } => Some("the resource is a database file, not a process"),
        Fault::Pause { .. } => None,
        // A server drops what it sends to the other one (`admin cut`); a
        // worker drops what it sends to, or hears from, a server (`links-N`).
        Fault::OneWay { from: Addr::Server(_), to: Addr::Server(_) }
        | Fault::OneWay { from: Addr::Client(_), to: Addr::Server(_) }
        | Fault::OneWay { from: Addr::Server(_), to: Addr::Client(_) }
        | Fault::CutClient { .. } => None,
        // The planner puts only servers and workers on these links; the simulator's
        // resource link (its writes, its floor reads) is cut only by `CutClient`.
        Fault::OneWay { .. } => Some("the workload sends nothing on that link"),
        // An outage: a tool holds the database's write lock until the restart (`restores.rs`).
        Fault::CrashResource | Fault::RestartResource => None,
        // `restores.rs`: copies of data directories, tool processes for the cluster and the resource.
        Fault::BackupNode { .. }
        | Fault::RestoreNode { .. }
        | Fault::BackupCluster
        | Fault::RestoreCluster
        | Fault::BackupResource
        | Fault::RestoreResource => None,
        Fault::DiskStall { .. } => Some("a real disk's fsync is not slowed"),
        _ => Some("a reactive family of the simulator (it watches every message)"),
    }
}

/// Which way a worker's link to a server is cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    /// What the worker sends to the server.
    To,
    /// What the server sends to the worker.
    From,
    Both,
}

/// The servers a worker drops what it sends to (`to`) and hears from
/// (`from`), and whether its link to the resource is cut (`CutClient`
/// isolates the worker from everyone, the resource too).
#[derive(Clone, Debug, Default)]
struct WorkerLinks {
    to: BTreeSet<NodeId>,
    from: BTreeSet<NodeId>,
    resource: bool,
}

impl WorkerLinks {
    /// `fencelock-node`'s `links-N` text (`client::Links`): `to=0,2 from=1 db`.
    fn text(&self) -> String {
        let list = |set: &BTreeSet<NodeId>| set.iter().map(|n| n.0.to_string()).collect::<Vec<_>>().join(",");
        let mut parts = Vec::new();
        if !self.to.is_empty() {
            parts.push(format!("to={}", list(&self.to)));
        }
        if !self.from.is_empty() {
            parts.push(format!("from={}", list(&self.from)));
        }
        if self.resource {
            parts.push("db".to_string());
        }
        parts.join(" ")
    }
}

/// `fencelock-node`'s `--clock` and `clock-N` text of a clock's mapping: `TRUE_US,LOCAL_US,RATE_PPM`.
fn clock_text(clock: &LocalClock) -> String {
    format!("{},{},{}", clock.true_ref_us(), clock.local_ref_us(), clock.rate_ppm())
}

/// What the runner does at an instant.
#[derive(Clone, Debug)]
enum Action {
    Fault(Fault),
    /// The end of the runner's pause.
    Resume(Actor),
    /// The end of a worker's own stall.
    EndStall(Actor),
    Restart(NodeId),
    Reisolate(NodeId),
    Heal,
    End,
}

struct Runner<'a> {
    /// The servers' ports, kept from the other runs of this process until the run ends.
    _ports: Ports,
    options: &'a RealOptions,
    model: &'a Model,
    config: PathBuf,
    control: PathBuf,
    resource: String,
    procs: Procs,
    /// Admin requests in flight (each a short `fencelock-node admin` process).
    admins: Vec<std::process::Child>,
    t0_us: u64,
    events: Vec<Stamped>,
    queue: BTreeMap<(u64, u64), Action>,
    queued: u64,
    /// Each process's machine clock, on the monotonic clock (the simulator's `LocalClock`).
    clocks: BTreeMap<Actor, LocalClock>,
    /// The servers each server drops Raft traffic with.
    isolated: BTreeMap<NodeId, BTreeSet<NodeId>>,
    /// The servers each server drops what it sends to, one way.
    cut: BTreeMap<NodeId, BTreeSet<NodeId>>,
    /// The links each worker drops at its end (`links-N`).
    worker_links: BTreeMap<ClientId, WorkerLinks>,
    /// The operator's backup and restore processes.
    tools: Tools,
    /// When the resource's last backup was recorded (CLOCK_MONOTONIC µs).
    resource_backup_at_us: Option<u64>,
    resource_restores: u64,
    /// When each server's last backup was recorded.
    node_backups: BTreeMap<NodeId, u64>,
    /// Servers restored from a backup, and when: recovering for a while.
    recovering: BTreeMap<NodeId, u64>,
    /// When the cluster's last backup was recorded, and the whole-cluster restores so far.
    cluster_backup_at_us: Option<u64>,
    cluster_restores: u32,
    down: BTreeSet<NodeId>,
    /// Processes the runner stopped for a pause (not a worker's own stall).
    paused: BTreeSet<Actor>,
    incarnations: BTreeMap<ClientId, u64>,
    roles: RoleWatch,
    /// Stalls armed so far (`stall-armed` names each by its number).
    stalls_armed: u64,
    /// The armed `StallUntilOvertaken`s by number, until a worker takes one.
    until_overtaken: BTreeMap<u64, UntilOvertaken>,
    /// The stalls they became, while no history shows the overtaking.
    overtaken: BTreeMap<ClientId, OvertakeWatch>,
    /// Processes that ended on their own: the run's own `panic`.
    died: Vec<(u64, Actor, String)>,
    played: Vec<FaultEvent>,
}

/// Runs one real run: starts the processes, plays the plan, stops them, judges.
pub fn run(options: &RealOptions) -> Result<RealRun, String> {
    prepare(options)?.run()
}

/// A run whose directory, cluster file and resource are ready: everything
/// that can refuse the input has been checked, and nothing has started.
pub struct Prepared<'a> {
    runner: Runner<'a>,
    history_dir: PathBuf,
    skipped: Vec<FaultEvent>,
    playable: Vec<FaultEvent>,
}

impl Prepared<'_> {
    /// Starts the processes, plays the plan, stops them, judges.
    pub fn run(self) -> Result<RealRun, String> {
        let Prepared { mut runner, history_dir, skipped, playable } = self;
        runner.t0_us = now_us();
        let interrupted = runner.play(playable)?;
        // The operator's tools count too: an outage's holding tool lasts until the restart.
        let stopped_at_end = runner.procs.kill_all() + runner.tools.kill_all();
        for mut admin in runner.admins.drain(..) {
            let _ = admin.kill();
            let _ = admin.wait();
        }
        let end_us = now_us();
        runner.judge(&history_dir, end_us, skipped, stopped_at_end, interrupted)
    }
}

/// Makes the run's directory and cluster file and opens the resource as the
/// workers will: the refusals a run can meet, before any process starts.
pub fn prepare(options: &RealOptions) -> Result<Prepared<'_>, String> {
    let model = &options.model;
    let dir = &options.dir;
    if dir.join("cluster.toml").exists() {
        return Err(format!("{} already holds a run; name a new directory", dir.display()));
    }
    let control = dir.join("control");
    let history_dir = dir.join("history");
    for d in [dir, &control, &history_dir] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: cannot create: {e}", d.display()))?;
    }
    let resource = match &options.resource {
        Some(url) => url.clone(),
        None => format!("sqlite:{}", dir.join("resource.sqlite").display()),
    };
    let (config, ports) = write_cluster_file(dir, model)?;
    let (skipped, playable): (Vec<FaultEvent>, Vec<FaultEvent>) = options
        .plan
        .clone()
        .unwrap_or_else(|| faults::plan(model, options.seed))
        .into_iter()
        .partition(|e| unplayable(&e.fault).is_some());
    let runner = Runner {
        _ports: ports,
        options,
        model,
        config,
        control,
        resource,
        procs: Procs::new(&options.node_bin, dir),
        admins: Vec::new(),
        t0_us: now_us(),
        events: Vec::new(),
        queue: BTreeMap::new(),
        queued: 0,
        clocks: BTreeMap::new(),
        isolated: BTreeMap::new(),
        cut: BTreeMap::new(),
        worker_links: BTreeMap::new(),
        tools: Tools::default(),
        resource_backup_at_us: None,
        resource_restores: 0,
        node_backups: BTreeMap::new(),
        recovering: BTreeMap::new(),
        cluster_backup_at_us: None,
        cluster_restores: 0,
        down: BTreeSet::new(),
        paused: BTreeSet::new(),
        incarnations: BTreeMap::new(),
        roles: RoleWatch::new(&history_dir, model.nodes),
        stalls_armed: 0,
        until_overtaken: BTreeMap::new(),
        overtaken: BTreeMap::new(),
        died: Vec::new(),
        played: Vec::new(),
    };
    runner.check_resource()?;
    Ok(Prepared { runner, history_dir, skipped, playable })
}

impl Runner<'_> {
    /// Starts everything, then plays the plan, the heal and the liveness phase. Returns whether it was interrupted.
    fn play(&mut self, plan: Vec<FaultEvent>) -> Result<bool, String> {
        let t0 = self.t0_us;
        // Rates at 0 are the clocks' initial drift: the processes start on them.
        for event in plan.iter().filter(|e| e.at_ms == 0) {
            if let Fault::ClockRate { actor, ppm } = event.fault {
                self.clocks.insert(actor, LocalClock::new(t0, t0, ppm));
            }
        }
        for n in 0..self.model.nodes {
            self.start_server(NodeId(n))?;
        }
        let history_dir = self.options.dir.join("history");
        self.wait_listening(&history_dir)?;
        for c in 0..self.model.clients {
            self.start_worker(ClientId(c))?;
        }
        for event in plan {
            if event.at_ms == 0 && matches!(event.fault, Fault::ClockRate { .. }) {
                self.played.push(event);
                continue;
            }
            self.at(t0 + event.at_ms * 1_000, Action::Fault(event.fault));
        }
        self.at(t0 + self.model.safety_ms * 1_000, Action::Heal);
        self.at(t0 + (self.model.safety_ms + self.model.liveness_ms) * 1_000, Action::End);
        loop {
            if self.options.stop.load(Ordering::Relaxed) {
                return Ok(true);
            }
            let now = now_us();
            while let Some(entry) = self.queue.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                let action = entry.remove();
                if matches!(action, Action::End) {
                    return Ok(false);
                }
                self.act(action)?;
            }
            self.notice_stalls();
            self.notice_overtaking();
            self.notice_exits();
            for status in self.tools.failed() {
                self.died.push((now_us(), Actor::Resource, format!("a backup or restore tool: {status}")));
            }
            self.admins.retain_mut(|admin| !matches!(admin.try_wait(), Ok(Some(_))));
            std::thread::sleep(TURN);
        }
    }

    /// Opens the resource the way the workers will, before anything starts.
    fn check_resource(&self) -> Result<(), String> {
        let output = std::process::Command::new(&self.options.node_bin)
            .args(["worker", "--check", "--client", "0", "--key", "k", "--config"])
            .arg(&self.config)
            .args(["--resource", &self.resource])
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot start {}: {e}", self.options.node_bin.display()))?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let line = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim();
        Err(line.trim_start_matches("fencelock-node: ").to_string())
    }

    fn at(&mut self, at_us: u64, action: Action) {
        self.queued += 1;
        self.queue.insert((at_us, self.queued), action);
    }

    fn record(&mut self, kind: EventKind) {
        self.events.push(Stamped { at_us: now_us(), kind });
    }

    fn act(&mut self, action: Action) -> Result<(), String> {
        match action {
            Action::Fault(fault) => self.fault(fault),
            Action::Resume(actor) => {
                self.resume(actor);
                Ok(())
            }
            Action::EndStall(actor) => {
                if self.procs.resume(actor) {
                    self.record(EventKind::Resumed { actor });
                }
                Ok(())
            }
            Action::Restart(node) => self.restart(node),
            Action::Reisolate(node) => {
                self.send_isolation(node);
                self.send_cut(node);
                Ok(())
            }
            Action::Heal => self.heal(),
            Action::End => Ok(()),
        }
    }

    fn fault(&mut self, fault: Fault) -> Result<(), String> {
        let now = now_us();
        let at_ms = now.saturating_sub(self.t0_us) / 1_000;
        self.played.push(FaultEvent { at_ms, fault: fault.clone() });
        self.record(EventKind::Fault { fault: fault.clone() });
        // The instant the history has for this fault: a restore names its backup by it.
        let recorded_us = self.events.last().map_or(now, |e| e.at_us);
        match fault {
            Fault::OneWay { from: Addr::Server(from), to: Addr::Server(to) } => {
                self.cut.entry(from).or_default().insert(to);
                self.send_cut(from);
            }
            Fault::CrashResource => self.crash_resource()?,
            Fault::RestartResource => self.restart_resource(),
            Fault::BackupResource => self.back_up_resource(recorded_us)?,
            Fault::RestoreResource => self.restore_resource()?,
            Fault::BackupNode { node } => self.back_up_node(node, recorded_us)?,
            Fault::RestoreNode { node } => self.restore_node(node)?,
            Fault::BackupCluster => self.back_up_cluster(recorded_us)?,
            Fault::RestoreCluster => self.restore_cluster()?,
            Fault::OneWay { from: Addr::Client(client), to: Addr::Server(server) } => {
                self.cut_worker(client, [server], Direction::To)?;
            }
            Fault::OneWay { from: Addr::Server(server), to: Addr::Client(client) } => {
                self.cut_worker(client, [server], Direction::From)?;
            }
            Fault::CutClient { client } => {
                self.worker_links.entry(client).or_default().resource = true;
                self.cut_worker(client, (0..self.model.nodes).map(NodeId), Direction::Both)?;
            }
            Fault::Partition { sides } => {
                let side_of = |addr: Addr| sides.iter().position(|side| side.contains(&addr));
                let across = |side_a: usize| -> BTreeSet<NodeId> {
                    (0..self.model.nodes)
                        .map(NodeId)
                        .filter(|b| side_of(Addr::Server(*b)).is_some_and(|side_b| side_b != side_a))
                        .collect()
                };
                for a in 0..self.model.nodes {
                    let Some(side_a) = side_of(Addr::Server(NodeId(a))) else { continue };
                    self.isolated.entry(NodeId(a)).or_default().extend(across(side_a));
                    self.send_isolation(NodeId(a));
                }
                for c in 0..self.model.clients {
                    let Some(side_c) = side_of(Addr::Client(ClientId(c))) else { continue };
                    let servers = across(side_c);
                    self.cut_worker(ClientId(c), servers, Direction::Both)?;
                }
            }
            // Cut off from everyone: its workers too.
            Fault::IsolateLeader => {
                let Some(leader) = self.roles.leader() else { return Ok(()) };
                self.isolate(leader);
                for c in 0..self.model.clients {
                    self.cut_worker(ClientId(c), [leader], Direction::Both)?;
                }
            }
            // Its side keeps `clients`, cut from the other servers; the rest reach both sides.
            Fault::IsolateLeaderWith { clients, pause_ms } => {
                let Some(leader) = self.roles.leader() else { return Ok(()) };
                self.isolate(leader);
                let others: Vec<NodeId> = (0..self.model.nodes).map(NodeId).filter(|n| *n != leader).collect();
                for client in clients {
                    self.cut_worker(client, others.iter().copied(), Direction::Both)?;
                }
                if pause_ms > 0 {
                    self.pause(Actor::Server(leader), pause_ms);
                }
            }
            Fault::Heal => self.heal_network()?,
            Fault::Crash { node, .. } => self.crash(node),
            Fault::Restart { node } => self.restart(node)?,
            Fault::Pause { actor, ms } => self.pause(actor, ms),
            Fault::ClockRate { actor, ppm } => {
                self.clock_of(actor).set_rate(now, ppm);
                self.send_clock(actor)?;
            }
            Fault::ClockStep { actor, delta_ms } => {
                self.clock_of(actor).step(now, delta_ms.saturating_mul(1_000));
                self.send_clock(actor)?;
            }
            Fault::CrashLeader { down_ms, .. } => {
                if let Some(leader) = self.roles.leader() {
                    self.crash(leader);
                    self.at(now + down_ms * 1_000, Action::Restart(leader));
                }
            }
            Fault::PauseLeader { ms } => {
                if let Some(leader) = self.roles.leader() {
                    self.pause(Actor::Server(leader), ms);
                }
            }
            Fault::StallHolder { ms } => self.arm_stall(ms)?,
            Fault::StallUntilOvertaken(stall) => {
                self.arm_stall(stall.ms_max)?;
                self.until_overtaken.insert(self.stalls_armed, stall);
            }
            _ => {}
        }
        Ok(())
    }

    /// Cuts `node` off from every other server (both ways, from both ends).
    fn isolate(&mut self, node: NodeId) {
        let others: BTreeSet<NodeId> = (0..self.model.nodes).map(NodeId).filter(|n| *n != node).collect();
        for other in &others {
            self.isolated.entry(*other).or_default().insert(node);
            self.send_isolation(*other);
        }
        self.isolated.insert(node, others);
        self.send_isolation(node);
    }

    /// Cuts `client`'s links with `servers` in `direction`, at the worker's end.
    fn cut_worker(
        &mut self,
        client: ClientId,
        servers: impl IntoIterator<Item = NodeId>,
        direction: Direction,
    ) -> Result<(), String> {
        let links = self.worker_links.entry(client).or_default();
        for server in servers {
            if direction != Direction::From {
                links.to.insert(server);
            }
            if direction != Direction::To {
                links.from.insert(server);
            }
        }
        self.send_links(client)
    }

    /// Writes `client`'s links file: the worker reads it at every message.
    fn send_links(&mut self, client: ClientId) -> Result<(), String> {
        let text = self.worker_links.get(&client).map(WorkerLinks::text).unwrap_or_default();
        write_atomically(&self.control, &format!("links-{}", client.0), &text)
    }

    fn heal_network(&mut self) -> Result<(), String> {
        let workers: Vec<ClientId> = self.worker_links.keys().copied().collect();
        self.worker_links.clear();
        for client in workers {
            self.send_links(client)?;
        }
        let cut: Vec<NodeId> = self.isolated.keys().copied().collect();
        self.isolated.clear();
        for node in cut {
            self.send_isolation(node);
        }
        let one_way: Vec<NodeId> = self.cut.keys().copied().collect();
        self.cut.clear();
        for node in one_way {
            self.send_cut(node);
        }
        Ok(())
    }

    /// Tells `node` the servers it drops what it sends to now, one way.
    fn send_cut(&mut self, node: NodeId) {
        if self.down.contains(&node) {
            return;
        }
        let peers: Vec<String> = self.cut.get(&node).into_iter().flatten().map(|n| n.0.to_string()).collect();
        let mut args = vec!["admin".to_string(), "cut".to_string(), "--id".to_string(), node.0.to_string()];
        if !peers.is_empty() {
            args.push(format!("--peers={}", peers.join(",")));
        }
        self.admin(args);
    }

    /// Tells `node` the servers it drops traffic with now (an admin request in the background).
    fn send_isolation(&mut self, node: NodeId) {
        if self.down.contains(&node) {
            return;
        }
        let peers: Vec<String> =
            self.isolated.get(&node).into_iter().flatten().map(|n| n.0.to_string()).collect::<Vec<_>>();
        let mut args = vec!["admin".to_string(), "isolate".to_string(), "--id".to_string(), node.0.to_string()];
        if !peers.is_empty() {
            args.push(format!("--peers={}", peers.join(",")));
        }
        self.admin(args);
    }

    fn admin(&mut self, mut args: Vec<String>) {
        args.push("--config".to_string());
        args.push(self.config.display().to_string());
        let spawned = std::process::Command::new(&self.options.node_bin)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Ok(child) = spawned {
            self.admins.push(child);
        }
    }

    fn crash(&mut self, node: NodeId) {
        let actor = Actor::Server(node);
        if !self.procs.is_running(actor) {
            return;
        }
        self.procs.kill(actor);
        self.down.insert(node);
        self.record(EventKind::Crashed { actor });
    }

    fn restart(&mut self, node: NodeId) -> Result<(), String> {
        if !self.down.remove(&node) {
            return Ok(());
        }
        self.record(EventKind::Restarted { actor: Actor::Server(node) });
        self.start_server(node)?;
        self.after_restart(node);
        Ok(())
    }

    /// A restarted server's cuts are sent to it again once it listens.
    fn after_restart(&mut self, node: NodeId) {
        let isolated = self.isolated.get(&node).is_some_and(|cut| !cut.is_empty());
        let cut = self.cut.get(&node).is_some_and(|cut| !cut.is_empty());
        if isolated || cut {
            self.at(now_us() + REISOLATE_AFTER_US, Action::Reisolate(node));
        }
    }

    fn pause(&mut self, actor: Actor, ms: u64) {
        if self.procs.stop(actor) {
            self.paused.insert(actor);
            self.record(EventKind::Paused { actor });
            self.at(now_us() + ms * 1_000, Action::Resume(actor));
        }
    }

    /// Ends the runner's pause of `actor` (a pause ended already, at the heal, is not ended twice).
    fn resume(&mut self, actor: Actor) {
        if self.paused.remove(&actor) && self.procs.resume(actor) {
            self.record(EventKind::Resumed { actor });
        }
    }

    /// `actor`'s machine clock (true time until a fault changes it).
    fn clock_of(&mut self, actor: Actor) -> &mut LocalClock {
        let t0 = self.t0_us;
        self.clocks.entry(actor).or_insert_with(|| LocalClock::new(t0, t0, 0))
    }

    /// Gives `actor` its machine clock's new mapping: a server by admin request, a worker by its clock file.
    fn send_clock(&mut self, actor: Actor) -> Result<(), String> {
        let text = clock_text(self.clock_of(actor));
        match actor {
            Actor::Server(node) => {
                if !self.down.contains(&node) {
                    self.admin(vec![
                        "admin".to_string(),
                        "clock-map".to_string(),
                        "--id".to_string(),
                        node.0.to_string(),
                        "--map".to_string(),
                        text,
                    ]);
                }
                Ok(())
            }
            Actor::Client(client) => write_atomically(&self.control, &format!("clock-{}", client.0), &text),
            Actor::Resource => Ok(()),
        }
    }

    fn heal(&mut self) -> Result<(), String> {
        self.heal_network()?;
        let _ = std::fs::remove_file(self.control.join("stall-armed"));
        // The runner's pauses end now; a worker's own stall runs its length, as in the simulator.
        let paused: Vec<Actor> = self.paused.iter().copied().collect();
        for actor in paused {
            self.resume(actor);
        }
        let down: Vec<NodeId> = self.down.iter().copied().collect();
        for node in down {
            self.restart(node)?;
        }
        self.restart_resource();
        self.record(EventKind::Healed);
        Ok(())
    }

    /// Workers that stopped themselves for a stall: the runner sends SIGCONT
    /// when its length has passed, or for the armed `StallUntilOvertaken`,
    /// once the histories show the overtaking (and at its longest length in
    /// any case).
    fn notice_stalls(&mut self) {
        for c in 0..self.model.clients {
            let note = self.control.join(format!("stopped-{c}"));
            if !note.exists() {
                continue;
            }
            let actor = Actor::Client(ClientId(c));
            if !self.procs.stopped_itself(actor) {
                continue;
            }
            let note_text = std::fs::read_to_string(&note).unwrap_or_default();
            let _ = std::fs::remove_file(&note);
            let StopNote { ms, armed, held } = StopNote::parse(&note_text);
            let now = now_us();
            let deadline_us = now + ms * 1_000;
            self.at(deadline_us, Action::EndStall(actor));
            let until = armed.and_then(|number| self.until_overtaken.remove(&number));
            if let (Some(stall), Some(held)) = (until, held) {
                let dir = self.options.dir.join("history");
                let sizes = (self.model.nodes, self.model.clients);
                let since_us = stalled_at(&dir, ClientId(c)).unwrap_or(now);
                let on = (stall.on, stall.after_ms);
                let watch = OvertakeWatch::new(&dir, sizes, ClientId(c), held, on, (since_us, deadline_us));
                self.overtaken.insert(ClientId(c), watch);
            }
        }
    }

    /// Arms the next stall (`stall-armed`: its length, then its number).
    fn arm_stall(&mut self, ms: u64) -> Result<(), String> {
        self.stalls_armed += 1;
        write_atomically(&self.control, "stall-armed", &format!("{ms}\n{}\n", self.stalls_armed))
    }

    /// Ends the watched stall `after_ms` past the overtaking, where that
    /// comes before its longest length.
    fn notice_overtaking(&mut self) {
        let now = now_us();
        let mut ended = Vec::new();
        self.overtaken.retain(|_, watch| {
            if now >= watch.deadline_us {
                return false;
            }
            if !watch.overtaken() {
                return true;
            }
            ended.push((watch.actor, (now + watch.after_ms * 1_000).min(watch.deadline_us)));
            false
        });
        for (actor, end_us) in ended {
            self.queue.retain(|_, action| !matches!(action, Action::EndStall(stalled) if *stalled == actor));
            self.at(end_us, Action::EndStall(actor));
        }
    }

    fn notice_exits(&mut self) {
        for (actor, status) in self.procs.exited() {
            let at_us = now_us();
            if let Actor::Server(node) = actor {
                self.down.insert(node);
            }
            self.died.push((at_us, actor, status));
        }
    }

    fn start_server(&mut self, node: NodeId) -> Result<(), String> {
        self.start_server_from(node, None)
    }

    /// Starts `node`'s server, restoring its data directory from `backup` first if given.
    fn start_server_from(&mut self, node: NodeId, backup: Option<&Path>) -> Result<(), String> {
        let mut args = vec![
            "serve".to_string(),
            "--config".to_string(),
            self.config.display().to_string(),
            "--id".to_string(),
            node.0.to_string(),
        ];
        if let Some(clock) = self.clocks.get(&Actor::Server(node)) {
            args.push(format!("--clock={}", clock_text(clock)));
        }
        if let Some(backup) = backup {
            args.push(format!("--restore-from={}", backup.display()));
        }
        self.procs.start(Actor::Server(node), &args).map(|_| ())
    }

    fn start_worker(&mut self, client: ClientId) -> Result<(), String> {
        let incarnation = *self.incarnations.entry(client).and_modify(|i| *i += 1).or_insert(0);
        let mut args = vec![
            "worker".to_string(),
            "--config".to_string(),
            self.config.display().to_string(),
            "--client".to_string(),
            client.0.to_string(),
            "--seed".to_string(),
            self.options.seed.to_string(),
            "--incarnation".to_string(),
            incarnation.to_string(),
            "--lease-ms".to_string(),
            self.model.lease_ms.to_string(),
            "--resource".to_string(),
            self.resource.clone(),
            "--control".to_string(),
            self.control.display().to_string(),
        ];
        for k in 0..self.model.keys {
            args.push(format!("--key={}", Model::key_name(k)));
        }
        if self.model.stalls {
            args.push(format!("--stall-ms-max={}", self.model.stall_ms_longest()));
        }
        if let Some(clock) = self.clocks.get(&Actor::Client(client)) {
            args.push(format!("--clock={}", clock_text(clock)));
        }
        self.procs.start(Actor::Client(client), &args).map(|_| ())
    }

    /// Waits until every server has begun its history (it listens by then), at most [`START_WAIT_US`].
    fn wait_listening(&mut self, history_dir: &Path) -> Result<(), String> {
        let deadline = now_us() + START_WAIT_US;
        loop {
            let serving = (0..self.model.nodes).all(|n| {
                let file = history_dir.join(format!("node-{n}.jsonl"));
                std::fs::metadata(file).is_ok_and(|m| m.len() > 0)
            });
            if serving {
                return Ok(());
            }
            if let Some((actor, status)) = self.procs.exited().first() {
                let log = self.procs.log_of(*actor);
                let last = std::fs::read_to_string(&log).unwrap_or_default();
                let line = last.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim().to_string();
                return Err(format!("{actor} did not start ({status}): {line}"));
            }
            if now_us() > deadline {
                return Err("the servers did not start listening within 2 s".to_string());
            }
            std::thread::sleep(TURN);
        }
    }

    fn judge(
        mut self,
        history_dir: &Path,
        end_us: u64,
        skipped: Vec<FaultEvent>,
        stopped_at_end: usize,
        interrupted: bool,
    ) -> Result<RealRun, String> {
        let drift = self.model.drift_ppm_max;
        let mut sources = vec![std::mem::take(&mut self.events)];
        let mut files: Vec<(Actor, PathBuf)> = std::fs::read_dir(history_dir)
            .map_err(|e| format!("{}: {e}", history_dir.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter_map(|path| {
                let name = path.file_name()?.to_str()?.to_string();
                merge::actor_of_file(&name).map(|actor| (actor, path))
            })
            .collect();
        files.sort();
        for (actor, path) in &files {
            sources.push(merge::read_file(path, *actor, drift)?);
        }
        let history = merge::merge(sources, self.t0_us);
        let run_us = end_us.saturating_sub(self.t0_us);
        let record = RunRecord { history, net: NetStats::default(), sim_us: run_us, probes: Default::default() };
        let mut model = self.model.clone();
        if interrupted {
            // Cut short: the liveness phase did not run its length.
            model.liveness_ms = 0;
        }
        let mut outcome = judge(self.options.seed, &model, self.played.clone(), record);
        for (at_us, actor, status) in &self.died {
            let log = self.procs.log_of(*actor);
            let detail = format!("{actor} exited on its own ({status}); its log: {}", log.display());
            outcome.violations.push(Violation::new(Property::Panic, at_us.saturating_sub(self.t0_us), detail));
            outcome.ok = false;
        }
        if interrupted {
            outcome.violations.retain(|v| !v.property.after_heal());
            outcome.ok = outcome.violations.is_empty();
        }
        Ok(RealRun {
            outcome,
            played: std::mem::take(&mut self.played),
            skipped,
            processes: self.procs.started + self.tools.started,
            stopped_at_end,
            interrupted,
        })
    }
}

/// Writes `dir/name` whole or not at all (a reader never sees half of it).
fn write_atomically(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    let temp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&temp, text).map_err(|e| format!("{}: {e}", temp.display()))?;
    std::fs::rename(&temp, dir.join(name)).map_err(|e| format!("{}: {e}", dir.join(name).display()))
}

/// Where the servers' ports are looked for: below the kernel's ephemeral
/// range, so that no outgoing connection (another run's worker dialling
/// its servers) takes a port between this check and the server's bind.
const PORTS_FROM: u16 = 20_000;
const PORTS_BELOW_DEFAULT: u16 = 32_768;

/// The servers' ports of the runs of this process still going. A server
/// stopped for an outage or a restore binds its port again when it comes
/// back, and a run beside it (the node tests play theirs side by side)
/// found that port free in between and took it.
static TAKEN: std::sync::Mutex<BTreeSet<u16>> = std::sync::Mutex::new(BTreeSet::new());

/// A run's servers' ports, given back to the search when the run ends.
struct Ports(Vec<u16>);

impl Drop for Ports {
    fn drop(&mut self) {
        let mut taken = TAKEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for port in &self.0 {
            taken.remove(port);
        }
    }
}

/// `count` loopback ports free now and taken by no other run of this
/// process, each held by a listener until the caller drops it. Runs of
/// other processes start their search at different places (from their
/// process id and the clock), so two rarely test the same port at once;
/// past the range, any port the kernel gives.
fn free_ports(count: usize) -> Result<(Vec<std::net::TcpListener>, Ports), String> {
    free_ports_from(count, u64::from(std::process::id()).wrapping_mul(7_919) ^ now_us())
}

/// [`free_ports`], its search starting `start` ports into the range.
fn free_ports_from(count: usize, start: u64) -> Result<(Vec<std::net::TcpListener>, Ports), String> {
    let mut taken = TAKEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let below = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(PORTS_BELOW_DEFAULT)
        .max(PORTS_FROM + 1_000);
    let span = u64::from(below - PORTS_FROM);
    let start = start % span;
    let mut listeners = Vec::with_capacity(count);
    for step in 0..span {
        if listeners.len() == count {
            break;
        }
        let port = PORTS_FROM + u16::try_from((start + step) % span).expect("below u16::MAX");
        if taken.contains(&port) {
            continue;
        }
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            listeners.push(listener);
        }
    }
    while listeners.len() < count {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot find a free loopback port: {e}"))?;
        listeners.push(listener);
    }
    let ports = listeners.iter().map(|l| l.local_addr().map(|a| a.port())).collect::<Result<Vec<u16>, _>>();
    let ports = ports.map_err(|e| format!("a loopback port: {e}"))?;
    taken.extend(&ports);
    Ok((listeners, Ports(ports)))
}

/// The cluster file of a run: the model's timing and variant, admin requests on, histories kept.
fn write_cluster_file(dir: &Path, model: &Model) -> Result<(PathBuf, Ports), String> {
    let (listeners, ports) = free_ports(usize::from(model.nodes))?;
    let mut text = format!(
        "cluster_id = \"real-{:x}\"\nlease_ms = {}\nheartbeat_ms = {}\nelection_ms_min = {}\nelection_ms_max = {}\n\
         drift_ppm_max = {}\nadmin = true\nhistory = \"history\"\nvariant = \"{}\"\n",
        now_us(),
        model.lease_ms,
        model.heartbeat_ms,
        model.election_ms_min,
        model.election_ms_max,
        model.drift_ppm_max,
        model.variant.name()
    );
    for (id, listener) in listeners.iter().enumerate() {
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        text.push_str(&format!("\n[[node]]\nid = {id}\naddr = \"127.0.0.1:{port}\"\ndata_dir = \"node-{id}\"\n"));
    }
    drop(listeners);
    let path = dir.join("cluster.toml");
    std::fs::write(&path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    Ok((path, ports))
}

/// CLOCK_MONOTONIC in µs: the clock every process of the run stamps its history with.
pub fn now_us() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => {
            let us = i128::from(ts.tv_sec()) * 1_000_000 + i128::from(ts.tv_nsec()) / 1_000;
            u64::try_from(us.max(0)).unwrap_or(0)
        }
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::{free_ports_from, TAKEN};

    /// Two runs of one process whose searches start at the same port still
    /// get different ports, though the first run's are free again (its
    /// servers stopped, or not yet bound); once a run ends, its ports may be
    /// given again.
    #[test]
    fn runs_of_one_process_never_share_a_port() {
        let (listeners, first) = free_ports_from(3, 4_242).expect("free ports");
        drop(listeners);
        let (listeners, second) = free_ports_from(3, 4_242).expect("free ports");
        drop(listeners);
        assert!(first.0.iter().all(|port| !second.0.contains(port)), "{:?} and {:?}", first.0, second.0);
        let given = first.0.clone();
        drop(first);
        let taken = TAKEN.lock().expect("taken ports");
        assert!(given.iter().all(|port| !taken.contains(port)), "a run's ports are given back when it ends");
        assert!(second.0.iter().all(|port| taken.contains(port)));
    }
}
