//! A leader with a live majority must keep committing when its view of a
//! follower goes stale: appends lost while the follower's window was not full
//! (fencesim seed 894 of a 3-node model, seed 409 of the default one), and a
//! node that finished recovering from a restore in this term, then crashed and
//! restarted with its disk intact (its answers must stay flagged, or the
//! leader ignores them for the rest of the term).

use crate::raft_harness::{with_variant, Cluster};
use fencelock::raft::Role;
use fencelock::{NodeId, Variant};

/// Heartbeat rounds to wait for a commit: a few election timeouts.
const ROUNDS_MAX: u32 = 100;

fn commits_within(cluster: &mut Cluster, leader: NodeId, index: fencelock::LogIndex) -> bool {
    for _ in 0..ROUNDS_MAX {
        cluster.run_ticks(1);
        if cluster.node(leader).commit_index() >= index {
            return true;
        }
    }
    false
}

#[test]
fn appends_lost_in_a_window_that_is_not_full_are_sent_again() {
    let (a, b, c) = (NodeId(0), NodeId(1), NodeId(2));
    let mut cluster = Cluster::new(3, 894, with_variant(Variant::Default));
    cluster.campaign(a);
    assert_eq!(cluster.role(a), Role::Leader);
    cluster.propose(a);
    cluster.run_ticks(3);
    // C is down: A needs B for every commit.
    cluster.crash(c);
    // Two appends to B are lost (B is down for them in fencesim), less than the in-flight window.
    cluster.blocked.insert((a, b));
    cluster.propose(a);
    let last = cluster.propose(a).expect("A leads");
    cluster.deliver_all();
    cluster.heal();
    // Only heartbeats follow; nobody proposes again (the service waits for that entry).
    let committed = commits_within(&mut cluster, a, last);
    assert_eq!(cluster.role(a), Role::Leader);
    assert!(committed, "A's commit stuck at {} below {last}", cluster.node(a).commit_index());
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

#[test]
fn a_node_that_recovered_in_this_term_and_restarted_is_still_counted() {
    let (a, b, r) = (NodeId(0), NodeId(1), NodeId(2));
    let mut cluster = Cluster::new(3, 409, with_variant(Variant::Default));
    cluster.campaign(a);
    assert_eq!(cluster.role(a), Role::Leader);
    cluster.propose(a);
    cluster.run_ticks(3);
    let backup = cluster.disks[2].clone();
    cluster.propose(a);
    cluster.run_ticks(3);
    // R is restored from the stale backup and recovers under A, in A's term.
    cluster.crash(r);
    cluster.disks[2] = backup;
    cluster.disks[2].restored_from_backup = true;
    cluster.restart(r);
    assert!(cluster.node(r).is_recovering());
    cluster.run_ticks(10);
    assert!(!cluster.node(r).is_recovering(), "R caught up with A");
    // The driver clears the flag once the Ready that ended recovery is durable.
    cluster.disks[2].restored_from_backup = false;
    // R crashes and restarts with its disk intact, still in A's term; B goes down.
    cluster.crash(r);
    cluster.restart(r);
    cluster.crash(b);
    let index = cluster.propose(a).expect("A leads");
    let committed = commits_within(&mut cluster, a, index);
    assert_eq!(cluster.role(a), Role::Leader);
    assert!(committed, "A's commit stuck at {} below {index}", cluster.node(a).commit_index());
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}
