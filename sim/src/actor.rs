//! Who an event, a clock or a fault is about: a server, a worker or the
//! protected resource. Printed one way everywhere: `n2`, `c1`, `db`.

use fencelock::{ClientId, NodeId};
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Actor {
    Server(NodeId),
    Client(ClientId),
    Resource,
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Server(node) => node.fmt(f),
            Actor::Client(client) => client.fmt(f),
            Actor::Resource => f.write_str("db"),
        }
    }
}

impl From<NodeId> for Actor {
    fn from(node: NodeId) -> Actor {
        Actor::Server(node)
    }
}

impl From<ClientId> for Actor {
    fn from(client: ClientId) -> Actor {
        Actor::Client(client)
    }
}
