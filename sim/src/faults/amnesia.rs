//! The ack-amnesia family of the fault plan: a follower forgets entries it
//! acknowledged just as the leader commits them, while the servers that
//! could elect a leader with its vote never had them.
//!
//! Why: Raft's safety rests on what a follower acknowledged staying on its
//! disk: it must be durable before the acknowledgement goes (or the crash
//! inside the fsync loses it), and a node restored from a stale backup must
//! not vote until it has caught up again (the recovery rule,
//! ARCHITECTURE.md, "Restores"). Breaking either loses a committed entry
//! only if the forgetful node's vote and a candidate's log both lack it and
//! the leader that has it is away: the forgetting must fall between the
//! acknowledgement and the moment anyone else learns the entry. Planned
//! restores and crashes almost never line up so; the episode arranges the
//! setting (a minority cut off, the disks backed up or slowed) and the
//! supervisor strikes at the commit (`world/amnesia.rs`).

use super::schedule::ReactingKind;
use super::{Family, Fault};
use crate::model::Model;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Episodes 3-10 s apart; each waits up to 1-5 s for a commit and keeps
/// the leader unplugged 200-1,500 ms after its strike. Half restore the
/// follower from a backup (`fsync_ms` 0); half slow the connected
/// followers' fsyncs to 20-300 ms and crash one of them.
pub(super) const ACK_AMNESIA: ReactingKind =
    ReactingKind { family: Family::AckAmnesia, gap_ms: (3_000, 10_000), draw: ack_amnesia };

fn ack_amnesia(_: &Model, rng: &mut ChaCha8Rng) -> (Fault, u64) {
    let for_ms = rng.gen_range(1_000..=5_000);
    let down_ms = rng.gen_range(200..=1_500);
    let fsync_ms = if rng.gen_bool(0.5) { 0 } else { rng.gen_range(20..=300) };
    (Fault::AckAmnesia { for_ms, down_ms, fsync_ms }, for_ms + down_ms)
}
