//! The `fencelock-node` command line (clap derive).
//!
//! Every failure ends with one line on stderr: exit 2 for bad input (flags,
//! a cluster file, a data directory of another cluster), exit 1 when the
//! cluster did not do what was asked (no leader, busy, no answer).

use crate::bench;
use crate::client::{ClientOptions, LockClient, LockError};
use crate::clock::ClockMap;
use crate::cluster::{self, CLUSTER_FILE};
use crate::config::{Cluster, NODES_MAX};
use crate::history::HistoryWriter;
use crate::net::{AdminReply, AdminRequest, Status};
use crate::server::{self, ServeError};
use clap::{Args, Parser, Subcommand};
use fencelock::{ClientId, Key, NodeId, RequestId, Token};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest key accepted from the command line.
const KEY_LEN_MAX: usize = 256;
/// Command-line clients take ids from this base plus their PID modulo
/// [`CLI_CLIENT_IDS`]: the lock state keeps one session per client id
/// (`SESSIONS_MAX`), so one-shot processes share a bounded set of ids, and
/// request ids from the wall clock keep each id's requests increasing.
const CLI_CLIENT_BASE: u32 = 1 << 30;
const CLI_CLIENT_IDS: u32 = 2_048;
/// How long `cluster up` waits for a leader.
const ELECTION_WAIT: Duration = Duration::from_secs(15);
/// How long `cluster down` waits after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

#[derive(Parser, Debug)]
#[command(name = "fencelock-node", version, about = "The fencelock lock service as real processes on 127.0.0.1")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one server of a cluster (in the foreground).
    Serve {
        #[arg(long)]
        config: PathBuf,
        #[arg(long)]
        id: u8,
        /// Start on this local clock mapping, TRUE_US,LOCAL_US,RATE_PPM (a
        /// restart keeps its machine's clock).
        #[arg(long)]
        clock: Option<ClockMap>,
        /// First replace the data dir with this backup of it (a copy of the
        /// data dir, or `storage`'s backup), marked restored from a stale
        /// backup: the node rejoins through recovery.
        #[arg(long)]
        restore_from: Option<PathBuf>,
    },
    /// Start or stop a local cluster.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Acquire, renew or release a lock.
    #[command(subcommand)]
    Lock(LockCommand),
    /// The leader, term, commit index and locks.
    Status {
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        json: bool,
    },
    /// Fault injection on one server (cluster file `admin = true`).
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Run one workload worker (what `fencesim real` starts per client).
    Worker(WorkerArgs),
    /// The operator's backups and restores of the protected resource.
    #[command(subcommand)]
    Resource(ResourceCommand),
    /// Start 3 local nodes and measure acquire→release round trips.
    Bench {
        #[arg(long, default_value_t = 4)]
        clients: usize,
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
struct WorkerArgs {
    #[command(flatten)]
    target: Target,
    /// This worker's client id.
    #[arg(long)]
    client: u32,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// This client's life, from 0: request ids of a new life never collide with an earlier one's.
    #[arg(long, default_value_t = 0)]
    incarnation: u64,
    /// A key to work on (repeat; the first is taken half the time).
    #[arg(long = "key", required = true)]
    keys: Vec<String>,
    #[arg(long)]
    lease_ms: Option<u64>,
    /// Stall between the lease check and the write now and then, at most this long.
    #[arg(long)]
    stall_ms_max: Option<u64>,
    /// The protected resource: `sqlite:PATH`, a path, or `postgres://…`.
    #[arg(long)]
    resource: String,
    /// A directory of control files (clock, cut links, armed stall); see `worker.rs`.
    #[arg(long)]
    control: Option<PathBuf>,
    /// Start on this local clock mapping, TRUE_US,LOCAL_US,RATE_PPM.
    #[arg(long)]
    clock: Option<ClockMap>,
    /// Jobs before the worker idles.
    #[arg(long)]
    jobs: Option<u64>,
    /// Only open the resource and exit: 0 when it can be used, 2 with the reason when not.
    #[arg(long)]
    check: bool,
}

#[derive(Subcommand, Debug)]
enum ResourceCommand {
    /// Take a consistent backup of the resource under LABEL (replacing an older one).
    Backup {
        #[command(flatten)]
        target: Target,
        /// The protected resource: `sqlite:PATH`, a path, or `postgres://…`.
        #[arg(long)]
        resource: String,
        #[arg(long, default_value = "backup")]
        label: String,
    },
    /// Hold the resource's write lock until killed: every write waits (an outage of the database).
    Hold {
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        resource: String,
        /// A file written once the lock is held (whoever waits for the outage to start reads it).
        #[arg(long)]
        ready: Option<PathBuf>,
    },
    /// Restore the resource from backup LABEL as restore number RESTORE: it
    /// refuses writes until its floor is raised from the lock service, which
    /// this command then reads and raises.
    Restore {
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        resource: String,
        #[arg(long, default_value = "backup")]
        label: String,
        /// This restore's number, from 1, above every earlier restore's.
        #[arg(long)]
        restore: u64,
        /// When the backup was taken (CLOCK_MONOTONIC µs), for the history.
        #[arg(long, default_value_t = 0)]
        backup_at_us: u64,
        /// How long the floor read may take in all.
        #[arg(long, default_value_t = 60_000)]
        wait_ms: u64,
    },
}

#[derive(Subcommand, Debug)]
enum ClusterCommand {
    /// Write DIR/cluster.toml (or reuse it: restart from disk) and start every server in the background.
    Up {
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        #[arg(long)]
        dir: PathBuf,
        /// Accept admin requests (isolate peers, skew clocks).
        #[arg(long)]
        admin: bool,
        /// Write JSON-lines histories to DIR/history/.
        #[arg(long)]
        history: bool,
    },
    /// Stop every server recorded in DIR/pids (SIGTERM, then SIGKILL).
    Down {
        #[arg(long)]
        dir: PathBuf,
    },
    /// With every server stopped: restore the whole cluster from the copies
    /// of its data dirs in FROM (FROM/node-N), as restore number EPOCH.
    Restore {
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        from: PathBuf,
        /// This whole-cluster restore's number, from 1, above every earlier one's.
        #[arg(long)]
        epoch: u32,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum LockCommand {
    /// Acquire KEY; prints its fencing token.
    Acquire {
        key: String,
        #[arg(long)]
        lease_ms: Option<u64>,
        /// Wait up to this long for a held key (0: try once).
        #[arg(long, default_value_t = 0)]
        wait_ms: u64,
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        json: bool,
    },
    /// Extend the lease of TOKEN on KEY.
    Renew {
        key: String,
        #[arg(long)]
        token: u64,
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        json: bool,
    },
    /// Release TOKEN on KEY.
    Release {
        key: String,
        #[arg(long)]
        token: u64,
        #[command(flatten)]
        target: Target,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum AdminCommand {
    /// Make server ID drop all Raft traffic to and from PEERS (none: heal).
    Isolate {
        #[arg(long)]
        id: u8,
        #[arg(long, value_delimiter = ',')]
        peers: Vec<u8>,
        #[command(flatten)]
        target: Target,
    },
    /// Make server ID drop the Raft messages it sends to PEERS, one way (none: heal).
    Cut {
        #[arg(long)]
        id: u8,
        #[arg(long, value_delimiter = ',')]
        peers: Vec<u8>,
        #[command(flatten)]
        target: Target,
    },
    /// Set server ID's local clock: true time + OFFSET_MS, running at 1 + RATE_PPM/1e6.
    Clock {
        #[arg(long)]
        id: u8,
        #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
        offset_ms: i64,
        #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
        rate_ppm: i64,
        #[command(flatten)]
        target: Target,
    },
    /// Give server ID's local clock this whole mapping, TRUE_US,LOCAL_US,RATE_PPM
    /// (what `fencesim real` sends for a clock fault).
    ClockMap {
        #[arg(long)]
        id: u8,
        #[arg(long, allow_hyphen_values = true)]
        map: ClockMap,
        #[command(flatten)]
        target: Target,
    },
}

/// Which cluster: a cluster directory or a cluster file.
#[derive(Args, Debug)]
struct Target {
    #[arg(long, conflicts_with = "config")]
    dir: Option<PathBuf>,
    #[arg(long)]
    config: Option<PathBuf>,
}

impl Target {
    fn load(&self) -> Result<Cluster, Failure> {
        match (&self.dir, &self.config) {
            (Some(dir), None) => Cluster::load(&dir.join(CLUSTER_FILE)).map_err(Failure::Input),
            (None, Some(file)) => Cluster::load(file).map_err(Failure::Input),
            _ => Err(Failure::Input("name the cluster with --dir DIR or --config FILE".to_string())),
        }
    }
}

/// How a command failed: its exit code and its one line.
pub enum Failure {
    Input(String),
    Runtime(String),
}

impl Failure {
    pub fn code(&self) -> u8 {
        match self {
            Failure::Input(_) => 2,
            Failure::Runtime(_) => 1,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Failure::Input(m) | Failure::Runtime(m) => m,
        }
    }
}

impl Cli {
    /// Whether this runs a server (which logs its life at info level).
    pub fn is_serve(&self) -> bool {
        matches!(self.command, Command::Serve { .. })
    }
}

pub async fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Serve { config, id, clock, restore_from } => serve(&config, id, clock, restore_from).await,
        Command::Cluster(ClusterCommand::Up { nodes, dir, admin, history }) => up(nodes, &dir, admin, history).await,
        Command::Cluster(ClusterCommand::Down { dir }) => down(&dir),
        Command::Cluster(ClusterCommand::Restore { target, from, epoch, json }) => {
            restore_cluster(&target, &from, epoch, json)
        }
        Command::Lock(command) => lock(command).await,
        Command::Status { target, json } => status(&target.load()?, json).await,
        Command::Admin(command) => admin_command(command).await,
        Command::Bench { clients, seconds, nodes, json } => bench_command(nodes, clients, seconds, json).await,
        Command::Worker(args) => worker_command(args).await,
        Command::Resource(command) => resource_command(command).await,
    }
}

async fn resource_command(command: ResourceCommand) -> Result<(), Failure> {
    match command {
        ResourceCommand::Backup { target, resource, label } => {
            let cluster = target.load()?;
            match crate::operator::backup(&cluster, &resource, &label).await.map_err(Failure::Runtime)? {
                Some(path) => println!("backed up {label} to {}", path.display()),
                None => println!("backed up {label}"),
            }
            Ok(())
        }
        ResourceCommand::Hold { target, resource, ready } => {
            let cluster = target.load()?;
            crate::operator::hold(&cluster, &resource, ready.as_deref()).await.map_err(Failure::Runtime)
        }
        ResourceCommand::Restore { target, resource, label, restore, backup_at_us, wait_ms } => {
            if restore == 0 {
                return Err(Failure::Input("--restore counts restores from 1, got 0".to_string()));
            }
            if !(1..=3_600_000).contains(&wait_ms) {
                return Err(Failure::Input(format!("--wait-ms must be in 1..=3600000, got {wait_ms}")));
            }
            let cluster = target.load()?;
            let options =
                crate::operator::RestoreOptions { url: resource, label: label.clone(), restore, backup_at_us, wait_ms };
            let restored = crate::operator::restore(&cluster, &options).await.map_err(|e| match e {
                crate::operator::RestoreError::NoBackup(_) => Failure::Input(e.to_string()),
                crate::operator::RestoreError::Failed(e) => Failure::Runtime(e),
            })?;
            match restored {
                Some(raised) => println!(
                    "restored {label} (restore {restore}); floor of restore {} raised from node {}: token {}, {} keys held",
                    raised.restore,
                    raised.from.0,
                    raised.floor.token_last.0,
                    raised.floor.held.len()
                ),
                None => println!("restored {label} (restore {restore}); no floor awaited"),
            }
            Ok(())
        }
    }
}

async fn worker_command(args: WorkerArgs) -> Result<(), Failure> {
    let cluster = args.target.load()?;
    let keys = args.keys.iter().map(|k| check_key(k)).collect::<Result<Vec<Key>, Failure>>()?;
    let lease_ms = args.lease_ms.unwrap_or(cluster.lease_ms);
    if !(100..=600_000).contains(&lease_ms) {
        return Err(Failure::Input(format!("--lease-ms must be in 100..=600000, got {lease_ms}")));
    }
    if args.check {
        return crate::worker::check_resource(&cluster, &args.resource).await.map_err(Failure::Input);
    }
    let options = crate::worker::WorkerOptions {
        client: ClientId(args.client),
        seed: args.seed,
        incarnation: args.incarnation,
        keys,
        lease_ms,
        stall_ms_max: args.stall_ms_max,
        resource: args.resource,
        control: args.control,
        clock: args.clock,
        jobs_max: args.jobs,
    };
    crate::worker::run(&cluster, options).await.map_err(Failure::Input)
}

async fn serve(config: &Path, id: u8, clock: Option<ClockMap>, restore_from: Option<PathBuf>) -> Result<(), Failure> {
    let cluster = Cluster::load(config).map_err(Failure::Input)?;
    let start = server::Start { clock, restore_from };
    let prepared = server::prepare(cluster, NodeId(id), start).await.map_err(serve_failure)?;
    tracing::info!("node {id} serving");
    server::run(prepared).await.map_err(serve_failure)
}

fn serve_failure(error: ServeError) -> Failure {
    match error {
        ServeError::Input(m) => Failure::Input(m),
        ServeError::Fatal(m) => Failure::Runtime(m),
    }
}

fn exe() -> Result<PathBuf, Failure> {
    std::env::current_exe().map_err(|e| Failure::Runtime(format!("cannot find this program: {e}")))
}

async fn up(nodes: usize, dir: &Path, admin: bool, history: bool) -> Result<(), Failure> {
    let file = dir.join(CLUSTER_FILE);
    let config = if file.exists() {
        if let Ok(pids) = cluster::read_pids(dir) {
            let live: Vec<String> =
                pids.iter().filter(|(_, p)| cluster::is_our_live_process(*p)).map(|(_, p)| p.to_string()).collect();
            if !live.is_empty() {
                return Err(Failure::Input(format!(
                    "{}: a cluster is running there (pids {}); run `cluster down --dir {}` first",
                    dir.display(),
                    live.join(", "),
                    dir.display()
                )));
            }
        }
        file
    } else {
        cluster::write_cluster_file(dir, nodes, admin, history).map_err(Failure::Input)?
    };
    let cluster = Cluster::load(&config).map_err(Failure::Input)?;
    if cluster.nodes.len() != nodes {
        return Err(Failure::Input(format!(
            "{}: holds {} nodes, not --nodes {nodes}",
            config.display(),
            cluster.nodes.len()
        )));
    }
    let exe = exe()?;
    let begin = Instant::now();
    let mut started = Vec::new();
    for node in &cluster.nodes {
        let log = dir.join(format!("node-{}.log", node.id.0));
        started.push(cluster::spawn_node(&exe, &config, node.id, &log).map_err(Failure::Runtime)?);
    }
    cluster::write_pids(dir, &started).map_err(Failure::Runtime)?;
    let leader = match cluster::wait_for_leader(&cluster, &mut started, ELECTION_WAIT).await {
        Ok(leader) => leader,
        Err(e) => {
            // A half-started cluster is stopped, not left running.
            let pids: Vec<(NodeId, i32)> = started.iter().map(|s| (s.id, s.pid as i32)).collect();
            cluster::stop(&pids, STOP_GRACE);
            return Err(Failure::Runtime(e));
        }
    };
    let elapsed = begin.elapsed();
    for (node, s) in cluster.nodes.iter().zip(&started) {
        println!(
            "node {} {} pid {} data {} log {}",
            node.id.0,
            node.addr,
            s.pid,
            node.data_dir.display(),
            s.log.display()
        );
    }
    println!("leader node {} (term {}) elected in {} ms", leader.node.0, leader.term.0, elapsed.as_millis());
    Ok(())
}

fn restore_cluster(target: &Target, from: &Path, epoch: u32, json: bool) -> Result<(), Failure> {
    if epoch == 0 {
        return Err(Failure::Input("--epoch counts whole-cluster restores from 1, got 0".to_string()));
    }
    if !from.is_dir() {
        return Err(Failure::Input(format!("--from {}: not a directory", from.display())));
    }
    let cluster = &target.load()?;
    let restored = crate::operator::restore_cluster(cluster, from, epoch).map_err(Failure::Runtime)?;
    if json {
        println!("{}", serde_json::to_string(&restored).unwrap_or_default());
    } else {
        println!(
            "restored {} nodes to index {} (term {}), epoch {}, tokens above {}",
            cluster.nodes.len(),
            restored.index.0,
            restored.term.0,
            restored.epoch,
            restored.token_floor.0
        );
    }
    Ok(())
}

fn down(dir: &Path) -> Result<(), Failure> {
    let pids = cluster::read_pids(dir).map_err(Failure::Input)?;
    let killed = cluster::stop(&pids, STOP_GRACE);
    if killed.is_empty() {
        println!("stopped {} nodes", pids.len());
    } else {
        println!("stopped {} nodes ({} needed SIGKILL)", pids.len(), killed.len());
    }
    Ok(())
}

fn check_key(key: &str) -> Result<Key, Failure> {
    if key.is_empty() || key.len() > KEY_LEN_MAX {
        return Err(Failure::Input(format!("KEY must be 1..={KEY_LEN_MAX} bytes")));
    }
    Ok(Key::new(key))
}

/// A one-shot client: its id from the PID, its request ids from the wall clock.
fn cli_client(cluster: &Cluster) -> LockClient {
    let id = ClientId(CLI_CLIENT_BASE + std::process::id() % CLI_CLIENT_IDS);
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX / 2));
    let options = ClientOptions { first_request: RequestId(now_us), ..ClientOptions::standard(id) };
    let client = LockClient::new(cluster, &options);
    let name = format!("client-{}", std::process::id());
    match HistoryWriter::open(cluster.history.as_deref(), &name) {
        Ok(history) => client.with_history(history),
        Err(e) => {
            // A history is a trace, not state: the command still runs.
            tracing::warn!("no history: {e}");
            client
        }
    }
}

fn lock_failure(error: LockError) -> Failure {
    Failure::Runtime(error.to_string())
}

async fn lock(command: LockCommand) -> Result<(), Failure> {
    match command {
        LockCommand::Acquire { key, lease_ms, wait_ms, target, json } => {
            let key = check_key(&key)?;
            let cluster = target.load()?;
            let lease_ms = lease_ms.unwrap_or(cluster.lease_ms);
            if !(100..=600_000).contains(&lease_ms) {
                return Err(Failure::Input(format!("--lease-ms must be in 100..=600000, got {lease_ms}")));
            }
            if wait_ms > 600_000 {
                return Err(Failure::Input(format!("--wait-ms must be at most 600000, got {wait_ms}")));
            }
            let mut client = cli_client(&cluster);
            let grant = client.acquire(&key, lease_ms, wait_ms).await.map_err(lock_failure)?;
            let valid_ms = grant.until_local_us.saturating_sub(client.now_local_us()) / 1_000;
            if json {
                println!(
                    "{}",
                    json!({"key": key.as_str(), "token": grant.token.0, "lease_ms": lease_ms, "believed_ms": valid_ms})
                );
            } else {
                println!("{}", grant.token.0);
            }
            Ok(())
        }
        LockCommand::Renew { key, token, target, json } => {
            let key = check_key(&key)?;
            let cluster = target.load()?;
            let mut client = cli_client(&cluster);
            client.adopt(key.clone(), Token(token));
            let grant = client.renew(&key).await.map_err(lock_failure)?;
            let valid_ms = grant.until_local_us.saturating_sub(client.now_local_us()) / 1_000;
            if json {
                println!("{}", json!({"key": key.as_str(), "token": token, "renewed": true, "believed_ms": valid_ms}));
            } else {
                println!("renewed {token}");
            }
            Ok(())
        }
        LockCommand::Release { key, token, target, json } => {
            let key = check_key(&key)?;
            let cluster = target.load()?;
            let mut client = cli_client(&cluster);
            client.adopt(key.clone(), Token(token));
            client.release(&key).await.map_err(lock_failure)?;
            if json {
                println!("{}", json!({"key": key.as_str(), "token": token, "released": true}));
            } else {
                println!("released {token}");
            }
            Ok(())
        }
    }
}

async fn status(cluster: &Cluster, json: bool) -> Result<(), Failure> {
    let statuses = cluster::statuses(cluster).await;
    let leader: Option<&Status> = statuses.iter().flatten().filter(|s| s.leader == Some(s.node)).max_by_key(|s| s.term);
    if json {
        let nodes: Vec<serde_json::Value> = statuses
            .iter()
            .zip(&cluster.nodes)
            .map(|(s, node)| match s {
                Ok(s) => serde_json::to_value(s).unwrap_or_default(),
                Err(e) => json!({"node": node.id.0, "error": e}),
            })
            .collect();
        let summary = leader
            .map(|l| json!({"leader": l.node.0, "term": l.term.0, "commit_index": l.commit_index.0, "locks": l.locks}));
        println!("{}", json!({"leader": summary, "nodes": nodes}));
    } else {
        for (s, node) in statuses.iter().zip(&cluster.nodes) {
            match s {
                Ok(s) => println!(
                    "node {} {} {} term {} leader {} commit {} applied {}",
                    node.id.0,
                    node.addr,
                    s.role,
                    s.term.0,
                    s.leader.map_or("-".to_string(), |l| l.0.to_string()),
                    s.commit_index.0,
                    s.applied_index.0
                ),
                Err(e) => println!("node {} {} down: {e}", node.id.0, node.addr),
            }
        }
        match leader {
            Some(l) => {
                println!(
                    "leader node {} term {} commit index {} locks {}",
                    l.node.0,
                    l.term.0,
                    l.commit_index.0,
                    l.locks.len()
                );
                for lock in &l.locks {
                    println!(
                        "lock {} token {} holder {} lease {} ms",
                        lock.key, lock.token.0, lock.holder, lock.lease_ms
                    );
                }
            }
            None => println!("no leader"),
        }
    }
    if leader.is_none() {
        return Err(Failure::Runtime("no leader answered".to_string()));
    }
    Ok(())
}

async fn admin_command(command: AdminCommand) -> Result<(), Failure> {
    let (id, request, target) = match command {
        AdminCommand::Isolate { id, peers, target } => {
            (id, AdminRequest::Isolate { peers: peers.into_iter().map(NodeId).collect() }, target)
        }
        AdminCommand::Cut { id, peers, target } => {
            (id, AdminRequest::Cut { peers: peers.into_iter().map(NodeId).collect() }, target)
        }
        AdminCommand::Clock { id, offset_ms, rate_ppm, target } => {
            (id, AdminRequest::Clock { offset_ms, rate_ppm }, target)
        }
        AdminCommand::ClockMap { id, map, target } => (id, AdminRequest::ClockMap { map }, target),
    };
    let cluster = target.load()?;
    let node = cluster.node(NodeId(id)).ok_or_else(|| Failure::Input(format!("no node {id} in the cluster")))?;
    match crate::client::admin(node.addr, request, cluster::STATUS_TIMEOUT).await.map_err(Failure::Runtime)? {
        AdminReply::Done => {
            println!("done");
            Ok(())
        }
        AdminReply::Refused { reason } => Err(Failure::Input(reason)),
        AdminReply::Status(_) => Err(Failure::Runtime("unexpected status answer".to_string())),
    }
}

async fn bench_command(nodes: usize, clients: usize, seconds: u64, json: bool) -> Result<(), Failure> {
    if nodes == 0 || nodes > NODES_MAX {
        return Err(Failure::Input(format!("--nodes must be in 1..={NODES_MAX}, got {nodes}")));
    }
    if clients == 0 || clients > bench::CLIENTS_MAX {
        return Err(Failure::Input(format!("--clients must be in 1..={}, got {clients}", bench::CLIENTS_MAX)));
    }
    if seconds == 0 || seconds > bench::SECONDS_MAX {
        return Err(Failure::Input(format!("--seconds must be in 1..={}, got {seconds}", bench::SECONDS_MAX)));
    }
    let report = bench::run(&exe()?, nodes, clients, seconds).await.map_err(Failure::Runtime)?;
    if json {
        println!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        println!("{}", report.line());
    }
    Ok(())
}
