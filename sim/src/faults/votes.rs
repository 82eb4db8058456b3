//! The vote-strike family of the fault plan: stretches of time in which an
//! election is split so that one voter decides it twice, if it can.
//!
//! Why: a vote sent before it is durable is forgotten by a crash in the
//! millisecond before the fsync, and the node may then vote again in the
//! same term. That breaks election safety only if a second candidate of the
//! same term asks it after it restarts, and a candidate asks every server
//! at once, so the others have all heard of the term already: crashes after
//! votes alone (`ack_crashes`) find it in well under 1% of seeds. The
//! strike makes the second candidate: as a voter grants a pre-vote, the
//! pre-candidate is cut off from every server but a bare majority with it
//! (so the others never hear of its term); as that voter grants it the
//! vote, the voter is crashed in that instant and the candidate is cut
//! off entirely. The others' election timers then run out in the old term
//! and they campaign for the same term, where the restarted voter is free
//! to vote again unless its vote was durable. The victims and instants
//! depend on the run, so the supervisor plays them (`world/votes.rs`).

use super::schedule::ReactingKind;
use super::{Family, Fault};
use crate::model::Model;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// The longest a vote strike waits for the vote after cutting the pre-candidate off.
pub(crate) const VOTE_WAIT_MS: u64 = 50;

/// Episodes 1-4 s apart; each watches for 3-12 s (votes are sent only
/// in elections), strikes up to 1-2 times, keeps each crashed voter down
/// 1-`down_ms` (5-30) ms and the candidate cut off `cut_ms` (300-1,500 ms),
/// long enough for the others to time out and elect a leader.
pub(super) const VOTE_STRIKES: ReactingKind =
    ReactingKind { family: Family::VoteStrikes, gap_ms: (1_000, 4_000), draw: vote_strikes };

fn vote_strikes(_: &Model, rng: &mut ChaCha8Rng) -> (Fault, u64) {
    let for_ms = rng.gen_range(3_000..=12_000);
    let strikes = rng.gen_range(1..=2);
    let down_ms = rng.gen_range(5..=30);
    let cut_ms = rng.gen_range(300..=1_500);
    (Fault::VoteStrikes { for_ms, strikes, down_ms, cut_ms }, for_ms + VOTE_WAIT_MS + cut_ms)
}
