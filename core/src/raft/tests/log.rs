use crate::command::Command;
use crate::lock::LockState;
use crate::raft::log::RaftLog;
use crate::raft::{Entry, Payload, Snapshot};
use crate::types::{Key, LogIndex, Term, Token};

fn entry(index: u64, term: u64) -> Entry {
    let command = Command::Expire { key: Key::new("k"), token: Token(index) };
    Entry { term: Term(term), index: LogIndex(index), payload: Payload::Command(command) }
}

fn log_of(terms: &[u64]) -> RaftLog {
    let entries = terms.iter().enumerate().map(|(at, &term)| entry(at as u64 + 1, term)).collect();
    RaftLog::recovered(LogIndex(0), Term(0), entries)
}

#[test]
fn a_recovered_log_is_all_persisted() {
    let log = log_of(&[1, 1, 2]);
    assert_eq!(log.last_index(), LogIndex(3));
    assert_eq!(log.last_term(), Term(2));
    assert_eq!(log.persisted, LogIndex(3));
    assert!(!log.has_unstable());
    assert_eq!(log.term(LogIndex(0)), Some(Term(0)));
    assert_eq!(log.term(LogIndex(4)), None);
}

#[test]
fn conflicts_truncate_the_suffix_and_rewind_persistence() {
    let mut log = log_of(&[1, 1, 2, 2]);
    let incoming = vec![entry(3, 2), entry(4, 3), entry(5, 3)];
    assert_eq!(log.find_conflict(&incoming), Some(LogIndex(4)));
    log.truncate_and_append(&incoming[1..]);
    assert_eq!(log.last_index(), LogIndex(5));
    assert_eq!(log.term(LogIndex(4)), Some(Term(3)));
    assert_eq!(log.persisted, LogIndex(3));
    assert_eq!(log.take_unstable().iter().map(|e| e.index.0).collect::<Vec<_>>(), vec![4, 5]);
}

#[test]
#[should_panic(expected = "never overwritten")]
fn a_committed_entry_is_never_truncated() {
    let mut log = log_of(&[1, 1, 2]);
    log.commit_to(LogIndex(3));
    log.truncate_and_append(&[entry(3, 3)]);
}

#[test]
#[should_panic(expected = "commit never decreases")]
fn commit_never_decreases() {
    let mut log = log_of(&[1, 1, 2]);
    log.commit_to(LogIndex(3));
    log.commit_to(LogIndex(2));
}

#[test]
fn find_conflict_by_term_skips_a_whole_term() {
    let log = log_of(&[1, 1, 4, 4, 4, 5]);
    // The leader's entry at 6 has term 3: every entry of terms 4 and 5 goes.
    assert_eq!(log.find_conflict_by_term(LogIndex(6), Term(3)), (LogIndex(2), Term(1)));
    assert_eq!(log.find_conflict_by_term(LogIndex(9), Term(5)), (LogIndex(6), Term(5)));
}

#[test]
fn compaction_keeps_the_term_of_the_compaction_point() {
    let mut log = log_of(&[1, 1, 2, 2]);
    log.commit_to(LogIndex(3));
    log.applied = LogIndex(3);
    log.compact(LogIndex(3));
    assert_eq!(log.snapshot_index, LogIndex(3));
    assert_eq!(log.term(LogIndex(3)), Some(Term(2)));
    assert_eq!(log.term(LogIndex(2)), None);
    assert_eq!(log.slice(LogIndex(4), LogIndex(4), 10), vec![entry(4, 2)]);
}

#[test]
fn committed_entries_are_handed_out_once_and_bounded() {
    let terms = vec![1; 2000];
    let mut log = log_of(&terms);
    log.commit_to(LogIndex(2000));
    assert_eq!(log.take_committed().len(), 1024);
    assert_eq!(log.take_committed().first().map(|e| e.index), Some(LogIndex(1025)));
    assert!(!log.has_committed_to_hand());
}

/// A driver may keep entries its snapshot already covers, the snapshot's own
/// index included; the recovered log starts right after the snapshot.
#[test]
fn a_recovered_log_drops_the_entries_its_snapshot_covers() {
    let entries = (1..=4).map(|index| entry(index, 1)).collect();
    let log = RaftLog::recovered(LogIndex(2), Term(1), entries);
    assert_eq!(log.last_index(), LogIndex(4));
    assert_eq!(log.entry(LogIndex(2)), None, "the snapshot covers its own index");
    assert_eq!(log.term(LogIndex(2)), Some(Term(1)));
    assert_eq!(log.slice(LogIndex(3), LogIndex(4), 10), vec![entry(3, 1), entry(4, 1)]);
}

/// `truncate_after` (the unsafe `Variant::TruncateAfterAppend`) drops exactly
/// the entries after the index, in a log that starts after a snapshot, and
/// rewinds persistence so that nothing dropped counts as durable; at or past
/// the end it does nothing.
#[test]
fn truncate_after_drops_exactly_the_entries_after_the_index() {
    let entries = (3..=7).map(|index| entry(index, 1)).collect();
    let mut log = RaftLog::recovered(LogIndex(2), Term(1), entries);
    log.truncate_after(LogIndex(7));
    assert_eq!(log.last_index(), LogIndex(7), "nothing follows the last entry");
    log.truncate_after(LogIndex(5));
    assert_eq!(log.last_index(), LogIndex(5));
    assert_eq!(log.slice(LogIndex(3), LogIndex(5), 10), vec![entry(3, 1), entry(4, 1), entry(5, 1)]);
    assert_eq!(log.persisted, LogIndex(5));
    assert!(!log.has_unstable(), "what is kept was already durable");
}

/// The conflict search stops at index 0, whatever term a log claims there
/// (a snapshot at index 0 with a later term, as a driver may hand over).
#[test]
fn find_conflict_by_term_stops_at_index_zero() {
    let log = RaftLog::recovered(LogIndex(0), Term(3), vec![entry(1, 3), entry(2, 3)]);
    assert_eq!(log.find_conflict_by_term(LogIndex(2), Term(1)), (LogIndex(0), Term(0)));
}

/// Entries compacted before they were handed out for persistence are never
/// handed out: a snapshot covers them.
#[test]
fn take_unstable_hands_out_nothing_a_snapshot_covers() {
    let mut log = log_of(&[1, 1]);
    for index in 3..=4 {
        log.append_leader(entry(index, 1));
    }
    log.commit_to(LogIndex(4));
    log.applied = LogIndex(4);
    log.compact(LogIndex(4));
    assert_eq!(log.take_unstable(), Vec::new());
    assert!(!log.has_unstable());
}

/// A restored log holds the snapshot alone, durable with the Ready that
/// carries it: nothing in it is left to hand out.
#[test]
fn a_restored_log_has_nothing_unstable() {
    let mut log = log_of(&[1, 1, 2]);
    let snapshot = Snapshot { index: LogIndex(9), term: Term(3), state: LockState::new(Token(0)) };
    log.restore(&snapshot);
    assert_eq!((log.last_index(), log.last_term()), (LogIndex(9), Term(3)));
    assert!(!log.has_unstable());
    assert_eq!(log.take_unstable(), Vec::new());
}
