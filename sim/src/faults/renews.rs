//! The renew-strike family of the fault plan: stretches of time in which a
//! leader that has just renewed a client's lease is cut off from the other
//! servers together with that client, and paused.
//!
//! Why: a renew needs no log entry, so it is safe only if the leader confirms
//! it still leads before it answers (SPEC.md §3). A leader
//! that skips the confirmation goes wrong only when it is deposed without
//! knowing it while the holder keeps renewing through it, and a successor
//! grants the lock once the lease it restarted runs out. A planned isolation
//! meets that only when it happens to fall just after a renew of a client it
//! happens to keep with the leader; the client's next renew must then queue
//! at the stalled leader after the successor took office. The victims and
//! instants depend on the run, so the supervisor plays them (`world/renews.rs`).

use super::schedule::ReactingKind;
use super::{Family, Fault};
use crate::model::Model;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The longest the links stay cut after the victim's pause ends (`world/renews.rs`).
pub(crate) const RENEW_CUT_AFTER_PAUSE_MS_MAX: u64 = 1_000;

/// Episodes 1-4 s apart; each watches renewals for 5-15 s (only a
/// long job renews, so renewals are few), strikes up to 1-2 times and
/// pauses each victim 1,000-2,600 ms: longer than a worker's renew period
/// (40% of the 2 s lease), so its next renew waits at the stalled leader.
pub(super) const RENEW_STRIKES: ReactingKind =
    ReactingKind { family: Family::RenewStrikes, gap_ms: (1_000, 4_000), draw: renew_strikes };

fn renew_strikes(_: &Model, rng: &mut ChaCha8Rng) -> (Fault, u64) {
    let for_ms = rng.gen_range(5_000..=15_000);
    let strikes = rng.gen_range(1..=2);
    let pause_ms = rng.gen_range(1_000..=2_600);
    (Fault::RenewStrikes { for_ms, strikes, pause_ms }, for_ms + pause_ms + RENEW_CUT_AFTER_PAUSE_MS_MAX)
}
