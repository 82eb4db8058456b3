//! The operations a node writes to its log file, and how each one changes
//! the durable image it recovers from.
//!
//! The rules are the simulator's disk model (`NodeImage` and `NodeOp` in
//! `sim/src/machine/disk.rs`), rule for rule, so a real node recovers exactly
//! what a simulated one would from the same writes. They are mirrored rather
//! than moved into `core` and shared, which would change the simulator for
//! the sake of this crate; instead the property test in
//! `node/tests/storage.rs` runs the simulator's own `Disk<NodeImage>` beside
//! the files and requires the same state after every sync and crash. One
//! difference: the simulator panics on an impossible write, while [`apply`]
//! returns an error, because a record read back from a file passed its
//! checksum yet may still come from a bug, and opening the file must report
//! that instead of aborting.

use fencelock::raft::{DurableState, Entry, HardState, Snapshot};
use fencelock::LogIndex;
use serde::{Deserialize, Serialize};

/// One write to the image. Postcard encodes a variant by its position, so a
/// new variant goes at the end and none is ever removed or reordered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    HardState(HardState),
    /// Appends entries, first truncating the log from `entries[0].index` (a
    /// follower overwriting a conflicting suffix).
    Append(Vec<Entry>),
    /// Installs a snapshot received from the leader: entries up to its index
    /// go; the suffix after it stays only if the log agrees at the snapshot's
    /// index and term, otherwise the whole log goes.
    Snapshot(Snapshot),
    /// Local compaction: drops the entries the snapshot covers.
    Compact(Snapshot),
    /// The node has relearned what its restored disk forgot.
    Recovered,
    /// The files came from a stale backup. The simulator sets this flag on
    /// the image it restores; here a restore writes it as a record.
    Restored,
}

/// Changes `image` by `op`, or says why `op` cannot follow `image` (and then
/// leaves `image` unchanged).
pub fn apply(image: &mut DurableState, op: &Op) -> Result<(), String> {
    match op {
        Op::HardState(hard_state) => image.hard_state = *hard_state,
        Op::Append(entries) => append(image, entries)?,
        Op::Snapshot(snapshot) => install(image, snapshot, true)?,
        Op::Compact(snapshot) => install(image, snapshot, false)?,
        Op::Recovered => image.restored_from_backup = false,
        Op::Restored => image.restored_from_backup = true,
    }
    Ok(())
}

/// The writes that rebuild `image` from an empty one: what a rewritten file holds.
pub fn ops_of(image: &DurableState) -> Vec<Op> {
    let mut ops = Vec::new();
    if let Some(snapshot) = &image.snapshot {
        ops.push(Op::Snapshot(snapshot.clone()));
    }
    if !image.entries.is_empty() {
        ops.push(Op::Append(image.entries.clone()));
    }
    if image.hard_state != HardState::default() {
        ops.push(Op::HardState(image.hard_state));
    }
    if image.restored_from_backup {
        ops.push(Op::Restored);
    }
    ops
}

/// Whether two images hold the same durable state (`DurableState` has no `PartialEq`).
pub fn same(a: &DurableState, b: &DurableState) -> bool {
    a.hard_state == b.hard_state
        && a.snapshot == b.snapshot
        && a.entries == b.entries
        && a.restored_from_backup == b.restored_from_backup
}

fn snapshot_index(image: &DurableState) -> LogIndex {
    image.snapshot.as_ref().map_or(LogIndex(0), |s| s.index)
}

/// Index of the last entry, or of the snapshot when the log is empty.
pub fn last_index(image: &DurableState) -> LogIndex {
    match image.entries.last() {
        Some(entry) => entry.index,
        None => snapshot_index(image),
    }
}

fn append(image: &mut DurableState, entries: &[Entry]) -> Result<(), String> {
    let Some(first) = entries.first() else { return Ok(()) };
    if let Some(pair) = entries.windows(2).find(|pair| pair[1].index.0 != pair[0].index.0 + 1) {
        return Err(format!("appended entries jump from {} to {}", pair[0].index, pair[1].index));
    }
    if first.index <= snapshot_index(image) {
        return Err(format!("append at {} overwrites the snapshot at {}", first.index, snapshot_index(image)));
    }
    if first.index.0 > last_index(image).0 + 1 {
        return Err(format!("append at {} leaves a gap after {}", first.index, last_index(image)));
    }
    let keep = image.entries.partition_point(|e| e.index < first.index);
    image.entries.truncate(keep);
    image.entries.extend_from_slice(entries);
    Ok(())
}

fn install(image: &mut DurableState, snapshot: &Snapshot, keep_matching_suffix: bool) -> Result<(), String> {
    if snapshot.index < snapshot_index(image) {
        return Err(format!("snapshot at {} is older than the one at {}", snapshot.index, snapshot_index(image)));
    }
    let agrees = image.entries.iter().any(|e| e.index == snapshot.index && e.term == snapshot.term);
    if keep_matching_suffix && !agrees {
        image.entries.clear();
    } else {
        image.entries.retain(|e| e.index > snapshot.index);
    }
    image.snapshot = Some(snapshot.clone());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::raft::Payload;
    use fencelock::{LockState, Term, Token};

    fn entries(from: u64, to: u64, term: u64) -> Vec<Entry> {
        (from..=to).map(|i| Entry { term: Term(term), index: LogIndex(i), payload: Payload::Noop }).collect()
    }

    fn snapshot(index: u64, term: u64) -> Snapshot {
        Snapshot { index: LogIndex(index), term: Term(term), state: LockState::new(Token(40)) }
    }

    fn indexes(image: &DurableState) -> Vec<u64> {
        image.entries.iter().map(|e| e.index.0).collect()
    }

    fn run(ops: &[Op]) -> DurableState {
        let mut image = DurableState::default();
        for op in ops {
            apply(&mut image, op).expect("a valid write");
        }
        image
    }

    // The same stories as the simulator's `NodeImage` tests, so the two stay in step.
    #[test]
    fn append_truncates_a_conflicting_suffix() {
        let image = run(&[Op::Append(entries(1, 5, 1)), Op::Append(entries(3, 4, 2))]);
        assert_eq!(indexes(&image), vec![1, 2, 3, 4]);
        assert_eq!(image.entries[2].term, Term(2));
        assert_eq!(last_index(&image), LogIndex(4));
    }

    #[test]
    fn impossible_appends_are_refused_and_change_nothing() {
        let mut image = run(&[Op::Append(entries(1, 2, 1)), Op::Compact(snapshot(1, 1))]);
        let before = image.clone();
        let gap = apply(&mut image, &Op::Append(entries(4, 4, 1))).unwrap_err();
        assert!(gap.contains("gap"), "{gap}");
        let over = apply(&mut image, &Op::Append(entries(1, 1, 1))).unwrap_err();
        assert!(over.contains("overwrites the snapshot"), "{over}");
        let mut jump = entries(2, 2, 1);
        jump.extend(entries(4, 4, 1));
        assert!(apply(&mut image, &Op::Append(jump)).unwrap_err().contains("jump"));
        assert!(apply(&mut image, &Op::Compact(snapshot(0, 1))).unwrap_err().contains("older"));
        assert!(same(&image, &before));
    }

    #[test]
    fn compaction_and_snapshots() {
        let mut image = run(&[Op::Append(entries(1, 6, 1)), Op::Compact(snapshot(3, 1))]);
        assert_eq!(indexes(&image), vec![4, 5, 6]);
        // A leader's snapshot that agrees at its index keeps the suffix.
        apply(&mut image, &Op::Snapshot(snapshot(4, 1))).unwrap();
        assert_eq!(indexes(&image), vec![5, 6]);
        // One that disagrees drops the whole log.
        apply(&mut image, &Op::Snapshot(snapshot(5, 3))).unwrap();
        assert!(image.entries.is_empty());
        assert_eq!(last_index(&image), LogIndex(5));
        // A snapshot past the last entry drops everything too, and appends continue after it.
        apply(&mut image, &Op::Append(entries(6, 7, 3))).unwrap();
        apply(&mut image, &Op::Snapshot(snapshot(9, 3))).unwrap();
        assert!(image.entries.is_empty());
        apply(&mut image, &Op::Append(entries(10, 10, 3))).unwrap();
        assert_eq!(image.snapshot.as_ref().map(|s| s.index), Some(LogIndex(9)));
        assert_eq!(image.entries.len(), 1);
    }

    #[test]
    fn the_ops_of_an_image_rebuild_it() {
        let image = run(&[
            Op::Append(entries(1, 6, 1)),
            Op::Compact(snapshot(3, 1)),
            Op::HardState(HardState { term: Term(4), vote: None, commit: LogIndex(5) }),
            Op::Restored,
        ]);
        assert!(same(&run(&ops_of(&image)), &image));
        assert!(same(&run(&ops_of(&DurableState::default())), &DurableState::default()));
    }
}
