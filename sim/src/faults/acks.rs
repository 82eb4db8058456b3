//! The crash-after-acknowledging family of the fault plan: stretches of
//! time in which a server is crashed in the instant it sends a vote
//! grant or an acknowledgement of appended entries, and comes back a few
//! milliseconds later, in time to vote again in the same election or to be
//! counted again by the same leader.
//!
//! Why: Raft's safety rests on a node making its vote and its log durable
//! before it says so. The planned crashes pick their instant ahead of time,
//! so they almost never fall inside the millisecond between an answer and
//! its fsync; a node that answers first and syncs after (a vote or an
//! acknowledgement sent before it is durable) then forgets what it promised
//! only when a disk dies under it. Real clusters see it as a process killed
//! by an out-of-memory or a power cut in the middle of a busy election or
//! write burst. The victims and instants depend on the run, so the
//! supervisor plays them (`world/acks.rs`).

use super::schedule::ReactingKind;
use super::{Family, Fault};
use crate::model::Model;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Episodes 3-10 s apart; each follows vote grants (half of them, for
/// 3-12 s) or entry acknowledgements (1-6 s), strikes up to 1-3 times and keeps each
/// victim down 1-`down_ms` (5-300) ms.
pub(super) const ACK_CRASHES: ReactingKind =
    ReactingKind { family: Family::AckCrashes, gap_ms: (3_000, 10_000), draw: ack_crashes };

fn ack_crashes(_: &Model, rng: &mut ChaCha8Rng) -> (Fault, u64) {
    let votes = rng.gen_bool(0.5);
    // Votes are sent only in elections: their episodes last longer, to meet one.
    let for_ms = if votes { rng.gen_range(3_000..=12_000) } else { rng.gen_range(1_000..=6_000) };
    let strikes = rng.gen_range(1..=3);
    let down_ms = rng.gen_range(5..=300);
    (Fault::AckCrashes { for_ms, votes, strikes, down_ms }, for_ms + down_ms)
}
