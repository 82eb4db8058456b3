//! The leader-churn family of the fault plan: stretches of time in which
//! every server that takes office is struck down (crashed or cut off)
//! within milliseconds of it, or as it applies its first entries.
//!
//! Why: the plan's other crashes pick their victim and instant ahead of
//! time, so they almost never meet a leader in its first round trips, while
//! its first entries are on some followers and not others. Those round trips
//! are where Raft's election and commit rules matter (figure 8 of the Raft
//! paper: an entry of an older term counted as committed by replica count
//! alone is overwritten once its leader dies before its own term's entry
//! spreads), and where a leader's first acknowledgements and votes meet their
//! fsyncs. Real clusters see it as a crash loop in the code that runs on
//! taking office or applying (a poison entry, an out-of-memory on loading
//! state) or as a leader whose network interface flaps.

use super::schedule::ReactingKind;
use super::{Family, Fault};
use crate::model::Model;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Episodes of 1-4 s, 4-12 s apart. Each strikes every new leader up to
/// `within_ms` (1-20) after it takes office or as it applies its first
/// entries, and brings it back `down_ms` (50-1,500) later.
pub(super) const LEADER_CHURN: ReactingKind =
    ReactingKind { family: Family::Churn, gap_ms: (4_000, 12_000), draw: leader_churn };

fn leader_churn(_: &Model, rng: &mut ChaCha8Rng) -> (Fault, u64) {
    let for_ms = rng.gen_range(1_000..=4_000);
    let within_ms = rng.gen_range(1..=20);
    let down_ms = rng.gen_range(50..=1_500);
    (Fault::LeaderChurn { for_ms, within_ms, down_ms }, for_ms + down_ms)
}
