//! Scripted scenarios: short stories told to the simulated world.
//!
//! ```text
//! let a = worker_a();
//! let token = sim.acquire(a, B1042).await;     // 41
//! sim.hold(a);                                 // worker A stalls (GC)
//! sim.run_for(ms(4_000)).await;                // its lease expires
//! ...
//! ```
//!
//! The script runs as the supervisor (never killed); workers execute its
//! commands on their own nodes, so a paused worker really is paused: a command
//! sent to it waits until it resumes. The same checker judges a scripted run.

use crate::faults::{Fault, StallPoint};
use crate::history::{Actor, EventKind, History};
use crate::machine::clock::now_us;
use crate::machine::net::Addr;
use crate::model::Model;
use crate::nodes::commands::{CommandQueue, WorkerCommand, WorkerResult};
use crate::run::seed::{judge, Outcome};
use crate::world::{Outlook, Supervisor};
use fencelock::resource::WritePath;
use fencelock::{ApplyResult, ClientId, Command, Key, NodeId, Token};
use futures::channel::{mpsc, oneshot};
use std::collections::BTreeMap;
use std::time::Duration;

/// The first key of seed 000.
pub const B1042: &str = "invoice/B-1042";

pub fn worker_a() -> ClientId {
    ClientId(0)
}

pub fn worker_b() -> ClientId {
    ClientId(1)
}

pub fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// The world as a script sees it.
pub struct Sim {
    supervisor: Supervisor,
    queues: BTreeMap<ClientId, mpsc::UnboundedSender<WorkerCommand>>,
}

/// A worker command in progress; await it with [`Sim::outcome`].
pub struct Pending(oneshot::Receiver<WorkerResult>);

/// The scripted model: no random faults or workers, a calm network.
pub fn script_model(workers: u32) -> Model {
    Model {
        clients: workers,
        loss_rate: 0.0,
        dup_rate: 0.0,
        partitions: false,
        crashes: false,
        restores: false,
        clock_steps: false,
        corruption: false,
        pauses: false,
        resource_crashes: false,
        resource_restores: false,
        ..Model::default()
    }
}

/// Runs `story` as the supervisor of a fresh world on its own thread, ends
/// the run (heals everything and runs the liveness phase), then checks the
/// history like any other run.
pub fn run_script<F>(seed: u64, model: Model, story: F) -> Outcome
where
    F: AsyncFnOnce(&mut Sim) + Send + 'static,
{
    let thread_model = model.clone();
    let record = std::thread::Builder::new()
        .name(format!("script-{seed}"))
        .stack_size(32 << 20)
        .spawn(move || {
            let runtime = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
            runtime.block_on(async move {
                let mut queues = BTreeMap::new();
                let mut receivers: BTreeMap<ClientId, CommandQueue> = BTreeMap::new();
                for c in 0..thread_model.clients {
                    let (tx, rx) = mpsc::unbounded();
                    queues.insert(ClientId(c), tx);
                    receivers.insert(ClientId(c), rx);
                }
                let supervisor = Supervisor::start(
                    seed,
                    thread_model,
                    Outlook::of(std::iter::empty()),
                    Some(receivers),
                    History::new(),
                );
                let mut sim = Sim { supervisor, queues };
                story(&mut sim).await;
                sim.finish().await;
                sim.supervisor.finish()
            })
        })
        .expect("spawning a script thread")
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    judge(seed, &model, Vec::new(), record)
}

impl Sim {
    /// Lets simulated time pass.
    pub async fn run_for(&mut self, duration: Duration) {
        self.supervisor.sleep_until_us(now_us() + duration.as_micros() as u64).await;
    }

    /// Waits until some server is leader (at most `bound`), and names it.
    pub async fn leader(&mut self) -> NodeId {
        for _ in 0..1_000 {
            if let Some(leader) = self.supervisor.ctx.known_leader() {
                return leader;
            }
            self.run_for(ms(10)).await;
        }
        panic!("no leader within 10 s of simulated time");
    }

    fn command(&self, worker: ClientId, make: impl FnOnce(oneshot::Sender<WorkerResult>) -> WorkerCommand) -> Pending {
        let (done, result) = oneshot::channel();
        self.queues[&worker].unbounded_send(make(done)).expect("the worker's queue is open");
        Pending(result)
    }

    /// Starts an acquire of `key` by `worker` (try-lock).
    pub fn start_acquire(&self, worker: ClientId, key: &str) -> Pending {
        let key = Key::new(key);
        self.command(worker, |done| WorkerCommand::Acquire { key, wait_ms: 0, vanish: false, done })
    }

    /// Acquires `key` and returns the token; panics with the refusal otherwise.
    pub async fn acquire(&mut self, worker: ClientId, key: &str) -> Token {
        let pending = self.start_acquire(worker, key);
        match self.outcome(pending).await {
            WorkerResult::Granted(token) => token,
            other => panic!("{worker} did not get {key}: {other:?}"),
        }
    }

    /// Sends an acquire and walks away before the answer: a ghost lock.
    pub async fn acquire_and_vanish(&mut self, worker: ClientId, key: &str) {
        let key = Key::new(key);
        let pending = self.command(worker, |done| WorkerCommand::Acquire { key, wait_ms: 0, vanish: true, done });
        self.outcome(pending).await;
    }

    /// Starts a write of `key` on `path` with the worker's own token (or `token`).
    pub fn start_write(&self, worker: ClientId, key: &str, path: WritePath, token: Option<Token>) -> Pending {
        let key = Key::new(key);
        self.command(worker, |done| WorkerCommand::Write { key, token, path, done })
    }

    pub async fn write(&mut self, worker: ClientId, key: &str, path: WritePath) -> WorkerResult {
        let pending = self.start_write(worker, key, path, None);
        self.outcome(pending).await
    }

    pub async fn renew(&mut self, worker: ClientId, key: &str) -> WorkerResult {
        let key = Key::new(key);
        let pending = self.command(worker, |done| WorkerCommand::Renew { key, done });
        self.outcome(pending).await
    }

    pub async fn release(&mut self, worker: ClientId, key: &str) -> WorkerResult {
        let key = Key::new(key);
        let pending = self.command(worker, |done| WorkerCommand::Release { key, done });
        self.outcome(pending).await
    }

    /// Starts a revoke of `token`'s lease on `key`, sent by `worker` (an
    /// operator's tool); it retries until some leader answers.
    pub fn start_revoke(&self, worker: ClientId, key: &str, token: Token) -> Pending {
        let key = Key::new(key);
        self.command(worker, |done| WorkerCommand::Revoke { key, token, done })
    }

    /// Waits for a started command, letting simulated time run meanwhile.
    pub async fn outcome(&mut self, pending: Pending) -> WorkerResult {
        pending.0.await.unwrap_or(WorkerResult::NoAnswer)
    }

    /// A stop-the-world stall of a worker or server until [`Sim::resume`].
    pub fn hold(&mut self, actor: impl Into<Actor>) {
        self.supervisor.hold(actor.into());
    }

    pub fn resume(&mut self, actor: impl Into<Actor>) {
        self.supervisor.resume(actor.into());
    }

    /// Applies one fault exactly as the fault schedule would.
    pub async fn fault(&mut self, fault: Fault) {
        self.supervisor.apply(&fault).await;
    }

    pub async fn partition(&mut self, sides: Vec<Vec<Addr>>) {
        self.fault(Fault::Partition { sides }).await;
    }

    pub async fn heal(&mut self) {
        self.fault(Fault::Heal).await;
    }

    pub async fn crash(&mut self, node: NodeId) {
        self.fault(Fault::Crash { node, torn: false }).await;
    }

    pub async fn restart(&mut self, node: NodeId) {
        self.fault(Fault::Restart { node }).await;
    }

    /// Ends the scripted part: heals everything and runs the liveness phase
    /// ([`run_script`] does this after every story).
    async fn finish(&mut self) {
        self.supervisor.heal();
        self.run_for(ms(self.supervisor.ctx.model.liveness_ms)).await;
    }
}

/// The compact story of a run for snapshots: grants with tokens, expiries
/// and releases with their outcome, resource verdicts, leader changes,
/// faults and process events. Times are left out so a snapshot survives
/// timing changes that do not change what happened.
pub fn story(history: &History) -> String {
    let mut lines = Vec::new();
    let mut applied_seen = std::collections::BTreeSet::new();
    let mut last_leader = None;
    for event in history.events() {
        let line = match &event.kind {
            EventKind::Role { node, role: fencelock::raft::Role::Leader, term, .. } => {
                if last_leader == Some((*node, *term)) {
                    continue;
                }
                last_leader = Some((*node, *term));
                format!("leader {node} in {term}")
            }
            EventKind::Applied { index, command, result, .. } => {
                // One line per log entry: the first node to apply it speaks for all.
                if !applied_seen.insert(*index) {
                    continue;
                }
                match (command, result) {
                    (Command::Grant { key, holder, .. }, ApplyResult::Granted { token }) => {
                        format!("grant {key} to {} -> {token}", holder.client)
                    }
                    (command, result) => format!("{command} -> {result}"),
                }
            }
            EventKind::ClusterRestored { epoch, token_floor, .. } => {
                applied_seen.clear();
                format!("cluster restored (epoch {epoch}), token floor {token_floor}")
            }
            EventKind::WriteDone { client, key, token, path, verdict, .. } => {
                format!("db {verdict}: {client} {key} {token} via {path}")
            }
            EventKind::Fault { fault } => format!("fault: {fault}"),
            EventKind::Churn(event) => format!("fault: {event}"),
            EventKind::Crashed { actor } => format!("{actor} crashed"),
            EventKind::Restarted { actor } => format!("{actor} restarted"),
            EventKind::Paused { actor } => format!("{actor} paused"),
            EventKind::Resumed { actor } => format!("{actor} resumed"),
            EventKind::Stalled { client, ms } => format!("{client} stalls {ms}ms before its write"),
            EventKind::StalledUntilOvertaken { client, key, before, .. } => {
                let what = match before {
                    StallPoint::Write => "write",
                    StallPoint::Renew => "renewal",
                };
                format!("{client} stalls before its {what} until overtaken on {key}")
            }
            EventKind::StalledOnGrant { client, request, ms } => {
                format!("{client} stalls {ms}ms before reading the Granted answer to {request}")
            }
            EventKind::NodeRestored { node, .. } => format!("{node} restored from a stale backup"),
            EventKind::GhostReleaseProposed { key, token, .. } => format!("ghost release proposed {key} {token}"),
            EventKind::ResourceRestored { restore, .. } => format!("db restored from its backup (restore {restore})"),
            EventKind::FloorRaised { token_last, held, .. } => {
                let held: Vec<String> = held.iter().map(|(key, token)| format!("{key} {token}")).collect();
                format!("db floor raised: token_last {token_last}, held [{}]", held.join(", "))
            }
            _ => continue,
        };
        lines.push(line);
    }
    lines.join("\n")
}
