//! What crosses the wire, simulated or real: one closed enum for every kind
//! of message.
//!
//! Every envelope is encoded by [`super::encode`] (postcard bytes under a
//! CRC-32) and decoded at the receiver, so serialization and corruption
//! detection are exercised on every message in the simulator and on every
//! TCP frame of a real node alike.

use crate::raft::Message;
use crate::resource::{Write, WriteVerdict};
use crate::service::{ClientReply, ClientRequest, FloorAnswer};
use crate::{ClientId, RequestId};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Envelope {
    /// Server to server.
    Raft(Message),
    /// Client to server.
    Request { client: ClientId, request: RequestId, body: ClientRequest },
    /// Server to client.
    Reply { request: RequestId, reply: ClientReply },
    /// Client to the protected resource.
    Write(Write),
    /// The resource's answer to a write.
    WriteReply { request: RequestId, verdict: WriteVerdict },
    /// The restored resource asks a server for its floor (a linearizable read).
    FloorRead { read: u64 },
    /// A server's answer to a floor read.
    FloorReply { read: u64, answer: FloorAnswer },
}
