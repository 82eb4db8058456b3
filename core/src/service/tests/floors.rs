//! The resource's floor read: a linearizable read of the lock table and counter.

use super::*;
use crate::resource::Fence;
use crate::service::FloorAnswer;
use crate::types::Holder;

fn floor_answers(cluster: &Cluster, read: u64) -> Vec<FloorAnswer> {
    cluster
        .log
        .iter()
        .filter_map(|(_, output)| match output {
            Output::FloorAnswer { read: r, answer } if *r == read => Some(answer.clone()),
            _ => None,
        })
        .collect()
}

fn ask(cluster: &mut Cluster, node: NodeId, read: u64) {
    cluster.servers[usize::from(node.0)].on_floor_read(read);
    cluster.collect(node);
    cluster.settle();
}

#[test]
fn the_leader_answers_with_the_holder_and_the_counter_after_confirming() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.request(leader, 1, 1, acquire(0));
    let token = cluster.token_of(leader).expect("granted");
    ask(&mut cluster, leader, 7);
    let holder = Holder { client: ClientId(1), request: RequestId(1) };
    let expected = crate::resource::LockFloor { token_last: token, held: vec![(key(), Fence { token, holder })] };
    assert_eq!(floor_answers(&cluster, 7), vec![FloorAnswer::Floor(expected)]);
}

#[test]
fn a_follower_sends_the_read_to_the_leader() {
    let (mut cluster, leader) = three(Variant::Default);
    ask(&mut cluster, other_than(leader), 8);
    assert_eq!(floor_answers(&cluster, 8), vec![FloorAnswer::NotLeader { leader: Some(leader) }]);
}

/// A leader cut off from the others cannot confirm it leads: no answer, the
/// resource asks again elsewhere (a successor may have granted meanwhile).
#[test]
fn a_cut_off_leader_never_answers() {
    let (mut cluster, leader) = three(Variant::Default);
    cluster.isolate(leader);
    ask(&mut cluster, leader, 9);
    cluster.run_ms(2_000);
    assert_eq!(floor_answers(&cluster, 9), vec![]);
}
