//! Newtypes shared by every layer, so a term can never be passed where a token is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_newtype!(
    /// A Raft server, numbered from 0.
    NodeId(u8), "n"
);
id_newtype!(
    /// A Raft term.
    Term(u64), "t"
);
id_newtype!(
    /// A position in the replicated log; 0 means "before the first entry".
    LogIndex(u64), "i"
);
id_newtype!(
    /// A fencing token: strictly increasing, never reissued.
    Token(u64), "tok"
);
id_newtype!(
    /// A client (worker) of the lock service.
    ClientId(u32), "c"
);
id_newtype!(
    /// A client-chosen request id; a retry reuses it.
    RequestId(u64), "r"
);

/// A lock key, such as `invoice/B-1042`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Key(pub String);

impl Key {
    pub fn new(name: impl Into<String>) -> Key {
        Key(name.into())
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who holds (or asked for) a lock: the client and the request that acquired it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Holder {
    pub client: ClientId,
    pub request: RequestId,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.client, self.request)
    }
}
