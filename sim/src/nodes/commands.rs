//! What a scripted story asks a worker to do, and what came of it: the
//! commands travel on a channel per worker, so the worker executes them on
//! its own node (a paused worker really is paused).

use crate::history::WriteVerdict;
use fencelock::resource::WritePath;
use fencelock::{Key, Token};
use futures::channel::{mpsc, oneshot};

/// What a script asks a worker to do; each carries where to send the result.
pub enum WorkerCommand {
    /// Acquire `key`; `vanish` = disconnect before the answer (a ghost lock).
    Acquire {
        key: Key,
        wait_ms: u64,
        vanish: bool,
        done: oneshot::Sender<WorkerResult>,
    },
    /// Write with the worker's token for `key` (or `token` if given), without checking its lease first.
    Write {
        key: Key,
        token: Option<Token>,
        path: WritePath,
        done: oneshot::Sender<WorkerResult>,
    },
    Renew {
        key: Key,
        done: oneshot::Sender<WorkerResult>,
    },
    Release {
        key: Key,
        done: oneshot::Sender<WorkerResult>,
    },
    /// Revoke the lease of `token` on `key` (retrying until answered).
    Revoke {
        key: Key,
        token: Token,
        done: oneshot::Sender<WorkerResult>,
    },
}

/// What came of a scripted command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkerResult {
    Granted(Token),
    Renewed,
    Released,
    /// The service answered something else (busy, not held, timed out).
    Refused(String),
    Written(WriteVerdict),
    /// No answer after every retry (or the worker walked away on purpose).
    NoAnswer,
}

pub type CommandQueue = mpsc::UnboundedReceiver<WorkerCommand>;
