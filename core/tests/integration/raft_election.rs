//! Elections: a single leader, pre-vote, check-quorum and leader stickiness.

use crate::raft_harness::{with_variant, Cluster};
use fencelock::raft::Role;
use fencelock::{NodeId, Term, Variant};
use std::collections::BTreeSet;

#[test]
fn a_single_leader_is_elected_and_replicates() {
    let mut cluster = Cluster::new(3, 1, |_| {});
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("a leader within 40 ticks");
    let leaders = cluster.up().into_iter().filter(|&id| cluster.role(id) == Role::Leader).count();
    assert_eq!(leaders, 1);
    let index = cluster.propose(leader).expect("the leader accepts proposals");
    cluster.run_ticks(5);
    assert!(cluster.applied.iter().all(|&applied| applied >= index), "applied: {:?}", cluster.applied);
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

#[test]
fn a_single_node_cluster_elects_itself_and_commits() {
    let mut cluster = Cluster::new(1, 2, |_| {});
    cluster.run_ticks(25);
    assert_eq!(cluster.leader(), Some(NodeId(0)));
    let index = cluster.propose(NodeId(0)).expect("leader");
    cluster.run_ticks(1);
    assert_eq!(cluster.applied[0], index);
}

#[test]
fn pre_vote_stops_a_partitioned_node_from_inflating_its_term() {
    let mut cluster = Cluster::new(3, 3, |_| {});
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    let term = cluster.node(leader).soft_state().term;
    let loner = cluster.up().into_iter().find(|&id| id != leader).expect("a follower");
    cluster.isolate(loner);
    cluster.run_ticks(200);
    assert_eq!(cluster.node(loner).soft_state().term, term, "pre-vote keeps the term");
    cluster.heal();
    cluster.run_ticks(20);
    assert_eq!(cluster.leader(), Some(leader), "the rejoining node does not depose the leader");
    assert_eq!(cluster.node(leader).soft_state().term, term);
}

#[test]
fn without_pre_vote_a_partitioned_node_inflates_its_term() {
    let mut cluster = Cluster::new(3, 3, |config| config.pre_vote = false);
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    let term = cluster.node(leader).soft_state().term;
    let loner = cluster.up().into_iter().find(|&id| id != leader).expect("a follower");
    cluster.isolate(loner);
    cluster.run_ticks(200);
    assert!(cluster.node(loner).soft_state().term > Term(term.0 + 3));
}

#[test]
fn check_quorum_steps_down_an_isolated_leader() {
    let mut cluster = Cluster::new(3, 4, |_| {});
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    cluster.isolate(leader);
    // Within two minimum election timeouts the old leader knows it lost its majority.
    cluster.run_ticks(2 * 10 + 1);
    assert_ne!(cluster.role(leader), Role::Leader);
    cluster.run_ticks(40);
    let new_leader = cluster.leader().expect("the majority elects a new leader");
    assert_ne!(new_leader, leader);
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

#[test]
fn without_check_quorum_an_isolated_leader_stays_leader() {
    let mut cluster = Cluster::new(3, 4, |config| config.check_quorum = false);
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    cluster.isolate(leader);
    cluster.run_ticks(100);
    assert_eq!(cluster.role(leader), Role::Leader);
}

#[test]
fn a_follower_hearing_from_its_leader_ignores_vote_requests() {
    let mut cluster = Cluster::new(3, 5, |config| config.pre_vote = false);
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    let term = cluster.node(leader).soft_state().term;
    let followers: Vec<NodeId> = cluster.up().into_iter().filter(|&id| id != leader).collect();
    // One follower cannot hear the leader but still reaches the other follower.
    cluster.blocked.insert((leader, followers[0]));
    cluster.blocked.insert((followers[0], leader));
    cluster.run_ticks(60);
    assert_eq!(cluster.leader(), Some(leader), "the other follower stayed with its leader");
    assert_eq!(cluster.node(followers[1]).soft_state().term, term, "and did not even adopt the higher term");
}

/// `election-churn`: hearing from the leader does not restart a follower's
/// election timer, and leader stickiness reads that same timer, so in a
/// healthy cluster a follower wins a new term every election timeout or so.
/// The safe protocol keeps its one leader and term.
#[test]
fn followers_whose_timer_ignores_the_leader_churn_leaders_in_a_healthy_cluster() {
    for variant in [Variant::Default, Variant::ElectionChurn] {
        let mut cluster = Cluster::new(3, 6, with_variant(variant));
        for _ in 0..40 {
            if cluster.leader().is_some() {
                break;
            }
            cluster.run_ticks(1);
        }
        let leader = cluster.leader().expect("a first leader within 40 ticks");
        let term = cluster.node(leader).soft_state().term;
        let mut leaders = BTreeSet::from([(term, leader)]);
        // Ten maximum election timeouts (20 ticks each), nothing failing.
        for _ in 0..200 {
            cluster.run_ticks(1);
            leaders.extend(cluster.leader().map(|id| (cluster.node(id).soft_state().term, id)));
        }
        let term_now = cluster.up().into_iter().map(|id| cluster.node(id).soft_state().term).max().expect("nodes");
        match variant {
            Variant::Default => {
                assert_eq!((cluster.leader(), term_now), (Some(leader), term), "one leader, one term");
                assert_eq!(leaders.len(), 1);
            }
            _ => {
                assert!(term_now.0 >= term.0 + 5, "a new term every timeout or two: {term} to {term_now}");
                assert!(leaders.len() >= 5, "a leader elected in each of those terms: {leaders:?}");
            }
        }
        assert!(cluster.violations.is_empty(), "{variant}: {:?}", cluster.violations);
    }
}
