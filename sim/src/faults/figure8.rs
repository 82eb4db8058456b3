//! The figure-8 family of the fault plan: stretches of time in which the
//! cluster is walked through figure 8 of the Raft paper, one step at a
//! time, as the run allows.
//!
//! Why: figure 8 needs three leaders in a row, each struck at its own
//! moment. A leader takes entries its followers never see; a successor of
//! a later term takes office without them and is struck before its own
//! first entry spreads; the first leader comes back, wins again and carries
//! its old entries to a majority; it is struck before an entry of its new
//! term follows them there; the successor returns and, its last term being
//! the higher, overwrites them. A leader that counts replicas to commit an
//! older term's entry has by then applied what is overwritten. Leader churn
//! strikes every new leader at random instants, so it meets all three
//! moments in a few seeds of a thousand; this family waits for each. The
//! leaders and instants depend on the run, so the supervisor plays them
//! (`world/figure8.rs`).

use super::schedule::ReactingKind;
use super::{Family, Fault};
use crate::model::Model;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// How long a stranded leader waits for the others to elect a successor.
pub(crate) const FIGURE8_STRAND_WAIT_MS: u64 = 1_000;
/// How long the successor stays unplugged waiting for the first leader's return to office.
pub(crate) const FIGURE8_RETURN_WAIT_MS: u64 = 1_500;

/// Episodes 1-4 s apart; each walks figure 8 for 3-12 s, up to 1-3
/// times: a leader returned to office is struck at its first apply or
/// `strike_ms` (5-60) after it is seen leading, whichever comes first,
/// and stays away `down_ms` (200-1,500) while the successor comes back.
pub(super) const FIGURE8_STRIKES: ReactingKind =
    ReactingKind { family: Family::Figure8Strikes, gap_ms: (1_000, 4_000), draw: figure8_strikes };

fn figure8_strikes(_: &Model, rng: &mut ChaCha8Rng) -> (Fault, u64) {
    let for_ms = rng.gen_range(3_000..=12_000);
    let strikes = rng.gen_range(1..=3);
    let strike_ms = rng.gen_range(5..=60);
    let down_ms = rng.gen_range(200..=1_500);
    let tail_ms = FIGURE8_STRAND_WAIT_MS + FIGURE8_RETURN_WAIT_MS + strike_ms + down_ms;
    (Fault::Figure8Strikes { for_ms, strikes, strike_ms, down_ms }, for_ms + tail_ms)
}
