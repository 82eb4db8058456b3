//! The fence-strike family of the fault plan: stretches of time in which the
//! protected resource crashes just after it accepts a takeover write.
//!
//! Why: the resource's check is only as good as the highest token it still
//! remembers. A takeover (the first write of a token issued after the
//! previous holder's lease expired rather than being released) raises the
//! fence that must stop the previous holder, who may still be alive, only
//! paused. A resource that acknowledges before the raised fence is durable,
//! or keeps it only in memory, forgets it in a crash right after, and then
//! accepts the old holder's write. Planned resource crashes almost never fall
//! in that window; the writes and instants depend on the run, so the
//! supervisor plays them (`world/fences.rs`).

use super::schedule::ReactingKind;
use super::{Family, Fault};
use crate::model::Model;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Episodes 1-4 s apart; each watches for 5-15 s (takeovers need a
/// lease to run out), strikes up to 1-2 times and keeps the resource
/// down `down_ms` (5-100 ms) each time.
pub(super) const FENCE_STRIKES: ReactingKind =
    ReactingKind { family: Family::FenceStrikes, gap_ms: (1_000, 4_000), draw: fence_strikes };

fn fence_strikes(_: &Model, rng: &mut ChaCha8Rng) -> (Fault, u64) {
    let for_ms = rng.gen_range(5_000..=15_000);
    let strikes = rng.gen_range(1..=2);
    let down_ms = rng.gen_range(5..=100);
    (Fault::FenceStrikes { for_ms, strikes, down_ms, restore: false }, for_ms + down_ms)
}
