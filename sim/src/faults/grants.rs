//! The grant-strike family of the fault plan: stretches of time in which a
//! leader that has just freed a key a client waits for is paused for longer
//! than a lease.
//!
//! Why: a waiter's Grant is proposed by the leader that queued its request,
//! the moment the key frees, and only that leader can tell the waiter
//! `Granted`. If it stalls right after sending the Grant to its followers, a
//! successor commits the Grant, tells nobody, and expires the lock a lease
//! later; the stalled leader wakes, catches up on the Grant and the Expire
//! together, and must not answer `Granted` for a lock that is gone (etcd
//! issue 11456). A planned pause meets that only when it happens to fall in
//! the milliseconds between the key freeing and the Grant's commit; the
//! victims and instants depend on the run, so the supervisor plays them
//! (`world/grants.rs`).

use super::schedule::ReactingKind;
use super::{Family, Fault};
use crate::model::Model;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Episodes 1-4 s apart; each watches for 5-15 s, strikes up to 1-2
/// times and pauses each victim a lease, two of the longest election
/// timeouts, and 100 ms to half a lease more: the successor is elected,
/// commits the Grant and expires it before the victim wakes.
pub(super) const GRANT_STRIKES: ReactingKind =
    ReactingKind { family: Family::GrantStrikes, gap_ms: (1_000, 4_000), draw: grant_strikes };

fn grant_strikes(model: &Model, rng: &mut ChaCha8Rng) -> (Fault, u64) {
    let (lease_ms, election_ms) = (model.lease_ms, model.election_ms_max);
    let for_ms = rng.gen_range(5_000..=15_000);
    let strikes = rng.gen_range(1..=2);
    let pause_ms = lease_ms + 2 * election_ms + rng.gen_range(100..=100 + lease_ms / 2);
    (Fault::GrantStrikes { for_ms, strikes, pause_ms }, for_ms + pause_ms)
}
