//! One server process: `LockServer` from `fencelock`, unchanged, under a
//! tokio driver. This is the real twin of `sim/src/nodes/server.rs` and keeps
//! its shape: a tick loop on `TICK_MS_STANDARD` of the local clock,
//! deliveries stepped in, and `drive`: persist → send `messages` → fsync →
//! send `messages_after_persist` → `apply_ready` → outputs.
//!
//! Where it differs from the simulator's driver, and why:
//! - tokio and TCP instead of madsim: deliveries come from connection tasks
//!   through one bounded channel, and the event loop is the only owner of the
//!   `LockServer`, so the protocol still sees one input at a time.
//! - Inputs are taken in batches (at most [`INBOUND_BATCH_MAX`]) before one
//!   `drive`: a real fsync costs milliseconds, so requests that arrived
//!   together share it. Each input is still stepped in alone, in order.
//! - Storage is `crate::storage::Storage` (files and a real fsync), called
//!   under `block_in_place`: the event loop waits for the disk as Raft
//!   requires, while connection tasks keep reading on other threads.
//! - A failed fsync ends the process (exit 1): after a failed fsync the
//!   kernel may have dropped the dirty pages, so nothing written since the
//!   last good sync can be trusted (the "fsyncgate" lesson).
//! - The Raft RNG seed comes from the node id and the process's start time,
//!   not from a run seed: there is no run to replay, and two lives of a node
//!   should not draw the same election timeouts.
//! - Replies go back on the connection the request came in on; when that
//!   connection is gone the reply is bounced (`on_bounced`), as the
//!   simulator's network bounces a reply to a crashed client.
//! - Admin requests (cluster file `admin = true`) stand in for the
//!   simulator's faults: isolate peers (or cut what goes to some, one way),
//!   skew the local clock, read status.
//! - Floor reads (`Envelope::FloorRead`, from a restored resource's owner or
//!   an operator tool, see `crate::client::FloorReader`) are answered on the
//!   connection they came in on, like replies. When that connection is gone
//!   the answer is dropped: it carries no decision the server must see
//!   through, and the asker times out and asks again.

use crate::clock::{ClockMap, LocalClock};
use crate::config::Cluster;
use crate::history::{EventKind, HistoryWriter};
use crate::net::{self, AdminReply, AdminRequest, LockRow, NodeFrame, PeerLink, Status};
use crate::storage::Storage;
use fencelock::raft::{Config, HardState, Message, RaftNode, Ready, SoftState, TICK_MS_STANDARD};
use fencelock::service::{LockServer, Output, ServiceConfig};
use fencelock::wire::Envelope;
use fencelock::{ClientId, LockState, LogIndex, NodeId, Token};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{mpsc, Semaphore};

/// One Raft tick, the same for every server.
const TICK_MS: u64 = TICK_MS_STANDARD;
/// A bound on Ready rounds handled after one batch of inputs; Raft converges in a few.
const READY_ROUNDS_MAX: usize = 64;
/// Inputs stepped in before one `drive`.
pub const INBOUND_BATCH_MAX: usize = 64;
/// Inputs waiting for the event loop; connection readers wait when it is full.
const INBOUND_QUEUE_MAX: usize = 4_096;
/// Open connections a server accepts (peers, clients, admin tools).
pub const CONNECTIONS_MAX: usize = 256;
/// Frames queued for one connection's writer before replies are dropped.
const CONNECTION_QUEUE_MAX: usize = 1_024;
/// Clients whose connection the server remembers for replies.
const ROUTES_MAX: usize = 4_096;
/// Floor reads whose answer is awaited, remembered with their connection.
/// A read whose round never settles (a deposed leader's) stays until its
/// connection closes or newer reads push it out; its asker has moved on.
const FLOOR_ROUTES_MAX: usize = 1_024;
/// Rounds of outputs handled in a row (a bounce may produce more outputs).
const OUTPUT_ROUNDS_MAX: usize = 16;

type ConnId = u64;

/// What connection tasks hand the event loop.
enum Inbound {
    Opened { conn: ConnId, tx: mpsc::Sender<Vec<u8>> },
    Frame { conn: ConnId, frame: NodeFrame },
    Closed { conn: ConnId },
}

/// Why a server stopped.
#[derive(Debug)]
pub enum ServeError {
    /// Bad input (the data directory, the address): exit 2.
    Input(String),
    /// The disk failed under a running server: exit 1.
    Fatal(String),
}

/// A bound listener and the opened storage: everything that can fail on
/// bad input, done before the server joins the cluster.
pub struct Prepared {
    cluster: Cluster,
    id: NodeId,
    storage: Storage,
    server: LockServer,
    listener: TcpListener,
    history: HistoryWriter,
    snapshot_index: LogIndex,
    token_last: Token,
    locks: Vec<(fencelock::Key, Token)>,
    clock: LocalClock,
}

/// How a server starts, besides its cluster file and id.
#[derive(Clone, Debug, Default)]
pub struct Start {
    /// The machine clock it starts on (a restart keeps its machine's clock).
    pub clock: Option<ClockMap>,
    /// A backup of its data dir to restore first (`Storage::restore_from`):
    /// the node comes back from a stale copy of its own disk.
    pub restore_from: Option<PathBuf>,
}

/// Opens node `id`'s storage (restored from a backup first, if `start`
/// says so) and binds its address. With a clock in `start`, the server's
/// local clock takes that mapping (a machine clock that outlives the
/// process: `fencesim real` restarts a server on the clock it had).
pub async fn prepare(cluster: Cluster, id: NodeId, start: Start) -> Result<Prepared, ServeError> {
    let mut local = LocalClock::new();
    if let Some(map) = start.clock {
        local.set_map(map).map_err(|e| ServeError::Input(format!("--clock: {e}")))?;
    }
    let node = cluster.node(id).ok_or_else(|| {
        ServeError::Input(format!(
            "{}: no node with id {} (nodes are 0..{})",
            cluster.file.display(),
            id.0,
            cluster.nodes.len()
        ))
    })?;
    let opened = match &start.restore_from {
        Some(backup) => Storage::restore_from(backup, &node.data_dir, &cluster.cluster_id, id),
        None => Storage::open(&node.data_dir, &cluster.cluster_id, id),
    };
    let (storage, durable) = opened.map_err(|e| ServeError::Input(e.to_string()))?;
    let (snapshot_index, state) = match &durable.snapshot {
        Some(snapshot) => (snapshot.index, snapshot.state.clone()),
        None => (LogIndex(0), LockState::new(Token(0))),
    };
    let token_last = state.token_last();
    let locks = state.locks().map(|(key, lock)| (key.clone(), lock.token)).collect();
    let voters = (0..cluster.node_count()).map(NodeId).collect();
    let mut config = Config::standard(id, voters);
    let ticks = |ms: u64| u32::try_from(ms / TICK_MS).expect("the cluster file bounds its timeouts");
    config.heartbeat_ticks = ticks(cluster.heartbeat_ms);
    config.election_ticks_min = ticks(cluster.election_ms_min);
    config.election_ticks_max = ticks(cluster.election_ms_max);
    config.variant = cluster.variant;
    let raft =
        RaftNode::new(config, durable, rng_seed(id)).map_err(|e| ServeError::Input(format!("raft config: {e}")))?;
    let server = LockServer::new(ServiceConfig::standard(cluster.variant), raft, state);
    let listener = TcpListener::bind(node.addr)
        .await
        .map_err(|e| ServeError::Input(format!("node {}: cannot listen on {}: {e}", id.0, node.addr)))?;
    let history =
        HistoryWriter::open(cluster.history.as_deref(), &format!("node-{}", id.0)).map_err(ServeError::Input)?;
    Ok(Prepared { cluster, id, storage, server, listener, history, snapshot_index, token_last, locks, clock: local })
}

/// The node id and the start time mixed (splitmix64), so lives and nodes differ.
fn rng_seed(id: NodeId) -> u64 {
    let mut x = crate::clock::true_us() ^ (u64::from(id.0) << 56) ^ u64::from(std::process::id());
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The event loop's state: the protocol and everything around it.
struct Node {
    id: NodeId,
    admin: bool,
    server: LockServer,
    storage: Storage,
    /// The hard state last handed to storage, to tell a term or vote change (which needs fsync).
    hard_state_written: HardState,
    clock: LocalClock,
    peers: BTreeMap<NodeId, PeerLink>,
    conns: BTreeMap<ConnId, mpsc::Sender<Vec<u8>>>,
    routes: BTreeMap<ClientId, ConnId>,
    /// Where each awaited floor answer goes, by read id (askers put their own id in it).
    floor_routes: BTreeMap<u64, ConnId>,
    isolated: BTreeSet<NodeId>,
    /// Peers this server's Raft messages are dropped for, one way (`admin cut`).
    cut_to: BTreeSet<NodeId>,
    history: HistoryWriter,
    soft: SoftState,
    /// Raft messages queued for peers since this process started (`Status::raft_sent`).
    raft_sent: u64,
}

/// Runs the server until SIGTERM or SIGINT (then `Ok`) or a disk failure.
pub async fn run(prepared: Prepared) -> Result<(), ServeError> {
    let Prepared { cluster, id, storage, server, listener, history, snapshot_index, token_last, locks, clock } =
        prepared;
    let peers = cluster.nodes.iter().filter(|n| n.id != id).map(|n| (n.id, PeerLink::start(n.id, n.addr))).collect();
    let (inbound_tx, mut inbound) = mpsc::channel(INBOUND_QUEUE_MAX);
    tokio::spawn(accept_loop(listener, inbound_tx));
    let soft = server.raft().soft_state();
    let mut node = Node {
        id,
        admin: cluster.admin,
        hard_state_written: server.raft().hard_state(),
        server,
        storage,
        clock,
        peers,
        conns: BTreeMap::new(),
        routes: BTreeMap::new(),
        floor_routes: BTreeMap::new(),
        isolated: BTreeSet::new(),
        cut_to: BTreeSet::new(),
        history,
        soft,
        raft_sent: 0,
    };
    node.record(EventKind::Restarted { actor: format!("server {}", id.0) });
    node.record(EventKind::SnapshotInstalled { node: id, index: snapshot_index, token_last, locks });
    // A new process knows no leader yet: say so, as the simulator's servers
    // do, or the history keeps the leader its previous life followed.
    let soft = node.soft;
    node.record(EventKind::Role { node: id, role: soft.role, term: soft.term, leader: soft.leader });
    if node.clock.map() != LocalClock::new().map() {
        node.record_clock();
    }
    // Listeners made once, so a signal that lands between two turns of the loop is not missed.
    let watch =
        |kind: SignalKind, name: &str| signal(kind).map_err(|e| ServeError::Fatal(format!("cannot watch {name}: {e}")));
    let mut terminate = watch(SignalKind::terminate(), "SIGTERM")?;
    let mut interrupt = watch(SignalKind::interrupt(), "SIGINT")?;
    let tick_us = TICK_MS * 1_000;
    let mut next_tick_local_us = node.clock.local_us() + tick_us;
    let mut batch = Vec::with_capacity(INBOUND_BATCH_MAX);
    loop {
        // Ticks keep their pace across a backward step of the local clock.
        let now_local_us = node.clock.local_us();
        next_tick_local_us = next_tick_local_us.min(now_local_us + tick_us);
        let wait = node.clock.true_wait(next_tick_local_us.saturating_sub(now_local_us));
        tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            got = inbound.recv_many(&mut batch, INBOUND_BATCH_MAX) => {
                if got == 0 {
                    return Err(ServeError::Fatal("the listener stopped".to_string()));
                }
                for input in batch.drain(..) {
                    node.on_inbound(input);
                }
            }
            () = tokio::time::sleep(wait) => {}
        }
        let now_local_us = node.clock.local_us();
        if now_local_us >= next_tick_local_us {
            node.server.tick(now_local_us / 1_000);
            // A clock stepped far forward does not owe a burst of ticks.
            next_tick_local_us = (next_tick_local_us + tick_us).max(now_local_us + 1);
        }
        node.drive()?;
        node.history.flush();
    }
    node.history.flush();
    tracing::info!("node {} stopping", id.0);
    Ok(())
}

/// Accepts connections while there are permits; each gets a reader and a writer task.
async fn accept_loop(listener: TcpListener, inbound: mpsc::Sender<Inbound>) {
    let permits = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    let mut next_conn: ConnId = 0;
    loop {
        let Ok((stream, peer)) = listener.accept().await else { continue };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!("refusing a connection from {peer}: {CONNECTIONS_MAX} open");
            continue;
        };
        let _ = stream.set_nodelay(true);
        next_conn += 1;
        let conn = next_conn;
        let (mut read, mut write) = stream.into_split();
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(CONNECTION_QUEUE_MAX);
        if inbound.send(Inbound::Opened { conn, tx }).await.is_err() {
            return;
        }
        tokio::spawn(async move {
            while let Some(bytes) = rx.recv().await {
                if net::write_bytes(&mut write, &bytes).await.is_err() {
                    break;
                }
            }
        });
        let inbound = inbound.clone();
        tokio::spawn(async move {
            let _permit = permit;
            loop {
                match net::read_frame(&mut read).await {
                    Ok(Some(frame)) => {
                        if inbound.send(Inbound::Frame { conn, frame }).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        // A bad checksum or length: the stream is out of step; close it.
                        tracing::warn!("closing connection from {peer}: {e}");
                        break;
                    }
                }
            }
            let _ = inbound.send(Inbound::Closed { conn }).await;
        });
    }
}

impl Node {
    fn now_local_ms(&self) -> u64 {
        self.clock.local_us() / 1_000
    }

    /// Tells the history the clock's new mapping.
    fn record_clock(&mut self) {
        let (local_us, rate_ppm) = (self.clock.local_us(), self.clock.rate_ppm());
        self.record(EventKind::Clock { local_us, rate_ppm });
    }

    fn record(&mut self, kind: EventKind) {
        let at_us = self.clock.true_us();
        let local_us = self.clock.local_us();
        self.history.record(at_us, local_us, kind);
    }

    fn on_inbound(&mut self, input: Inbound) {
        match input {
            Inbound::Opened { conn, tx } => {
                self.conns.insert(conn, tx);
            }
            Inbound::Closed { conn } => {
                self.conns.remove(&conn);
                self.routes.retain(|_, c| *c != conn);
                self.floor_routes.retain(|_, c| *c != conn);
            }
            Inbound::Frame { conn, frame } => self.on_frame(conn, frame),
        }
    }

    fn on_frame(&mut self, conn: ConnId, frame: NodeFrame) {
        let now_local_ms = self.now_local_ms();
        match frame {
            NodeFrame::Lock(Envelope::Raft(message)) => {
                if message.to == self.id && !self.isolated.contains(&message.from) {
                    self.server.step(message, now_local_ms);
                }
            }
            NodeFrame::Lock(Envelope::Request { client, request, body }) => {
                self.route(client, conn);
                self.server.on_client(client, request, body, now_local_ms);
            }
            NodeFrame::Lock(Envelope::FloorRead { read }) => {
                if !self.floor_routes.contains_key(&read) && self.floor_routes.len() >= FLOOR_ROUTES_MAX {
                    // The lowest id goes: its asker's next attempt brings a new route.
                    self.floor_routes.pop_first();
                }
                self.floor_routes.insert(read, conn);
                self.server.on_floor_read(read);
            }
            NodeFrame::Lock(_) | NodeFrame::AdminReply(_) => {}
            NodeFrame::Admin(request) => {
                let reply = self.on_admin(request);
                self.send_conn(conn, &NodeFrame::AdminReply(reply));
            }
        }
    }

    /// Remembers where `client`'s replies go; the table is bounded.
    fn route(&mut self, client: ClientId, conn: ConnId) {
        if !self.routes.contains_key(&client) && self.routes.len() >= ROUTES_MAX {
            // The lowest id goes; its next request brings its route back.
            self.routes.pop_first();
        }
        self.routes.insert(client, conn);
    }

    fn on_admin(&mut self, request: AdminRequest) -> AdminReply {
        // Status only reads, and `cluster up` and `status` need it on any
        // cluster; what changes a server's behaviour needs `admin = true`.
        if !self.admin && request != AdminRequest::Status {
            return AdminReply::Refused { reason: "admin requests are off (cluster file: admin = false)".to_string() };
        }
        match request {
            AdminRequest::Status => AdminReply::Status(self.status()),
            AdminRequest::Isolate { peers } => {
                self.isolated = peers.into_iter().filter(|p| *p != self.id).collect();
                AdminReply::Done
            }
            AdminRequest::Cut { peers } => {
                self.cut_to = peers.into_iter().filter(|p| *p != self.id).collect();
                AdminReply::Done
            }
            AdminRequest::Clock { offset_ms, rate_ppm } => match self.clock.set(offset_ms, rate_ppm) {
                Ok(()) => {
                    self.record_clock();
                    AdminReply::Done
                }
                Err(reason) => AdminReply::Refused { reason },
            },
            AdminRequest::ClockMap { map } => match self.clock.set_map(map) {
                Ok(()) => {
                    self.record_clock();
                    AdminReply::Done
                }
                Err(reason) => AdminReply::Refused { reason },
            },
        }
    }

    fn status(&self) -> Status {
        let raft = self.server.raft();
        let soft = raft.soft_state();
        let state = self.server.state();
        Status {
            node: self.id,
            role: format!("{:?}", soft.role),
            term: soft.term,
            leader: soft.leader,
            serving: self.server.is_serving_leader(),
            commit_index: raft.commit_index(),
            applied_index: self.server.applied_index(),
            token_last: state.token_last(),
            locks: state
                .locks()
                .map(|(key, lock)| LockRow {
                    key: key.clone(),
                    token: lock.token,
                    holder: lock.holder.to_string(),
                    lease_ms: lock.lease_ms,
                })
                .collect(),
            local_ms: self.now_local_ms(),
            raft_sent: self.raft_sent,
        }
    }

    /// Queues a frame on connection `conn`; false when it is gone or full.
    fn send_conn(&self, conn: ConnId, frame: &NodeFrame) -> bool {
        let Some(tx) = self.conns.get(&conn) else { return false };
        let Some(bytes) = net::encode(frame) else { return false };
        tx.try_send(bytes).is_ok()
    }

    /// Persists, sends and applies until the server has nothing more to do.
    fn drive(&mut self) -> Result<(), ServeError> {
        for _ in 0..READY_ROUNDS_MAX {
            if !self.server.has_ready() {
                break;
            }
            let mut ready = self.server.ready();
            let must_sync = self.persist(&mut ready);
            self.send_all(&mut ready.messages);
            if must_sync {
                let storage = &mut self.storage;
                tokio::task::block_in_place(|| storage.sync())
                    .map_err(|e| ServeError::Fatal(format!("node {}: fsync failed: {e}", self.id.0)))?;
            }
            self.send_all(&mut ready.messages_after_persist);
            if must_sync && !self.server.raft().is_recovering() && self.storage.durable().restored_from_backup {
                // Durable with the vote that ended recovery (ARCHITECTURE.md, "Restores").
                self.storage.mark_recovered();
            }
            if let Some(snapshot) = &ready.snapshot {
                let locks = snapshot.state.locks().map(|(key, lock)| (key.clone(), lock.token)).collect();
                let token_last = snapshot.state.token_last();
                self.record(EventKind::SnapshotInstalled { node: self.id, index: snapshot.index, token_last, locks });
            }
            let now_local_ms = self.now_local_ms();
            self.server.apply_ready(ready, now_local_ms);
            self.handle_outputs();
        }
        self.handle_outputs();
        let now = self.server.raft().soft_state();
        if now != self.soft {
            self.soft = now;
            tracing::info!(
                "node {}: {:?} in term {}, leader {:?}",
                self.id.0,
                now.role,
                now.term.0,
                now.leader.map(|l| l.0)
            );
            self.record(EventKind::Role { node: self.id, role: now.role, term: now.term, leader: now.leader });
        }
        Ok(())
    }

    /// Writes the persistent parts of a Ready (durable at the next sync).
    /// Returns whether anything the protocol depends on was written: a
    /// commit index alone is not worth an fsync (it is recomputed after a crash).
    fn persist(&mut self, ready: &mut Ready) -> bool {
        let mut must_sync = false;
        if let Some(snapshot) = &ready.snapshot {
            self.storage.install_snapshot(snapshot);
            must_sync = true;
        }
        if !ready.entries.is_empty() {
            self.storage.append(&ready.entries);
            ready.entries.clear();
            must_sync = true;
        }
        if let Some(hard_state) = ready.hard_state {
            let before = self.hard_state_written;
            self.storage.set_hard_state(hard_state);
            self.hard_state_written = hard_state;
            must_sync |= hard_state.term != before.term || hard_state.vote != before.vote;
        }
        must_sync
    }

    /// Sends `messages`, draining them: their buffer goes back to the server
    /// with the Ready ([`LockServer::apply_ready`]).
    fn send_all(&mut self, messages: &mut Vec<Message>) {
        for message in messages.drain(..) {
            if self.isolated.contains(&message.to) || self.cut_to.contains(&message.to) {
                continue;
            }
            let Some(link) = self.peers.get(&message.to) else { continue };
            if let Some(bytes) = net::encode(&NodeFrame::Lock(Envelope::Raft(message))) {
                // A full queue drops the message: Raft resends what matters.
                if link.send(bytes) {
                    self.raft_sent += 1;
                }
            }
        }
    }

    fn handle_outputs(&mut self) {
        for _ in 0..OUTPUT_ROUNDS_MAX {
            let outputs = self.server.take_outputs();
            if outputs.is_empty() {
                return;
            }
            for output in outputs {
                self.handle_output(output);
            }
        }
    }

    fn handle_output(&mut self, output: Output) {
        let id = self.id;
        match output {
            Output::Reply { client, request, reply } => {
                self.record(EventKind::Replied { node: id, client, request, reply });
                let frame = NodeFrame::Lock(Envelope::Reply { request, reply });
                let sent = self.routes.get(&client).is_some_and(|conn| self.send_conn(*conn, &frame));
                if !sent {
                    let now_local_ms = self.now_local_ms();
                    self.server.on_bounced(client, request, reply, now_local_ms);
                }
            }
            Output::Applied { index, term, command, result } => {
                self.record(EventKind::Applied { node: id, index, term, command, result });
            }
            Output::AppliedNoop { index, term } => {
                self.record(EventKind::AppliedNoop { node: id, index, term });
            }
            Output::Compacted(snapshot) => self.storage.compact(&snapshot),
            Output::ExpireProposed { key, token } => {
                self.record(EventKind::ExpireProposed { node: id, key, token });
            }
            Output::GhostReleaseProposed { key, token, holder } => {
                self.record(EventKind::GhostReleaseProposed { node: id, key, token, holder });
            }
            Output::TurnedAway { key, holder } => {
                self.record(EventKind::TurnedAway { node: id, key, holder });
            }
            Output::FloorAnswer { read, answer } => {
                // Each read is answered once; a lost answer is asked again under a new id.
                if let Some(conn) = self.floor_routes.remove(&read) {
                    self.send_conn(conn, &NodeFrame::Lock(Envelope::FloorReply { read, answer }));
                }
            }
        }
    }
}
