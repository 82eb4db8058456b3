//! A node restarted from a stale backup of its own disk (SCENARIOS.md 9):
//! while recovering it neither votes nor campaigns, so it cannot vote twice
//! in a term nor elect a leader that lacks a committed entry.
//! `Variant::AmnesiaRejoin` drops the rule and both failures appear.

use crate::raft_harness::{with_variant, Cluster};
use fencelock::raft::Role;
use fencelock::{NodeId, Term, Variant};

/// S2 votes for S1 in term T+1, then its disk is rolled back to term T and
/// S0 asks it for a vote in term T+1 again. Returns the cluster afterwards.
fn double_vote(variant: Variant) -> Cluster {
    let (s0, s1, s2) = (NodeId(0), NodeId(1), NodeId(2));
    let mut cluster = Cluster::new(3, 31, with_variant(variant));
    cluster.campaign(s0);
    assert_eq!(cluster.role(s0), Role::Leader);
    cluster.propose(s0);
    cluster.run_ticks(3);
    let term = cluster.node(s0).soft_state().term;
    let backup = cluster.disks[2].clone();
    // S1 wins term T+1 with S2's vote, away from S0.
    cluster.partition(&[s0]);
    cluster.crash(s2);
    cluster.restart(s2);
    cluster.campaign(s1);
    assert_eq!(cluster.role(s1), Role::Leader);
    assert_eq!(cluster.node(s1).soft_state().term, Term(term.0 + 1));
    assert_eq!(cluster.disks[2].hard_state.vote, Some(s1));
    // The operator restores S2 from the backup taken in term T.
    cluster.crash(s2);
    cluster.disks[2] = backup;
    cluster.disks[2].restored_from_backup = true;
    cluster.restart(s2);
    cluster.heal();
    cluster.partition(&[s1]);
    // S0, still leader of term T on its side, restarts as a follower and campaigns.
    cluster.crash(s0);
    cluster.restart(s0);
    cluster.campaign(s0);
    cluster.campaign(s0);
    cluster
}

#[test]
fn a_restored_node_does_not_vote_while_recovering() {
    let cluster = double_vote(Variant::Default);
    let s2 = NodeId(2);
    assert!(cluster.node(s2).is_recovering());
    assert_ne!(cluster.role(NodeId(0)), Role::Leader, "S0 cannot win without S2");
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

#[test]
fn with_amnesia_rejoin_the_restored_node_votes_twice_in_a_term() {
    let cluster = double_vote(Variant::AmnesiaRejoin);
    assert!(!cluster.node(NodeId(2)).is_recovering());
    assert!(
        cluster.violations.iter().any(|violation| violation.starts_with("election-safety")),
        "{:?}",
        cluster.violations
    );
}

#[test]
fn a_restored_node_leaves_recovery_after_catching_up_with_a_later_leader() {
    let mut cluster = double_vote(Variant::Default);
    cluster.heal();
    cluster.run_ticks(100);
    let s2 = NodeId(2);
    assert!(!cluster.node(s2).is_recovering());
    let leader = cluster.leader().expect("leader");
    let hard_state = cluster.disks[2].hard_state;
    assert!(hard_state.vote.is_some(), "the leader it caught up with is its vote, durably");
    assert_eq!(cluster.node(s2).commit_index(), cluster.node(leader).commit_index());
    cluster.settle(200);
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

/// Entries committed by S0 and S2 while S1 was down; S0 crashes and S2 is
/// rolled back to before them. Can S1 (lacking them) be elected with S2?
fn lost_commit(variant: Variant) -> Cluster {
    let (s0, s1, s2) = (NodeId(0), NodeId(1), NodeId(2));
    let mut cluster = Cluster::new(3, 32, with_variant(variant));
    cluster.campaign(s0);
    assert_eq!(cluster.role(s0), Role::Leader);
    cluster.run_ticks(3);
    let backup = cluster.disks[2].clone();
    cluster.crash(s1);
    for _ in 0..5 {
        cluster.propose(s0);
    }
    cluster.run_ticks(3);
    assert!(cluster.applied[2] > backup.last_index(), "S2 applied entries its backup lacks");
    cluster.crash(s0);
    cluster.crash(s2);
    cluster.disks[2] = backup;
    cluster.disks[2].restored_from_backup = true;
    cluster.restart(s2);
    cluster.restart(s1);
    cluster.run_ticks(100);
    cluster
}

#[test]
fn a_restored_node_does_not_elect_a_leader_lacking_a_committed_entry() {
    let mut cluster = lost_commit(Variant::Default);
    assert_eq!(cluster.leader(), None, "no leader until S0, which holds the entries, is back");
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
    cluster.restart(NodeId(0));
    cluster.settle(300);
    assert!(!cluster.node(NodeId(2)).is_recovering());
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

#[test]
fn with_amnesia_rejoin_a_leader_lacking_a_committed_entry_is_elected() {
    let mut cluster = lost_commit(Variant::AmnesiaRejoin);
    assert!(cluster.leader().is_some());
    cluster.restart(NodeId(0));
    cluster.run_ticks(50);
    assert!(
        cluster.violations.iter().any(|violation| violation.starts_with("apply-agreement")),
        "{:?}",
        cluster.violations
    );
}

/// Swarm seed 694: S1 leads term T and is paused; S0 and S2 elect a leader of
/// T+1 and commit its entries; the follower of T+1 is restored from a backup
/// of term T. S1 wakes, still leader of T on its side, appends, and reaches
/// only the restored node. Returns the cluster and the restored node.
fn stale_leader_meets_amnesia(variant: Variant) -> (Cluster, NodeId) {
    let (s0, s1, s2) = (NodeId(0), NodeId(1), NodeId(2));
    let mut cluster = Cluster::new(3, 33, with_variant(variant));
    cluster.campaign(s1);
    assert_eq!(cluster.role(s1), Role::Leader);
    cluster.propose(s1);
    cluster.run_ticks(3);
    let stale_term = cluster.node(s1).soft_state().term;
    let backups = cluster.disks.clone();
    // S1 is paused: it neither ticks nor hears anything.
    cluster.isolate(s1);
    for _ in 0..200 {
        for id in [s0, s2] {
            cluster.tick(id);
        }
        cluster.deliver_all();
        if [s0, s2].iter().any(|&id| cluster.role(id) == Role::Leader) {
            break;
        }
    }
    let leader = [s0, s2].into_iter().find(|&id| cluster.role(id) == Role::Leader).expect("a leader of T+1");
    let restored = if leader == s0 { s2 } else { s0 };
    cluster.propose(leader);
    cluster.deliver_all();
    cluster.tick(leader);
    cluster.deliver_all();
    let new_index = cluster.node(leader).last_index();
    assert_eq!(cluster.node(leader).commit_index(), new_index, "T+1 committed over the restored node");
    assert!(cluster.node(leader).soft_state().term > stale_term);
    // The operator restores the follower from its backup of term T.
    cluster.crash(restored);
    cluster.disks[restored.0 as usize] = backups[restored.0 as usize].clone();
    cluster.disks[restored.0 as usize].restored_from_backup = true;
    cluster.restart(restored);
    // S1 wakes on the restored node's side, cut off from the leader of T+1, and appends.
    cluster.heal();
    cluster.isolate(leader);
    assert_eq!(cluster.role(s1), Role::Leader);
    cluster.propose(s1);
    cluster.propose(s1);
    for _ in 0..5 {
        for id in [s1, restored] {
            cluster.tick(id);
        }
        cluster.deliver_all();
        cluster.check();
    }
    (cluster, restored)
}

#[test]
fn a_restored_node_does_not_help_a_stale_leader_commit_over_a_later_term() {
    let (mut cluster, restored) = stale_leader_meets_amnesia(Variant::Default);
    assert!(cluster.node(restored).is_recovering());
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
    // Healed: the survey finds the later term, S1 steps down, everyone agrees.
    cluster.heal();
    cluster.settle(300);
    assert!(!cluster.node(restored).is_recovering());
    cluster.check_durability();
    assert!(cluster.violations.is_empty(), "{:?}", cluster.violations);
}

#[test]
fn with_amnesia_rejoin_a_stale_leader_commits_over_a_later_term() {
    let (mut cluster, _) = stale_leader_meets_amnesia(Variant::AmnesiaRejoin);
    cluster.heal();
    cluster.run_ticks(50);
    assert!(
        cluster.violations.iter().any(|violation| violation.starts_with("apply-agreement")),
        "{:?}",
        cluster.violations
    );
}
