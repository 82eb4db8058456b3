//! A tokio client of the lock service, driving core's sans-IO
//! `fencelock::client::Client` the way `sim/src/nodes/worker.rs` does: the
//! core decides where a request goes, when it is retried (same request id,
//! so the server's session deduplicates it), how `NotLeader` hints are
//! followed and what the lease belief is ("I hold this lock until my local
//! time T"); this file only moves bytes and reads the clock.
//!
//! Differences from the simulated worker, and why:
//! - A server that refuses the connection answers for itself: the client
//!   treats it as `NotLeader { leader: None }`, so a dead server costs a
//!   redirect instead of a whole request timeout (the simulated network
//!   silently drops such packets).
//! - One TCP connection per server, dialled on first use and again after it
//!   breaks; replies from every connection meet in one bounded channel.
//! - The client's local clock is CLOCK_MONOTONIC (`crate::clock`).
//! - Cut links are cut at this end (`with_links`): a request to a server
//!   the links file names under `to` is recorded and dropped as it is sent,
//!   a reply from one it names under `from` is dropped as it arrives (the
//!   server did the work; its answer is lost), as the simulated network
//!   drops them. The file is read at every send and every reply, so a cut
//!   takes effect in the middle of a request's retries.
//! - With a history writer (`with_history`), the client records the
//!   simulator's client events: `Requested`, `Answered`, `BeliefStart`,
//!   `BeliefEnd`.
//!
//! [`FloorReader`] is the other client of the cluster: what a restored
//! resource's owner (or an operator tool) uses to read the lock service's
//! floor, as the simulator's resource does by itself after a restore.

use crate::clock::{ClockMap, LocalClock};
use crate::config::Cluster;
use crate::history::{EventKind, GiveUp, HistoryWriter};
use crate::net::{self, NodeFrame};
use fencelock::client::{Client, ClientConfig, ClientEvent, Outgoing};
use fencelock::resource::LockFloor;
use fencelock::service::{ClientReply, FloorAnswer};
use fencelock::wire::Envelope;
use fencelock::{ClientId, Holder, Key, NodeId, RequestId, Token};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;

/// How long a dial may take before the server counts as down.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// Replies waiting to be read; a reader task waits when it is full.
const REPLIES_MAX: usize = 256;

/// How a client behaves.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub id: ClientId,
    /// Request ids start above this; see `ClientConfig::first_request`.
    pub first_request: RequestId,
    /// How long to wait for an answer before retrying at the next server.
    pub request_timeout_ms: u64,
    /// Attempts of one request (same id) before giving up.
    pub attempts_max: u32,
}

impl ClientOptions {
    /// Standard settings for client `id`: 300 ms per attempt, 40 attempts
    /// (12 s, longer than any election the cluster file allows).
    pub fn standard(id: ClientId) -> ClientOptions {
        ClientOptions { id, first_request: RequestId(0), request_timeout_ms: 300, attempts_max: 40 }
    }
}

/// Why a request did not get what it asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockError {
    /// The key is held; its lease runs at most this much longer.
    Busy { remaining_ms: u64 },
    /// The wait for the key ran out before it was free.
    WaitTimedOut,
    /// The token is not the key's current holder.
    NotHeld,
    /// No server answered within the attempts.
    GaveUp { attempts: u32 },
    /// The client holds no belief on the key to renew or release.
    NotBelieved,
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Busy { remaining_ms } => write!(f, "busy: held for at most {remaining_ms} ms more"),
            LockError::WaitTimedOut => f.write_str("the wait for the lock ran out"),
            LockError::NotHeld => f.write_str("not held: the token is not the lock's current holder"),
            LockError::GaveUp { attempts } => write!(f, "no answer from the cluster after {attempts} attempts"),
            LockError::NotBelieved => f.write_str("this client holds no such lock"),
        }
    }
}

impl std::error::Error for LockError {}

/// A granted or renewed lock: act on it only while the local clock is before `until_local_us`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub key: Key,
    pub token: Token,
    /// Whom the lock table names as the holder (this client and its acquire
    /// request): a write under `token` carries it, because the resource lets
    /// only the holder itself write again with an equal token. A renewal of
    /// an adopted token does not know its acquire: request 0 then, which no
    /// acquire uses, so such a write is refused rather than mistaken for the holder's.
    pub holder: Holder,
    pub until_local_us: u64,
}

/// The links of a client that are cut at the client's end: the text of a
/// links file is `to=0,2 from=1 db` (any part may be missing; an empty text
/// cuts nothing; `db`: the link to the protected resource, both ways).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Links {
    /// Servers whose requests from this client are lost.
    pub to: BTreeSet<NodeId>,
    /// Servers whose replies to this client are lost.
    pub from: BTreeSet<NodeId>,
    /// The resource: the client's writes and their answers are lost.
    pub resource: bool,
}

impl Links {
    pub fn is_empty(&self) -> bool {
        self.to.is_empty() && self.from.is_empty() && !self.resource
    }
}

impl FromStr for Links {
    type Err = String;

    fn from_str(text: &str) -> Result<Links, String> {
        let mut links = Links::default();
        for part in text.split_whitespace() {
            if part == "db" {
                links.resource = true;
                continue;
            }
            let (side, nodes) =
                part.split_once('=').ok_or_else(|| format!("links: `{part}` is not to=N,… or from=N,…"))?;
            let set = match side {
                "to" => &mut links.to,
                "from" => &mut links.from,
                _ => return Err(format!("links: `{side}` is neither `to` nor `from`")),
            };
            for node in nodes.split(',').filter(|n| !n.is_empty()) {
                set.insert(NodeId(node.parse().map_err(|_| format!("links: `{node}` is not a server id"))?));
            }
        }
        Ok(links)
    }
}

impl fmt::Display for Links {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
        f.write_str(&parts.join(" "))
    }
}

struct Connection {
    write: OwnedWriteHalf,
    closed: Arc<AtomicBool>,
}

/// A client of one cluster.
pub struct LockClient {
    client: Client,
    addrs: Vec<SocketAddr>,
    connections: Vec<Option<Connection>>,
    replies_tx: mpsc::Sender<(NodeId, RequestId, ClientReply)>,
    replies: mpsc::Receiver<(NodeId, RequestId, ClientReply)>,
    clock: LocalClock,
    attempts_max: u32,
    history: HistoryWriter,
    /// The holder of each key this client was granted, for the renewals' `Grant`s.
    holders: BTreeMap<Key, Holder>,
    /// The file naming the links cut at this end, if any (see [`Links`]).
    links: Option<PathBuf>,
}

impl LockClient {
    pub fn new(cluster: &Cluster, options: &ClientOptions) -> LockClient {
        let client = Client::new(ClientConfig {
            id: options.id,
            nodes: cluster.node_count(),
            drift_ppm_max: cluster.drift_ppm_max,
            request_timeout_us: options.request_timeout_ms.max(1) * 1_000,
            first_request: options.first_request,
            variant: cluster.variant,
        });
        let (replies_tx, replies) = mpsc::channel(REPLIES_MAX);
        LockClient {
            client,
            addrs: cluster.nodes.iter().map(|n| n.addr).collect(),
            connections: cluster.nodes.iter().map(|_| None).collect(),
            replies_tx,
            replies,
            clock: LocalClock::new(),
            attempts_max: options.attempts_max.max(1),
            history: HistoryWriter::none(),
            holders: BTreeMap::new(),
            links: None,
        }
    }

    /// Cuts the links the file at `path` names (see [`Links`]), read anew at
    /// every send and reply; a missing or unreadable file cuts nothing.
    pub fn with_links(mut self, path: PathBuf) -> LockClient {
        self.links = Some(path);
        self
    }

    /// Whether this client's link to the protected resource is cut now.
    pub fn resource_cut(&self) -> bool {
        self.cut_links().resource
    }

    fn cut_links(&self) -> Links {
        let Some(path) = &self.links else { return Links::default() };
        std::fs::read_to_string(path).ok().and_then(|text| text.parse().ok()).unwrap_or_default()
    }

    /// Records this client's events with `history`.
    pub fn with_history(mut self, history: HistoryWriter) -> LockClient {
        self.history = history;
        self
    }

    fn record(&mut self, kind: EventKind) {
        self.history.record(self.clock.true_us(), self.clock.local_us(), kind);
    }

    pub fn id(&self) -> ClientId {
        self.client.id()
    }

    /// Takes `map` as this client's local clock (its machine's clock, as
    /// whoever plays the faults sets it) and tells the history.
    pub fn set_clock(&mut self, map: ClockMap) -> Result<(), String> {
        self.clock.set_map(map)?;
        let (local_us, rate_ppm) = (self.clock.local_us(), self.clock.rate_ppm());
        self.record(EventKind::Clock { local_us, rate_ppm });
        Ok(())
    }

    /// Records an event of this client's (a worker's writes and stalls) in its history.
    pub fn record_event(&mut self, kind: EventKind) {
        self.record(kind);
        self.history.flush();
    }

    /// The client's local clock, µs (the clock beliefs are measured on).
    pub fn now_local_us(&self) -> u64 {
        self.clock.local_us()
    }

    /// The token this client may act on now, if any.
    pub fn belief(&self, key: &Key) -> Option<Token> {
        self.client.belief(key, self.now_local_us())
    }

    /// Takes over a token granted to another process (see `Client::adopt`).
    pub fn adopt(&mut self, key: Key, token: Token) {
        self.holders.remove(&key);
        self.client.adopt(key, token);
    }

    /// Acquires `key` for `lease_ms`, waiting at most `wait_ms` in the key's queue.
    pub async fn acquire(&mut self, key: &Key, lease_ms: u64, wait_ms: u64) -> Result<Grant, LockError> {
        let out = self.client.acquire(key.clone(), lease_ms, wait_ms, self.now_local_us());
        // Retries keep the request id, so the lock table's holder is this request.
        let holder = Holder { client: self.id(), request: out.request };
        match self.exchange(out).await? {
            ClientEvent::Granted { key, token, until_local_us } => {
                self.record(EventKind::BeliefStart { client: self.id(), key: key.clone(), token, until_local_us });
                self.holders.insert(key.clone(), holder);
                Ok(Grant { key, token, holder, until_local_us })
            }
            other => Err(self.refusal(other)),
        }
    }

    /// Extends the lease on `key`.
    pub async fn renew(&mut self, key: &Key) -> Result<Grant, LockError> {
        let out = self.client.renew(key, self.now_local_us()).ok_or(LockError::NotBelieved)?;
        match self.exchange(out).await? {
            ClientEvent::Renewed { key, token, until_local_us } => {
                self.record(EventKind::BeliefStart { client: self.id(), key: key.clone(), token, until_local_us });
                // A renewal keeps the lock's holder.
                let holder =
                    self.holders.get(&key).copied().unwrap_or(Holder { client: self.id(), request: RequestId(0) });
                Ok(Grant { key, token, holder, until_local_us })
            }
            other => Err(self.refusal(other)),
        }
    }

    /// Releases `key`; the belief ends before the request leaves.
    pub async fn release(&mut self, key: &Key) -> Result<(), LockError> {
        let token = self.client.token_of(key);
        let out = self.client.release(key, self.now_local_us());
        self.end_lease(key, token, out).await
    }

    /// Revokes this client's own lease on `key` by its token (etcd's `lease
    /// revoke`); the belief ends before the request leaves. A retried revoke
    /// may land after the key was granted again: the token makes it harmless.
    pub async fn revoke(&mut self, key: &Key) -> Result<(), LockError> {
        let token = self.client.token_of(key);
        let out = self.client.revoke(key, self.now_local_us());
        self.end_lease(key, token, out).await
    }

    /// Sends a release or revoke of `key` (`out`, made by the core client,
    /// which dropped the belief on `token`), recording the belief's end first.
    async fn end_lease(&mut self, key: &Key, token: Option<Token>, out: Option<Outgoing>) -> Result<(), LockError> {
        let out = out.ok_or(LockError::NotBelieved)?;
        if let Some(token) = token {
            self.record(EventKind::BeliefEnd { client: self.id(), key: key.clone(), token });
        }
        self.holders.remove(key);
        match self.exchange(out).await? {
            ClientEvent::Released { .. } => Ok(()),
            other => Err(self.refusal(other)),
        }
    }

    fn refusal(&self, event: ClientEvent) -> LockError {
        match event {
            ClientEvent::Busy { remaining_ms } => LockError::Busy { remaining_ms },
            ClientEvent::TimedOut => LockError::WaitTimedOut,
            // A renewal answered after the lock was replaced changes nothing: it is not ours.
            _ => LockError::NotHeld,
        }
    }

    /// Sends `out` and follows redirects and timeouts until the request's
    /// final answer, or gives up (and cancels) after `attempts_max`.
    async fn exchange(&mut self, out: Outgoing) -> Result<ClientEvent, LockError> {
        let result = self.exchange_unflushed(out).await;
        self.history.flush();
        result
    }

    async fn exchange_unflushed(&mut self, out: Outgoing) -> Result<ClientEvent, LockError> {
        let request = out.request;
        self.send(&out).await;
        let mut attempts = 1;
        loop {
            let now = self.now_local_us();
            let deadline = self.client.pending_deadline_local_us().unwrap_or(now);
            let wait = self.clock.true_wait(deadline.saturating_sub(now));
            match tokio::time::timeout(wait, self.replies.recv()).await {
                Ok(Some((node, r, reply))) => {
                    if r != request || self.cut_links().from.contains(&node) {
                        continue;
                    }
                    self.record(EventKind::Answered { client: self.id(), request, from: node, reply });
                    for event in self.client.on_reply(node, r, reply, self.now_local_us()) {
                        match event {
                            ClientEvent::Sent(out) => self.send(&out).await,
                            ClientEvent::Nothing => {}
                            other => return Ok(other),
                        }
                    }
                }
                // The client holds a sender itself, so the channel never closes.
                Ok(None) => {}
                Err(_) => {
                    attempts += 1;
                    if attempts > self.attempts_max {
                        if let Some(cancel) = self.client.cancel(self.now_local_us()) {
                            self.send(&cancel).await;
                        }
                        self.record(EventKind::GaveUp { client: self.id(), request, why: GiveUp::Retries });
                        return Err(LockError::GaveUp { attempts: self.attempts_max });
                    }
                    if let Some(out) = self.client.on_timeout(self.now_local_us()) {
                        self.send(&out).await;
                    }
                }
            }
        }
    }

    /// Delivers `out`; a server that cannot be reached answers "not here".
    async fn send(&mut self, out: &Outgoing) {
        let (client, request, to, body) = (self.id(), out.request, out.to, out.body.clone());
        self.record(EventKind::Requested { client, request, to, body });
        if self.cut_links().to.contains(&to) {
            return;
        }
        let envelope = Envelope::Request { client: self.client.id(), request: out.request, body: out.body.clone() };
        let Some(bytes) = net::encode(&NodeFrame::Lock(envelope)) else { return };
        let index = usize::from(out.to.0);
        for _ in 0..2 {
            let usable = matches!(&self.connections[index], Some(c) if !c.closed.load(Ordering::Relaxed));
            if !usable {
                self.connections[index] = self.connect(out.to).await;
            }
            let Some(connection) = self.connections[index].as_mut() else { break };
            if net::write_bytes(&mut connection.write, &bytes).await.is_ok() {
                return;
            }
            // A connection broken since its last use: dial once more.
            self.connections[index] = None;
        }
        let unreachable = ClientReply::NotLeader { leader: None };
        let _ = self.replies_tx.try_send((out.to, out.request, unreachable));
    }

    async fn connect(&self, node: NodeId) -> Option<Connection> {
        let addr = self.addrs[usize::from(node.0)];
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await.ok()?.ok()?;
        let _ = stream.set_nodelay(true);
        let (mut read, write) = stream.into_split();
        let closed = Arc::new(AtomicBool::new(false));
        let replies = self.replies_tx.clone();
        let flag = closed.clone();
        tokio::spawn(async move {
            while let Ok(Some(frame)) = net::read_frame(&mut read).await {
                if let NodeFrame::Lock(Envelope::Reply { request, reply }) = frame {
                    if replies.send((node, request, reply)).await.is_err() {
                        break;
                    }
                }
            }
            flag.store(true, Ordering::Relaxed);
        });
        Some(Connection { write, closed })
    }
}

/// Sends one admin request to `addr` and waits for its answer (bounded by `timeout`).
pub async fn admin(addr: SocketAddr, request: net::AdminRequest, timeout: Duration) -> Result<net::AdminReply, String> {
    let exchange = async {
        let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("{addr}: {e}"))?;
        let (mut read, mut write) = stream.into_split();
        let bytes = net::encode(&NodeFrame::Admin(request)).ok_or("admin request too long")?;
        net::write_bytes(&mut write, &bytes).await.map_err(|e| format!("{addr}: {e}"))?;
        match net::read_frame(&mut read).await {
            Ok(Some(NodeFrame::AdminReply(reply))) => Ok(reply),
            Ok(_) => Err(format!("{addr}: no admin answer")),
            Err(e) => Err(format!("{addr}: {e}")),
        }
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| format!("{addr}: no answer within {timeout:?}"))?
}

/// How a floor read behaves.
#[derive(Clone, Debug)]
pub struct FloorOptions {
    /// Names this asker in its read ids (their high 32 bits), so that two
    /// askers' reads at one server never share an id and an answer.
    pub asker: u32,
    /// The server asked first.
    pub first: NodeId,
    /// How long to wait for one server's answer before asking the next.
    pub attempt_timeout_ms: u64,
    /// The pause before the next attempt when a server refused the
    /// connection, knew no leader, or leads but cannot serve the read yet.
    pub retry_ms: u64,
    /// How long the whole read may take before it gives up.
    pub read_timeout_ms: u64,
    /// Attempts of one read at most, whatever the time.
    pub attempts_max: u32,
}

impl FloorOptions {
    /// Standard settings for asker `asker`: 300 ms per attempt and 12 s in
    /// all, as a lock request (longer than any election the cluster file
    /// allows); 20 ms between attempts that got no floor, as the simulator's
    /// resource. The attempt cap only stops two servers that name each other
    /// from being asked without end.
    pub fn standard(asker: u32) -> FloorOptions {
        FloorOptions {
            asker,
            first: NodeId(0),
            attempt_timeout_ms: 300,
            retry_ms: 20,
            read_timeout_ms: 12_000,
            attempts_max: 10_000,
        }
    }
}

/// Why a floor read got no floor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FloorError {
    /// No leader answered within the read's time or attempts.
    GaveUp { attempts: u32 },
    /// This reader has used every read id its asker has.
    ReadsExhausted,
}

impl fmt::Display for FloorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FloorError::GaveUp { attempts } => write!(f, "no floor from the cluster after {attempts} attempts"),
            FloorError::ReadsExhausted => f.write_str("this floor reader has used all its read ids"),
        }
    }
}

impl std::error::Error for FloorError {}

/// What one attempt of a floor read got.
enum Asked {
    /// A floor, answered to this read id.
    Floor(LockFloor, u64),
    NotLeader(Option<NodeId>),
    /// The server leads but cannot serve the read now.
    Unavailable,
    /// The connection was refused or broke.
    Refused,
    /// No answer within the attempt timeout.
    Silent,
}

/// Reads the lock service's floor (a linearizable read of its lock table and
/// token counter) for a resource restored from a backup: the real twin of the
/// floor read in `sim/src/nodes/resource.rs`, and as there: a server that
/// names its leader is left for that leader at once; one that knows no leader,
/// or does not answer in time, for the next server round the ring; a leader
/// that cannot serve yet is asked again after `retry_ms`.
///
/// Each attempt has its own read id, and a floor answered to any attempt of
/// the same call is taken: every one was sent after the call began, so each
/// answer is a read taken after the restore that preceded the call.
///
/// A connection carries one attempt at a time. An attempt that times out
/// closes its connection: its answer may be half read, and the stream would
/// be out of step.
///
/// With a history ([`FloorReader::with_history`]) each attempt is recorded
/// as a `FloorAsked` line for the restore [`FloorReader::read_for`] names.
pub struct FloorReader {
    options: FloorOptions,
    addrs: Vec<SocketAddr>,
    connections: Vec<Option<tokio::net::TcpStream>>,
    /// The low 32 bits of the last read id sent.
    read_last: u32,
    history: HistoryWriter,
    /// The restore the reads are for (named in the history).
    restore: u64,
}

/// A floor a [`FloorReader`] read: the lock service's answer, the server
/// that gave it and the read id it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FloorRead {
    pub floor: LockFloor,
    pub from: NodeId,
    pub read: u64,
}

impl FloorReader {
    pub fn new(cluster: &Cluster, options: FloorOptions) -> FloorReader {
        assert!(usize::from(options.first.0) < cluster.nodes.len(), "the first server is one of the cluster's");
        FloorReader {
            options,
            addrs: cluster.nodes.iter().map(|n| n.addr).collect(),
            connections: cluster.nodes.iter().map(|_| None).collect(),
            read_last: 0,
            history: HistoryWriter::none(),
            restore: 0,
        }
    }

    /// This reader, recording each attempt in `history`.
    pub fn with_history(mut self, history: HistoryWriter) -> FloorReader {
        self.history = history;
        self
    }

    /// Names the restore the next reads are for, in the history.
    pub fn read_for(&mut self, restore: u64) {
        self.restore = restore;
    }

    /// Records `kind` in this reader's history, now.
    pub fn record(&mut self, kind: EventKind) {
        let now_us = crate::clock::true_us();
        self.history.record(now_us, now_us, kind);
        self.history.flush();
    }

    /// Asks the cluster for its floor until a leader answers one, or gives
    /// up after `read_timeout_ms` or `attempts_max`.
    pub async fn read_floor(&mut self) -> Result<LockFloor, FloorError> {
        self.read_floor_answered().await.map(|read| read.floor)
    }

    /// [`FloorReader::read_floor`], with the server that answered and the read id.
    pub async fn read_floor_answered(&mut self) -> Result<FloorRead, FloorError> {
        let first_of_call = self.read_last.checked_add(1).ok_or(FloorError::ReadsExhausted)?;
        let nodes = self.addrs.len();
        let next = |node: NodeId| NodeId(u8::try_from((usize::from(node.0) + 1) % nodes).expect("NODES_MAX fits a u8"));
        let retry = Duration::from_millis(self.options.retry_ms);
        let deadline = tokio::time::Instant::now() + Duration::from_millis(self.options.read_timeout_ms);
        let mut to = self.options.first;
        let mut attempts = 0;
        while attempts < self.options.attempts_max.max(1) && tokio::time::Instant::now() < deadline {
            attempts += 1;
            self.read_last = self.read_last.checked_add(1).ok_or(FloorError::ReadsExhausted)?;
            self.record(EventKind::FloorAsked { restore: self.restore, read: self.read_id(self.read_last), to });
            match self.ask(to, first_of_call).await {
                Asked::Floor(floor, read) => return Ok(FloorRead { floor, from: to, read }),
                // A named leader is asked at once, as in the simulator.
                Asked::NotLeader(Some(leader)) if usize::from(leader.0) < nodes => to = leader,
                // Refused at once (a dead server) or no leader known: the next
                // server, a little later, so that a follower still naming a
                // dead leader is not asked in a tight loop until the election.
                Asked::NotLeader(_) | Asked::Refused => {
                    to = next(to);
                    tokio::time::sleep(retry).await;
                }
                // A leader that cannot serve yet: the same server, a little later.
                Asked::Unavailable => tokio::time::sleep(retry).await,
                // It had its whole attempt timeout already.
                Asked::Silent => to = next(to),
            }
        }
        Err(FloorError::GaveUp { attempts })
    }

    fn read_id(&self, low: u32) -> u64 {
        (u64::from(self.options.asker) << 32) | u64::from(low)
    }

    /// One attempt at server `to` with read id `read_last`; a floor answered
    /// to an earlier attempt of this call (from `first_of_call`) is taken too.
    async fn ask(&mut self, to: NodeId, first_of_call: u32) -> Asked {
        let read = self.read_id(self.read_last);
        let bytes = net::encode(&NodeFrame::Lock(Envelope::FloorRead { read })).expect("a floor read fits a frame");
        let index = usize::from(to.0);
        let timeout = Duration::from_millis(self.options.attempt_timeout_ms.max(1));
        let asker = u64::from(self.options.asker);
        let asked = tokio::time::timeout(timeout, async {
            let stream = self.send(index, &bytes).await?;
            loop {
                match net::read_frame(stream).await {
                    Ok(Some(NodeFrame::Lock(Envelope::FloorReply { read: r, answer }))) => {
                        let ours = r >> 32 == asker && r as u32 >= first_of_call;
                        match answer {
                            FloorAnswer::Floor(floor) if ours => return Some(Asked::Floor(floor, r)),
                            // Only the answer to the attempt in flight moves the read on.
                            _ if r != read => {}
                            FloorAnswer::Floor(_) => unreachable!("the attempt in flight is of this call"),
                            FloorAnswer::NotLeader { leader } => return Some(Asked::NotLeader(leader)),
                            FloorAnswer::Unavailable => return Some(Asked::Unavailable),
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => return None,
                }
            }
        })
        .await;
        match asked {
            Ok(Some(asked)) => asked,
            Ok(None) => {
                self.connections[index] = None;
                Asked::Refused
            }
            Err(_) => {
                self.connections[index] = None;
                Asked::Silent
            }
        }
    }

    /// Writes `bytes` to server `index`, dialling it if needed (and once more
    /// if a kept connection turns out broken); the connection, if it took them.
    async fn send(&mut self, index: usize, bytes: &[u8]) -> Option<&mut tokio::net::TcpStream> {
        for _ in 0..2 {
            if self.connections[index].is_none() {
                let stream = tokio::net::TcpStream::connect(self.addrs[index]).await.ok()?;
                let _ = stream.set_nodelay(true);
                self.connections[index] = Some(stream);
            }
            let stream = self.connections[index].as_mut().expect("dialled above");
            if net::write_bytes(stream, bytes).await.is_ok() {
                return self.connections[index].as_mut();
            }
            self.connections[index] = None;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::Links;
    use fencelock::NodeId;

    #[test]
    fn links_read_back_what_they_print() {
        let links: Links = "to=0,2 from=1".parse().expect("links");
        assert_eq!(links.to.iter().copied().collect::<Vec<_>>(), vec![NodeId(0), NodeId(2)]);
        assert_eq!(links.from.iter().copied().collect::<Vec<_>>(), vec![NodeId(1)]);
        assert_eq!(links.to_string(), "to=0,2 from=1");
        assert!("".parse::<Links>().expect("nothing cut").is_empty());
        assert_eq!("from=3".parse::<Links>().expect("links").to_string(), "from=3");
        assert!("to=x".parse::<Links>().is_err());
        assert!("over=1".parse::<Links>().is_err());
        assert!("to".parse::<Links>().is_err());
        let cut_off: Links = "to=0 from=0 db".parse().expect("links");
        assert!(cut_off.resource && !cut_off.is_empty());
        assert_eq!(cut_off.to_string(), "to=0 from=0 db");
    }
}
