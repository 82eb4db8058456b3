//! The protected resource (the shop database): every write carries a fencing token. Stub: see issue 2.

use crate::types::Token;
use serde::{Deserialize, Serialize};

/// Which write path of the protected resource a write took.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WritePath {
    /// The application's write (`set_status`).
    Status,
    /// The bulk import (`append_ledger`).
    Ledger,
}

/// How the resource answered a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteVerdict {
    Accepted,
    /// A retry of an earlier write (same client and request id): the original answer, no second effect.
    Duplicate {
        accepted: bool,
    },
    /// Lower than the highest token accepted for the key.
    RejectedStale {
        highest: Token,
    },
    /// Equal to the highest token but from another holder.
    RejectedEqualToken {
        highest: Token,
    },
}
