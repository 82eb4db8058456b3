//! Read index: a round is confirmed only by a majority that heard the leader
//! after the round started.

use crate::raft_harness::Cluster;
use fencelock::raft::{ProposeError, Role};
use fencelock::NodeId;

#[test]
fn a_read_is_confirmed_by_a_majority_with_the_commit_index() {
    let mut cluster = Cluster::new(3, 21, |_| {});
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    cluster.propose(leader);
    cluster.run_ticks(3);
    cluster.node_mut(leader).read_index(7).expect("leader");
    cluster.process(leader);
    cluster.deliver_all();
    let commit = cluster.node(leader).commit_index();
    let confirmed: Vec<_> = cluster.read_states.iter().filter(|(id, state)| *id == leader && state.ctx == 7).collect();
    assert_eq!(confirmed.len(), 1);
    assert_eq!(confirmed[0].1.commit, commit);
}

#[test]
fn a_read_on_a_follower_names_the_leader() {
    let mut cluster = Cluster::new(3, 22, |_| {});
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    let follower = NodeId((leader.0 + 1) % 3);
    assert_eq!(cluster.node_mut(follower).read_index(1), Err(ProposeError::NotLeader { leader: Some(leader) }));
}

#[test]
fn an_isolated_leader_confirms_no_read_and_drops_it_on_stepping_down() {
    let mut cluster = Cluster::new(3, 23, |_| {});
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    cluster.isolate(leader);
    cluster.node_mut(leader).read_index(8).expect("still leader");
    cluster.process(leader);
    // The minority side hears nothing back; the majority elects someone else.
    cluster.run_ticks(60);
    assert!(cluster.read_states.iter().all(|(_, state)| state.ctx != 8), "{:?}", cluster.read_states);
    assert_ne!(cluster.role(leader), Role::Leader);
    cluster.heal();
    cluster.run_ticks(20);
    assert!(cluster.read_states.iter().all(|(_, state)| state.ctx != 8), "a dropped round never confirms");
}

#[test]
fn a_read_with_one_follower_answering_is_confirmed_in_a_three_node_cluster() {
    let mut cluster = Cluster::new(3, 24, |_| {});
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    cluster.crash(NodeId((leader.0 + 1) % 3));
    cluster.node_mut(leader).read_index(9).expect("leader");
    cluster.process(leader);
    cluster.deliver_all();
    assert!(cluster.read_states.iter().any(|(_, state)| state.ctx == 9), "leader plus one follower is a majority");
    // In a five-node cluster, leader plus one is not.
    let mut cluster = Cluster::new(5, 25, |_| {});
    cluster.run_ticks(40);
    let leader = cluster.leader().expect("leader");
    for step in 1..=3 {
        cluster.crash(NodeId((leader.0 + step) % 5));
    }
    cluster.node_mut(leader).read_index(10).expect("leader");
    cluster.process(leader);
    cluster.deliver_all();
    assert!(cluster.read_states.iter().all(|(_, state)| state.ctx != 10));
}
