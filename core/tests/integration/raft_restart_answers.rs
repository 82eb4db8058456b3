//! A leader's view of a follower that restarted or was restored within the
//! leader's term. Its answers are flagged `recovering` (ARCHITECTURE.md,
//! "Restores"): the leader must count them at once, replicate to the node
//! with its full window again, and never let an answer from an earlier life
//! of the node (a delayed one, sent before a later restore) bring back a
//! match index the node's disk no longer holds.

use crate::raft_harness::Cluster;
use fencelock::raft::{Message, MessageBody, Role};
use fencelock::{LogIndex, NodeId};

const A: NodeId = NodeId(0);
const B: NodeId = NodeId(1);
const C: NodeId = NodeId(2);

/// A leads with index 2 replicated everywhere; C is cut off and B restarts
/// from its own (intact) disk in A's term.
fn b_restarted_in_the_leaders_term(seed: u64) -> Cluster {
    let mut cluster = Cluster::new(3, seed, |_| {});
    cluster.campaign(A);
    assert_eq!(cluster.role(A), Role::Leader);
    assert_eq!(cluster.propose(A), Some(LogIndex(2)));
    cluster.deliver_all();
    let term = cluster.node(A).soft_state().term;
    cluster.isolate(C);
    cluster.crash(B);
    cluster.restart(B);
    assert_eq!(cluster.node(B).soft_state().term, term, "B restarts in A's term");
    cluster
}

fn appends_with_entries_to(cluster: &Cluster, to: NodeId) -> usize {
    let carries_entries = |message: &&Message| {
        message.to == to && matches!(&message.body, MessageBody::Append { entries, .. } if !entries.is_empty())
    };
    cluster.queue.iter().filter(carries_entries).count()
}

#[test]
fn a_flagged_ack_after_a_restart_commits_at_once() {
    let mut cluster = b_restarted_in_the_leaders_term(16);
    let index = cluster.propose(A).expect("A leads");
    assert_eq!(index, LogIndex(3));
    // A's append reaches B, B's flagged answer reaches A; nothing else happens.
    cluster.deliver_all();
    assert!(cluster.disks[B.0 as usize].entry(index).is_some(), "B stored index 3");
    assert_eq!(cluster.node(A).commit_index(), index, "B's acknowledgement makes a majority with A");
}

#[test]
fn a_node_restarted_in_the_term_gets_the_full_window_again() {
    let mut cluster = b_restarted_in_the_leaders_term(17);
    // Several heartbeat rounds: every answer B gives in this term is flagged.
    cluster.run_ticks(10);
    assert_eq!(cluster.role(A), Role::Leader);
    let inflight_max = cluster.configs[A.0 as usize].inflight_max;
    assert!(inflight_max >= 3);
    for _ in 0..3 {
        cluster.propose(A).expect("A leads");
    }
    // In Probe only one append would be on its way to B until B answers it.
    assert_eq!(appends_with_entries_to(&cluster, B), 3, "B is replicated, not probed");
    cluster.deliver_all();
    assert_eq!(cluster.node(A).commit_index(), cluster.node(A).last_index());
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

/// R is restored twice from the same backup within A's term. Its first life
/// caught up and acknowledged a new entry, but that answer is held up in the
/// network until after the second restore: it describes a disk that no
/// longer exists and must not count.
#[test]
fn a_delayed_answer_from_before_a_second_restore_is_not_counted() {
    let r = C;
    let mut cluster = Cluster::new(3, 18, |_| {});
    cluster.campaign(A);
    assert_eq!(cluster.role(A), Role::Leader);
    cluster.propose(A);
    cluster.run_ticks(3);
    let backup = cluster.disks[r.0 as usize].clone();
    let restore = |cluster: &mut Cluster| {
        cluster.crash(r);
        cluster.disks[r.0 as usize] = backup.clone();
        cluster.disks[r.0 as usize].restored_from_backup = true;
        cluster.restart(r);
        assert!(cluster.node(r).is_recovering());
    };
    // First restore: R catches up with A and leaves recovery in A's term.
    restore(&mut cluster);
    cluster.run_ticks(10);
    assert!(!cluster.node(r).is_recovering());
    cluster.disks[r.0 as usize].restored_from_backup = false;
    // B goes away, so every commit needs R. R stores a new entry; its answer is held.
    cluster.isolate(B);
    let index = cluster.propose(A).expect("A leads");
    let acked = |cluster: &Cluster| {
        cluster.queue.iter().any(|message| {
            message.from == r
                && matches!(message.body, MessageBody::AppendResponse { success: true, match_index, .. } if match_index >= index)
        })
    };
    assert!(cluster.deliver_until(acked));
    let delayed = cluster.take(|message| message.from == r);
    assert!(cluster.node(A).commit_index() < index);
    // Second restore: R's disk lacks the entry again. Its new life answers a
    // heartbeat, then A's link to R fails before R can catch up.
    restore(&mut cluster);
    assert!(cluster.disks[r.0 as usize].entry(index).is_none());
    let heartbeat_ticks = cluster.configs[A.0 as usize].heartbeat_ticks;
    cluster.queue.clear();
    for _ in 0..heartbeat_ticks {
        cluster.tick(A);
    }
    for message in cluster.take(|message| message.to == r) {
        cluster.deliver(message);
    }
    cluster.blocked.insert((A, r));
    cluster.deliver_all();
    // The answer from R's first life arrives; A goes on with its heartbeats.
    for message in delayed {
        cluster.deliver(message);
    }
    for _ in 0..heartbeat_ticks {
        cluster.tick(A);
    }
    cluster.deliver_all();
    cluster.check_durability();
    assert!(cluster.node(A).commit_index() < index, "index {index} is on A's disk only");
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
    // Once healed, R catches up and the entry commits.
    cluster.heal();
    cluster.run_ticks(20);
    assert!(cluster.node(A).commit_index() >= index);
    cluster.check_durability();
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}
