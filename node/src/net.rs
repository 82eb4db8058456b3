//! TCP for a node: what a connection carries, how frames are read and
//! written, and the tasks that keep server-to-server links up.
//!
//! Every connection carries [`NodeFrame`]s, each a `fencelock::wire` frame
//! behind a `u32` length (`wire::encode_prefixed`). A `NodeFrame` is either
//! core's [`Envelope`] — the same enum, the same bytes inside, that the
//! simulator's network carries — or an admin request or answer.
//!
//! Admin messages are a separate enum here rather than new `Envelope`
//! variants: they are how an operator (or a test) injects the faults the
//! simulator applies from outside the processes — drop a peer's traffic,
//! step or skew a clock — so they have no place in the protocol's closed
//! message set, and `core` and `sim` stay unaware of them.
//!
//! Links between servers are one-way: a server sends on a connection it
//! dialled and receives on connections it accepted. Each peer has one
//! sender task with a bounded queue; when the queue is full a message is
//! dropped (Raft tolerates loss and retries on its own), and a broken link
//! is redialled with a capped exponential backoff.

use fencelock::wire::{self, Envelope, WireError, PREFIX_LEN};
use fencelock::{Key, LogIndex, NodeId, Term, Token};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// Messages queued for one peer before new ones are dropped.
pub const PEER_QUEUE_MAX: usize = 1_024;
/// The first pause before redialling a peer; doubled up to [`BACKOFF_MAX`].
const BACKOFF_MIN: Duration = Duration::from_millis(20);
const BACKOFF_MAX: Duration = Duration::from_millis(1_000);
/// How long a dial or a write may take before the link counts as broken.
const IO_TIMEOUT: Duration = Duration::from_millis(2_000);

/// What one frame on a node's TCP connections holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum NodeFrame {
    Lock(Envelope),
    Admin(AdminRequest),
    AdminReply(AdminReply),
}

/// An operator's request. All but `Status` (read-only) are refused unless
/// the cluster file says `admin = true`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminRequest {
    Status,
    /// Drop every Raft message to and from these peers (replaces the set; empty heals).
    Isolate {
        peers: Vec<NodeId>,
    },
    /// Set the local clock: `offset_ms` added to it, running at `1 + rate_ppm / 1e6`.
    Clock {
        offset_ms: i64,
        rate_ppm: i64,
    },
    /// Take this whole clock mapping (what `fencesim real` sends: the
    /// machine clock it keeps for the server, so a step or a new rate lands
    /// on the reading the checker was told).
    ClockMap {
        map: crate::clock::ClockMap,
    },
    /// Drop every Raft message sent to these peers, one way: what they send
    /// still arrives (replaces the set; empty heals).
    Cut {
        peers: Vec<NodeId>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminReply {
    Status(Status),
    Done,
    Refused { reason: String },
}

/// A server's view of itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub node: NodeId,
    pub role: String,
    pub term: Term,
    pub leader: Option<NodeId>,
    /// A leader whose term's first entry is applied: it answers clients.
    pub serving: bool,
    pub commit_index: LogIndex,
    pub applied_index: LogIndex,
    pub token_last: Token,
    pub locks: Vec<LockRow>,
    pub local_ms: u64,
    /// Raft messages this process has queued for its peers since it
    /// started: with the commit index, what replication costs per entry.
    pub raft_sent: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRow {
    pub key: Key,
    pub token: Token,
    pub holder: String,
    pub lease_ms: u64,
}

/// Why a connection ends.
#[derive(Debug)]
pub enum ConnError {
    Io(std::io::Error),
    Wire(WireError),
}

impl std::fmt::Display for ConnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnError::Io(e) => write!(f, "{e}"),
            ConnError::Wire(e) => write!(f, "{e}"),
        }
    }
}

impl From<std::io::Error> for ConnError {
    fn from(e: std::io::Error) -> ConnError {
        ConnError::Io(e)
    }
}

/// Reads one frame. `Ok(None)` is a clean end of stream; any error means
/// the caller closes the connection.
pub async fn read_frame<R: AsyncReadExt + Unpin>(reader: &mut R) -> Result<Option<NodeFrame>, ConnError> {
    let mut prefix = [0u8; PREFIX_LEN];
    match reader.read_exact(&mut prefix).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    // The length is checked before the buffer is allocated.
    let len = wire::frame_len(prefix).map_err(ConnError::Wire)?;
    let mut frame = vec![0u8; len];
    reader.read_exact(&mut frame).await?;
    wire::decode(&frame).map(Some).map_err(ConnError::Wire)
}

/// Encodes a frame for a stream; `None` for a frame too long to send (logged).
pub fn encode(frame: &NodeFrame) -> Option<Vec<u8>> {
    match wire::encode_prefixed(frame) {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            tracing::warn!("dropping an outgoing frame: {e}");
            None
        }
    }
}

/// Writes one encoded frame within [`IO_TIMEOUT`].
pub async fn write_bytes<W: AsyncWriteExt + Unpin>(writer: &mut W, bytes: &[u8]) -> Result<(), ConnError> {
    match tokio::time::timeout(IO_TIMEOUT, writer.write_all(bytes)).await {
        Ok(result) => result.map_err(ConnError::from),
        Err(_) => Err(ConnError::Io(std::io::Error::new(std::io::ErrorKind::TimedOut, "write timed out"))),
    }
}

/// The sending side of a link to one peer.
pub struct PeerLink {
    queue: mpsc::Sender<Vec<u8>>,
}

impl PeerLink {
    /// Starts the link's task; it dials `addr` when there is something to send.
    pub fn start(peer: NodeId, addr: SocketAddr) -> PeerLink {
        let (queue, rx) = mpsc::channel(PEER_QUEUE_MAX);
        tokio::spawn(peer_task(peer, addr, rx));
        PeerLink { queue }
    }

    /// Queues an encoded frame; a full queue drops it (Raft retries).
    pub fn send(&self, bytes: Vec<u8>) -> bool {
        self.queue.try_send(bytes).is_ok()
    }
}

async fn peer_task(peer: NodeId, addr: SocketAddr, mut rx: mpsc::Receiver<Vec<u8>>) {
    let mut backoff = BACKOFF_MIN;
    // Holds a frame taken from the queue whose write failed: it goes first on the next link.
    let mut carried: Option<Vec<u8>> = None;
    loop {
        let first = match carried.take() {
            Some(bytes) => bytes,
            None => match rx.recv().await {
                Some(bytes) => bytes,
                None => return,
            },
        };
        let stream = match tokio::time::timeout(IO_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => stream,
            _ => {
                // The peer is down: what was queued meanwhile is stale; drop it
                // rather than replay a burst of old heartbeats later.
                drop(first);
                while rx.try_recv().is_ok() {}
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        tracing::debug!("link to {peer} at {addr} up");
        let (_read, mut write) = stream.into_split();
        let mut next = Some(first);
        while let Some(bytes) = next.take() {
            if let Err(e) = write_bytes(&mut write, &bytes).await {
                tracing::debug!("link to {peer} broke: {e}");
                carried = Some(bytes);
                break;
            }
            backoff = BACKOFF_MIN;
            next = rx.recv().await;
            if next.is_none() {
                return;
            }
        }
    }
}
