//! Ctrl-C (SIGINT) and SIGTERM — how a terminal, Kubernetes, Slurm and CI
//! stop a job — end a long command the same way: it finishes the seed or run
//! in flight, prints its summary (the records file already holds every
//! finished seed, one write each) and exits 130 or 143, the shell's code for
//! the signal. A second signal while the first is being handled ends the
//! process at once with that code.

use signal_hook::consts::{SIGINT, SIGTERM};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Once};

/// Set by SIGINT or SIGTERM: the loops (hunt, explore, shrink, real) poll it.
pub static INTERRUPTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Set by SIGTERM alone, to tell the exit code.
static TERMINATED: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// The exit code of a command ended by SIGINT (128 + 2).
pub const EXIT_SIGINT: u8 = 130;
/// The exit code of a command ended by SIGTERM (128 + 15).
pub const EXIT_SIGTERM: u8 = 143;

/// Installs the handlers once. With `second_ends`, a second signal ends the
/// process at once; without it (a real run, which must stop its processes
/// first), every signal only sets the flag.
pub fn catch(second_ends: bool) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (signal, code) in [(SIGINT, EXIT_SIGINT), (SIGTERM, EXIT_SIGTERM)] {
            if second_ends {
                // Registered first, so it sees the flag as the earlier signal left it.
                let _ = signal_hook::flag::register_conditional_shutdown(signal, i32::from(code), INTERRUPTED.clone());
            }
            let _ = signal_hook::flag::register(signal, INTERRUPTED.clone());
        }
        let _ = signal_hook::flag::register(SIGTERM, TERMINATED.clone());
    });
}

/// Whether a signal asked the command to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// The exit code for a command a signal stopped: 143 after SIGTERM, else 130.
pub fn exit_code() -> u8 {
    if TERMINATED.load(Ordering::Relaxed) {
        EXIT_SIGTERM
    } else {
        EXIT_SIGINT
    }
}
