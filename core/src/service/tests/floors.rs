//! The resource's floor read: a linearizable read of the lock table and counter.

use super::*;
use crate::raft::{Config, Message};
use crate::resource::Fence;
use crate::service::FloorAnswer;
use crate::types::{Holder, Key, Token};

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

/// A floor read confirmed while the leader has committed more than two
/// Readies' worth of entries (1,024 each) beyond what it applied waits for
/// the apply (parked), then answers with the counter of everything
/// committed before it was asked: answered at once it would miss the last
/// grants. Client proposals alone stay within one Ready (`PENDING_MAX`), so
/// the leader's own Expires of three thousand leases join them, and the test
/// moves the messages by hand so that one acknowledgement commits them all.
#[test]
fn a_floor_read_confirmed_ahead_of_apply_waits_for_the_apply() {
    let wide = |raft: &mut Config| {
        raft.entries_per_message_max = 4_096;
        raft.inflight_max = 4;
    };
    let mut cluster = Cluster::with_raft(3, ServiceConfig::standard(Variant::Default), wide);
    let leader = cluster.elect();
    let follower = other_than(leader);
    let grant = |cluster: &mut Cluster, client: u32| {
        let body = ClientRequest::Acquire { key: Key::new(format!("k{client}")), lease_ms: LEASE_MS, wait_ms: 0 };
        cluster.send(leader, client, 1, body);
    };
    // Three thousand locks, committed and applied.
    for batch in 0..3 {
        for client in 1 + batch * 1_000..=(batch + 1) * 1_000 {
            grant(&mut cluster, client);
        }
        cluster.settle();
    }
    // From now on appends with entries wait: the leases run out and the
    // leader proposes their Expires, then a thousand more grants.
    cluster.hold_entries();
    cluster.step_clock(leader, i64::try_from(2 * LEASE_MS).expect("small"));
    for _ in 0..20 {
        cluster.tick();
    }
    for client in 3_001..=4_000 {
        grant(&mut cluster, client);
    }
    cluster.settle();
    // Every held append reaches one follower at once, and its answers reach
    // the leader at once: the leader's commit jumps over thousands of entries.
    let held: Vec<Message> = std::mem::take(&mut cluster.held_entries).into_iter().collect();
    cluster.entries_pass_through = None;
    cluster.step_into(follower, held);
    let answers = cluster.take_ready(follower);
    cluster.step_into(leader, answers);
    let (commit, applied) = {
        let raft = cluster.server(leader).raft();
        (raft.commit_index().0, raft.applied_index().0)
    };
    assert!(commit > applied + 2 * 1_024, "the commit ran ahead of the apply: {commit} and {applied}");
    // The floor read; its confirming round rides on the leader's next appends.
    cluster.servers[usize::from(leader.0)].on_floor_read(11);
    cluster.collect(leader);
    let round = cluster.take_ready(leader);
    cluster.step_into(follower, round);
    let confirmations = cluster.take_ready(follower);
    cluster.step_into(leader, confirmations);
    let _ = cluster.take_ready(leader);
    assert!(!cluster.server(leader).floors_parked.is_empty(), "the read waits for the apply");
    assert_eq!(floor_answers(&cluster, 11), vec![], "not answered before the apply caught up");
    cluster.inbox.clear();
    cluster.settle();
    let answers = floor_answers(&cluster, 11);
    let [FloorAnswer::Floor(floor)] = answers.as_slice() else { panic!("one floor answer: {answers:?}") };
    assert_eq!(floor.token_last, Token(4_000), "every grant committed before the read is in it");
}
