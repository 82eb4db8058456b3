use crate::raft::progress::{Flagged, Progress, ProgressState};
use crate::types::LogIndex;

#[test]
fn replicate_never_has_more_than_inflight_max_appends() {
    let mut progress = Progress::new(LogIndex(1));
    progress.become_replicate();
    for last in 1..=4 {
        assert!(!progress.is_paused(4));
        progress.sent_append(LogIndex(last), 1, 4);
    }
    assert!(progress.is_paused(4));
    assert_eq!(progress.inflight_len(), 4);
    assert!(progress.acknowledge(LogIndex(2), 4));
    assert_eq!(progress.inflight_len(), 2);
    assert_eq!(progress.next_index, LogIndex(5));
}

#[test]
fn a_probe_sends_one_append_at_a_time() {
    let mut progress = Progress::new(LogIndex(10));
    progress.sent_append(LogIndex(10), 1, 4);
    assert!(progress.is_paused(4));
    // A rejection of a different previous index is stale.
    assert!(!progress.reject(LogIndex(3), LogIndex(3)));
    assert!(progress.reject(LogIndex(9), LogIndex(4)));
    assert_eq!(progress.next_index, LogIndex(5));
    assert!(!progress.is_paused(4));
}

#[test]
fn a_stale_rejection_in_replicate_is_ignored() {
    let mut progress = Progress::new(LogIndex(1));
    progress.acknowledge(LogIndex(5), 4);
    progress.become_replicate();
    assert!(!progress.reject(LogIndex(4), LogIndex(0)));
    assert_eq!(progress.state, ProgressState::Replicate);
    assert!(progress.reject(LogIndex(7), LogIndex(0)));
    assert_eq!(progress.state, ProgressState::Probe);
    assert_eq!(progress.next_index, LogIndex(6));
}

#[test]
fn forgetting_a_match_after_a_restore_lowers_it() {
    let mut progress = Progress::new(LogIndex(1));
    progress.acknowledge(LogIndex(50), 4);
    progress.forget_match(LogIndex(20), LogIndex(21));
    assert_eq!(progress.match_index, LogIndex(20));
    assert_eq!(progress.state, ProgressState::Probe);
}

#[test]
fn duplicate_acks_do_not_open_the_window_beyond_inflight_max() {
    let mut progress = Progress::new(LogIndex(1));
    progress.become_replicate();
    let mut sent_unacked = 0;
    for last in 1..=4 {
        progress.sent_append(LogIndex(last), 1, 4);
        sent_unacked += 1;
    }
    assert!(progress.acknowledge(LogIndex(1), 4));
    sent_unacked -= 1;
    // The network duplicates that acknowledgement three times.
    for _ in 0..3 {
        progress.acknowledge(LogIndex(1), 4);
    }
    // Bounded: a window that never fills is the failure this test reports.
    for last in 5..16 {
        if progress.is_paused(4) {
            break;
        }
        progress.sent_append(LogIndex(last), 1, 4);
        sent_unacked += 1;
    }
    assert!(progress.is_paused(4), "the window never filled");
    assert!(sent_unacked <= 4, "{sent_unacked} appends with entries unacknowledged");
}

/// An empty append (the probe the leader sends when a follower is behind
/// and nothing new is left to send) carries no entries to wait for: it takes
/// no slot of the window, or empty appends would fill it and stop replication.
#[test]
fn an_empty_append_takes_no_slot_of_the_window() {
    let mut progress = Progress::new(LogIndex(1));
    progress.become_replicate();
    for _ in 0..8 {
        progress.sent_append(LogIndex(0), 0, 4);
    }
    assert_eq!(progress.inflight_len(), 0);
    assert!(!progress.is_paused(4));
    assert_eq!(progress.next_index, LogIndex(1));
}

/// The next index stays past the match, whatever the leader learns: the
/// leader never sends again what the follower holds. An acknowledgement
/// beyond where it was probing (a late snapshot answer), a rejection whose
/// hint lies below the match (a follower that lost entries it had
/// acknowledged, under an unsafe variant), a restore report with a low next
/// index, and the switch to replicating all keep it at least one past.
#[test]
fn the_next_index_stays_past_the_match() {
    let mut progress = Progress::new(LogIndex(1));
    assert!(progress.acknowledge(LogIndex(5), 4));
    assert_eq!((progress.match_index, progress.next_index), (LogIndex(5), LogIndex(6)), "acknowledge");
    progress.become_replicate();
    assert_eq!(progress.next_index, LogIndex(6), "become_replicate");
    let mut probing = Progress::new(LogIndex(16));
    probing.acknowledge(LogIndex(10), 4);
    assert!(probing.reject(LogIndex(15), LogIndex(5)));
    assert_eq!(probing.next_index, LogIndex(11), "reject");
    progress.forget_match(LogIndex(20), LogIndex(3));
    assert_eq!(progress.next_index, LogIndex(21), "forget_match");
}

/// Leaving the snapshot state, the leader probes past the snapshot it sent
/// (as etcd does), even when the answer that ends the wait reports less:
/// the follower is expected to hold it, and a rejection backs off if not.
#[test]
fn a_probe_after_a_snapshot_starts_past_the_snapshot() {
    let mut progress = Progress::new(LogIndex(1));
    progress.become_snapshot(LogIndex(50));
    progress.acknowledge(LogIndex(20), 4);
    progress.become_probe();
    assert_eq!(progress.state, ProgressState::Probe);
    assert_eq!(progress.next_index, LogIndex(51));
}

/// Once a follower flagged an answer in this term, further flagged answers
/// of the same life count as they are, whatever append they answer: only a
/// new life makes the leader forget what the follower acknowledged.
#[test]
fn a_flagged_answer_of_the_counted_life_keeps_its_match() {
    let life = |seq: u64| Some(Flagged { incarnation: 7, seq });
    let mut progress = Progress::new(LogIndex(1));
    assert!(progress.admit(life(3), 3, LogIndex(1)), "the first flagged answer starts the count");
    progress.acknowledge(LogIndex(5), 4);
    assert!(progress.admit(life(4), 4, LogIndex(6)), "an answer to a later append");
    assert!(progress.admit(life(2), 4, LogIndex(6)), "a late answer to an earlier append");
    assert_eq!(progress.match_index, LogIndex(5));
    assert!(!progress.admit(None, 4, LogIndex(6)), "an unflagged answer is from before the restart");
}
