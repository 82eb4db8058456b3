use crate::raft::progress::{Progress, ProgressState};
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
    let mut last = 5;
    while !progress.is_paused(4) {
        progress.sent_append(LogIndex(last), 1, 4);
        last += 1;
        sent_unacked += 1;
    }
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

/// The next index stays past the match: an acknowledgement beyond where the
/// leader was probing (a late snapshot answer) moves it past the match, so
/// the leader never sends again what the follower holds.
#[test]
fn an_acknowledgement_beyond_the_next_index_moves_it_past_the_match() {
    let mut progress = Progress::new(LogIndex(1));
    assert!(progress.acknowledge(LogIndex(5), 4));
    assert_eq!(progress.match_index, LogIndex(5));
    assert_eq!(progress.next_index, LogIndex(6));
}
