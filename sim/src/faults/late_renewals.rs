//! The late-renewal family of the fault plan: stretches of time in which a
//! holder's renewal reaches the leader just as its lease ends there.
//!
//! Why: a leader decides a lease's expiry in two steps, a read round that
//! confirms it still leads and then the Expire it proposes, and a renewal
//! may reach it between them or just before the first. Whether the renewal
//! or the Expire wins, exactly one must: the holder may not believe in a
//! lease the log has ended, and a renewal confirmed in time must stop the
//! Expire. A holder renews at 40% of its lease, so its renewals arrive more
//! than half a lease early; planned faults almost never make one arrive in
//! the few milliseconds of that decision. The renewals and instants depend
//! on the run, so the supervisor plays them (`world/late_renewals.rs`).

use super::schedule::ReactingKind;
use super::{Family, Fault};
use crate::model::Model;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The latest a held renewal arrives past the lease's end at the leader.
pub(crate) const LATE_RENEWAL_AFTER_MS_MAX: u64 = 30;

/// Episodes 1-4 s apart; each watches renewals for 5-15 s (only a long
/// job renews, so renewals are few) and holds up to 1-3 of them, each
/// until 0-30 ms past its lease's end at the leader (the expiry's read
/// round takes one round trip, a few milliseconds).
pub(super) const LATE_RENEWALS: ReactingKind =
    ReactingKind { family: Family::LateRenewals, gap_ms: (1_000, 4_000), draw: late_renewals };

fn late_renewals(model: &Model, rng: &mut ChaCha8Rng) -> (Fault, u64) {
    // A renewal held in an episode's last instant arrives up to a lease later.
    let held_ms_max = model.lease_ms + LATE_RENEWAL_AFTER_MS_MAX;
    let for_ms = rng.gen_range(5_000..=15_000);
    let strikes = rng.gen_range(1..=3);
    let after_ms = rng.gen_range(0..=LATE_RENEWAL_AFTER_MS_MAX);
    (Fault::LateRenewals { for_ms, strikes, after_ms }, for_ms + held_ms_max)
}
