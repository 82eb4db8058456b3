//! What a run recorded survives a panic: the world offers its shared state
//! (the history) as it starts, and the seed thread that asked for it keeps
//! the handle, to check and trace the events up to the panic.

use crate::nodes::context::Shared;
use std::cell::RefCell;
use std::sync::{mpsc, Arc, Mutex};

thread_local! {
    /// Where a seed thread's world hands its shared state, so that what it
    /// recorded before a panic can still be checked and traced.
    static SALVAGE: RefCell<Option<mpsc::Sender<Arc<Mutex<Shared>>>>> = const { RefCell::new(None) };
}

/// Called by the world as it starts: on a seed thread of [`run_plan`], keeps a
/// handle on the world's shared state (the history) for after a panic.
pub(crate) fn offer(shared: &Arc<Mutex<Shared>>) {
    SALVAGE.with(|slot| {
        if let Some(salvage) = slot.borrow().as_ref() {
            // The receiver lives as long as the run; a send can only fail after it.
            let _ = salvage.send(shared.clone());
        }
    });
}

/// Asks the world started on this thread to hand its shared state to `salvage`.
pub fn catch_on_this_thread(salvage: mpsc::Sender<Arc<Mutex<Shared>>>) {
    SALVAGE.with(|slot| *slot.borrow_mut() = Some(salvage));
}
